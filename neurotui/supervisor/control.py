"""Control channel: an owner-only unix socket per session, one JSON request per connection."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from neurotui.session import layout

_MAX_UNIX_PATH = 100  # sun_path is 108 bytes on Linux; keep a margin


def socket_path(session_dir: Path) -> Path:
    """The session's socket, or a short owner-only stand-in when the path is too long."""
    path = session_dir.resolve() / layout.CONTROL_SOCKET
    if len(os.fsencode(path)) <= _MAX_UNIX_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    short_dir = Path(tempfile.gettempdir()) / f"neurotui-{os.getuid()}"
    short_dir.mkdir(mode=0o700, exist_ok=True)
    return short_dir / f"{digest}.sock"


def listen(session_dir: Path) -> socket.socket:
    path = socket_path(session_dir)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # created owner-only: no window where others could connect
    try:
        server.bind(str(path))
    finally:
        os.umask(old_umask)
    server.listen(8)
    server.setblocking(False)
    return server


def read_request(conn: socket.socket) -> dict[str, Any]:
    conn.settimeout(2.0)
    data = b""
    while not data.endswith(b"\n") and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    request = json.loads(data or b"{}")
    return request if isinstance(request, dict) else {}


def send(session_dir: Path, request: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Ask the live supervisor; raises OSError when no supervisor listens."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(str(socket_path(session_dir)))
        client.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    reply = json.loads(data or b"{}")
    return reply if isinstance(reply, dict) else {}
