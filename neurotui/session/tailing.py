"""Following an append-only file: the complete lines written since the last read."""

from __future__ import annotations

from pathlib import Path


def read_new_lines(path: Path, offset: int, pending: bytes,
                   max_bytes: int = -1) -> tuple[list[bytes], int, bytes]:
    """Lines appended to `path` after `offset`, without their newline.

    Returns (lines, new offset, new pending). A last line with no newline yet is handed back as
    `pending`, to be completed by the next read: a writer may be in the middle of it.
    `max_bytes` bounds one read (-1: to the end); a line cut by it waits in `pending` too.
    Raises OSError (FileNotFoundError when the file is not there yet).
    """
    with open(path, "rb") as f:
        f.seek(offset)
        chunk = f.read(max_bytes)
    lines = (pending + chunk).split(b"\n")
    return lines[:-1], offset + len(chunk), lines[-1]
