"""Whole-run history in bounded memory: time buckets that double in width as the run grows.

Users want the step time of the whole run, not the last minute (nvitop #217, nvtop #155), and
a week-long run must not grow the dashboard without bound: at most `max_buckets` buckets are
kept; when the run outgrows them, neighbours are merged and the bucket width doubles.

The step-time chart is drawn to the scale of the steady steps (`StepScale`): a first compiled
step of 4.85 s must not flatten 30 ms steps into one line, or a 2% regression could not be
seen. What is drawn apart, clipped above that scale with a mark and counted in its caption:

- warm-up steps (the first `warmup_steps` of each rank and attempt, as steady state leaves
  them out: graph compilation, caches) slower than the threshold, one by one (they are few,
  so they are kept as they come);
- buckets of steady steps whose mean is above the threshold (a recompilation, an evaluation,
  a checkpoint), said to be compile spans when a compile event fell into their steps.

The threshold is robust, from the steady buckets alone: their median plus `SPREAD` standard
deviations (estimated as 1.4826 x the median absolute deviation), and never under `FLOOR`
times the median, so bucket noise is never drawn apart and a regression of a few percent, or
even of tens of percent, stays on the scale where it can be seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SPREAD = 8.0
"""Standard deviations of the steady buckets above their median before a bucket is apart."""
FLOOR = 1.5
"""Nothing under this many times the steady median is drawn apart."""
WARMUP_KEPT = 4096
"""Warm-up steps kept one by one (a few per rank and attempt); later ones count only in their
bucket, where the bucket rule still draws them apart when they make it slow."""


@dataclass(frozen=True)
class StepScale:
    """What the step-time chart draws to scale, and what it draws apart above the scale."""

    shown: tuple[float, ...]
    """Per bucket: the mean time of its steps drawn to scale (NaN: none)."""
    above: tuple[bool, ...]
    """Per bucket: it holds steps drawn apart (a mark at the chart's top)."""
    threshold: float
    """Step times (and bucket means) above this are drawn apart."""
    warmup_above: int = 0
    """Warm-up steps drawn apart (one per rank per step)."""
    compile_spans: int = 0
    """Buckets of steady steps drawn apart that a compile event fell into."""
    slow_spans: int = 0
    """Buckets of steady steps drawn apart with no compile event."""
    highest: float = math.nan
    """The longest step drawn apart (of a span: its longest step; NaN: none)."""

    @property
    def apart(self) -> bool:
        return any(self.above)


@dataclass(frozen=True)
class HistorySeries:
    """Per bucket: mean step time (NaN: no step in it) and whole-job samples/s."""

    start: float
    bucket_s: float
    step_time: tuple[float, ...]
    samples_per_s: tuple[float, ...]
    scale: StepScale | None = None
    """How the step times are drawn (None: no timed step yet)."""


class RunHistory:
    def __init__(self, start: float, max_buckets: int = 1024, bucket_s: float = 1.0) -> None:
        if max_buckets < 2 or max_buckets % 2:
            raise ValueError("max_buckets must be even and >= 2")
        self.start = float(start)
        self.bucket_s = float(bucket_s)
        self.max_buckets = max_buckets
        self._time_sum = np.zeros(max_buckets)
        self._time_n = np.zeros(max_buckets)
        self._samples = np.zeros(max_buckets)
        self._warm_sum = np.zeros(max_buckets)
        self._warm_n = np.zeros(max_buckets)
        self._max = np.full(max_buckets, -np.inf)
        """Per bucket: its longest step (how far back its steps began: compile events)."""
        self._warm_t: list[np.ndarray] = []
        self._warm_time: list[np.ndarray] = []
        self._warm_kept = 0
        self._last_t = self.start

    def add(self, t: np.ndarray, step_time: np.ndarray, samples: np.ndarray,
            past: np.ndarray | None = None) -> None:
        """Take in steps: their time, step time (NaN: unknown), samples covered and whether
        each is past warm-up (None: all are)."""
        t = np.asarray(t, dtype=float)
        if not len(t):
            return
        # An attach takes in millions of rows: no mask (and no copy) where every row has
        # its value, as nearly all do.
        ok = np.isfinite(t)
        every = bool(ok.all())
        if not every:
            if not ok.any():
                return
            t = t[ok]
        self._last_t = max(self._last_t, float(t.max()))
        while self._index(self._last_t) >= self.max_buckets:
            self._widen()
        idx = self._indices(t)
        np.clip(idx, 0, self.max_buckets - 1, out=idx)
        times = np.asarray(step_time, dtype=float)
        counted = np.asarray(samples, dtype=float)
        passed = None if past is None else np.asarray(past, dtype=bool)
        if not every:
            times, counted = times[ok], counted[ok]
            passed = None if passed is None else passed[ok]
        known = np.isfinite(times)
        all_known = bool(known.all())
        known_idx = idx if all_known else idx[known]
        known_times = times if all_known else times[known]
        # bincount, not np.add.at: an attach takes in millions of rows at once.
        n = self.max_buckets
        self._time_sum += np.bincount(known_idx, known_times, minlength=n)
        self._time_n += np.bincount(known_idx, minlength=n)
        np.maximum.at(self._max, known_idx, known_times)
        if not np.isfinite(counted).all():
            counted = np.nan_to_num(counted, nan=0.0)
        self._samples += np.bincount(idx, counted, minlength=n)
        if passed is not None:
            warm = known & ~passed
            if warm.any():
                np.add.at(self._warm_sum, idx[warm], times[warm])
                np.add.at(self._warm_n, idx[warm], 1.0)
                take = min(int(warm.sum()), WARMUP_KEPT - self._warm_kept)
                if take > 0:
                    self._warm_t.append(t[warm][:take].copy())
                    self._warm_time.append(times[warm][:take].copy())
                    self._warm_kept += take

    def series(self, end: float, compiles: np.ndarray | None = None) -> HistorySeries:
        """Buckets from the start to `end` (now, or the run's end). The last bucket is rated
        over the time it covers, and left out while under half a bucket (too noisy).
        `compiles`: the compile events' times, to say which slow spans they explain."""
        end = float(end)
        while self._index(end) >= self.max_buckets:
            self._widen()
        n = self._index(end) + 1
        covered = np.minimum(self.bucket_s, end - (self.start + self.bucket_s * np.arange(n)))
        keep = covered >= self.bucket_s / 2
        n_keep = int(keep.sum()) if not keep.all() else n
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = self._time_sum[:n] / self._time_n[:n]
            sps = self._samples[:n] / covered
        step_time = tuple(float(x) for x in mean[:n_keep])
        return HistorySeries(self.start, self.bucket_s, step_time,
                             tuple(float(x) for x in sps[:n_keep]),
                             self._scale(n_keep, compiles) if np.isfinite(mean[:n_keep]).any()
                             else None)

    def _scale(self, n: int, compiles: np.ndarray | None) -> StepScale:
        """The module's rule over the first `n` buckets (at least one holds a timed step)."""
        total, count = self._time_sum[:n].copy(), self._time_n[:n].copy()
        warm_t = np.concatenate(self._warm_t) if self._warm_t else np.empty(0)
        warm_time = np.concatenate(self._warm_time) if self._warm_time else np.empty(0)
        steady_n = count - self._warm_n[:n]
        with np.errstate(invalid="ignore", divide="ignore"):
            steady = (total - self._warm_sum[:n]) / steady_n  # its steady steps' mean
            everything = total / count
        reference = steady[(steady_n > 0.5) & np.isfinite(steady)]  # (counts: whole floats)
        if not len(reference):  # still warming up: its steps are all there is
            reference = warm_time if len(warm_time) else everything[count > 0]
        threshold = _threshold(reference)
        # Warm-up steps over the threshold leave their bucket's mean, one by one.
        # (Those in the last half bucket, not shown yet, wait for it.)
        at = np.clip(self._indices(warm_t), 0, self.max_buckets - 1)
        slow = (warm_time > threshold) & (at < n)
        np.subtract.at(total, at[slow], warm_time[slow])
        np.subtract.at(count, at[slow], 1.0)
        above = np.zeros(n, dtype=bool)
        above[at[slow]] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            shown = np.where(count > 0.5, total / count, np.nan)
        # Buckets still over it: steady steps slowed by a compile, an evaluation, a save.
        spans = np.isfinite(shown) & (shown > threshold)
        compiled = spans & self._compiled(n, compiles)
        highest = max((float(x) for x in (*warm_time[slow], *self._max[:n][spans])),
                      default=math.nan)
        above |= spans
        shown[spans] = np.nan
        return StepScale(tuple(float(x) for x in shown), tuple(bool(x) for x in above),
                         threshold, int(slow.sum()), int(compiled.sum()),
                         int(spans.sum() - compiled.sum()), highest)

    def _compiled(self, n: int, compiles: np.ndarray | None) -> np.ndarray:
        """Per bucket: a compile event fell into some step that ended in it (a step ending at
        `e` began at `e - its time`, at most the bucket's longest step before its start)."""
        hit = np.zeros(n, dtype=bool)
        if compiles is None or not len(compiles):
            return hit
        c = np.asarray(compiles, dtype=float)
        c = np.sort(c[np.isfinite(c)])
        starts = self.start + self.bucket_s * np.arange(n)
        reach = np.where(np.isfinite(self._max[:n]), self._max[:n], 0.0)
        first = np.searchsorted(c, starts - reach, "right")  # events after the first start
        last = np.searchsorted(c, starts + self.bucket_s, "left")  # before the bucket's end
        hit[:] = last > first
        return hit

    def _index(self, t: float) -> int:
        return max(0, math.floor((t - self.start) / self.bucket_s))

    def _indices(self, t: np.ndarray) -> np.ndarray:
        return np.floor((t - self.start) / self.bucket_s).astype(np.int64)

    def _widen(self) -> None:
        for arr in (self._time_sum, self._time_n, self._samples, self._warm_sum,
                    self._warm_n):
            half = arr.reshape(-1, 2).sum(axis=1)
            arr[:] = 0.0
            arr[:len(half)] = half
        longest = self._max.reshape(-1, 2).max(axis=1)
        self._max[:] = -np.inf
        self._max[:len(longest)] = longest
        self.bucket_s *= 2


def _threshold(reference: np.ndarray) -> float:
    """The module's robust threshold over the steady buckets' means (or steps)."""
    median = float(np.median(reference))
    sigma = 1.4826 * float(np.median(np.abs(reference - median)))
    return max(median + SPREAD * sigma, FLOOR * median)
