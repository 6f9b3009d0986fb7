"""Stopping a job: through its supervisor (the control channel), or, when none answers or the
answer cannot be trusted, with the same escalation done here. One path for the CLI's `stop` and
the dashboard's S."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neurotui.session import layout
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.status import pid_alive
from neurotui.session.writer import EventWriter, update_meta
from neurotui.supervisor import control
from neurotui.supervisor.process_tree import JobTree


@dataclass(frozen=True)
class StopAnswer:
    ok: bool
    message: str  # for the user, as it happened
    direct: bool = False  # no supervisor (or none to trust) answered: the job was signalled here


def stop_job(session_dir: Path, *, by: str, restart: bool = False,
             going_direct: Callable[[str], None] | None = None) -> StopAnswer:
    """Ask the session's supervisor to stop (or restart) its job; when none answers, or the
    answer cannot be trusted, stop the job here with the same escalation (a restart needs a
    supervisor). Blocks while stopping directly (up to the stop timeouts), after telling
    `going_direct` why."""
    try:
        control.send(session_dir, {"cmd": "restart" if restart else "stop", "by": by})
    except (OSError, ValueError) as exc:
        why = (f"the control socket is not to be trusted ({exc})"
               if isinstance(exc, control.ControlRefused) else "no supervisor answers")
        if restart:
            return StopAnswer(False, f"{why}; cannot restart")
        if going_direct is not None:
            going_direct(f"{why}; stopping the job directly")
        try:
            stopped = stop_unsupervised(session_dir, by=by)
        except SessionFormatError as exc:  # its pids cannot be known: nothing to signal
            return StopAnswer(False, f"cannot stop it: {exc}", direct=True)
        return StopAnswer(stopped, "stopped" if stopped else "the job was not running",
                          direct=True)
    if restart:
        return StopAnswer(True, "restart requested")
    return StopAnswer(True, "stop requested: SIGINT, then SIGTERM, then SIGKILL")


def stop_unsupervised(session_dir: Path, int_timeout_s: float = 20.0,
                      term_timeout_s: float = 10.0, *, by: str = "cli") -> bool:
    """The supervisor's escalation, done here; False when the job was not running.
    SessionFormatError when its meta.json cannot be read (no pids to signal)."""
    meta = load_meta(session_dir)
    if not pid_alive(meta.get("job_pid"), meta.get("job_create_time")):
        return False
    tree = JobTree(int(meta["job_pid"]))
    writer = EventWriter(session_dir / layout.EVENTS)
    writer.write("stop_request", by=by, restart=False)
    for sig, wait_s in ((signal.SIGINT, int_timeout_s), (signal.SIGTERM, term_timeout_s),
                        (signal.SIGKILL, 5.0)):
        writer.write("stop_escalate", signal=sig.name)
        tree.signal_group(sig)
        if sig != signal.SIGINT:
            tree.signal_all(sig)
        deadline = time.time() + wait_s
        while time.time() < deadline and tree.alive():
            time.sleep(0.2)
            tree.refresh()
        if not tree.alive():
            break
    update_meta(session_dir, ended_at=time.time(), exit={
        "code": None, "signal": None, "reason": "stopped", "attempts": meta.get("attempt", 0) + 1,
        "note": "stopped without its supervisor; the exit code was not observed"})
    writer.close()
    return True
