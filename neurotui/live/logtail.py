"""Following one log file of the session (a rank's stdout or stderr, or the launcher log).

Bounded: on opening, only the last `backlog_bytes` are read; a line without a newline is held
until it completes, but never beyond `max_line_bytes` (a progress bar that never prints a
newline must not grow memory). Decoding errors are replaced, not fatal: logs are data.

A replay reads each file only up to where it had been written at the replay's cursor (the
session's `log_offsets` records): `limits`, by path relative to the session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from neurotui.session import layout

LAUNCHER = -1
STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class LogChoice:
    """What the log panel shows: a rank (or LAUNCHER) and, for ranks, which stream."""

    rank: int = LAUNCHER
    stream: str = "stdout"

    def label(self) -> str:
        return "launcher" if self.rank == LAUNCHER else f"rank {self.rank} {self.stream}"


def resolve(session_dir: Path, choice: LogChoice,
            rank_files: dict[int, list[Path]] | None = None) -> Path | None:
    """The newest file for `choice` (a restart writes a new attempt's files)."""
    if choice.rank == LAUNCHER:
        return session_dir / layout.LAUNCHER_LOG
    files = rank_files if rank_files is not None else layout.rank_log_files(session_dir)
    mine = [p for p in files.get(choice.rank, []) if p.stem == choice.stream]
    return mine[-1] if mine else None


class LogTail:
    def __init__(self, path: Path | None, backlog_bytes: int = 64 * 1024,
                 max_line_bytes: int = 16 * 1024) -> None:
        self.path = path
        self.backlog_bytes = backlog_bytes
        self.max_line_bytes = max_line_bytes
        self._offset: int | None = None
        self._pending = b""

    @property
    def offset(self) -> int | None:
        """Bytes read so far (None: nothing yet)."""
        return self._offset

    def read(self, limit: int | None = None) -> list[str]:
        """New complete lines since the last call (the backlog's tail on the first call),
        reading no further than byte `limit` when given."""
        if self.path is None:
            return []
        try:
            with open(self.path, "rb") as f:
                end = f.seek(0, 2)
                if limit is not None:
                    end = min(end, limit)
                if self._offset is None or end < self._offset:  # first read, or truncated
                    start = max(0, end - self.backlog_bytes)
                    self._pending = b""
                    f.seek(start)
                    chunk = f.read(end - start)
                    if start > 0:  # the first line is cut: drop it rather than show half
                        chunk = chunk.partition(b"\n")[2]
                else:
                    f.seek(self._offset)
                    chunk = f.read(min(end - self._offset, self.backlog_bytes * 4))
                    end = self._offset + len(chunk)
                self._offset = end
        except OSError:
            return []
        data = self._pending + chunk
        parts = data.split(b"\n")
        self._pending = parts.pop()
        if len(self._pending) > self.max_line_bytes:
            parts.append(self._pending)
            self._pending = b""
        lines = []
        for raw in parts:
            text = raw[:self.max_line_bytes].decode("utf-8", errors="replace")
            # The cut is marked with a control character: textsafe shows it as a visible
            # escape, so it cannot be mistaken for the log's own text.
            lines.append(text + "\x1a" if len(raw) > self.max_line_bytes else text)
        return lines


class ShownLogFollower:
    """The log panel's source: follows the wanted choice, and the newest attempt's file.

    `wanted=None` means "pick for me": rank 0's stdout once rank logs exist, else the launcher
    log. Rank log files are looked up again every `rescan_s` (a restart adds files).
    """

    def __init__(self, session_dir: Path, rescan_s: float = 5.0) -> None:
        self.session_dir = session_dir
        self.rescan_s = rescan_s
        self.choice: LogChoice | None = None
        self.path: Path | None = None
        self.ranks: tuple[int, ...] = ()
        self._tail: LogTail | None = None
        self._files: dict[int, list[Path]] = {}
        self._scanned_at = -float("inf")

    def poll(self, wanted: LogChoice | None, now: float,
             limits: Mapping[str, int] | None = None) -> tuple[list[str], bool]:
        """New lines, and whether they replace what was shown (another file, or a replay
        gone back in time). `limits`: how far each file may be read (see the docstring)."""
        if now - self._scanned_at >= self.rescan_s or now < self._scanned_at or (
                wanted is not None and wanted.rank not in self._files
                and wanted.rank != LAUNCHER):
            with contextlib.suppress(OSError):
                self._files = layout.rank_log_files(self.session_dir)
            self.ranks = tuple(sorted(self._files))
            self._scanned_at = now
        files = self._files
        if limits is not None:  # a replay: only the files written to by its cursor
            files = {rank: written for rank, paths in files.items()
                     if (written := [p for p in paths if self._limit(p, limits)])}
        choice = wanted or (LogChoice(min(files)) if files else LogChoice())
        path = resolve(self.session_dir, choice, files)
        limit = None if limits is None or path is None else self._limit(path, limits)
        reset = choice != self.choice or path != self.path or self._tail is None or (
            limit is not None and limit < (self._tail.offset or 0))
        if reset:
            self.choice, self.path = choice, path
            self._tail = LogTail(path)
        assert self._tail is not None
        return self._tail.read(limit), reset

    def _limit(self, path: Path, limits: Mapping[str, int]) -> int | None:
        """How far `path` had been written (0: not yet); None for a file outside the session."""
        try:
            return limits.get(path.relative_to(self.session_dir).as_posix(), 0)
        except ValueError:
            return None
