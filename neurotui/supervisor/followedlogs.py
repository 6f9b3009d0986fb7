"""The logs LogFollower follows, one file each (_Followed: how far it was read, looked at
and written), the kernel's word of which changed (_Changes, inotify), and the stamps a look
gives the lines it saw whole. The follower (logfollow.py) decides when to look and what to
read; these keep where each file stands.
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from neurotui.session.tailing import split_lines
from neurotui.supervisor import spool
from neurotui.supervisor.stepoffsets import FileId

_MAX_READ = 4 << 20  # per file per read: a flood of output cannot stall the supervisor
MTIME_SLACK_S = 0.05
"""The kernel's file times come from a coarse clock (a tick, a few ms, behind ours): a write
just after a look may carry a time before it by that much."""

_CR = ord("\r")
"""A carriage return as an int: `_CR in data` is a memchr, where `b"\r" in data` first tries
to read its operand as an int, raising and clearing a TypeError (about 2,500 instructions,
each log's read at each poll)."""


@dataclass(eq=False, slots=True)  # one per file: compared and hashed as itself
class _Followed:
    path: Path
    name: str  # relative to the session, as `log_offsets` names it
    rank: int | None  # None: the launcher's combined output, ranks from line prefixes
    offset: int = 0
    pending: bytes = b""
    parsed: int = 0
    """Bytes of `pending` already parsed: positions of a bar redrawn with carriage returns."""
    fd: int | None = None
    """Kept open between reads: a log changes many times a second."""
    copy: spool.Copy | None = None
    """Where a spool file's bytes go in the session (None: `path` is in the session)."""
    freed: int = 0  # a spool file's bytes up to here were given back (spool.punch_hole)
    changes: int = 0  # times it was seen changed (kernel, look), in the second being counted
    first_write_ns: int = 0
    last_write_ns: int = 0
    """Its modification times at the first and last looks that saw it grown in the second
    being counted (_look): how far apart its writes are (_write_rate)."""
    watched: bool = False  # the kernel says when it changes (inotify): no need to poll it
    timed: bool = False
    """Looked at on the batch's timer, while busy; the kernel's watch on it removed."""
    behind: bool = True
    """More may wait than the kernel will say: a new log's first lines, written before it
    was watched; a read that stopped at _MAX_READ; a log taken over at a mark (resume)."""
    seen: int = 0
    """The file's size at the last look (a read, or a look's fstat)."""
    modified_ns: int = 0
    """The file's modification time at the last read that looked at its size (0: none)."""
    grew_at: float = -math.inf
    """When a read or look last found it grown: its next lines were written after that."""
    looks: list[tuple[int, float]] = field(default_factory=list)
    """What looks saw of it since the last take (_note_change, _look): each one's size and
    stamp."""
    ident: FileId | None = None  # (device, inode): the automatic probe names a log so
    placed: bool = False
    """Its lines are placed by the probe's steps (placing.read_placed), read at polls."""
    held: list[tuple[int, float]] = field(default_factory=list)
    """Placed, read but not yet taken: each read's end, and when it was read."""
    flooding: bool = False
    """Skipped ahead at its last look for a flood, and not caught up since: skipped again as
    soon as it is FloodGate.flooding_behind_max behind (reading a flood costs a core)."""
    flood_mark: tuple[int, float] | None = None
    """Its size at the last look for a flood (_shed_flood), and when: where the lines kept
    from bytes skipped later stood in time."""

    def split(self, chunk: bytes) -> list[bytes]:
        """The complete lines `chunk` (read after what was split before) ends, the rest
        waiting in `pending`."""
        if not chunk:
            return []
        lines, self.pending = split_lines(self.pending, chunk)
        return lines

    def status(self) -> os.stat_result:
        """The file's status (its size; its modification time, when the kernel saw its last
        write), opening it first. Raises OSError (FileNotFoundError while it is not there)."""
        if self.fd is None:
            # A spool file is opened for writing too: punching holes needs it.
            self.fd = os.open(self.path, os.O_RDWR if self.copy else os.O_RDONLY)
            status = os.fstat(self.fd)
            self.ident = (status.st_dev, status.st_ino)
            return status
        return os.fstat(self.fd)

    def read_chunk(self, now: float, upto: int | None = None) -> bytes:
        """The bytes appended since the last read, up to `upto` (None: the file's size now),
        copied on for a spool file. Raises OSError (FileNotFoundError while the file is not
        there)."""
        # Exactly what was added: an unbuffered read sized for the worst case (_MAX_READ)
        # allocates that much first (about 15 us for 4 MiB, against 1 us for a line).
        if upto is None or self.fd is None:
            status = self.status()
            size_now, self.modified_ns = status.st_size, status.st_mtime_ns
            self.seen = max(self.seen, size_now)
            upto = size_now if upto is None else min(upto, size_now)
        size = min(upto - self.offset, _MAX_READ)
        chunk = os.pread(self.fd, size, self.offset) if size > 0 and self.fd is not None \
            else b""
        self.took(chunk, now)
        return chunk

    def took(self, chunk: bytes, now: float) -> None:
        """`chunk`, read from where the last read ended: copied on for a spool file, whose
        memory is given back once copied (spool.punch_hole)."""
        self.offset += len(chunk)
        if self.copy is not None:
            self.copy.write(chunk, now)
        if chunk and self.copy is not None and self.offset - self.freed >= spool.PUNCH_EVERY:
            copied = self.offset - self.copy.waiting  # only what is in the session already
            upto = copied - copied % 4096  # whole pages only
            if upto > self.freed and spool.punch_hole(self.fd, self.freed, upto):
                self.freed = upto

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        if self.copy is not None:
            self.copy.close()


class _Pieces:
    """One read of a log, given out a look at a time: the bytes up to each size seen."""

    __slots__ = ("_at", "_data", "_start")

    def __init__(self, start: int, data: bytes) -> None:
        self._start, self._data, self._at = start, data, 0

    def upto(self, size: int) -> bytes:
        end = size - self._start
        if end > len(self._data):  # the read was cut at _MAX_READ
            end = len(self._data)
        if end <= self._at:
            return b""
        piece, self._at = self._data[self._at:end], end
        return piece


class _Changes:
    """Which followed files changed, from the kernel (inotify); None where unavailable."""

    _EVENT = struct.Struct("iIII")  # wd, mask, cookie, length of the name that follows

    def __init__(self) -> None:
        from inotify_simple import INotify, flags  # Linux only: ImportError/OSError elsewhere

        self._inotify = INotify(nonblocking=True)
        self._mask = flags.MODIFY
        self._folder_mask = flags.CREATE | flags.MOVED_TO
        self._targets: dict[int, _Followed | Path] = {}
        self._buffer = bytearray(1 << 12)  # read into, not allocated at every wakeup

    def fileno(self) -> int:
        return self._inotify.fileno()

    def watch(self, path: Path, target: _Followed | Path, *, folder: bool = False) -> bool:
        """Say when `path` changes (a file), or when something is created in it (a folder),
        by handing back `target`."""
        try:
            mask = self._folder_mask if folder else self._mask
            self._targets[self._inotify.add_watch(path, mask)] = target
            return True
        except OSError:  # no watches left (fs.inotify.max_user_watches): polled instead
            return False

    def unwatch(self, target: _Followed) -> None:
        """Say no more when `target` changes."""
        for wd, watched in list(self._targets.items()):
            if watched is target:
                del self._targets[wd]
                with contextlib.suppress(OSError):  # the file is gone: so is its watch
                    self._inotify.rm_watch(wd)

    def changed(self) -> list[_Followed | Path]:
        """The targets of the watches that fired since the last call, each once."""
        # Read and unpacked here rather than through INotify.read: this runs for every
        # burst of output a job writes, and only the watch descriptors are needed.
        wds: set[int] = set()
        buffer, event, fd = self._buffer, self._EVENT, self._inotify.fileno()
        while True:
            try:
                size = os.readv(fd, (buffer,))
            except OSError:  # nothing (more) to read (non-blocking), or closed
                break
            # Events of watched files carry no name: a read of those only is 16-byte records,
            # whose watch descriptors are every fourth int (a busy wakeup reads dozens; a
            # loop over them cost most of its handling). A nonzero name length anywhere at
            # those places means names: unpacked one by one.
            ints = memoryview(buffer)[:size].cast("i") if size % event.size == 0 else None
            if ints is not None and not any(ints[3::4]):
                wds.update(ints[0::4])
            else:
                offset = 0
                while offset + event.size <= size:
                    wd, _mask, _cookie, name_length = event.unpack_from(buffer, offset)
                    wds.add(wd)
                    offset += event.size + name_length
            del ints  # the buffer is read into again
            if size < len(buffer) - 272:  # room for one more event with its name: all read
                break
        targets = self._targets
        return [targets[wd] for wd in wds if wd in targets]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._inotify.close()


def _whole_seconds(modified_ns: int) -> bool:
    """Whether a file time is in whole seconds: a coarse file system's, not when the write
    happened to the millisecond."""
    return modified_ns % 1_000_000_000 == 0


def _written_at(modified_ns: int, now: float, after: float) -> float:
    """The stamp of the lines a look or read at `now` found: when their log's last write
    happened (its modification time, from the fstat that gave the size), not when the look
    came, which may be a batch or a poll later. The lines of one read share it, and the
    figures give each of them the time since the log's previous stamp over their steps: two
    true times of writes, so that averages exact steps. `now` where the time cannot be that:
    later than now, or before `after` (the look that found the log's previous lines: the
    file system's clock is not ours), or not that fine (whole seconds: coarse times)."""
    if _whole_seconds(modified_ns):
        return now
    written = modified_ns / 1e9
    return written if after - MTIME_SLACK_S <= written <= now else now


def _write_rate(followed: _Followed, elapsed: float) -> float:
    """How many times a second `followed` was seen grown in the last `elapsed` seconds: its
    count over them, or where less, its looks' count over the time between the first and
    the last write they saw. The count alone is off by up to one a window (a log of 10 lines
    a second shows 11 in 1.05 s, and the busiest of 32 logs mostly shows 11): the batches
    came 10% shorter than they need be, a wakeup more a second."""
    changes = followed.changes
    rate = changes / elapsed
    first, last = followed.first_write_ns, followed.last_write_ns
    if changes >= 2 and last > first and not _whole_seconds(last):
        rate = min(rate, (changes - 1) * 1e9 / (last - first))
    return rate


def _looked_stamps(whole: bytes, base: int, seen: list[tuple[int, float]],
                   ) -> tuple[list[float], int]:
    """The stamp of each line `whole` (which begins at byte `base`) ends, by the looks that
    saw the log grow (`seen`: each one's size and stamp), and how many of those lines came
    in a look after another's: _looker.c's read_looked, in Python."""
    # The lines a look saw whole are those whose newline is before its size: one, mostly
    # (a look a line). The last look saw all that was read (to its size, or less: a read
    # cut at _MAX_READ).
    stamps: list[float] = []
    count = whole.count
    at = shared = 0
    for size, stamp in seen:
        upto = size - base
        if upto > at:
            lines = count(b"\n", at, upto)
            if lines == 1:
                stamps.append(stamp)
            elif lines:
                stamps += [stamp] * lines
                shared += lines - 1
            at = upto
    return stamps, shared


def _line_ends(data: bytes, base: int) -> list[int]:
    """Where each complete line of `data` (which begins at byte `base`) ends, past its
    newline."""
    ends, at = [], data.find(b"\n")
    while at >= 0:
        ends.append(base + at + 1)
        at = data.find(b"\n", at + 1)
    return ends


def _modified_times(folders: list[Path]) -> dict[Path, int] | None:
    """Each folder's modification time (ns); None when one is not there (yet)."""
    try:
        return {folder: os.stat(folder).st_mtime_ns for folder in folders}
    except OSError:
        return None


def _changes() -> _Changes | None:
    try:
        return _Changes()
    except (ImportError, OSError, AttributeError):
        return None

