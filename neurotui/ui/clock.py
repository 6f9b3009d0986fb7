"""Where "now" comes from: the wall clock when following live, a fixed or recorded one else.

The dashboard never calls time.time() itself: tests pin the clock so snapshots are stable,
and a replay drives the same screens from a recorded timeline.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class WallClock:
    def now(self) -> float:
        return time.time()


class FixedClock:
    """A clock that only moves when told to (tests, a paused replay)."""

    def __init__(self, t: float) -> None:
        self.t = float(t)

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
