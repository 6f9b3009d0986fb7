"""A new session on disk: its private folder, and the meta.json it starts with (FORMAT.md).

What goes into it (the command as launched, the price, where the job's output is spooled) is
decided by the command line (cli.py: `run`); this module only lays it down.
"""

from __future__ import annotations

import getpass
import os
import platform
from pathlib import Path
from typing import Any

from neurotui import __version__
from neurotui.session import layout
from neurotui.session.paths import new_session_id
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

_VERSIONED = {"torch": "torch", "torch_xla": "torch-xla", "torch_neuronx": "torch-neuronx",
              "neuronx_cc": "neuronx-cc", "timm": "timm"}


def new_session_folder(root: Path, name: str, now: float, *,
                       group_readable: bool = False) -> Path:
    """`root/<YYYYmmdd-HHMMSS>-<name>` (with `-2`, `-3`... when taken), with logs/ and probe/.

    Private by default: logs may hold tokens a job printed (torchrun's own run folder is 0700
    too). Files inside keep their modes: the folder is what others cannot enter."""
    root.mkdir(parents=True, exist_ok=True)
    session_id = new_session_id(name, now)
    session_dir = root / session_id
    suffix = 1
    while True:
        # mkdir claims the name: two runs starting in the same second (the nodes of one job
        # on a shared sessions folder) cannot both take it, as they could after a look.
        try:
            session_dir.mkdir(mode=0o700)
            break
        except FileExistsError:
            suffix += 1
            session_dir = root / f"{session_id}-{suffix}"
    session_dir.chmod(0o750 if group_readable else 0o700)
    (session_dir / layout.LOGS_DIR).mkdir()
    (session_dir / layout.PROBE_DIR).mkdir()
    return session_dir


def write_first_meta(session_dir: Path, *, name: str, started_at: float,
                     **fields: Any) -> dict[str, Any]:
    """meta.json as a run starts: `fields` (command, price, config, ...) plus what every
    session records of where and with what it ran."""
    meta = {
        "format": FORMAT_VERSION, "id": session_dir.name, "name": name,
        "cwd": os.getcwd(), "host": platform.node(), "user": _user(),
        "versions": package_versions(), "started_at": started_at, "ended_at": None,
        "exit": None,
        "records_alerts": True,  # older sessions did not: their alert count is unknown
        **fields,
    }
    write_json_atomic(session_dir / layout.META, meta)
    return meta


def package_versions() -> dict[str, str | None]:
    from importlib import metadata  # only `run` needs it: keeps other commands' start quick

    versions: dict[str, str | None] = {"python": platform.python_version(),
                                       "neurotui": __version__}
    for key, dist in _VERSIONED.items():
        try:
            versions[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[key] = None
    return versions


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
