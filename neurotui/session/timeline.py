"""A recorded session seen as it stood at any moment: what `neurotui replay` shows.

`Timeline` loads the whole session once (through the reader and its columnar cache: under a
second for a 24-hour, 32-rank session) and keeps steps and the rare events whole. High-rate
telemetry is not loaded: the reader's byte-range index says where each sample lies, so a view
reads only the few dozen samples before its cursor, found by bisecting on their times.

`TimelineView` has the interface the dashboard model reads a session through (poll,
take_steps, reopened, meta, events, frame, last, problems, dir), cut at its cursor, so the
model and screens serve replay unchanged: replay is not a second rendering path.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from neurotui.metrics import finite_or_none
from neurotui.session.reader import (
    BOUNDED_KINDS,
    LOG_OFFSETS,
    ReadProblems,
    SessionReader,
    json_loads,
)
from neurotui.session.status import SessionStatus, session_status
from neurotui.session.steptable import TakenSteps

TELEMETRY_WINDOW = 40
"""Telemetry samples a view keeps per kind (as the live dashboard's reader does)."""


class _Samples:
    """One telemetry kind's samples, in file (= time) order, read from disk on demand."""

    def __init__(self, paths: Sequence[Path], stream: np.ndarray, offset: np.ndarray,
                 length: np.ndarray) -> None:
        self.paths = list(paths)
        self.stream, self.offset, self.length = stream, offset, length
        self._files: dict[int, BinaryIO] = {}
        self._t: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self.offset)

    def record(self, i: int) -> dict[str, Any]:
        sid = int(self.stream[i])
        f = self._files.get(sid)
        if f is None:
            f = self._files[sid] = open(self.paths[sid], "rb")  # noqa: SIM115 (closed in close())
        f.seek(int(self.offset[i]))
        record = json_loads(f.read(int(self.length[i])))
        if not isinstance(record, dict):
            raise ValueError(f"{self.paths[sid]}: byte {self.offset[i]}: not an event")
        return record

    def t(self, i: int) -> float:
        t = self._t.get(i)
        if t is None:
            t = self._t[i] = float(self.record(i)["t"])
        return t

    def count_until(self, until: float) -> int:
        """How many samples have t <= until (bisection: ~20 reads for millions of rows)."""
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.t(mid) <= until:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


class Timeline:
    """A whole recorded session, loaded once; `view()` gives it as it stood at a time."""

    def __init__(self, session_dir: Path | str) -> None:
        self.reader = SessionReader(session_dir, telemetry_history=0).load()
        self.dir = self.reader.dir
        self.meta = self.reader.meta
        self.steps = self.reader.step_columns()
        self._step_t = self.steps.floats("t")
        phases = self.reader.phase_columns()
        self.phases = phases.rows(np.argsort(phases["t"], kind="stable")) \
            if len(phases) else phases
        self._phase_t = self.phases.floats("t") if len(phases) else None
        # Rare events (compiles, process starts and exits, restarts...): kept whole, by time.
        self.events: dict[str, list[dict[str, Any]]] = {}
        self._event_t: dict[str, list[float]] = {}
        for kind, bucket in self.reader.events.items():
            if kind in BOUNDED_KINDS:
                continue
            ordered = sorted(bucket, key=lambda e: float(e["t"]))
            self.events[kind] = ordered
            self._event_t[kind] = [float(e["t"]) for e in ordered]
        self.samples = {kind: _Samples(*self.reader.event_locations(kind))
                        for kind in sorted(BOUNDED_KINDS)}
        # Recorded since the supervisor marked how far the logs were written (log_offsets).
        self.has_log_offsets = len(self.samples[LOG_OFFSETS]) > 0
        self.start, self.end = self._bounds()

    def _bounds(self) -> tuple[float, float]:
        """From the session's start to its recorded end (or its last record, if still running
        or lost)."""
        times = [t for t in (finite_or_none(self.meta.get("started_at")),
                             finite_or_none(self.meta.get("ended_at"))) if t is not None]
        if len(self._step_t):
            times += [float(self._step_t[0]), float(self._step_t[-1])]
        times += [ts[-1] for ts in self._event_t.values() if ts]
        for samples in self.samples.values():
            if len(samples):
                times.append(samples.t(len(samples) - 1))
        if not times:
            return 0.0, 0.0
        start = finite_or_none(self.meta.get("started_at"))
        return (start if start is not None else min(times)), max(times)

    def time_of_step(self, step: int) -> float | None:
        """When the run first reached `step` (on any rank of any attempt), or None."""
        reached = np.flatnonzero(self.steps["step"] >= step)
        return float(self._step_t[reached[0]]) if len(reached) else None

    def steps_until(self, until: float) -> int:
        return int(np.searchsorted(self._step_t, until, side="right"))

    def phase_rows_until(self, until: float) -> int:
        if self._phase_t is None:
            return len(self.phases)
        return int(np.searchsorted(self._phase_t, until, side="right"))

    def events_until(self, kind: str, until: float) -> list[dict[str, Any]]:
        times = self._event_t.get(kind)
        if not times:
            return []
        return self.events[kind][:bisect.bisect_right(times, until)]

    def status_at(self, until: float) -> SessionStatus:
        """What the session's state was at `until`, as the live dashboard would have said."""
        ended_at = finite_or_none(self.meta.get("ended_at"))
        if ended_at is not None and until >= ended_at:
            return session_status(self.dir)
        if until < self.end or self.meta.get("exit") is not None:
            return SessionStatus("running", True, "replay")
        now = session_status(self.dir)  # the record stops here: still running, or lost
        return now if not now.running else SessionStatus("running", True, "replay")

    def view(self) -> TimelineView:
        return TimelineView(self)

    def close(self) -> None:
        for samples in self.samples.values():
            samples.close()


class TimelineView:
    """The reader's interface over a timeline, cut at `until` (set it with `seek`)."""

    def __init__(self, timeline: Timeline, window: int = TELEMETRY_WINDOW) -> None:
        self.timeline = timeline
        self.dir = timeline.dir
        self.meta = timeline.meta
        self.problems: ReadProblems = timeline.reader.problems
        self.samples_from = timeline.reader.samples_from  # of the whole recording
        self.window = window
        self.until = timeline.start
        self._shown = -1  # records visible at the last poll
        self._handed = self._phases_handed = 0  # rows handed out by take_steps
        self.events: dict[str, Sequence[dict[str, Any]]] = {}
        self._telemetry: dict[str, deque[dict[str, Any]]] = {}
        self._telemetry_rows: dict[str, int] = {}

    def seek(self, until: float) -> None:
        self.until = until

    def poll(self, *, final: bool = False) -> int:
        """Bring the view to its cursor; returns how many records it gained (or lost)."""
        tl, until = self.timeline, self.until
        shown = tl.steps_until(until)
        events: dict[str, Sequence[dict[str, Any]]] = {}
        for kind in tl.events:
            events[kind] = tl.events_until(kind, until)
            shown += len(events[kind])
        for kind, samples in tl.samples.items():
            rows = samples.count_until(until)
            shown += rows
            if rows:
                events[kind] = self._take_samples(kind, samples, rows)
        self.events = events
        changed = abs(shown - self._shown) if self._shown >= 0 else shown
        self._shown = shown
        return changed

    def _take_samples(self, kind: str, samples: _Samples, rows: int) -> deque[dict[str, Any]]:
        """The last `window` samples up to row `rows`, reading only what is new."""
        have = self._telemetry_rows.get(kind, 0)
        recent = self._telemetry.get(kind)
        if recent is None or rows < have or rows - have > self.window:
            recent = self._telemetry[kind] = deque(maxlen=self.window)
            have = max(0, rows - self.window)
        for i in range(have, rows):
            recent.append(samples.record(i))
        self._telemetry_rows[kind] = rows
        return recent

    def take_steps(self) -> TakenSteps | None:
        """As SessionReader.take_steps: the steps (and phase rows) up to the cursor not handed
        out yet; None after the cursor went back past rows already handed out (the follower
        starts over: `reopened()`)."""
        tl = self.timeline
        rows = tl.steps_until(self.until)
        if rows < self._handed:
            self._handed = self._phases_handed = 0
            return None
        phase_rows = tl.phase_rows_until(self.until)
        taken = TakenSteps(tl.steps.rows(slice(self._handed, rows)),
                           tl.phases.rows(slice(self._phases_handed, phase_rows)))
        self._handed, self._phases_handed = rows, phase_rows
        return taken

    def reopened(self) -> TimelineView:
        """Itself, handing out from the start again (take_steps said to start over)."""
        self._handed = self._phases_handed = 0
        return self

    def last(self, kind: str) -> dict[str, Any] | None:
        items = self.events.get(kind)
        return items[-1] if items else None


_DURATION = re.compile(r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?"
                       r"(?:(?P<s>\d+(?:\.\d+)?)s?)?$")


def parse_position(text: str, time_of_step: Callable[[int], float | None],
                   start: float) -> float:
    """Where "go to" goes: `step 1200` (or `s1200`), or a time from the start: `1:02:03`,
    `12:30`, `1h2m`, `90s`, `90` (seconds).

    Raises ValueError with a message for the user."""
    text = text.strip().lower()
    m = re.fullmatch(r"(?:step\s*|s)(\d+)", text)
    if m:
        t = time_of_step(int(m.group(1)))
        if t is None:
            raise ValueError(f"step {int(m.group(1)):,} was never reached")
        return t
    if ":" in text:
        try:
            parts = [float(p) for p in text.split(":")]
        except ValueError:
            raise ValueError(f"not a time: {text!r}") from None
        if len(parts) > 3 or any(p < 0 for p in parts):
            raise ValueError(f"not a time: {text!r}")
        seconds = 0.0
        for p in parts:
            seconds = seconds * 60 + p
        return start + seconds
    m = _DURATION.fullmatch(text)
    if not text or m is None:
        raise ValueError(f"not a time or step: {text!r} (try 12:30, 1h5m, 90s or step 500)")
    seconds = sum(float(m.group(g) or 0) * k for g, k in (("h", 3600), ("m", 60), ("s", 1)))
    if not math.isfinite(seconds):
        raise ValueError(f"not a time: {text!r}")
    return start + seconds
