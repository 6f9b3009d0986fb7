"""Control channel: an owner-only unix socket per session, one JSON request per connection.

Both ends check who is at the other (SO_PEERCRED): the supervisor answers only its own user,
and a client trusts only a supervisor of its own user. A socket whose session path is too long
for a unix address lives in a private folder ($XDG_RUNTIME_DIR, or /tmp/neurotui-<uid>) whose
owner and mode are verified: a folder another user made first is never used."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.jsonfile import META_MAX_BYTES, read_json_file

_MAX_UNIX_PATH = 100  # sun_path is 108 bytes on Linux; keep a margin


class ControlRefused(OSError):
    """The other end of the control socket is not who it must be (another user)."""


def socket_path(session_dir: Path) -> Path:
    """Where the session's supervisor listens: in the session folder, or, when that path is
    too long for a unix address, in a private folder of this user."""
    path = session_dir.resolve() / layout.CONTROL_SOCKET
    if len(os.fsencode(path)) <= _MAX_UNIX_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    return _private_dir() / f"{digest}.sock"


def _private_dir() -> Path:
    uid = os.getuid()
    candidates = [Path(tempfile.gettempdir()) / f"neurotui-{uid}"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and is_private(Path(runtime)):
        candidates.insert(0, Path(runtime) / "neurotui")
    found = private_folder(candidates)
    # Every usual place is taken (another user made it first): a fresh one of our own. The
    # supervisor records the path it listens on in meta.json (control_socket) for clients.
    return found or Path(tempfile.mkdtemp(prefix=f"neurotui-{uid}-"))


def private_folder(candidates: list[Path]) -> Path | None:
    """The first of `candidates` that is (or can be made) this user's private folder."""
    for folder in candidates:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            continue
        if is_private(folder):
            return folder
    return None


def is_private(folder: Path) -> bool:
    """A real folder (not a link) of this user that no one else can enter or write."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def peer_uid(conn: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux SO_PEERCRED; None elsewhere)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option,
                                                           struct.calcsize("3i")))
    return uid


def listen(path: Path) -> socket.socket:
    """Listen at `path` (socket_path's answer, kept: it may be a fresh folder each call)."""
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
    """Ask the live supervisor; raises OSError when no supervisor listens, ControlRefused
    when the socket is served by another user or the request is refused."""
    path = _recorded_socket(session_dir) or socket_path(session_dir)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(str(path))
        uid = peer_uid(client)
        if uid is not None and uid != os.getuid():
            raise ControlRefused(f"{path} is served by user id {uid}, not by you: not trusted")
        client.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    reply = json.loads(data or b"{}")
    if not isinstance(reply, dict):
        return {}
    if reply.get("ok") is False:
        raise ControlRefused(f"the supervisor refused: {reply.get('error', 'no reason given')}")
    return reply


def _recorded_socket(session_dir: Path) -> Path | None:
    """The socket the supervisor said it listens on (meta.json), if any."""
    try:
        recorded = read_json_file(session_dir / layout.META, META_MAX_BYTES).get("control_socket")
    except (OSError, ValueError, AttributeError):  # (a deep or huge meta.json: a ValueError)
        return None
    return Path(recorded) if isinstance(recorded, str) and recorded else None
