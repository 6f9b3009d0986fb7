"""Stop and restart requests through the session folder: how a job of many nodes is stopped
from any node, or from a login node that sees the shared sessions folder.

The control socket reaches only the supervisor on the same host. Every node's supervisor
looks, at each poll, for a request file in its own session folder (one stat a second); `stop`
writes one into each node's part, and each supervisor acts on its own part, then removes the
file, which tells the sender it was taken. The folder is the user's own (0700): only they can
ask.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from neurotui.session.jsonfile import SMALL_FILE_MAX_BYTES, read_json_file
from neurotui.session.status import session_status

REQUEST_FILE = "control-request.json"
COMMANDS = ("stop", "restart")


def post_request(session_dir: Path, cmd: str, by: str) -> str:
    """Leave a stop or restart request for the session's supervisor; returns its id. Written
    whole (a temporary file renamed), so a supervisor never reads half of one."""
    if cmd not in COMMANDS:
        raise ValueError(f"unknown command {cmd!r}")
    request_id = uuid.uuid4().hex
    record = {"cmd": cmd, "by": by, "id": request_id, "t": time.time(),
              "from_host": socket.gethostname()}
    temporary = session_dir / f".{REQUEST_FILE}.{request_id}"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, session_dir / REQUEST_FILE)
    return request_id


def ask_running(parts: Iterable[Path], cmd: str, by: str) -> list[Path]:
    """Leave `cmd` in each of a job's parts whose node runs (post_request); returns the
    parts asked, none when no node runs."""
    running = [part for part in parts if session_status(part).running]
    for part in running:
        post_request(part, cmd, by)
    return running


def request_pending(session_dir: Path) -> bool:
    """The request is still there: its supervisor has not taken it (yet)."""
    return (session_dir / REQUEST_FILE).exists()


class RequestInbox:
    """The supervisor's side: a request left since it started, taken once."""

    def __init__(self, session_dir: Path, since: float) -> None:
        self.path = session_dir / REQUEST_FILE
        self.since = since  # older requests were for an earlier supervisor
        self._seen: tuple[int, int] | None = None  # (mtime, size) of the file last read

    def take(self) -> dict[str, Any] | None:
        """The new request, if any (and the file removed: the sender's sign it was taken);
        None when there is none, it is stale (from before this supervisor started), or it
        cannot be read."""
        try:
            status = self.path.stat()
        except OSError:
            self._seen = None
            return None
        seen = (status.st_mtime_ns, status.st_size)
        if seen == self._seen:
            return None  # read before and kept (it could not be removed)
        self._seen = seen
        try:
            request = read_json_file(self.path, SMALL_FILE_MAX_BYTES)
        except (OSError, ValueError):  # (past a session JSON's limits too: a ValueError)
            return None  # half-written by something else than post_request: next look
        with contextlib.suppress(OSError):
            self.path.unlink()
        if not isinstance(request, dict) or request.get("cmd") not in COMMANDS:
            return None
        t = request.get("t")
        if not isinstance(t, (int, float)) or t < self.since:
            return None
        return request
