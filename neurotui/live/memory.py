"""Giving freed memory back to the OS while following a long run.

A follower frees big blocks (the steps of a long run taken in at once when attaching, a replay
view's step table rebuilt, the pieces a first read parses) and many small ones; glibc keeps
such freed heap memory mapped, so RSS would creep up to its highest point and stay there.
`malloc_trim` returns it. Not glibc (macOS, musl): a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable

TRIM_EVERY_S = 10.0


def _load_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


class Trimmer:
    def __init__(self, every_s: float = TRIM_EVERY_S) -> None:
        self.every_s = every_s
        self._trim = _load_trim()
        self._last = -float("inf")

    def maybe_trim(self, now: bool = False) -> bool:
        """Trim if `every_s` passed since the last trim, or at once when `now` (a big block
        was just freed). A trim costs well under a millisecond."""
        t = time.monotonic()
        if not now and t - self._last < self.every_s:
            return False
        self._last = t
        if self._trim is not None:
            self._trim(0)
        return True
