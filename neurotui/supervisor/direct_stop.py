"""Stopping a job whose supervisor is gone: the same escalation, done by the CLI itself."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from neurotui.session import layout
from neurotui.session.status import pid_alive
from neurotui.session.writer import EventWriter, read_meta, update_meta
from neurotui.supervisor.process_tree import JobTree


def stop_unsupervised(session_dir: Path, int_timeout_s: float = 20.0,
                      term_timeout_s: float = 10.0) -> int:
    meta = read_meta(session_dir)
    if not pid_alive(meta.get("job_pid"), meta.get("job_create_time")):
        print("neurotui: the job is not running", file=sys.stderr)
        return 1
    tree = JobTree(int(meta["job_pid"]))
    writer = EventWriter(session_dir / layout.EVENTS)
    writer.write("stop_request", by="cli", restart=False)
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
    print("neurotui: stopped")
    return 0
