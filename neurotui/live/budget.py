"""Spend at most a share of one core on a recurring expensive computation.

Some views need the whole run (steady state over every step; the reader's full step table).
Their cost grows with the run, so instead of a fixed period they run again only after
`cost / share` seconds: a 40 ms recompute at a 2% share runs at most every 2 s. The dashboard
then follows any run size within its CPU budget; big runs just refresh those views less often.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Budget:
    def __init__(self, share: float, min_interval_s: float = 0.0,
                 monotonic: Callable[[], float] = time.monotonic, enabled: bool = True) -> None:
        self.enabled = enabled
        self.share = share
        self.min_interval_s = min_interval_s
        self._monotonic = monotonic
        self._next = -float("inf")
        self.last_cost_s = 0.0

    def due(self) -> bool:
        return not self.enabled or self._monotonic() >= self._next

    def start(self) -> float:
        return self._monotonic()

    def spent(self, started: float) -> None:
        now = self._monotonic()
        self.last_cost_s = now - started
        self._next = now + max(self.min_interval_s, self.last_cost_s / self.share)


class FramePacer:
    """The live dashboard's frames: every `interval_s`, and further apart when a frame costs
    more than `share` of one core, so that following a job of thousands of ranks (a frame of
    tens of milliseconds) stays as light as following one node. Measured as the whole
    process's CPU time between frames: reading, working out and drawing, every thread."""

    def __init__(self, share: float, longest: float = 5.0,
                 cpu_time: Callable[[], float] = time.process_time) -> None:
        """`longest`: frames never further apart than this many intervals."""
        self.share = share
        self.longest = longest
        self._cpu_time = cpu_time
        self._last: float | None = None
        self.last_cost_s = 0.0

    def next_in(self, interval_s: float, *, count: bool = True) -> float:
        """Seconds to the next frame, at the end of one. `count=False`: this frame's cost
        says nothing of the next ones' (the first read of a long run), so the interval."""
        now = self._cpu_time()
        self.last_cost_s = now - self._last if self._last is not None else 0.0
        self._last = now
        if not count:
            return interval_s
        return max(interval_s, min(self.last_cost_s / self.share, self.longest * interval_s))
