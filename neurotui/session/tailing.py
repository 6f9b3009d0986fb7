"""Following an append-only file: the complete lines written since the last read."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_LONG_LINE_STEP = 1 << 20
"""A line longer than a whole piece is read to its end this many bytes at a time."""


def read_new_block(path: Path, offset: int, max_bytes: int = -1) -> tuple[bytes, int]:
    """The bytes appended to `path` from `offset` (the start of a line) on, and how many of
    them are complete lines (up to and with the last newline).

    Nothing is carried over: a last line still being written is read again next time, from
    `offset + complete`. No piece is copied to join it to the carried
    part (a long session's first read moves a gigabyte), and a bulk decoder takes the
    complete lines as they lie. `max_bytes` bounds one read (-1: to the end), unless a single
    line is longer: that one is read whole.
    Raises OSError (FileNotFoundError when the file is not there yet).
    """
    # os-level calls, sized by fstat: a follower reads dozens of files every refresh, mostly
    # a few KB each, where a buffered file object costs more than the read.
    fd = os.open(path, os.O_RDONLY)
    try:
        return _read_block(fd, offset, max_bytes, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _read_block(fd: int, offset: int, max_bytes: int, file_size: int) -> tuple[bytes, int]:
    """read_new_block's read, of the open file `fd` (`file_size` bytes long)."""
    size = file_size - offset
    want = size if max_bytes < 0 else min(size, max_bytes)
    chunk = os.pread(fd, want, offset) if want > 0 else b""
    complete = chunk.rfind(b"\n") + 1
    if not complete and len(chunk) == max_bytes > 0:  # a line longer than a piece
        parts = [chunk]
        read = len(chunk)
        while more := os.pread(fd, _LONG_LINE_STEP, offset + read):
            newline = more.find(b"\n")
            parts.append(more if newline < 0 else more[:newline + 1])
            read += len(parts[-1])
            if newline >= 0:
                break
        chunk = b"".join(parts)
        complete = chunk.rfind(b"\n") + 1
    return chunk, complete


class KeptFiles:
    """read_new_block for files read again and again (every second, dozens of them): each
    kept open, so that a read is an fstat and a pread, not an open and a close besides. For
    files only ever appended to (probe files): a file made again under its name is not seen,
    as the one first opened is read on."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}

    def read_new_block(self, path: Path, offset: int, max_bytes: int = -1) -> tuple[bytes, int]:
        """As the function of that name. Raises OSError; the file is then let go."""
        fd = self._fds.get(path)
        try:
            if fd is None:
                fd = self._fds[path] = os.open(path, os.O_RDONLY)
            return _read_block(fd, offset, max_bytes, os.fstat(fd).st_size)
        except OSError:
            self.forget(path)
            raise

    def forget(self, path: Path) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self.forget(path)


def split_lines(pending: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """The complete lines of `pending + chunk` (without newlines), and what is left after the
    last newline: a line still being written."""
    lines = (pending + chunk).split(b"\n")
    return lines[:-1], lines[-1]


def read_lines_backwards(path: Path, max_bytes: int, block: int = 1 << 16) -> Iterator[bytes]:
    """The complete lines of `path`, last first, from at most its last `max_bytes`; a last
    line without its newline (a writer killed mid-line) is left out, and so is a first line
    cut by `max_bytes`. Raises OSError."""
    with open(path, "rb") as f:
        end = f.seek(0, 2)
        start = max(0, end - max_bytes)
        position, tail = end, b""
        seen_newline = False
        while position > start:
            size = min(block, position - start)
            position -= size
            f.seek(position)
            lines = (f.read(size) + tail).split(b"\n")
            if not seen_newline:
                if len(lines) == 1:  # still inside the unfinished last line
                    tail = lines[0]
                    continue
                lines, seen_newline = lines[:-1], True  # what follows the last newline
            tail = lines[0]  # may go on in the block before
            yield from reversed(lines[1:])
        if start == 0 and seen_newline and tail:
            yield tail
