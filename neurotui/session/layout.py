"""File names inside a session folder (see FORMAT.md); one place so writer and reader agree."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

META = "meta.json"
EVENTS = "events.jsonl"
NEURON_TALLY = "neuron_tally.json"
"""The run's neuron samples added up as recorded (neurontally.py): what compare needs."""
PROBE_DIR = "probe"
LOGS_DIR = "logs"
LAUNCHER_LOG_NAME = "launcher.log"
TORCHRUN_LOG_NAME = "torchrun"
LAUNCHER_LOG = f"{LOGS_DIR}/{LAUNCHER_LOG_NAME}"
TORCHRUN_LOG_DIR = f"{LOGS_DIR}/{TORCHRUN_LOG_NAME}"
SUPERVISOR_LOG = "supervisor.log"
EXPORTER_LOG = "exporter.log"
CONTROL_SOCKET = "control.sock"
CACHE_MIN_SOURCE_BYTES = 8 << 20
"""Sessions with less JSON-lines data (events.jsonl and probe/*.jsonl) than this parse in well
under a second: not cached (session/cache.py). Here, not there: the supervisor starts the
cache keeper past it, and must not import numpy to know it."""

# torchrun --log-dir layout: <dir>/<run_id>_<suffix>/attempt_<k>/<local_rank>/{stdout,stderr}.log
TORCHRUN_RANK_LOG_NAMES = ("stdout.log", "stderr.log")
"""The logs torchrun writes in each rank's folder, and all it writes there that is followed."""
_TORCHRUN_RANK_LOG = re.compile(
    rf"attempt_(\d+)/(\d+)/({'|'.join(map(re.escape, TORCHRUN_RANK_LOG_NAMES))})$")
_PROBE_FILE = re.compile(r"^rank-(\d+)\.jsonl$")
_AUTO_PROBE_FILE = re.compile(r"^auto-rank-(\d+)\.jsonl$")


def probe_path(session_dir: Path, rank: int) -> Path:
    return session_dir / PROBE_DIR / f"rank-{rank}.jsonl"


def probe_files(session_dir: Path, *, auto: bool = False) -> dict[int, Path]:
    """Rank -> the steps it wrote through neurotui.probe (probe/rank-R.jsonl), or with
    `auto`, through the automatic probe (probe/auto-rank-R.jsonl)."""
    pattern = _AUTO_PROBE_FILE if auto else _PROBE_FILE
    found: dict[int, Path] = {}
    for path in (session_dir / PROBE_DIR).glob("*.jsonl"):
        m = pattern.match(path.name)
        if m:
            found[int(m.group(1))] = path
    return found


SETTLED_DIR_S = 2.0
"""A folder's time stamp may be coarse: one changed in the last seconds is listed again at every
look, not to miss a file made in the same tick as a listing."""


class ProbeFolder:
    """A session's probe files (`probe_files`, both kinds), listed again only when the probe
    folder changed: the supervisor and a following dashboard look every second or more often,
    and a listing (a glob over dozens of files) cost more than the rest of such a look."""

    def __init__(self, session_dir: Path) -> None:
        self.dir = session_dir / PROBE_DIR
        self._changed: int | None = None  # the folder's mtime when listed
        self._files: tuple[dict[int, Path], dict[int, Path]] = ({}, {})

    def files(self, *, auto: bool = False) -> dict[int, Path]:
        """Rank -> probe file, as probe_files gives them (do not change what it returns)."""
        return self.both()[1 if auto else 0]

    def both(self) -> tuple[dict[int, Path], dict[int, Path]]:
        """(probe.step() files, automatic probe files), after one look at the folder."""
        try:
            changed: int | None = self.dir.stat().st_mtime_ns
        except FileNotFoundError:  # no folder, no files: nothing to list (most jobs)
            self._changed, self._files = None, ({}, {})
            return self._files
        except OSError:
            changed = None
        if changed is None or changed != self._changed or \
                time.time() - changed / 1e9 < SETTLED_DIR_S:
            session = self.dir.parent
            self._files = (probe_files(session), probe_files(session, auto=True))
            self._changed = changed
        return self._files


def json_lines_bytes(session_dir: Path) -> int:
    """Bytes of the session's JSON lines (events.jsonl and probe/*.jsonl): a few stat calls."""
    total = 0
    for path in [session_dir / EVENTS, *(session_dir / PROBE_DIR).glob("*.jsonl")]:
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


def rank_log_files(session_dir: Path) -> dict[int, list[Path]]:
    """Per-rank stdout/stderr files written by torchrun, oldest attempt first.

    Rank numbers are torchrun's local ranks (single node: the global rank).
    """
    return torchrun_rank_logs(session_dir / TORCHRUN_LOG_DIR)


def torchrun_log_dirs(root: Path) -> list[Path]:
    """The folders of torchrun's --log-dir `root` that rank logs appear in or under: `root`
    itself, its runs, their attempts and the attempts' rank folders (for watching them)."""
    found = [root] if root.is_dir() else []
    for pattern in ("*", "*/attempt_*", "*/attempt_*/*"):
        found.extend(path for path in root.glob(pattern) if path.is_dir())
    return found


def torchrun_rank_logs(root: Path) -> dict[int, list[Path]]:
    """As rank_log_files, for torchrun's --log-dir `root` (the session's, or the spool's)."""
    found: dict[int, list[tuple[str, Path]]] = {}
    for path in root.glob("*/attempt_*/*/*.log"):
        m = _TORCHRUN_RANK_LOG.search(path.as_posix())
        if m:
            # Oldest torchrun run first (a restart is a new run folder), then attempt, stream.
            run_mtime = path.parent.parent.parent.stat().st_mtime_ns
            key = f"{run_mtime:020d}/{int(m.group(1)):04d}/{m.group(3)}"
            found.setdefault(int(m.group(2)), []).append((key, path))
    return {rank: [p for _, p in sorted(items)] for rank, items in sorted(found.items())}
