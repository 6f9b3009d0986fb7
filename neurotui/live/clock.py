"""Where "now" comes from: the wall clock when following live, a fixed or recorded one else.

The dashboard never calls time.time() itself: tests pin the clock so snapshots are stable,
and a replay drives the same screens from a recorded timeline.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
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


SPEEDS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, math.inf)
"""Replay speeds offered by the speed keys; inf: as fast as frames can be drawn."""
MAX_SPEED_FRAMES = 400
"""At the fastest speed a whole run plays in about this many frames."""


class ReplayClock:
    """Recorded time for a replay: a cursor between `start` and `end` that moves with the
    wall clock times `speed` while playing.

    `tick()` is called once per frame, before the frame is computed, so one frame sees one
    time. At speed inf ("as fast as possible") each tick moves a fixed share of the run and
    frames follow each other without waiting. Thread-safe: the keys (UI thread) and the
    frames (a worker thread) both use it.
    """

    def __init__(self, start: float, end: float, *, speed: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.start = float(start)
        self.end = max(float(end), self.start)
        self.speed = speed
        self.playing = False
        self._monotonic = monotonic
        self._t = self.start
        self._wall = monotonic()
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._t

    @property
    def fastest(self) -> bool:
        return math.isinf(self.speed)

    @property
    def frame_s(self) -> float:
        """Recorded seconds one frame moves at the fastest speed."""
        return max(1.0, (self.end - self.start) / MAX_SPEED_FRAMES)

    def tick(self) -> float:
        with self._lock:
            self._advance(frame=True)
            return self._t

    def _advance(self, *, frame: bool) -> None:
        """Move the cursor by the wall time since the last move (at the fastest speed: by a
        frame, if this is one). Call with the lock held."""
        wall = self._monotonic()
        if self.playing:
            if self.fastest:
                step = self.frame_s if frame else 0.0
            else:
                step = (wall - self._wall) * self.speed
            self._t = min(self.end, self._t + step)
            if self._t >= self.end:
                self.playing = False  # stop at the end, like a player does
        self._wall = wall

    def play(self, playing: bool | None = None) -> None:
        """Start, stop (or with None, toggle); playing again from the end starts over."""
        with self._lock:
            self.playing = (not self.playing) if playing is None else playing
            if self.playing and self._t >= self.end:
                self._t = self.start
            self._wall = self._monotonic()

    def seek(self, t: float) -> float:
        with self._lock:
            self._t = min(self.end, max(self.start, float(t)))
            self._wall = self._monotonic()
            return self._t

    def set_speed(self, speed: float) -> None:
        with self._lock:
            self._advance(frame=False)  # the time played so far counts at the old speed
            self.speed = speed

    def faster(self, delta: int) -> float:
        """The next speed up (delta 1) or down (-1) among SPEEDS."""
        i = min(range(len(SPEEDS)), key=lambda k: abs(math.log(
            min(SPEEDS[k], 1e9) / min(self.speed, 1e9))))
        self.set_speed(SPEEDS[max(0, min(len(SPEEDS) - 1, i + delta))])
        return self.speed
