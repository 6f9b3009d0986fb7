"""Where a step's time goes: the share of each recorded step phase (data, forward, backward,
optimizer, ...) per rank and for the job, now and over time, and the phase that grew.

Not to be confused with phases.py (where the *run* is: starting, compiling, steady). Step
phases are what a script reports with `probe.step(phases={...})` (seconds per phase of one
step); the automatic probe reports `data` (the wait for the DataLoader) and `step` (the rest).

The figure, defined once:

- Steps counted: a rank's steps past warm-up (steptime.past_warmup, as the steady state) of
  its latest attempt, with a known step time and a phase record at the same (t, rank) (the
  last one when several). A rank's *window* is its last `window` such steps, its *baseline*
  its first `baseline` such steps; from each, the steps a compile event fell into
  (steady.compile_hits) are left out, unless that leaves none.
- Segments: each recorded phase, and `other`: the part of the step time no phase covers
  (step time - sum of the step's phases, at least 0: logging, the probe call, a host sync).
  `other` is a segment only where it is material: its median at least OTHER_MIN_SHARE of the
  median step time of the same steps; a script that times the whole step has none.
- A split (one rank, or the job: every rank's window pooled) is each segment's median seconds
  over the window, a phase not reported by any of its steps left out, and each segment's
  share = its median / the sum of the segments' medians. Shares are of that sum, not of the
  median step time (medians do not add up; the sum of the segments does, to 100%).
- The phase that grew: once a rank has `baseline + window` counted steps (so the two do not
  overlap), the segment whose median over the window exceeds its median over the baseline by
  the most seconds, when by at least GROWTH_MIN_RATIO and GROWTH_MIN_S; else None. For the
  job, the windows and the baselines of those ranks, pooled.
- Over time: every counted step of every attempt (compile-hit steps included: they are where
  the time went), in time buckets that double in width as the run grows (as live/history.py);
  per bucket each segment's *mean* (means can be merged when buckets are, medians cannot),
  `other` a segment where its mean is material, shares of the sum as above.
- For compare: `steady_phase_medians`, each recorded phase's median over the run's steady
  steps (steady.steady_steps: warm-up and compile-hit steps left out).

Two forms: `step_breakdown` / `breakdown_history` over whole tables (pandas or Columns), and
`BreakdownTracker`, kept up as rows arrive (the live model): it keeps per rank only its
baseline and its window, and the buckets. Both select with the same rules and end in
`_splits` / `_bucket_shares`; tests/unit/metrics/test_breakdown.py holds them equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.metrics.common import floats, has_rows, numbers
from neurotui.metrics.steady import compile_hits, steady_steps
from neurotui.metrics.steptime import past_warmup, with_step_time

KNOWN_PHASES = ("data", "forward", "backward", "optimizer", "step")
"""Shown in this order (the order a step runs in); other names follow alphabetically."""
OTHER = "other"
WINDOW_STEPS = 50
BASELINE_STEPS = 50
OTHER_MIN_SHARE = 0.05
GROWTH_MIN_RATIO = 0.10
GROWTH_MIN_S = 0.001
HISTORY_BUCKETS = 256
HISTORY_BUCKET_S = 1.0
NO_PHASES_NOTE = (
    "no step phases recorded, so where a step's time goes is unknown (never guessed).\n"
    "Report them from the training loop, one call per step, seconds per phase:\n"
    "    from neurotui import probe\n"
    '    probe.step(samples=16, phases={"data": 0.01, "forward": 0.05})\n'
    "(runner/train_vit.py reports data, forward, backward and optimizer this way.)")
"""What a view says when a run reports no phases: how to add them, never a guess."""
_NOT_PHASES = ("t", "rank")


def phase_order(names: Iterable[str]) -> tuple[str, ...]:
    """Phase names in display order: the known ones as a step runs, then the others
    alphabetically, `other` last."""
    names = set(names)
    known = [n for n in KNOWN_PHASES if n in names]
    rest = sorted(n for n in names if n not in KNOWN_PHASES and n != OTHER)
    return (*known, *rest, *((OTHER,) if OTHER in names else ()))


def phase_names(phases: Any) -> tuple[str, ...]:
    """The phase columns of a phase table (t and rank are the step's own), in display order."""
    if phases is None:
        return ()
    return phase_order(str(c) for c in phases.columns if c not in _NOT_PHASES)


# -- results ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Growth:
    """A segment whose median grew from the baseline to the window."""

    phase: str
    before_s: float
    now_s: float

    @property
    def ratio(self) -> float:
        """now / before - 1 (inf when the phase took no time before)."""
        return self.now_s / self.before_s - 1.0 if self.before_s > 0 else math.inf


@dataclass(frozen=True)
class PhaseSplit:
    """One rank's (or the job's, rank None) window: each segment's median and share."""

    rank: int | None
    names: tuple[str, ...]
    median_s: tuple[float, ...]
    shares: tuple[float, ...]
    """Of the sum of `median_s`: they add up to 1."""
    steps: int
    step_s: float
    """Median step time of the same steps."""
    grew: Growth | None = None

    def share(self, name: str) -> float | None:
        return self.shares[self.names.index(name)] if name in self.names else None

    def largest(self) -> str:
        return self.names[int(np.argmax(self.shares))]


@dataclass(frozen=True)
class StepBreakdown:
    job: PhaseSplit | None
    """Every rank's window pooled; None before a step is counted."""
    ranks: tuple[PhaseSplit, ...]
    """Per rank of the latest attempt with counted steps, by rank."""


@dataclass(frozen=True)
class BreakdownHistory:
    """Per time bucket, each segment's share of the step (NaN: no counted step in it)."""

    start: float
    bucket_s: float
    names: tuple[str, ...]
    shares: tuple[tuple[float, ...], ...]
    """Per name (as `names`), per bucket."""
    step_s: tuple[float, ...]
    """Per bucket, the mean step time of its counted steps."""


# -- the rule, shared by both forms ----------------------------------------------------------

@dataclass
class _Rows:
    """Counted steps: their end, step time and phase seconds (a column per name, NaN where a
    step did not report that phase), in time order."""

    t: np.ndarray
    step_time: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.t)

    def rows(self, which: np.ndarray | slice) -> _Rows:
        return _Rows(self.t[which], self.step_time[which],
                     {k: v[which] for k, v in self.values.items()})

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        """Steps x names (recorded phases only), NaN where not reported."""
        out = np.full((len(self), len(names)), np.nan)
        for i, name in enumerate(names):
            if name in self.values:
                out[:, i] = self.values[name]
        return out

    @staticmethod
    def concat(parts: Sequence[_Rows]) -> _Rows:
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        names = list(dict.fromkeys(n for p in parts for n in p.values))
        if not parts:
            return _Rows(np.empty(0), np.empty(0))
        return _Rows(np.concatenate([p.t for p in parts]),
                     np.concatenate([p.step_time for p in parts]),
                     {n: np.concatenate([p.values.get(n, np.full(len(p), np.nan))
                                         for p in parts]) for n in names})


def _segments(rows: _Rows, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Steps x (names + other): each recorded phase's seconds and the rest of the step, and
    the step times. The phases are summed in `names` order, so both forms add alike."""
    phases = rows.matrix(names)
    covered = np.zeros(len(rows))
    for i in range(len(names)):
        covered += np.nan_to_num(phases[:, i])
    other = np.maximum(rows.step_time - covered, 0.0)
    return np.column_stack([phases, other]) if len(names) else other[:, None], rows.step_time


def _medians(values: np.ndarray) -> np.ndarray:
    """Along axis 1 of (groups x steps x columns), the median of the known values (NaN when
    none), bit for bit as np.median of them: the middle one, or the mean of the middle two.
    One sort for every rank and phase at once (a rank and phase at a time took 13 ms a
    refresh on 32 ranks)."""
    ordered = np.sort(values, axis=1)  # NaN last
    known = (~np.isnan(values)).sum(axis=1)
    lo = np.maximum((known - 1) // 2, 0)[:, None, ...]
    hi = np.maximum(known // 2, 0)[:, None, ...]
    if not values.shape[1]:
        return np.full((values.shape[0], *values.shape[2:]), np.nan)
    middle = (np.take_along_axis(ordered, np.minimum(lo, values.shape[1] - 1), axis=1)
              + np.take_along_axis(ordered, np.minimum(hi, values.shape[1] - 1), axis=1))
    with np.errstate(invalid="ignore"):
        return np.where(known > 0, middle[:, 0, ...] / 2, np.nan)


@dataclass
class _Stack:
    """Row sets (one per rank) side by side: steps x segments, NaN-padded to the longest;
    steps a compile event fell into are NaN too, unless that would leave a set none."""

    segments: np.ndarray
    """sets x steps x (names + other)."""
    step_time: np.ndarray
    """sets x steps."""
    kept: np.ndarray
    """Steps kept per set."""

    @classmethod
    def of(cls, parts: Sequence[_Rows], ranks: Sequence[int], names: Sequence[str],
           compiles: Any) -> _Stack:
        lengths = np.array([len(p) for p in parts], dtype=np.int64)
        rows = _Rows.concat(parts)
        segments, step_time = _segments(rows, names)
        owner = np.repeat(np.arange(len(parts)), lengths)
        position = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        hit = compile_hits(rows.t, rows.t - rows.step_time,
                           np.repeat(np.asarray(ranks, dtype=np.int64), lengths), compiles)
        hits = np.bincount(owner, weights=hit, minlength=len(parts)).astype(np.int64)
        drop = hit & (hits < lengths)[owner]  # a set all hit keeps its rows
        width = int(lengths.max()) if len(parts) else 0
        stacked = np.full((len(parts), width, segments.shape[1]), np.nan)
        times = np.full((len(parts), width), np.nan)
        keep = ~drop
        stacked[owner[keep], position[keep]] = segments[keep]
        times[owner[keep], position[keep]] = step_time[keep]
        return cls(stacked, times, lengths - np.where(hits < lengths, hits, 0))

    def pooled(self, which: np.ndarray) -> _Stack:
        """The sets `which` as one set (the job)."""
        segments = self.segments[which].reshape(-1, self.segments.shape[2])
        times = self.step_time[which].reshape(-1)
        known = ~np.isnan(times)
        return _Stack(segments[known][None], times[known][None],
                      np.array([int(self.kept[which].sum())]))


def _split_of(rank: int | None, med: np.ndarray, step_s: float, steps: int,
              names: Sequence[str], grew: Growth | None) -> PhaseSplit | None:
    """A split from its segments' medians (names + other) and its median step time."""
    if not steps:
        return None
    keep = [i for i in range(len(names)) if not math.isnan(med[i])]
    labels = [names[i] for i in keep]
    if med[-1] >= OTHER_MIN_SHARE * step_s and med[-1] > 0:
        keep.append(len(names))
        labels.append(OTHER)
    total = float(sum(med[i] for i in keep))
    if not keep or not total > 0 or not math.isfinite(total):
        return None
    return PhaseSplit(rank, tuple(labels), tuple(float(med[i]) for i in keep),
                      tuple(float(med[i]) / total for i in keep), steps, step_s, grew)


def _growth(was: np.ndarray, is_: np.ndarray, step_s: float, names: Sequence[str]
            ) -> Growth | None:
    """The segment that grew most from the baseline's medians `was` to the window's `is_`."""
    best: Growth | None = None
    for i, name in enumerate([*names, OTHER]):
        b, n = was[i], is_[i]
        if math.isnan(b) or math.isnan(n):
            continue
        if name == OTHER and n < OTHER_MIN_SHARE * step_s:
            continue  # not a segment of the window's split: nothing to mark
        if n >= b * (1.0 + GROWTH_MIN_RATIO) and n - b >= GROWTH_MIN_S and (
                best is None or n - b > best.now_s - best.before_s):
            best = Growth(name, float(b), float(n))
    return best


@dataclass
class _RankRows:
    """What the figure needs of one rank's counted steps (of one attempt)."""

    baseline: _Rows
    window: _Rows
    counted: int


def _splits(by_rank: Mapping[int, _RankRows], names: Sequence[str], compiles: Any,
            window: int, baseline: int) -> StepBreakdown:
    ranks = sorted(by_rank)
    now = _Stack.of([by_rank[r].window for r in ranks], ranks, names, compiles)
    med = _medians(now.segments)
    step_s = _medians(now.step_time[:, :, None])[:, 0]
    judged = np.array([by_rank[r].counted >= baseline + window for r in ranks], dtype=bool)
    before: _Stack | None = None
    was = np.full_like(med, np.nan)
    if judged.any():
        ranks_judged = [r for r, j in zip(ranks, judged, strict=True) if j]
        before = _Stack.of([by_rank[r].baseline for r in ranks_judged], ranks_judged, names,
                           compiles)
        was[judged] = _medians(before.segments)
    splits: list[PhaseSplit] = []
    shown = np.zeros(len(ranks), dtype=bool)
    for i, rank in enumerate(ranks):
        grew = _growth(was[i], med[i], float(step_s[i]), names) if judged[i] else None
        split = _split_of(rank, med[i], float(step_s[i]), int(now.kept[i]), names, grew)
        if split is not None:
            splits.append(split)
            shown[i] = True
    if not splits:
        return StepBreakdown(None, ())
    job = now.pooled(shown)
    job_med = _medians(job.segments)[0]
    job_step = float(_medians(job.step_time[:, :, None])[0, 0])
    job_grew = None
    if before is not None:
        grown = now.pooled(judged)
        job_grew = _growth(_medians(before.pooled(np.ones(len(before.kept), dtype=bool))
                                    .segments)[0],
                           _medians(grown.segments)[0],
                           float(_medians(grown.step_time[:, :, None])[0, 0]), names)
    return StepBreakdown(_split_of(None, job_med, job_step, int(job.kept[0]), names, job_grew),
                         tuple(splits))


def _bucket_shares(sums: np.ndarray, counts: np.ndarray, step_sum: np.ndarray,
                   step_n: np.ndarray, names: Sequence[str], start: float,
                   bucket_s: float) -> BreakdownHistory:
    """Shares per bucket from per-bucket sums: `sums`/`counts` buckets x (names + other)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
        step_mean = step_sum / step_n
    other = means[:, -1]
    material = (other >= OTHER_MIN_SHARE * step_mean) & (other > 0)
    means[:, -1] = np.where(material, other, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.nansum(means, axis=1)
        shares = np.where(np.isnan(means), 0.0, means) / total[:, None]
    empty = ~(step_n > 0) | ~(total > 0)
    shares[empty] = np.nan
    labels = [*names, OTHER]
    keep = [i for i in range(len(labels)) if i < len(names) or material.any()]
    return BreakdownHistory(start, bucket_s, tuple(labels[i] for i in keep),
                            tuple(_floats(shares[:, i]) for i in keep), _floats(step_mean))


def _floats(values: np.ndarray) -> tuple[float, ...]:
    """Floats with every NaN the one math.nan: tuples compare item by item, an object equal
    to itself first, so two histories alike compare equal (a view redraws only on change)."""
    return tuple(math.nan if x != x else x for x in values.tolist())


def _bucket_width(start: float, last: float, bucket_s: float, buckets: int) -> float:
    while math.floor((last - start) / bucket_s) >= buckets:
        bucket_s *= 2
    return bucket_s


def _bucket_index(t: np.ndarray, start: float, bucket_s: float, buckets: int) -> np.ndarray:
    return np.clip(np.floor((t - start) / bucket_s).astype(np.int64), 0, buckets - 1)


def _bucket_sums(rows: _Rows, names: Sequence[str], idx: np.ndarray, buckets: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    segments, step_time = _segments(rows, names)
    sums = np.zeros((buckets, len(names) + 1))
    counts = np.zeros((buckets, len(names) + 1))
    known = ~np.isnan(segments)
    for i in range(segments.shape[1]):
        np.add.at(sums[:, i], idx[known[:, i]], segments[known[:, i], i])
        np.add.at(counts[:, i], idx[known[:, i]], 1.0)
    step_sum, step_n = np.zeros(buckets), np.zeros(buckets)
    np.add.at(step_sum, idx, step_time)
    np.add.at(step_n, idx, 1.0)
    return sums, counts, step_sum, step_n


# -- the whole table -------------------------------------------------------------------------

def _counted(steps: Any, phases: Any, warmup_steps: int
             ) -> tuple[dict[tuple[int, int], _Rows], tuple[str, ...]]:
    """Every (attempt, rank)'s counted steps, in time order, and the phase names."""
    names = phase_names(phases)
    if not names or not has_rows(phases, "t", "rank") or not has_rows(
            steps, "t", "rank", "step", "attempt"):
        return {}, names
    df = with_step_time(steps)
    past = np.asarray(past_warmup(df, warmup_steps), dtype=bool)
    t, step_time = floats(df["t"]), floats(df["step_time"])
    rank, attempt = numbers(df["rank"]), numbers(df["attempt"])
    table = _PhaseTable(floats(phases["t"]), numbers(phases["rank"]),
                        {n: floats(phases[n]) for n in names})
    out: dict[tuple[int, int], _Rows] = {}
    usable = past & np.isfinite(step_time) & ~np.isnan(rank.astype(float)) \
        & ~np.isnan(attempt.astype(float))
    bounds = np.flatnonzero((rank[1:] != rank[:-1]) | (attempt[1:] != attempt[:-1])) + 1
    for first, last in zip([0, *bounds], [*bounds, len(df)], strict=True):
        if first == last or not usable[first:last].any():
            continue
        key = (int(attempt[first]), int(rank[first]))
        rows = table.join(key[1], t[first:last], step_time[first:last], usable[first:last])
        if len(rows):
            out[key] = _Rows.concat([out[key], rows]) if key in out else rows
    return out, names


def step_breakdown(steps: Any, phases: Any, compiles: Any = None,
                   warmup_steps: int = DEFAULT_WARMUP_STEPS, *, window: int = WINDOW_STEPS,
                   baseline: int = BASELINE_STEPS) -> StepBreakdown:
    """The step breakdown (module docstring) of a whole step table and phase table (the
    reader's steps() and phases(), DataFrames or Columns); `compiles` as compile_hits takes
    them."""
    counted, names = _counted(steps, phases, warmup_steps)
    if not counted:
        return StepBreakdown(None, ())
    latest = max(numbers(steps["attempt"]).tolist())
    by_rank = {r: _RankRows(rows.rows(slice(0, baseline)), rows.rows(slice(-window, None)),
                            len(rows))
               for (a, r), rows in counted.items() if a == latest}
    return _splits(by_rank, names, compiles, window, baseline)


def breakdown_history(steps: Any, phases: Any, start: float, end: float,
                      warmup_steps: int = DEFAULT_WARMUP_STEPS, *,
                      buckets: int = HISTORY_BUCKETS,
                      bucket_s: float = HISTORY_BUCKET_S) -> BreakdownHistory | None:
    """The shares over time, from `start` to `end` (module docstring); None before a step
    is counted."""
    counted, names = _counted(steps, phases, warmup_steps)
    if not counted:
        return None
    rows = _Rows.concat(list(counted.values()))
    width = _bucket_width(start, max(start, float(rows.t.max()), end), bucket_s, buckets)
    sums = _bucket_sums(rows, names, _bucket_index(rows.t, start, width, buckets), buckets)
    n = max(0, math.floor((end - start) / width)) + 1
    return _bucket_shares(*(a[:n] for a in sums), names, start, width)


def steady_phase_medians(steps: Any, phases: Any, compiles: Any = None,
                         warmup_steps: int = DEFAULT_WARMUP_STEPS) -> dict[str, float]:
    """Each recorded phase's median seconds over the run's steady steps (all attempts;
    warm-up and compile-hit steps left out as steady.steady_steps), in display order. A phase
    with no steady step reporting it is left out: {} for a run without phases."""
    names = phase_names(phases)
    if not names or not has_rows(phases, "t", "rank"):
        return {}
    steady = steady_steps(steps, warmup_steps, compiles)
    if not len(steady):
        return {}
    table = _PhaseTable(floats(phases["t"]), numbers(phases["rank"]),
                        {n: floats(phases[n]) for n in names})
    t, rank = floats(steady["t"]), numbers(steady["rank"])
    parts = []
    for r in np.unique(rank[~np.isnan(rank.astype(float))]).tolist():
        mine = rank == r
        parts.append(table.join(int(r), t[mine], floats(steady["step_time"])[mine],
                                np.ones(int(mine.sum()), dtype=bool)))
    rows = _Rows.concat(parts)
    med = _medians(rows.matrix(names)[None])[0]
    return {n: float(m) for n, m in zip(names, med, strict=True) if not math.isnan(m)}


class _PhaseTable:
    """Phase rows grouped by rank, each rank's in time order: a step's phases are found by
    its (t, rank), the last record when several."""

    def __init__(self, t: np.ndarray, rank: np.ndarray, values: Mapping[str, np.ndarray]
                 ) -> None:
        keep = ~np.isnan(t) & ~np.isnan(rank.astype(float))
        rank = rank[keep].astype(np.int64)
        order = np.lexsort((t[keep], rank))  # stable: equal (t, rank) keep their order
        self.t = t[keep][order]
        self.rank = rank[order]
        self.values = {n: np.asarray(v, dtype=float)[keep][order] for n, v in values.items()}
        cuts = np.flatnonzero(self.rank[1:] != self.rank[:-1]) + 1
        starts, ends = [0, *cuts.tolist()], [*cuts.tolist(), len(self.rank)]
        self.slices = {int(self.rank[s]): slice(s, e)
                       for s, e in zip(starts, ends, strict=True) if s < e}

    def join(self, rank: int, t: np.ndarray, step_time: np.ndarray, usable: np.ndarray
             ) -> _Rows:
        """A rank's steps (end t, step time, usable: past warm-up with a known time) that
        have a phase record with a known value: the counted steps."""
        where = self.slices.get(rank)
        if where is None or not len(t):
            return _Rows(np.empty(0), np.empty(0))
        mine_t = self.t[where]
        at = np.searchsorted(mine_t, t, side="right") - 1
        found = at >= 0
        found[found] = mine_t[at[found]] == t[found]
        found &= usable
        at = at[found] + where.start
        values = {n: v[at] for n, v in self.values.items()}
        reported = np.zeros(len(at), dtype=bool)
        for v in values.values():
            reported |= ~np.isnan(v)
        pick = np.flatnonzero(found)[reported]
        return _Rows(t[pick], step_time[pick], {n: v[reported] for n, v in values.items()})


# -- kept up as rows arrive ------------------------------------------------------------------

class BreakdownTracker:
    """step_breakdown and breakdown_history for rows that arrive a few at a time.

    The live model stages each batch's phase rows (`stage`), then hands over each rank's new
    steps with their step time and warm-up flag as steptime.StepClock gives them
    (`add_group`); what a batch's steps did not claim is dropped with the next `stage`. Per
    rank it keeps its baseline and its window only, and the history's buckets: bounded however
    long the run.
    """

    def __init__(self, start: float | None = None, *, window: int = WINDOW_STEPS,
                 baseline: int = BASELINE_STEPS, buckets: int = HISTORY_BUCKETS,
                 bucket_s: float = HISTORY_BUCKET_S) -> None:
        if buckets < 2 or buckets % 2:
            raise ValueError("buckets must be even and >= 2")
        self.window, self.baseline = window, baseline
        self.start = start
        """The history's origin: the run's start, else the first counted step's end."""
        self.buckets, self.bucket_s = buckets, float(bucket_s)
        self.names: tuple[str, ...] = ()
        self.latest_attempt = -1
        self.ranks: dict[int, tuple[int, _RankRows]] = {}
        """rank -> (its attempt, its counted steps kept)."""
        self._staged: _PhaseTable | None = None
        self._unbucketed: list[_Rows] = []
        """Counted steps not in the history's buckets yet: bucketed a batch at a time (a
        rank at a time cost a millisecond a second on 32 ranks)."""
        self._sums: dict[str, np.ndarray] = {}
        self._counts: dict[str, np.ndarray] = {}
        self._step_sum = np.zeros(buckets)
        self._step_n = np.zeros(buckets)
        self._last_t = -math.inf
        self.version = 0
        """Counts changes: a result is worth working out again only when it moved."""

    def stage(self, phases: Any) -> None:
        """The phase rows (columns t, rank and one per phase) that came with the steps about
        to be added; None or no rows: nothing staged."""
        self._bucket()
        if phases is None or not len(phases):
            self._staged = None
            return
        names = phase_names(phases)
        self.names = phase_order({*self.names, *names})
        self._staged = _PhaseTable(floats(phases["t"]), numbers(phases["rank"]),
                                   {n: floats(phases[n]) for n in names})

    def add_group(self, attempt: int, rank: int, t: np.ndarray, past: np.ndarray,
                  step_time: np.ndarray) -> None:
        """One rank's new steps of one attempt (time order, after its last): their end,
        warm-up flag and step time."""
        self.latest_attempt = max(self.latest_attempt, attempt)
        if self._staged is None:
            return
        usable = np.asarray(past, dtype=bool) & np.isfinite(step_time)
        rows = self._staged.join(rank, np.asarray(t, dtype=float),
                                 np.asarray(step_time, dtype=float), usable)
        if not len(rows):
            return
        self.version += 1
        self._unbucketed.append(rows)  # over time: every attempt's steps
        kept = self.ranks.get(rank)
        if kept is not None and attempt < kept[0]:
            return  # late rows of an attempt already replaced
        if kept is None or attempt > kept[0]:
            empty = _Rows(np.empty(0), np.empty(0))
            kept = (attempt, _RankRows(empty, empty, 0))
            self.ranks[rank] = kept
        mine = kept[1]
        if len(mine.baseline) < self.baseline:
            mine.baseline = _Rows.concat([mine.baseline, rows]).rows(slice(0, self.baseline))
        mine.window = _Rows.concat([mine.window, rows]).rows(slice(-self.window, None))
        mine.counted += len(rows)

    def result(self, compiles: Any = None) -> StepBreakdown:
        """The breakdown of the steps taken so far; `compiles` as compile_hits takes them."""
        by_rank = {r: rows for r, (a, rows) in self.ranks.items() if a == self.latest_attempt}
        if not by_rank:
            return StepBreakdown(None, ())
        return _splits(by_rank, self.names, compiles, self.window, self.baseline)

    def history(self, end: float) -> BreakdownHistory | None:
        """The shares over time up to `end` (now, or the run's end)."""
        self._bucket()
        if self.start is None or self._last_t == -math.inf:
            return None  # no counted step yet
        while math.floor((max(end, self._last_t) - self.start) / self.bucket_s) \
                >= self.buckets:
            self._widen()
        n = max(0, math.floor((end - self.start) / self.bucket_s)) + 1
        n = min(n, self.buckets)
        labels = [*self.names, OTHER]
        sums = np.column_stack([self._sums.get(k, np.zeros(self.buckets))[:n] for k in labels])
        counts = np.column_stack([self._counts.get(k, np.zeros(self.buckets))[:n]
                                  for k in labels])
        return _bucket_shares(sums, counts, self._step_sum[:n], self._step_n[:n], self.names,
                              self.start, self.bucket_s)

    def _bucket(self) -> None:
        if self._unbucketed:
            rows = _Rows.concat(self._unbucketed)
            self._unbucketed = []
            self._add_history(rows)

    def _add_history(self, rows: _Rows) -> None:
        if self.start is None:
            self.start = float(rows.t.min())
        self._last_t = max(self._last_t, float(rows.t.max()))
        while math.floor((self._last_t - self.start) / self.bucket_s) >= self.buckets:
            self._widen()
        names = self.names
        idx = _bucket_index(rows.t, self.start, self.bucket_s, self.buckets)
        sums, counts, step_sum, step_n = _bucket_sums(rows, names, idx, self.buckets)
        for i, name in enumerate([*names, OTHER]):
            self._sums.setdefault(name, np.zeros(self.buckets))
            self._counts.setdefault(name, np.zeros(self.buckets))
            self._sums[name] += sums[:, i]
            self._counts[name] += counts[:, i]
        self._step_sum += step_sum
        self._step_n += step_n

    def _widen(self) -> None:
        for arr in (*self._sums.values(), *self._counts.values(), self._step_sum,
                    self._step_n):
            half = arr.reshape(-1, 2).sum(axis=1)
            arr[:] = 0.0
            arr[:len(half)] = half
        self.bucket_s *= 2
        self.version += 1
