"""Whole-run history in bounded memory: time buckets that double in width as the run grows.

Users want the step time of the whole run, not the last minute (nvitop #217, nvtop #155), and
a week-long run must not grow the dashboard without bound: at most `max_buckets` buckets are
kept; when the run outgrows them, neighbours are merged and the bucket width doubles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HistorySeries:
    """Per bucket: mean step time (NaN: no step in it) and whole-job samples/s."""

    start: float
    bucket_s: float
    step_time: tuple[float, ...]
    samples_per_s: tuple[float, ...]


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
        self._last_t = self.start

    def add(self, t: np.ndarray, step_time: np.ndarray, samples: np.ndarray) -> None:
        """Take in steps: their time, step time (NaN: unknown) and samples covered."""
        t = np.asarray(t, dtype=float)
        if not len(t):
            return
        finite_t = t[np.isfinite(t)]
        if not len(finite_t):
            return
        self._last_t = max(self._last_t, float(finite_t.max()))
        while self._index(self._last_t) >= self.max_buckets:
            self._widen()
        ok = np.isfinite(t)
        idx = np.clip(self._indices(t[ok]), 0, self.max_buckets - 1)
        times = np.asarray(step_time, dtype=float)[ok]
        known = np.isfinite(times)
        np.add.at(self._time_sum, idx[known], times[known])
        np.add.at(self._time_n, idx[known], 1.0)
        counted = np.nan_to_num(np.asarray(samples, dtype=float)[ok], nan=0.0)
        np.add.at(self._samples, idx, counted)

    def series(self, end: float) -> HistorySeries:
        """Buckets from the start to `end` (now, or the run's end). The last bucket is rated
        over the time it covers, and left out while under half a bucket (too noisy)."""
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
        return HistorySeries(self.start, self.bucket_s,
                             tuple(float(x) for x in mean[:n_keep]),
                             tuple(float(x) for x in sps[:n_keep]))

    def _index(self, t: float) -> int:
        return max(0, math.floor((t - self.start) / self.bucket_s))

    def _indices(self, t: np.ndarray) -> np.ndarray:
        return np.floor((t - self.start) / self.bucket_s).astype(np.int64)

    def _widen(self) -> None:
        for arr in (self._time_sum, self._time_n, self._samples):
            half = arr.reshape(-1, 2).sum(axis=1)
            arr[:] = 0.0
            arr[:len(half)] = half
        self.bucket_s *= 2
