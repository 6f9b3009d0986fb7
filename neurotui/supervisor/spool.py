"""The job's output goes to a spool in memory, never straight to the sessions disk.

A job writing its stdout into a file on a full disk gets ENOSPC and, being Python, dies of it.
So the job writes to files in a private folder on a RAM filesystem (/dev/shm, or
$XDG_RUNTIME_DIR), which a full sessions disk cannot touch; the supervisor's log follower reads
them as they grow, copies each byte it read into the session's logs/ (dropping and counting
what a full disk refuses), and then gives the memory back by punching a hole in the part of
the spool file it has read (the file keeps its size, so the job's offsets stay as they were).

If the supervisor dies, the job does not notice: it goes on writing into the spool, which
holds its output (in memory) until an adopting supervisor copies it on. Where no RAM
filesystem can be had, the job writes into the session folder itself, as before, and
meta.json says so (`spool: null`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurotui.session.layout import LOGS_DIR
from neurotui.supervisor.control import is_private, private_folder

if TYPE_CHECKING:
    from neurotui.supervisor.logcap import LogCap

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
PUNCH_EVERY = 64 << 10
"""Memory is given back once this much of a spool file has been copied: one syscall per
64 KiB, and never more than that held per file for nothing."""


def spool_root() -> Path | None:
    """This user's private folder on a RAM filesystem, or None where there is none."""
    candidates = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and is_private(Path(runtime)):
        candidates.append(Path(runtime) / "neurotui-spool")
    if Path("/dev/shm").is_dir():
        candidates.append(Path("/dev/shm") / f"neurotui-{os.getuid()}")
    return private_folder(candidates)


def create(session_dir: Path) -> Path | None:
    """A fresh spool folder for `session_dir` (None: no RAM filesystem; the job then writes
    into the session folder)."""
    root = spool_root()
    if root is None:
        return None
    resolved = session_dir.resolve()
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:12]
    folder = root / f"{resolved.name}-{digest}"
    try:
        folder.mkdir(mode=0o700)
    except OSError:
        return None
    return folder


def remove(folder: Path) -> None:
    """The job is over and every byte was taken: the spool goes."""
    shutil.rmtree(folder, ignore_errors=True)


def _fallocate():  # type: ignore[no-untyped-def]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.fallocate
    except (OSError, AttributeError):  # not glibc/Linux: spool memory is kept, not punched
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    call.restype = ctypes.c_int
    return call


_FALLOCATE = _fallocate()


def punch_hole(fd: int, start: int, end: int) -> bool:
    """Free the memory of bytes [start, end) of a spool file, keeping its size. False where
    the system cannot (the spool then keeps what it holds until the job ends)."""
    if _FALLOCATE is None or end <= start:
        return False
    if _FALLOCATE(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, start, end - start) != 0:
        return ctypes.get_errno() not in (errno.EOPNOTSUPP, errno.ENOSYS)
    return True


COPY_BATCH_BYTES = 64 << 10
"""A copy is written out at the follower's polls (every half second), or once this much waits:
one write per read cost the supervisor a syscall for each burst of each rank's output."""


class Copy:
    """The session's copy of one spool file: append-only, and a full disk drops bytes (counted,
    with when) instead of failing. The first write that works again says in the copy itself
    what was lost there. Bytes wait in memory until `flush` (see COPY_BATCH_BYTES)."""

    def __init__(self, path: Path, cap: LogCap | None = None) -> None:
        self.path = path
        self.cap = cap
        """The session's log cap, shared by all its copies (logcap.py): past it, output is
        dropped, and the copy says so where it was cut and, at its close, how much."""
        self.over_cap = 0  # bytes the cap dropped from this copy
        self._fd: int | None = None
        self.size = 0
        self.lost_bytes = 0  # since the last `take_loss`
        self.lost_from: float | None = None
        self.lost_to: float | None = None
        self.error: str | None = None
        self._marked = True  # the last loss is marked in the copy (or there was none)
        self._waiting: list[bytes] = []
        self.waiting = 0
        """Bytes given to `write` and not written out yet (the spool keeps them too)."""

    def write(self, data: bytes, now: float) -> None:
        """Append `data` at the next flush (nothing: only make sure the copy exists now, as
        the spool file does)."""
        if data and self.cap is not None:
            data = self._within_cap(data, now)
        if data:
            self._waiting.append(data)
            self.waiting += len(data)
            if self.waiting >= COPY_BATCH_BYTES:
                self.flush(now)
        elif self._fd is None:
            self._write_out(b"", now)

    def _within_cap(self, data: bytes, now: float) -> bytes:
        """What of `data` the cap lets in: whole lines, then (once) the line saying where it
        cut."""
        assert self.cap is not None
        if self.over_cap:
            self.over_cap += len(data)
            self.cap.dropped += len(data)
            return b""
        allowed = self.cap.allow(len(data), now)
        if allowed == len(data):
            return data
        kept = data[:data.rfind(b"\n", 0, allowed) + 1]  # (nothing, where no line ends)
        self.cap.kept -= allowed - len(kept)
        self.over_cap = len(data) - len(kept)
        self.cap.dropped += self.over_cap
        return kept + self.cap.cut_line()

    def add(self, data: bytes, now: float) -> None:
        """Append the supervisor's own text (a line saying what was dropped there), outside
        the cap's count."""
        if self.over_cap:
            return  # the cap's own line said that nothing comes after it
        self._waiting.append(data)
        self.waiting += len(data)
        self.flush(now)

    def flush(self, now: float) -> None:
        """Write out what waits."""
        if self._waiting:
            data = b"".join(self._waiting)
            self._waiting, self.waiting = [], 0
            self._write_out(data, now)

    def _write_out(self, data: bytes, now: float) -> None:
        try:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                self.size = os.fstat(self._fd).st_size
            if self.lost_from is not None and not self._marked:
                self._write_all(self._loss_line().encode())
                self._marked = True
            self._write_all(data)
        except OSError as exc:
            if data:  # (a copy that could not be made yet is made at the next write)
                self._lose(len(data), now, exc)

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError:
                # A partial write leaves part of a line: take it back, so what follows the
                # loss starts where the last whole write ended.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self.size)
                raise
            self.size += written
            view = view[written:]

    def _lose(self, count: int, now: float, exc: OSError) -> None:
        self.lost_bytes += count
        if self.lost_from is None:
            self.lost_from = now
        self.lost_to = now
        self.error = exc.strerror or str(exc)
        self._marked = False

    def _loss_line(self) -> str:
        return (f"\n[neurotui: {self.lost_bytes:,} bytes of output lost here: "
                f"{self.error or 'write failed'}]\n")

    def take_loss(self, final: bool = False) -> tuple[int, float, float, str] | None:
        """(bytes, from, to, error) lost since the last call, once writing works again (or,
        `final`, at the end whatever the disk says); None while nothing was lost."""
        if self.lost_from is None or not (self._marked or final):
            return None
        loss = (self.lost_bytes, self.lost_from, self.lost_to or self.lost_from,
                self.error or "write failed")
        self.lost_bytes, self.lost_from, self.lost_to, self.error = 0, None, None, None
        return loss

    def close(self) -> None:
        now = time.time()
        if self.over_cap and self.cap is not None:  # how much the cap dropped, at the end
            line = self.cap.count_line(self.over_cap)
            self.over_cap = 0
            self.add(line, now)
        self.flush(now)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def pending_losses(spool_dir: Path) -> list[dict[str, Any]]:
    """Steps a rank's probe could not write and could not say so before the job ended (the
    disk was full to the end): the counts it left in the spool, taken (and removed)."""
    found = []
    for path in sorted(spool_dir.glob("lost-*.json")):
        with contextlib.suppress(OSError, ValueError):
            loss = json.loads(path.read_text())
            if isinstance(loss, dict) and loss.pop("kind", None) == "lost":
                loss.pop("t", None)
                found.append(loss)
            path.unlink()
    return found


def salvage(session_dir: Path, spool_dir: Path, read_marks: dict[str, int] | None) -> int:
    """The spool of a session whose supervisor died and whose job then ended, unadopted: copy
    what the job wrote after the last mark into the session's logs/, then free the memory.
    Returns the bytes copied. Raises OSError (no right to write the session, a full disk)."""
    copied = 0
    for path in sorted(spool_dir.rglob("*.log")):
        name = f"{LOGS_DIR}/{path.relative_to(spool_dir).as_posix()}"
        with open(path, "rb") as source:
            start = (read_marks or {}).get(name, 0)
            with contextlib.suppress(OSError):  # read memory given back is a hole: skipped
                start = max(start, os.lseek(source.fileno(), start, os.SEEK_DATA))
            source.seek(start)
            target = session_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as out:
                copied += out.write(source.read())
    remove(spool_dir)
    return copied
