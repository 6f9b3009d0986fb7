"""Steady-state figures over every step of the run, kept up incrementally.

`metrics.steady_state` needs the whole step table: on a million steps it takes most of a
second and a few hundred MB of temporaries, too much to repeat while following a run. This
tracker gives the same figures (same warm-up rule, same compile exclusion, same statistics,
tested against metrics.steady_state) from the rows as they arrive, keeping only what the
statistics need: one float per steady step and per-rank sums.

Compile lines can land a little after the steps they slowed (they come from logs, steps from
the probe), so rows wait `grace_s` behind the newest step before their compile check is final.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from neurotui import metrics

GRACE_S = 10.0
BATCH_ROWS = 200_000


@dataclass
class _Sums:
    # float32: 4 bytes a steady step (a million steps, 4 MB); 7 significant digits is far
    # finer than any step time is measured.
    times: array = field(default_factory=lambda: array("f"))
    samples: dict[int, float] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)
    samples_unknown: bool = False

    def add(self, rank: np.ndarray, samples: np.ndarray, step_time: np.ndarray) -> None:
        if not len(rank):
            return
        self.times.frombytes(np.asarray(step_time, dtype=np.float32).tobytes())
        if np.isnan(samples).any():
            self.samples_unknown = True
        # One pass per figure (bincount) rather than a mask per rank: a replay jumping to the
        # end of a 32-rank day takes millions of rows at once.
        if _small_ints(rank):  # ranks are: count by rank number, no sort
            ranks = np.flatnonzero(np.bincount(rank))
            samples_by = np.bincount(rank, weights=samples)[ranks]
            seconds_by = np.bincount(rank, weights=step_time)[ranks]
        else:
            ranks, index = np.unique(rank, return_inverse=True)
            samples_by = np.bincount(index, weights=samples)
            seconds_by = np.bincount(index, weights=step_time)
        for r, n, s in zip(ranks, samples_by, seconds_by, strict=True):
            key = int(r)
            self.samples[key] = self.samples.get(key, 0.0) + float(n)
            self.seconds[key] = self.seconds.get(key, 0.0) + float(s)

    def merged(self, other: _Sums) -> _Sums:
        out = _Sums(array("f", self.times), dict(self.samples), dict(self.seconds),
                    self.samples_unknown or other.samples_unknown)
        out.times.extend(other.times)
        for r, v in other.samples.items():
            out.samples[r] = out.samples.get(r, 0.0) + v
        for r, v in other.seconds.items():
            out.seconds[r] = out.seconds.get(r, 0.0) + v
        return out


class SteadyTracker:
    """Steady-state statistics from steps marked past warm-up (stepstate.py marks them)."""

    def __init__(self, warmup_steps: int = metrics.DEFAULT_WARMUP_STEPS,
                 grace_s: float = GRACE_S, batch_rows: int = BATCH_ROWS) -> None:
        self.warmup_steps = warmup_steps
        self.grace_s = grace_s
        self.batch_rows = batch_rows
        self.steady_since: dict[int, float] = {}
        self._clean = _Sums()
        self._hit = _Sums()
        self._pending: list[tuple[np.ndarray, ...]] = []
        self._newest = -np.inf

    def add_group(self, attempt: int, rank: int, t: np.ndarray, past: np.ndarray,
                  step_time: np.ndarray, samples: np.ndarray) -> None:
        """One rank's new rows of one attempt, in time order, with their warm-up flags."""
        if not len(t):
            return
        self._newest = max(self._newest, float(np.nanmax(t)))
        if past.any():
            first = float(t[past.argmax()])
            self.steady_since[attempt] = min(self.steady_since.get(attempt, first), first)
        keep = past & np.isfinite(step_time)
        if keep.any():
            self._pending.append((t[keep], np.full(int(keep.sum()), rank, dtype=np.int32),
                                  samples[keep], step_time[keep]))

    def result(self, compiles: pd.DataFrame | None) -> metrics.SteadyState | None:
        clean, hit = self._clean, self._hit
        if self._pending:
            later_parts: list[tuple[np.ndarray, ...]] = []
            clean_later, hit_later = _Sums(), _Sums()
            for t, rank, samples, step_time in self._pending_batches():
                hits = metrics.compile_hits(t, t - step_time, rank, compiles)
                final = t <= self._newest - self.grace_s
                for bucket, mask in ((self._clean, final & ~hits), (self._hit, final & hits)):
                    bucket.add(rank[mask], samples[mask], step_time[mask])
                if not final.all():
                    later = ~final
                    later_parts.append((t[later], rank[later], samples[later],
                                        step_time[later]))
                    for bucket, mask in ((clean_later, later & ~hits),
                                         (hit_later, later & hits)):
                        bucket.add(rank[mask], samples[mask], step_time[mask])
            self._pending = later_parts
            if later_parts:
                clean, hit = self._clean.merged(clean_later), self._hit.merged(hit_later)
        # As metrics.steady_steps: compile-hit steps are left out unless nothing else is left.
        use = clean if len(clean.times) else hit
        if not len(use.times):
            return None
        times = np.frombuffer(use.times, dtype=np.float32)
        rate = None
        if not use.samples_unknown:
            rate = sum(use.samples[r] / use.seconds[r] for r in use.seconds
                       if use.seconds[r] > 0)
        return metrics.SteadyState(
            samples_per_s=rate if rate and rate > 0 else None,
            step_time_median=float(np.median(times)),
            step_time_p90=float(np.quantile(times, 0.9)),
            step_time_mean=float(times.mean(dtype=np.float64)),
            steps=len(times), ranks=len(use.seconds), warmup_steps=self.warmup_steps)


    def _pending_batches(self) -> Iterator[tuple[np.ndarray, ...]]:
        """The pending groups joined into batches of about `batch_rows` rows, each handed back
        as it is used: a dashboard attaching to a long run takes in millions at once, and
        joining them all would double them in memory."""
        pending, self._pending = self._pending, []
        while pending:
            size, take = 0, 0
            while take < len(pending) and (not take or size < self.batch_rows):
                size += len(pending[take][0])
                take += 1
            batch, pending = pending[:take], pending[take:]
            yield tuple(np.concatenate(c) for c in zip(*batch, strict=True))
            del batch


def _small_ints(values: np.ndarray) -> bool:
    """Non-negative and small enough to count with np.bincount (ranks are)."""
    return bool(len(values)) and values.dtype.kind in "iu" and \
        int(values.min()) >= 0 and int(values.max()) < 1 << 16
