"""Every CPU over time, for the heat map: a bounded time x CPU matrix of the host samples, and
the CPUs the ranks and DataLoader workers were last seen on. No Textual in here.

The matrix is kept in a numpy ring (a few hundred samples x up to 192 CPUs: under 200 KB) and
handed to the views as a read-only copy only when a sample came in. The dashboard compares
states by value at every frame, so `CpuHistory` compares by a small key (rows, CPUs, first and
last sample time) instead of its 40,000 cells: the same samples of the same session give the
same key, live or replayed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HEAT_HISTORY = 240
"""Samples kept (one a second: the last 4 minutes): a column each on the widest terminals."""
GAP_FACTOR = 2.5
"""Two samples further apart than this many sampling intervals have a gap between them
(the supervisor was stopped or starved): one missing column is drawn there."""


@dataclass(frozen=True)
class CpuHistory:
    """`loads[i, c]`: CPU c's percent busy at sample i (oldest first), NaN where not recorded
    (a gap between samples, or a CPU the sample did not list). Read-only arrays."""

    key: tuple[int, int, float, float]
    loads: np.ndarray = field(compare=False, repr=False)
    times: np.ndarray = field(compare=False, repr=False)
    """Each row's time (NaN for a gap row)."""
    interval_s: float | None = None
    """The usual time between samples (their median spacing); None with fewer than two."""

    @property
    def cpus(self) -> int:
        return int(self.loads.shape[1])

    @property
    def span_s(self) -> float:
        """Time from the oldest sample to the newest."""
        finite = self.times[np.isfinite(self.times)]
        return float(finite[-1] - finite[0]) if len(finite) > 1 else 0.0


@dataclass(frozen=True)
class CpuMarks:
    """The CPUs the job's processes last ran on, in the latest process sample."""

    ranks: tuple[int, ...] = ()
    workers: tuple[int, ...] = ()
    note: str | None = None
    """Why there are no marks: no process sample yet, or a session recorded without them."""


NO_MARKS = CpuMarks()


def cpu_marks(procs: Mapping[str, Any] | None) -> CpuMarks:
    """Ranks' and DataLoader workers' CPUs from a `procs` event (`cpu_num` of each row)."""
    if procs is None:
        return CpuMarks(note="no process sample yet")
    rows = [p for p in procs.get("procs") or () if isinstance(p, Mapping)]
    if rows and not any("cpu_num" in p for p in rows):
        return CpuMarks(note="ranks' CPUs not recorded")  # a session from before cpu_num

    def on(role: str) -> tuple[int, ...]:
        return tuple(sorted({n for p in rows if p.get("role") == role
                             and isinstance(n := p.get("cpu_num"), int) and n >= 0}))

    ranks, workers = on("rank"), on("worker")
    if rows and not ranks and not workers:  # the ranks not started yet, or gone
        return CpuMarks(note="no rank running")
    return CpuMarks(ranks, workers)


class CpuHeatHistory:
    """Takes in the host samples as the reader gains them; `update` returns the history."""

    def __init__(self, size: int = HEAT_HISTORY) -> None:
        self.size = size
        self._window_interval: float | None = None  # set at each update, kept by _clear
        self._clear()

    def _clear(self) -> None:
        self._loads = np.full((self.size, 0), math.nan, dtype=np.float32)
        self._times = np.full(self.size, math.nan)
        self._rows = 0  # rows written since the last clear (the ring holds the last `size`)
        self._last_t: float | None = None
        self._shown: CpuHistory | None = None

    def update(self, series: Sequence[Mapping[str, Any]]) -> CpuHistory | None:
        """`series`: the reader's last host samples, oldest first (it keeps a window)."""
        if not series:
            return self._shown
        newest = _t(series[-1])
        if self._last_t is not None and newest < self._last_t:
            self._clear()  # the series went back in time (a replay seeking back)
        last = self._last_t if self._last_t is not None else -math.inf
        fresh = []
        for event in reversed(series):
            if _t(event) <= last:
                break
            fresh.append(event)
        if not fresh:
            return self._shown
        fresh.reverse()
        # The spacing of the reader's window stands in while too few samples are kept.
        self._window_interval = _median_spacing(np.array([_t(e) for e in series]))
        if self._last_t is not None and len(fresh) == len(series) and \
                self._is_gap(_t(fresh[0]) - self._last_t):
            # All of the reader's window is new and far from what came before: samples in
            # between may never have been seen (a replay jumping ahead). Start over rather
            # than draw a gap that the recording does not have.
            self._clear()
        for event in fresh:
            t = _t(event)
            if self._last_t is not None and self._is_gap(t - self._last_t):
                self._append(math.nan, None)
            self._append(t, event.get("cpu"))
            self._last_t = t
        self._shown = self._snapshot()
        return self._shown

    def _interval(self) -> float | None:
        return _median_spacing(self._ordered(self._times)[-16:])

    def _is_gap(self, dt: float) -> bool:
        interval = self._interval() or self._window_interval
        return interval is not None and dt > GAP_FACTOR * interval

    def _append(self, t: float, cpu: Any) -> None:
        values = _loads(cpu)
        if len(values) > self._loads.shape[1]:  # more CPUs than seen so far: widen
            wider = np.full((self.size, len(values)), math.nan, dtype=np.float32)
            wider[:, :self._loads.shape[1]] = self._loads
            self._loads = wider
        i = self._rows % self.size
        self._loads[i] = math.nan
        self._loads[i, :len(values)] = values
        self._times[i] = t
        self._rows += 1

    def _ordered(self, ring: np.ndarray) -> np.ndarray:
        """The ring's rows oldest first (a copy)."""
        if self._rows <= self.size:
            return ring[:self._rows].copy()
        start = self._rows % self.size
        return np.concatenate([ring[start:], ring[:start]])

    def _snapshot(self) -> CpuHistory:
        loads, times = self._ordered(self._loads), self._ordered(self._times)
        loads.flags.writeable = times.flags.writeable = False
        finite = times[np.isfinite(times)]
        key = (len(times), loads.shape[1], float(finite[0]) if len(finite) else math.nan,
               float(finite[-1]) if len(finite) else math.nan)
        return CpuHistory(key, loads, times, self._interval())


def _median_spacing(times: np.ndarray) -> float | None:
    diffs = np.diff(times[np.isfinite(times)])
    diffs = diffs[diffs > 0]
    return float(np.median(diffs)) if len(diffs) else None


def _t(event: Mapping[str, Any]) -> float:
    try:
        return float(event.get("t", -math.inf))
    except (TypeError, ValueError):
        return -math.inf


_NUMBERS = frozenset({int, float})


def _loads(cpu: Any) -> np.ndarray:
    """A sample's per-CPU percents; anything not a number is NaN (shown as not recorded)."""
    if not isinstance(cpu, (list, tuple)):
        return np.zeros(0, dtype=np.float32)
    if set(map(type, cpu)) <= _NUMBERS:  # the usual sample: converted whole (a reader
        # keeping a day's history hands over 2,900 of 128 CPUs: a CPU at a time, 0.2 s)
        with contextlib.suppress(OverflowError):
            values = np.array(cpu, dtype=np.float64)
            with np.errstate(over="ignore"):
                out = values.astype(np.float32)
            out[~np.isfinite(values)] = math.nan
            return out
    out = np.full(len(cpu), math.nan, dtype=np.float32)
    for i, value in enumerate(cpu):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            with contextlib.suppress(OverflowError):  # an int past any float: not a percent
                if math.isfinite(value):
                    out[i] = value
    return out
