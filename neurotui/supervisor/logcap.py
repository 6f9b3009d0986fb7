"""The session's log cap: the job's logs, copied into the session, keep at most so many bytes
(`neurotui run --log-cap`, 1 GiB unless told); past it their output is dropped, and the log
says where and how much. Shared by the spool's copies (spool.py) and the flood gate."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_LOG_CAP = 1 << 30
"""The session's logs keep at most this much of the job's output (1 GiB) unless told."""
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
          "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


def parse_size(text: str) -> int:
    """`200M`, `1.5G`, `512K`, `1000000` (bytes; powers of 1024) to bytes. ValueError says why
    not."""
    match = _SIZE_RE.fullmatch(text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (say e.g. 200M, 1G or 500000000)")
    return int(float(match.group(1)) * _UNITS[unit])


def size_text(count: float) -> str:
    """Bytes as a person reads them: `812 MB`, `200 MB`, `5.3 KB` (powers of 1024)."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= size:
            value = count / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) \
                else f"{value:.1f} {unit}"
    return f"{count:.0f} bytes"


@dataclass
class LogCap:
    """The session's copies of the job's logs, all together, keep at most `limit` bytes."""

    limit: int | None
    kept: int = 0
    dropped: int = 0
    reached_at: float | None = None

    def allow(self, wanted: int, now: float) -> int:
        """How many of `wanted` bytes may be kept now (counted as kept)."""
        if self.limit is None:
            self.kept += wanted
            return wanted
        allowed = max(0, min(wanted, self.limit - self.kept))
        self.kept += allowed
        if allowed < wanted and self.reached_at is None:
            self.reached_at = now
        return allowed

    def cut_line(self) -> bytes:
        """Written into a log where the cap cut it."""
        return (f"\n[neurotui: output dropped from here on: the session's log cap "
                f"({size_text(self.limit or 0)}) was reached]\n").encode()

    def count_line(self, dropped: int) -> bytes:
        """Written at the end of a log the cap cut: how much of its output was dropped."""
        return (f"[neurotui: {size_text(dropped)} of output dropped here: the session's log "
                f"cap ({size_text(self.limit or 0)}) was reached]\n").encode()
