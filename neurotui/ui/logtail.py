"""Following one log file of the session (a rank's stdout or stderr, or the launcher log).

Bounded: on opening, only the last `backlog_bytes` are read; a line without a newline is held
until it completes, but never beyond `max_line_bytes` (a progress bar that never prints a
newline must not grow memory). Decoding errors are replaced, not fatal: logs are data.
"""

from __future__ import annotations

import contextlib
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

    def read(self) -> list[str]:
        """New complete lines since the last call (the backlog's tail on the first call)."""
        if self.path is None:
            return []
        try:
            with open(self.path, "rb") as f:
                end = f.seek(0, 2)
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
            if len(raw) > self.max_line_bytes:
                raw = raw[:self.max_line_bytes] + b" [line cut]"
            with contextlib.suppress(Exception):
                lines.append(raw.decode("utf-8", errors="replace"))
        return lines
