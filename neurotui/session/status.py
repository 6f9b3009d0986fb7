"""Is a session running? Decided from meta.json and the liveness of the recorded processes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from neurotui.session.meta import SessionFormatError, load_meta

_STARTING_GRACE_S = 30.0


@dataclass(frozen=True)
class SessionStatus:
    state: str  # starting, running, unsupervised, completed, failed, stopped, ended, lost,
    # unreadable
    running: bool
    detail: str = ""


def pid_alive(pid: object, create_time: object = None) -> bool:
    """Alive and the same process (create time matches), not a recycled pid."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if isinstance(create_time, (int, float)) and create_time > 0:
            return abs(proc.create_time() - create_time) < 1.0
        return True
    except psutil.Error:
        return False


def supervisor_alive(meta: dict[str, Any]) -> bool:
    pid = meta.get("supervisor_pid")
    if not pid_alive(pid):
        return False
    try:
        return "neurotui.supervisor" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def session_status(session_dir: Path) -> SessionStatus:
    try:
        meta = load_meta(session_dir)
    except SessionFormatError as exc:
        return SessionStatus("unreadable", False, str(exc))
    return status_of(meta)


def status_of(meta: dict[str, Any]) -> SessionStatus:
    """The state of a session whose meta.json is already read (the home screen reads each
    session's meta.json once for its row and its state)."""
    ended = meta.get("exit")
    if isinstance(ended, dict):
        reason = str(ended.get("reason") or "ended")
        # "ended": adopted after its supervisor died, so its exit code is unknown.
        state = reason if reason in ("completed", "stopped", "ended") else "failed"
        return SessionStatus(state, False, reason)
    if supervisor_alive(meta):
        return SessionStatus("running", True)
    if pid_alive(meta.get("job_pid"), meta.get("job_create_time")):
        return SessionStatus("unsupervised", True,
                             "training runs on but its supervisor is gone: steps still recorded "
                             "by the probe; `neurotui attach` (or A in the dashboard) adopts it")
    if meta.get("supervisor_pid") is None and \
            time.time() - float(meta.get("started_at") or 0) < _STARTING_GRACE_S:
        return SessionStatus("starting", True)
    return SessionStatus("lost", False, "ended without a final record (its supervisor died)")
