"""Starting a supervisor process: for a new run, or to adopt a job whose supervisor died."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from neurotui.session import layout
from neurotui.session.meta import SessionFormatError, load_meta


def start_supervisor(session_dir: Path, adopt: bool = False) -> subprocess.Popen[bytes]:
    """The supervisor runs detached: its own session, no terminal, output to a file."""
    with open(session_dir / layout.SUPERVISOR_LOG, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "neurotui.supervisor", *(["--adopt"] if adopt else []),
             str(session_dir)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True)


def adopt(session_dir: Path, timeout_s: float = 30.0) -> str | None:
    """A new supervisor for a job whose supervisor died (the job ran on by design); None once
    it has taken the job over, else why not."""
    started = time.time()
    supervisor = start_supervisor(session_dir, adopt=True)
    while time.time() < started + timeout_s and supervisor.poll() is None:
        try:
            meta = load_meta(session_dir)
        except SessionFormatError as exc:
            return f"could not adopt the job: {exc}"
        if meta.get("supervisor_pid") == supervisor.pid and \
                float(meta.get("adopted_at") or 0) >= started:
            return None
        time.sleep(0.05)
    return ("could not adopt the job; it stays unsupervised (see "
            f"{session_dir / layout.SUPERVISOR_LOG})")
