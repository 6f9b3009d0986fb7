"""Throughput, step times, phase and cost: pure functions over the session DataFrames.

Inputs are what the session reader produces (see neurotui/session/FORMAT.md):

- steps: one row per rank per step, columns t, rank, step, samples, loss, dt, src, attempt;
- compiles: compile events, columns t, rank (may be null), what;
- meta: the meta.json dict (started_at, ended_at, exit, config).

No I/O and no clocks: "now" is always a parameter, so the same code serves the live dashboard
and a replay at any point in time. Every figure that cannot be known (no price, no steps, a
zero or NaN input) is None, never a made-up number and never a ZeroDivisionError.

Steady state follows the reference study: step times averaged over steps 11..N, i.e. the first
`warmup_steps` (10) steps of every rank and attempt are warm-up (graph compilation, caches) and
left out. Price-performance = samples/s x 3600 / USD per hour = samples per dollar; the
"all-in" view divides all samples by the whole bill, compile and idle time included.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from neurotui.defaults import DEFAULT_MIN_STALL_S, DEFAULT_STALL_FACTOR, DEFAULT_WARMUP_STEPS

DEFAULT_BUCKET_S = 10.0
DEFAULT_WINDOW_S = 30.0
DEFAULT_STRAGGLER_THRESHOLD = 0.2

Phase = Literal["starting", "compiling", "warm-up", "steady", "finished", "crashed", "stopped",
                "ended"]
PHASES: tuple[Phase, ...] = (
    "starting", "compiling", "warm-up", "steady", "finished", "crashed", "stopped", "ended")
_STOP_WORDS = ("stop", "interrupt", "cancel", "user")
_GROUP = ["attempt", "rank"]


# -- small helpers -------------------------------------------------------------------------

def finite_or_none(value: Any) -> float | None:
    """A finite float, or None for None/NaN/inf/bool/non-numbers: missing stays missing."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _pos(value: Any) -> float | None:
    """A finite float > 0, or None: the inputs that may be divided by or multiplied into money."""
    number = finite_or_none(value)
    return number if number is not None and number > 0 else None


def _has_rows(df: pd.DataFrame | None, *columns: str) -> bool:
    return df is not None and len(df) > 0 and all(c in df.columns for c in columns)


def _until(df: pd.DataFrame, now: float | None) -> pd.DataFrame:
    """Rows up to `now` (a replay position); all rows when `now` is None."""
    if now is None or not _has_rows(df, "t"):
        return df
    return df[df["t"] <= now]


# -- step times ----------------------------------------------------------------------------
# The step-time helpers below work on numpy arrays over the (attempt, rank)-sorted table:
# groupby-diff/transform/cummax and per-rank .loc assignment took seconds on a 24-hour,
# 32-rank run (issue #6: compare under 3 s), where adjacent-row arithmetic takes milliseconds.

_SORT_KEYS = ["attempt", "rank", "t", "step"]


def _floats(column: pd.Series) -> np.ndarray:
    """A column as float64 values, NaN where missing or not a number."""
    if not pd.api.types.is_numeric_dtype(column.dtype):
        column = pd.to_numeric(column, errors="coerce")
    return column.to_numpy(dtype=float, na_value=np.nan)


def _numbers(column: pd.Series) -> np.ndarray:
    """A column of whole numbers (attempt, rank, step): signed integers as they are (never
    missing, and no float copy; unsigned ones would wrap in a difference), else _floats."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind == "i":
        return column.to_numpy()
    return _floats(column)


def _missing(values: np.ndarray) -> np.ndarray:
    return np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), dtype=bool)


def _sort_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """`steps` sorted (stable) by attempt, rank, t, step, as sort_values would, NaN last."""
    keys = [steps[c] for c in _SORT_KEYS]
    if not all(isinstance(k.dtype, np.dtype) and k.dtype.kind in "iuf" for k in keys):
        return steps.sort_values(_SORT_KEYS, kind="stable")  # nullable or object columns
    attempt, rank, t, step = (k.to_numpy() for k in keys)
    order = _order_of_time_sorted(attempt, rank, t, step)
    if order is None:  # np.lexsort is stable and puts NaN last like sort_values
        order = np.lexsort((step, t, rank, attempt))
    return steps.take(order)


def _order_of_time_sorted(attempt: np.ndarray, rank: np.ndarray, t: np.ndarray,
                          step: np.ndarray) -> np.ndarray | None:
    """The sort order by attempt, rank, t, step of a table already in (t, step) order (the
    reader's), with integer attempts and ranks: then a stable sort by (attempt, rank) alone
    gives it, and a radix sort of a 16-bit key does that in a tenth of np.lexsort's time.
    None when the table is not like that."""
    if attempt.dtype.kind not in "iu" or rank.dtype.kind not in "iu" or len(t) < 2:
        return None
    with np.errstate(invalid="ignore"):
        later = t[1:] > t[:-1]
        if not (later | ((t[1:] == t[:-1]) & (step[1:] >= step[:-1]))).all():
            return None  # not in time order, a tie out of step order, or a NaN
    low_a, low_r = int(attempt.min()), int(rank.min())
    attempts, ranks = int(attempt.max()) - low_a + 1, int(rank.max()) - low_r + 1
    if attempts * ranks > 1 << 16:
        return None
    # Written straight into 16 bits: no int64 temporaries (fresh memory is slow to touch).
    key = np.empty(len(rank), dtype=np.uint16)
    np.subtract(rank, low_r, out=key, casting="unsafe")
    if attempts > 1:
        high = np.empty_like(key)
        np.subtract(attempt, low_a, out=high, casting="unsafe")
        key += high * np.uint16(ranks)
    return np.argsort(key, kind="stable")


def _group_starts(df: pd.DataFrame) -> np.ndarray:
    """True where a row starts a new (attempt, rank) run of the sorted table, and on every
    row whose attempt or rank is missing (groupby leaves those out: they have no group)."""
    attempt, rank = _numbers(df["attempt"]), _numbers(df["rank"])
    starts = np.ones(len(df), dtype=bool)
    starts[1:] = (attempt[1:] != attempt[:-1]) | (rank[1:] != rank[:-1])  # NaN != NaN
    return starts


def _keyed(df: pd.DataFrame) -> np.ndarray:
    """True for rows with both an attempt and a rank (the rows groupby puts in a group)."""
    return ~(_missing(_numbers(df["attempt"])) | _missing(_numbers(df["rank"])))


def _diff_in_groups(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """values[i] - values[i - 1] within a run (as floats), NaN on each run's first row."""
    out = np.empty(len(values), dtype=float)
    out[0] = np.nan
    np.subtract(values[1:], values[:-1], out=out[1:])
    out[starts] = np.nan
    return out


def with_step_time(steps: pd.DataFrame) -> pd.DataFrame:
    """`steps` sorted by attempt, rank and time, with three derived columns.

    - step_time: seconds per step. `dt` when the rank reported it; otherwise the time since
      the same rank's previous record in the same attempt divided by the steps in between
      (log lines every k steps). NaN when unknown (first record, counter reset, t not rising).
    - steps_covered: steps since that previous record (1 for the first record and after a
      counter reset, e.g. a per-epoch step number).
    - samples_covered: samples x steps_covered. `samples` is per step (FORMAT.md), so a record
      every 10 steps stands for 10 steps' samples; totals and rates over time use this.

    Deriving this is the costly part of the figures on a long run: a caller wanting several
    of them (summary.summarize) derives it once and passes `timed=True` to the others.
    """
    if not _has_rows(steps, "t", "rank", "step", "attempt"):
        base = list(steps.columns) if steps is not None else []
        return pd.DataFrame(columns=[*base, "step_time", "steps_covered", "samples_covered"])
    df = _sort_steps(steps)  # a new frame: adding columns leaves the caller's alone
    starts = _group_starts(df)
    elapsed = _diff_in_groups(_floats(df["t"]), starts)
    advanced = _diff_in_groups(_numbers(df["step"]), starts)
    # In place from here on: each array is tens of MB on a long run (see _column).
    with np.errstate(invalid="ignore", divide="ignore"):
        rising = advanced > 0
        unknown = ~(rising & (elapsed > 0))
        step_time = np.divide(elapsed, advanced, out=elapsed)  # derived from t and step
        step_time[unknown] = np.nan
        if "dt" in df.columns:  # reported by the rank: wins
            dt = _floats(df["dt"])
            reported = np.isfinite(dt) & (dt > 0)
            step_time[reported] = dt[reported]
    covered = advanced
    covered[~rising] = 1.0
    samples = _floats(df["samples"]) if "samples" in df.columns else np.full(len(df), np.nan)
    for name, values in (("step_time", step_time), ("steps_covered", covered),
                         ("samples_covered", samples * covered)):
        df[name] = _column(values, df.index)
    return df


def _column(values: np.ndarray, index: pd.Index) -> pd.Series:
    """A new column without the copy `df[name] = ndarray` makes (pandas 3): on a long run
    each copy is tens of MB of fresh memory, slow to touch in a new process."""
    return pd.Series(values, index=index, copy=False)


def _past_warmup(df: pd.DataFrame, warmup_steps: int) -> pd.Series:
    """True for rows once their rank got `warmup_steps` steps past its first in the attempt.

    First step 1 and 10 warm-up steps -> steps 11.. count (the study's 11..N). Progress is a
    running maximum in time order, so a step counter that resets each epoch does not make
    every epoch start look like warm-up. `df` comes from with_step_time (time-sorted, each
    rank's rows of an attempt together), possibly filtered.
    """
    out = np.zeros(len(df), dtype=bool)
    if len(df):
        starts = _group_starts(df)
        first = np.flatnonzero(starts)
        group = np.cumsum(starts) - 1
        step = _numbers(df["step"])
        progress = step - np.fmin.reduceat(step, first)[group]  # fmin: NaN steps skipped
        with np.errstate(invalid="ignore"):
            reached = progress >= max(0, int(warmup_steps))
        # "the running maximum reached it" = "some row so far in the run reached it"
        count = np.cumsum(reached)
        before = (count - reached)[first][group]
        out = (count > before) & ~_missing(progress) & _keyed(df)
    return pd.Series(out, index=df.index)


def steady_steps(steps: pd.DataFrame, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                 compiles: pd.DataFrame | None = None, *, timed: bool = False) -> pd.DataFrame:
    """The steady-state rows (with `step_time`): warm-up and compile-hit steps left out.

    A row is warm-up until its rank is `warmup_steps` steps past the first step it recorded in
    that attempt (first step 1 -> steps 1..10 skipped; a restart resuming at 300 skips
    300..309 too, since it compiles again). When `compiles` is given, steps whose
    interval (t - step_time, t] contains a compile event of that rank (or of no rank) are
    also left out, unless that would leave nothing: a job that compiles at every step has no
    other steady state, and its slow steps are then what it really runs at. `timed`: `steps`
    already comes from with_step_time.
    """
    df = steps if timed else with_step_time(steps)
    if not len(df):
        return df
    return df[_steady_mask(df, warmup_steps, compiles)]


def _steady_mask(df: pd.DataFrame, warmup_steps: int,
                 compiles: pd.DataFrame | None) -> np.ndarray:
    """steady_steps' rows of a with_step_time table, as a mask (no copy of the table)."""
    keep = _past_warmup(df, warmup_steps).to_numpy()
    if _has_rows(compiles, "t") and keep.any():
        hit = _overlaps_compile(df, compiles).to_numpy()  # type: ignore[arg-type]
        if not hit[keep].all():
            keep = keep & ~hit
    return keep


def _overlaps_compile(df: pd.DataFrame, compiles: pd.DataFrame) -> pd.Series:
    """Per row of a with_step_time table: did a compile event of its rank (or of no rank)
    happen during the step?"""
    end = _floats(df["t"])
    hit = compile_hits(end, end - _floats(df["step_time"]), _numbers(df["rank"]), compiles)
    return pd.Series(hit, index=df.index)


def compile_hits(end: np.ndarray, start: np.ndarray, rank: np.ndarray,
                 compiles: pd.DataFrame | None) -> np.ndarray:
    """Per step (its end, start and rank): did a compile event of its rank, or of no rank,
    fall in (start, end]? Steps of unknown length or rank: no. The rule of the figures here
    and of the dashboard's running steady state and alerts alike.

    Rows are searched a run of one rank at a time: fast when each rank's rows lie together
    (as in a with_step_time table), right in any order.
    """
    hit = np.zeros(len(end), dtype=bool)
    if not len(end) or not _has_rows(compiles, "t"):
        return hit
    assert compiles is not None
    ct = pd.to_numeric(compiles["t"], errors="coerce")
    if "rank" in compiles.columns:
        crank = pd.to_numeric(compiles["rank"], errors="coerce")
    else:
        crank = pd.Series(np.nan, index=compiles.index)
    anyrank = np.sort(ct[crank.isna()].dropna().to_numpy(dtype=float))
    ranked = ct[crank.notna()]
    own = {float(r): np.sort(np.concatenate([anyrank, times.dropna().to_numpy(float)]))
           for r, times in ranked.groupby(crank[crank.notna()])}
    if not len(anyrank) and not own:
        return hit
    counted = ~np.isnan(start) & ~_missing(rank)  # steps of unknown length or rank: no
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
    step_time = _floats(df["step_time"])
    keep = _steady_mask(df, warmup_steps, compiles) & ~np.isnan(step_time)
    if not keep.any():
        return None
    # Arrays of the kept rows rather than a filtered copy of the whole table.
    times = step_time[keep]
    rank = _numbers(df["rank"])[keep]
    samples = _floats(df["samples"])[keep] if "samples" in df.columns else None
    series = pd.Series(times, copy=False)  # pandas' median and quantile, as before
    return SteadyState(
        samples_per_s=_samples_per_s(rank, samples, times),
        step_time_median=float(series.median()),
        step_time_p90=float(series.quantile(0.9)),
        step_time_mean=float(series.mean()),
        steps=int(keep.sum()),
        ranks=len(np.unique(rank[~_missing(rank)])),
        warmup_steps=int(warmup_steps),
    )


def steady_step_time_without_data(steps: pd.DataFrame, phases: pd.DataFrame | None,
                                  warmup_steps: int = DEFAULT_WARMUP_STEPS,
                                  compiles: pd.DataFrame | None = None, *,
                                  timed: bool = False) -> float | None:
    """Mean steady step time less each step's wait for its batch (its `data` phase), or None
    when no steady step reports one.

    The reference study's own "average step time" times only the step's body, data loading
    excluded; the automatic probe reports the loader wait as `data`. `timed`: `steps` comes
    from with_step_time. Under torch-xla that wait
    holds the previous step's graph execution too, so this is below the wall-clock step time
    that throughput and cost are made of: it is shown beside them, never instead.
    """
    if not _has_rows(phases, "t", "rank", "data"):
        return None
    assert phases is not None
    steady = steady_steps(steps, warmup_steps, compiles, timed=timed)
    if not len(steady):
        return None
    waits = phases[["t", "rank", "data"]].drop_duplicates(["t", "rank"], keep="last")
    joined = steady[["t", "rank", "step_time"]].merge(waits, on=["t", "rank"], how="inner")
    body = (_floats(joined["step_time"]) - _floats(joined["data"]))
    body = body[np.isfinite(body)]
    return float(body.mean()) if len(body) else None


def step_sources(sources: set[str], probe_info: list[dict[str, Any]] | None = None,
                 samples_from: set[str] | None = None) -> str | None:
    """Where the step figures come from, in words ("automatic probe (host-side, xla)"), or
    None before any step. `sources` are the steps' `src` values, `probe_info` the automatic
    probe's records (what it timed, on which device), `samples_from` how their samples were
    known (SessionReader.samples_from): printed throughput and --samples-per-step are said."""
    names = [STEP_SOURCE_NAMES[s] for s in ("probe", "auto", "log") if s in sources]
    if not names:
        return None
    devices = sorted({str(r.get("device")) for r in probe_info or ()
                      if r.get("what") == "armed" and r.get("device") in ("xla", "cuda")})
    if "auto" in sources and devices:
        names[names.index(STEP_SOURCE_NAMES["auto"])] += f" (host-side, {', '.join(devices)})"
    said = [SAMPLES_FROM_NAMES[k] for k in SAMPLES_FROM_NAMES if k in (samples_from or ())]
    return " + ".join(names) + (f"; samples from {' and '.join(said)}" if said else "")


SAMPLES_FROM_NAMES = {"throughput": "printed throughput",
                      "samples_per_step": "step rate x --samples-per-step"}
def steps_sources(steps: pd.DataFrame) -> set[str]:
    """The `src` values of a step table (probe, auto, log), for step_sources."""
    return set(steps["src"].astype(str).unique()) if len(steps) else set()


STEP_SOURCE_NAMES = {"probe": "probe.step()", "auto": "automatic probe", "log": "log lines"}


def _samples_per_s(rank: np.ndarray, samples: np.ndarray | None,
                   times: np.ndarray) -> float | None:
    """Sum over ranks (rank order) of the rank's samples over its step time, or None when a
    rank's samples are unknown; rows without a rank count in no rank. The rows come from a
    with_step_time table: each rank's lie in a run per attempt, gathered without a sort."""
    if samples is None:
        return None
    missing = _missing(rank)
    if missing.any():
        rank, samples, times = rank[~missing], samples[~missing], times[~missing]
    if not len(rank) or np.isnan(samples).any():
        return None
    runs: dict[Any, list[slice]] = {}
    bounds = [0, *(np.flatnonzero(rank[1:] != rank[:-1]) + 1), len(rank)]
    for first, last in itertools.pairwise(bounds):
        runs.setdefault(rank[first], []).append(slice(first, last))
    rates = []
    for key in sorted(runs):
        parts = runs[key]
        # One contiguous array per rank, rows in table order: the sums come out as pandas'
        # per-rank sums did, to the last bit.
        s = samples[parts[0]] if len(parts) == 1 else np.concatenate([samples[p] for p in parts])
        t = times[parts[0]] if len(parts) == 1 else np.concatenate([times[p] for p in parts])
        rates.append(float(s.sum()) / float(t.sum()))
    return _pos(sum(rates))


# -- throughput over time ------------------------------------------------------------------

def throughput_series(steps: pd.DataFrame, bucket_s: float = DEFAULT_BUCKET_S,
                      start: float | None = None, end: float | None = None) -> pd.DataFrame:
    """Whole-job samples/s (all ranks summed) in time buckets, for the throughput chart.

    Columns: t (bucket start), seconds (time the bucket covers), samples, samples_per_s.
    Buckets start at `start` (the run's started_at; default: when the first step began) and
    run to `end` (now or ended_at; default: the last step). Buckets with no steps are 0, so
    compile stalls show as gaps. The last bucket is usually partial: it is rated over the time it
    covers, and left out while it covers less than half a bucket (too noisy to show).
    """
    columns = ["t", "seconds", "samples", "samples_per_s"]
    bucket = _pos(bucket_s)
    df = with_step_time(steps)
    if bucket is None or not len(df):
        return pd.DataFrame(columns=columns)
    df = df[np.isfinite(df["t"].astype(float))]
    samples = df["samples_covered"].fillna(0.0)
    t0 = finite_or_none(start) if start is not None else None
    if t0 is None:  # when the first step began, if its duration is known
        t0 = float((df["t"] - df["step_time"].fillna(0.0) * df["steps_covered"]).min())
    t1 = finite_or_none(end) if end is not None else None
    t1 = float(df["t"].max()) if t1 is None else t1
    if t1 <= t0:
        return pd.DataFrame(columns=columns)
    keep = (df["t"] >= t0) & (df["t"] <= t1)
    index = np.floor((df.loc[keep, "t"].to_numpy() - t0) / bucket).astype(int)
    count = math.floor((t1 - t0) / bucket) + 1
    index = np.minimum(index, count - 1)
    totals = np.bincount(index, weights=samples[keep].to_numpy(), minlength=count)
    starts = t0 + bucket * np.arange(count)
    seconds = np.minimum(bucket, t1 - starts)
    out = pd.DataFrame({"t": starts, "seconds": seconds, "samples": totals})
    out = out[out["seconds"] >= bucket / 2].reset_index(drop=True)
    out["samples_per_s"] = out["samples"] / out["seconds"]
    return out


def current_throughput(steps: pd.DataFrame, now: float,
                       window_s: float = DEFAULT_WINDOW_S) -> float | None:
    """Samples/s of the whole job over the last `window_s` seconds (all ranks summed).

    Per rank: samples after its first record in the window over the time they took (so the
    figure is right from the first seconds of a run and with slow or sparse steps); once a
    rank has been silent for longer than its usual step interval, the silence counts too, so
    a stall drags the figure down to 0. 0.0 when steps exist but none in the window; None
    when there are no steps at all, or no step in the window says its samples.
    """
    start = finite_or_none(now)
    window = _pos(window_s)
    if start is None or window is None:
        return None
    df = with_step_time(_until(steps, start))
    if not len(df):
        return None
    recent = df[df["t"] > start - window]
    total = 0.0
    unknown = 0
    for _, rows in recent.groupby(_GROUP, sort=False):  # time-sorted within each group
        if rows["samples_covered"].isna().all():
            unknown += 1
            continue
        t = rows["t"].to_numpy(dtype=float)
        if len(rows) >= 2:
            typical = float(np.median(np.diff(t)))
            span = max(t[-1] - t[0], (start - t[0]) - typical)
            if span > 0:
                total += float(rows["samples_covered"].iloc[1:].fillna(0.0).sum()) / span
        else:
            step_time = _pos(rows["step_time"].iloc[0])
            per_step = finite_or_none(rows["samples"].iloc[0])
            if step_time is not None and per_step is not None:
                total += per_step / max(step_time, start - t[0])
    # Steps in the window whose samples nobody knows: unknown, not 0 (0 is a stall).
    return None if unknown and unknown == recent.groupby(_GROUP, sort=False).ngroups else total


def total_samples(steps: pd.DataFrame, now: float | None = None, *,
                  timed: bool = False) -> float:
    """All samples processed so far (all ranks, all attempts; sparse records count for the
    steps they stand for). `timed`: `steps` already comes from with_step_time."""
    df = _until(steps, now) if timed else with_step_time(_until(steps, now))
    return float(df["samples_covered"].fillna(0.0).sum()) if len(df) else 0.0


def latest_step(steps: pd.DataFrame, now: float | None = None) -> int | None:
    """The highest step number reached in the latest attempt, or None before any step."""
    df = _until(steps, now)
    if not _has_rows(df, "step", "attempt"):
        return None
    last = df[df["attempt"] == df["attempt"].max()]
    return int(last["step"].max())


# -- ranks ---------------------------------------------------------------------------------

def rank_step_times(steps: pd.DataFrame, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                    attempt: int | None = None) -> pd.DataFrame:
    """Median step time per rank (index: rank; columns median_step_s, steps).

    Uses the latest attempt (or `attempt`), steady steps only; a rank with no steady step yet
    falls back to all its known step times so that a slow rank shows up early too.
    """
    columns = ["median_step_s", "steps"]
    df = with_step_time(steps)
    if not len(df):
        return pd.DataFrame(columns=columns)
    df = df[df["attempt"] == (df["attempt"].max() if attempt is None else attempt)]
    df = df.assign(past_warmup=_past_warmup(df, warmup_steps))
    df = df[df["step_time"].notna()]
    steady = df[df["past_warmup"]]
    rows = {}
    for rank, all_rows in df.groupby("rank"):
        mine = steady[steady["rank"] == rank]
        use = mine if len(mine) else all_rows
        rows[int(rank)] = (float(use["step_time"].median()), len(use))
    out = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    out.index.name = "rank"
    return out.sort_index()


def find_stragglers(per_rank: pd.DataFrame | pd.Series | Mapping[int, float],
                    threshold: float = DEFAULT_STRAGGLER_THRESHOLD) -> list[int]:
    """Ranks whose median step time exceeds the median of the other ranks' by > `threshold`.

    In data-parallel training every rank waits for the slowest at each all-reduce, so one
    slow rank (a noisy core, a slow data loader) sets the pace for all. `per_rank` is
    rank_step_times() or a rank -> median step seconds mapping. Needs two ranks or more.
    """
    if isinstance(per_rank, pd.DataFrame):
        per_rank = per_rank["median_step_s"] if "median_step_s" in per_rank else pd.Series()
    medians = {int(r): v for r, v in dict(per_rank).items() if _pos(v) is not None}
    if len(medians) < 2 or finite_or_none(threshold) is None:
        return []
    slow = []
    for rank, median in medians.items():
        others = float(np.median([v for r, v in medians.items() if r != rank]))
        if median > others * (1.0 + threshold):
            slow.append(rank)
    return sorted(slow)


def stalled_ranks(steps: pd.DataFrame, now: float, factor: float = DEFAULT_STALL_FACTOR,
                  min_silence_s: float = DEFAULT_MIN_STALL_S,
                  compiles: pd.DataFrame | None = None,
                  warmup_steps: int = DEFAULT_WARMUP_STEPS) -> dict[int, float]:
    """Ranks of the latest attempt silent for > `factor` x their median step time -> seconds.

    The silence must also exceed `min_silence_s` (log-parsed steps arrive in bursts). A
    compile event of the rank (or of no rank) restarts its clock: compiling is not stalling.
    Ranks without a known median step time are not judged. The caller asks this only while
    the job runs.
    """
    moment = finite_or_none(now)
    if moment is None or _pos(factor) is None:
        return {}
    df = _until(steps, moment)
    per_rank = rank_step_times(df, warmup_steps)
    if not len(per_rank):
        return {}
    latest = df[df["attempt"] == df["attempt"].max()]
    last_seen = latest.groupby("rank")["t"].max()
    if _has_rows(compiles, "t"):
        cdf = _until(compiles, moment)
        ranks = (pd.to_numeric(cdf["rank"], errors="coerce") if "rank" in cdf
                 else pd.Series(np.nan, index=cdf.index))
        any_rank = cdf.loc[ranks.isna(), "t"].max() if len(cdf) else np.nan
        for rank in last_seen.index:
            mine = cdf.loc[ranks == rank, "t"].max() if len(cdf) else np.nan
            candidates = [x for x in (last_seen[rank], mine, any_rank)
                          if finite_or_none(x) is not None]
            last_seen[rank] = max(candidates)
    out = {}
    for rank, seen in last_seen.items():
        if rank not in per_rank.index:
            continue
        silence = moment - float(seen)
        limit = max(float(min_silence_s), factor * float(per_rank.loc[rank, "median_step_s"]))
        if silence > limit:
            out[int(rank)] = silence
    return out


# -- phase ---------------------------------------------------------------------------------

def run_is_over(meta: Mapping[str, Any] | None, now: float | None = None) -> bool:
    """True once meta says the run ended (and, in a replay, `now` is past its end)."""
    meta = meta or {}
    ended_at = finite_or_none(meta.get("ended_at"))
    if meta.get("exit") is None and ended_at is None:
        return False
    return ended_at is None or now is None or now >= ended_at


def exit_phase(exit_info: Mapping[str, Any] | None) -> Phase:
    """"finished" (code 0), "stopped" (the user stopped it), "ended" (a job adopted after its
    supervisor died: how it exited is unknown) or "crashed" (anything else).

    A reason mentioning stop/interrupt/cancel/user wins over the exit code, since a graceful
    stop may well exit 0. An end without exit details is "stopped": a crash cannot be shown.
    """
    if not exit_info:
        return "stopped"
    reason = str(exit_info.get("reason") or "").lower()
    if reason == "ended":
        return "ended"
    if any(word in reason for word in _STOP_WORDS):
        return "stopped"
    if exit_info.get("code") == 0 and not exit_info.get("signal"):
        return "finished"
    return "crashed"


def phase(meta: Mapping[str, Any] | None, steps: pd.DataFrame | None,
          compiles: pd.DataFrame | None, now: float | None,
          warmup_steps: int = DEFAULT_WARMUP_STEPS) -> Phase:
    """Where the run is: starting, compiling, warm-up, steady, finished, crashed or stopped.

    Ended runs are classified by meta.exit. A running one is "compiling" while its newest
    compile event is newer than its newest step, "starting" before any step or compile,
    "warm-up" until a rank of the latest attempt has done `warmup_steps` steps past its first,
    then "steady". Only events up to `now` count, so replays show the phase at that time.
    """
    if run_is_over(meta, now):
        return exit_phase((meta or {}).get("exit"))
    s = _until(steps, now) if _has_rows(steps, "t", "step", "attempt", "rank") else None
    c = _until(compiles, now) if _has_rows(compiles, "t") else None
    last_compile = float(c["t"].max()) if c is not None and len(c) else None
    if s is None or not len(s):
        return "compiling" if last_compile is not None else "starting"
    if last_compile is not None and last_compile > float(s["t"].max()):
        return "compiling"
    latest = s[s["attempt"] == s["attempt"].max()]
    progress = latest.groupby("rank")["step"].agg(lambda x: x.max() - x.min())
    return "steady" if int(progress.max()) >= int(warmup_steps) else "warm-up"


# -- cost ----------------------------------------------------------------------------------

def cost_so_far(usd_per_hour: float | None, started_at: float | None, now: float | None,
                ended_at: float | None = None) -> float | None:
    """USD spent from start to `now` (or to `ended_at` once ended): the instance bills all of
    it, compile and idle time included."""
    price = _pos(usd_per_hour)
    start = finite_or_none(started_at)
    stop = finite_or_none(now)
    end = finite_or_none(ended_at)
    if end is not None:
        stop = end if stop is None else min(stop, end)
    if price is None or start is None or stop is None:
        return None
    return max(0.0, stop - start) / 3600.0 * price


def samples_per_dollar(samples_per_s: float | None,
                       usd_per_hour: float | None) -> float | None:
    """Price-performance: samples/s x 3600 / USD per hour (320/s at $1.34375/h -> 857,302)."""
    rate, price = _pos(samples_per_s), _pos(usd_per_hour)
    if rate is None or price is None:
        return None
    return rate * 3600.0 / price


def all_in_samples_per_dollar(total: float | None, total_cost_usd: float | None) -> float | None:
    """Samples per dollar of the whole bill so far (compile, warm-up and idle time included)."""
    count, cost = _pos(total), _pos(total_cost_usd)
    return None if count is None or cost is None else count / cost


def cost_per_million_samples(samples_per_s: float | None,
                             usd_per_hour: float | None) -> float | None:
    """USD per 1,000,000 samples at this throughput and price."""
    per_dollar = samples_per_dollar(samples_per_s, usd_per_hour)
    return None if per_dollar is None else 1e6 / per_dollar


def cost_per_epoch(dataset_size: float | None, samples_per_s: float | None,
                   usd_per_hour: float | None) -> float | None:
    """USD for one pass over `dataset_size` samples at this throughput and price."""
    size, per_dollar = _pos(dataset_size), samples_per_dollar(samples_per_s, usd_per_hour)
    return None if size is None or per_dollar is None else size / per_dollar


def price_per_neuroncore_hour(usd_per_hour: float | None,
                              neuron_cores: float | None) -> float | None:
    """USD per NeuronCore-hour, to compare instance sizes of one family."""
    price, cores = _pos(usd_per_hour), _pos(neuron_cores)
    return None if price is None or cores is None else price / cores


def relative_price_performance(samples_per_s_a: float | None, usd_per_hour_a: float | None,
                               samples_per_s_b: float | None,
                               usd_per_hour_b: float | None) -> float | None:
    """Samples per dollar of A divided by B's: > 1 means A is the better deal.

    Equals (speed A / speed B) x (price B / price A), so a faster instance is worse exactly
    when its price ratio exceeds its speed ratio.
    """
    a = samples_per_dollar(samples_per_s_a, usd_per_hour_a)
    b = samples_per_dollar(samples_per_s_b, usd_per_hour_b)
    return None if a is None or b is None else a / b


@dataclass(frozen=True)
class Projection:
    """Time and money still needed to reach a target, at the current pace and price."""

    remaining_s: float
    remaining_usd: float | None
    total_usd: float | None
    """Spent so far plus remaining, when both are known."""
    eta: float | None
    """Unix time of arrival, when `now` was given."""


def project_remaining(done: float | None, target: float | None, rate_per_s: float | None,
                      usd_per_hour: float | None = None, spent_usd: float | None = None,
                      now: float | None = None) -> Projection | None:
    """Projection for `target - done` units at `rate_per_s` units per second.

    None when the target, the progress or the rate is unknown (or zero); the money parts are
    None without a price. At or past the target the remaining time is 0.
    """
    goal, so_far, rate = _pos(target), finite_or_none(done), _pos(rate_per_s)
    if goal is None or so_far is None or rate is None:
        return None
    remaining_s = max(0.0, goal - so_far) / rate
    price = _pos(usd_per_hour)
    remaining_usd = None if price is None else remaining_s / 3600.0 * price
    spent = finite_or_none(spent_usd)
    total = None if remaining_usd is None or spent is None else spent + remaining_usd
    moment = finite_or_none(now)
    eta = None if moment is None else moment + remaining_s
    return Projection(remaining_s, remaining_usd, total, eta)


def project_to_step(current_step: float | None, target_step: float | None,
                    step_time_s: float | None, usd_per_hour: float | None = None,
                    spent_usd: float | None = None,
                    now: float | None = None) -> Projection | None:
    """Time and cost to reach config.step_target at the steady step time."""
    step_time = _pos(step_time_s)
    rate = None if step_time is None else 1.0 / step_time
    return project_remaining(current_step, target_step, rate, usd_per_hour, spent_usd, now)


def project_to_epochs(samples_done: float | None, target_epochs: float | None,
                      dataset_size: float | None, samples_per_s: float | None,
                      usd_per_hour: float | None = None, spent_usd: float | None = None,
                      now: float | None = None) -> Projection | None:
    """Time and cost to process `target_epochs` x `dataset_size` samples at samples_per_s."""
    epochs, size = _pos(target_epochs), _pos(dataset_size)
    target = None if epochs is None or size is None else epochs * size
    return project_remaining(samples_done, target, samples_per_s, usd_per_hour, spent_usd, now)
