"""What a session's job left in memory when its supervisor died and nobody adopted it.

The job's output goes to a spool in memory (spool.py) that the supervisor copies into the
session. If the supervisor dies and the job then ends unadopted, nobody is left to copy the
rest or to free that memory: the next command that finds the session lost does both.
"""

from __future__ import annotations

import time
from pathlib import Path

from neurotui.session import layout
from neurotui.session.writer import EventWriter, read_meta, update_meta
from neurotui.supervisor import spool
from neurotui.supervisor.logfollow import resume_point


def take_leftovers(session_dir: Path) -> str | None:
    """Copy a lost session's spool into its logs/ and free it; what was done, or None when
    there was nothing to take. Raises OSError (no right to write the session, a full disk)."""
    meta = read_meta(session_dir)
    folder = meta.get("spool")
    if not folder or not Path(folder).is_dir():
        return None
    marks, _ = resume_point(session_dir / layout.EVENTS, int(meta.get("attempt") or 0))
    losses = spool.pending_losses(Path(folder))
    copied = spool.salvage(session_dir, Path(folder), marks)
    writer = EventWriter(session_dir / layout.EVENTS)
    now = time.time()
    for loss in losses:
        writer.write("lost", t=now, **loss, said_by="neurotui")
    message = (f"its supervisor died and the job ended unadopted: {copied:,} bytes of output "
               "it left in memory were copied into logs/")
    writer.write("warning", t=now, source="supervisor", message=message)
    writer.close()
    update_meta(session_dir, spool=None)
    return message
