"""The steady state: step-time statistics and samples/s once warm-up is over.

Steady state follows the reference study: step times averaged over steps 11..N, i.e. the
first `warmup_steps` (10) steps of every rank and attempt are warm-up (graph compilation,
caches) and left out, and so are steps a compile event fell into.

Two forms of one rule, side by side: `steady_state` over a whole step table (summary, compare),
and `SteadyTracker`, kept up from the rows as they arrive (the live model): on a million steps
the batch form takes most of a second and a few hundred MB of temporaries, too much to repeat
while following a run, so the tracker keeps only what the statistics need (one float per
steady step and per-rank sums). Both select steps with `compile_hits` and the warm-up flags
of steptime.py and end in `_steady_state`; tests/unit/metrics/test_metrics_forms.py holds them
equal.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.metrics.common import floats, has_rows, like, missing, numbers, positive, rows
from neurotui.metrics.steptime import past_warmup, with_step_time

if TYPE_CHECKING:
    import pandas as pd

GRACE_S = 10.0
"""Compile lines can land a little after the steps they slowed (they come from logs, steps
from the probe): the tracker's rows wait this long behind the newest step before their
compile check is final."""
BATCH_ROWS = 200_000


@dataclass(frozen=True)
class SteadyState:
    """Steady-state throughput and step-time statistics (warm-up excluded)."""

    samples_per_s: float | None
    """Sum over ranks of samples / step time: the study's batch / mean step time. None if
    the ranks do not report samples."""
    step_time_median: float
    step_time_p90: float
    step_time_mean: float
    steps: int
    """Rows counted (one per rank per step)."""
    ranks: int
    warmup_steps: int


def _steady_state(times: np.ndarray, samples_by_rank: Mapping[Any, float] | None,
                  seconds_by_rank: Mapping[Any, float], warmup_steps: int) -> SteadyState:
    """The statistics of the steady steps' times, and the rate: per rank its samples over
    its seconds (mean batch / mean step time, as the study), summed over ranks. Throughput is
    None when a rank's samples are unknown (`samples_by_rank` None)."""
    rate = None
    if samples_by_rank is not None:
        rate = positive(sum(samples_by_rank[r] / seconds_by_rank[r]
                            for r in sorted(seconds_by_rank) if seconds_by_rank[r] > 0))
    return SteadyState(
        samples_per_s=rate,
        step_time_median=float(np.median(times)),
        step_time_p90=float(np.quantile(times, 0.9)),
        step_time_mean=float(times.mean(dtype=np.float64)),
        steps=len(times), ranks=len(seconds_by_rank), warmup_steps=int(warmup_steps))


def compile_hits(end: np.ndarray, start: np.ndarray, rank: np.ndarray,
                 compiles: Any) -> np.ndarray:
    """Per step (its end, start and rank): did a compile event of its rank, or of no rank,
    fall in (start, end]? Steps of unknown length or rank: no. The rule of the figures here
    and of the dashboard's running steady state and alerts alike.

    `compiles`: a table (a DataFrame, or the live path's Columns) with columns t and rank
    (missing or NaN: a compile of no rank), or None.

    Rows are searched a run of one rank at a time: fast when each rank's rows lie together
    (as in a with_step_time table), right in any order.
    """
    hit = np.zeros(len(end), dtype=bool)
    if not len(end) or not has_rows(compiles, "t"):
        return hit
    assert compiles is not None
    ct = floats(compiles["t"])
    crank = floats(compiles["rank"]) if "rank" in compiles.columns else np.full(len(ct), np.nan)
    timed = ~np.isnan(ct)
    no_rank = np.isnan(crank)
    anyrank = np.sort(ct[timed & no_rank])
    own = {float(r): np.sort(np.concatenate([anyrank, ct[timed & (crank == r)]]))
           for r in np.unique(crank[~no_rank])}
    if not len(anyrank) and not own:
        return hit
    counted = ~np.isnan(start) & ~missing(rank)  # steps of unknown length or rank: no
    filled = np.where(np.isnan(rank), np.inf, rank) if rank.dtype.kind == "f" else rank
    bounds = [*np.flatnonzero(filled[1:] != filled[:-1]) + 1, len(end)]
    first = 0
    for last in bounds:
        times = own.get(float(filled[first]), anyrank)
        if len(times):
            run = slice(first, last)
            inside = (np.searchsorted(times, end[run], "right")
                      - np.searchsorted(times, start[run], "right"))
            hit[run] = (inside > 0) & counted[run]
        first = last
    return hit


# -- the whole table -------------------------------------------------------------------------

def steady_steps(steps: pd.DataFrame, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 compiles: pd.DataFrame | None = None, *, timed: bool = False) -> pd.DataFrame:
    """The steady-state rows (with `step_time`): warm-up and compile-hit steps left out.

    A row is warm-up until its rank is `warmup_steps` steps past the first step it recorded in
    that attempt (steptime.past_warmup). When `compiles` is given, steps whose interval
    (t - step_time, t] contains a compile event of that rank (or of no rank) are also left
    out, unless that would leave nothing: a job that compiles at every step has no other
    steady state, and its slow steps are then what it really runs at. `timed`: `steps`
    already comes from with_step_time.
    """
    df = steps if timed else with_step_time(steps)
    if not len(df):
        return df
    return rows(df, _steady_mask(df, warmup_steps, compiles))


def _steady_mask(df: pd.DataFrame, warmup_steps: int,
                 compiles: pd.DataFrame | None) -> np.ndarray:
    """steady_steps' rows of a with_step_time table, as a mask (no copy of the table)."""
    keep = np.asarray(past_warmup(df, warmup_steps))
    if has_rows(compiles, "t") and keep.any():
        hit = np.asarray(overlaps_compile(df, compiles))  # type: ignore[arg-type]
        if not hit[keep].all():
            keep = keep & ~hit
    return keep


def overlaps_compile(df: pd.DataFrame, compiles: pd.DataFrame) -> pd.Series:
    """Per row of a with_step_time table: did a compile event of its rank (or of no rank)
    happen during the step?"""
    end = floats(df["t"])
    hit = compile_hits(end, end - floats(df["step_time"]), numbers(df["rank"]), compiles)
    return like(df, hit)


def steady_state(steps: pd.DataFrame, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 compiles: pd.DataFrame | None = None, *,
                 timed: bool = False) -> SteadyState | None:
    """Steady-state samples/s and step-time median/p90/mean, or None before steady state.

    Throughput per rank is its samples divided by its step time (both summed over its
    steady steps, i.e. mean batch / mean step time as in the reference study), summed over
    ranks: 2 ranks x 16 samples at 0.1 s/step -> 320 samples/s. `timed`: `steps` already
    comes from with_step_time.
    """
    df = steps if timed else with_step_time(steps)
    if not len(df):
        return None
    step_time = floats(df["step_time"])
    keep = _steady_mask(df, warmup_steps, compiles) & ~np.isnan(step_time)
    if not keep.any():
        return None
    # Arrays of the kept rows rather than a filtered copy of the whole table.
    times = step_time[keep]
    rank = numbers(df["rank"])[keep]
    samples = floats(df["samples"])[keep] if "samples" in df.columns else None
    ranked = ~missing(rank)  # rows without a rank count in no rank's rate
    samples_by, seconds_by = _sums_by_rank(rank[ranked], times[ranked],
                                           None if samples is None else samples[ranked])
    return _steady_state(times, samples_by, seconds_by, warmup_steps)


def _sums_by_rank(rank: np.ndarray, times: np.ndarray, samples: np.ndarray | None
                  ) -> tuple[dict[Any, float] | None, dict[Any, float]]:
    """Per rank, its samples (None when any is unknown) and its seconds. The rows come from
    a with_step_time table: each rank's lie in a run per attempt, gathered without a sort,
    and summed as one contiguous array in table order (the sums come out as pandas'
    per-rank sums did, to the last bit)."""
    runs: dict[Any, list[slice]] = {}
    bounds = [0, *(np.flatnonzero(rank[1:] != rank[:-1]) + 1), len(rank)] if len(rank) else []
    for first, last in itertools.pairwise(bounds):
        runs.setdefault(rank[first], []).append(slice(first, last))

    def total(values: np.ndarray, parts: list[slice]) -> float:
        joined = values[parts[0]] if len(parts) == 1 else np.concatenate(
            [values[p] for p in parts])
        return float(joined.sum())

    seconds = {key: total(times, parts) for key, parts in runs.items()}
    if samples is None or np.isnan(samples).any():
        return None, seconds
    return {key: total(samples, parts) for key, parts in runs.items()}, seconds


def steady_step_time_without_data(steps: pd.DataFrame, phases: pd.DataFrame | None,
                                  warmup_steps: int = DEFAULT_WARMUP_STEPS,
                                  compiles: pd.DataFrame | None = None, *,
                                  timed: bool = False) -> float | None:
    """Mean steady step time less each step's wait for its batch (its `data` phase), or None
    when no steady step reports one.

    The reference study's own "average step time" times only the step's body, data loading
    excluded; the automatic probe reports the loader wait as `data`. `timed`: `steps` comes
    from with_step_time. Under torch-xla that wait holds the previous step's graph execution
    too, so this is below the wall-clock step time that throughput and cost are made of: it
    is shown beside them, never instead.
    """
    if not has_rows(phases, "t", "rank", "data"):
        return None
    assert phases is not None
    steady = steady_steps(steps, warmup_steps, compiles, timed=timed)
    if not len(steady):
        return None
    # Each steady step joined to its (t, rank)'s last phase row, in the steps' order (as an
    # inner merge on t and rank after drop_duplicates(keep="last")).
    key = floats(phases["t"]) + 1j * floats(phases["rank"])
    last_first = key[::-1]
    waits, at = np.unique(last_first, return_index=True)  # the first of the reversed: last
    data = floats(phases["data"])[::-1][at]
    wanted = floats(steady["t"]) + 1j * floats(steady["rank"])
    found = np.minimum(np.searchsorted(waits, wanted), len(waits) - 1)
    matched = waits[found] == wanted
    body = floats(steady["step_time"])[matched] - data[found[matched]]
    body = body[np.isfinite(body)]
    return float(body.mean()) if len(body) else None


# -- kept up as rows arrive ------------------------------------------------------------------

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
    """steady_state from steps as they arrive, marked past warm-up (steptime.StepClock)."""

    def __init__(self, warmup_steps: int = DEFAULT_WARMUP_STEPS,
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
        self.add_groups([(attempt, rank)], np.zeros(1, dtype=np.int64), t, past, step_time,
                        samples)

    def add_groups(self, groups: list[tuple[int, int]], firsts: np.ndarray, t: np.ndarray,
                   past: np.ndarray, step_time: np.ndarray, samples: np.ndarray) -> None:
        """`add_group` for several ranks' rows at once: `groups` (attempt, rank), each one's
        rows together from its place in `firsts` (StepClock.take_groups)."""
        if not len(t):
            return
        self._newest = max(self._newest, float(np.nanmax(t)))
        lengths = np.diff(np.append(firsts, len(t)))
        attempts = np.array([attempt for attempt, _ in groups], dtype=np.int64)
        if past.any():
            # Each attempt's first steady step: the earliest past warm-up of any of its ranks.
            row_attempt = np.repeat(attempts, lengths)
            for attempt in np.unique(row_attempt[past]).tolist():
                first = float(t[past & (row_attempt == attempt)].min())
                self.steady_since[attempt] = min(self.steady_since.get(attempt, first), first)
        keep = past & np.isfinite(step_time)
        if keep.any():
            rank = np.repeat(np.array([r for _, r in groups], dtype=np.int32), lengths)
            self._pending.append((t[keep], rank[keep], samples[keep], step_time[keep]))

    def result(self, compiles: Any) -> SteadyState | None:
        """`compiles`: as compile_hits takes them."""
        clean, hit = self._clean, self._hit
        if self._pending:
            later_parts: list[tuple[np.ndarray, ...]] = []
            clean_later, hit_later = _Sums(), _Sums()
            for t, rank, samples, step_time in self._pending_batches():
                hits = compile_hits(t, t - step_time, rank, compiles)
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
        # As steady_steps: compile-hit steps are left out unless nothing else is left.
        use = clean if len(clean.times) else hit
        if not len(use.times):
            return None
        return _steady_state(np.frombuffer(use.times, dtype=np.float32),
                             None if use.samples_unknown else use.samples, use.seconds,
                             self.warmup_steps)

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
