"""Samples/s: now (over the last seconds), over time (the chart), and the totals.

The current throughput has two forms of one rule, side by side: `current_throughput` over a
whole step table and `window_throughput` over the rows a live model keeps per rank; both add
up `window_rates` over the ranks of the latest attempt.
tests/unit/metrics/test_metrics_forms.py holds them equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from neurotui.metrics.common import (
    finite_or_none,
    floats,
    has_rows,
    positive,
    stacked_by_length,
    until,
)
from neurotui.metrics.steptime import with_step_time

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_BUCKET_S = 10.0
DEFAULT_WINDOW_S = 30.0

RankRows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""One rank's rows in time order: t, samples_covered, step_time, samples."""
K = TypeVar("K")


def _lone_row_rate(step_time: float, samples: float, covered: float, t: float,
                   now: float) -> float | None:
    """A rank with one row in the window: its samples over its step time, or the time since
    it; None when its step time is unknown (a rank's first step, where no time was printed):
    not yet a rate, and not a stall."""
    if math.isnan(covered):
        return None
    seconds, per_step = positive(step_time), finite_or_none(samples)
    if seconds is None or per_step is None:
        return None
    return per_step / max(seconds, now - t)


def window_throughput(ranks: Iterable[RankRows], now: float,
                      window_s: float = DEFAULT_WINDOW_S) -> float | None:
    """Samples/s of the whole job over the last `window_s` seconds: each rank's rows (of the
    latest attempt) in (now - window_s, now] rated by `window_rates`, summed. 0.0 when no rank
    has a row in the window (a stall), None when no rank in it says its samples."""
    return total_rate(window_rates(enumerate(ranks), now, window_s).values())


def window_rates(ranks: Iterable[tuple[K, RankRows]], now: float,
                 window_s: float = DEFAULT_WINDOW_S) -> dict[K, float | None]:
    """Per rank with rows in the window, its samples/s (None: none of its rows says its
    samples), as window_throughput rates it: the parts of a job (a node's ranks) add up to
    the whole.

    A rank with rows of two stamps or more: the samples after its first row over the time
    they took, so the figure is right from the first seconds of a run and with slow or sparse
    steps; once the rank has been silent for longer than its usual step interval (the
    median), the silence counts too, so a stall drags the figure down to 0. Rows read together
    share their read's stamp: "after its first row" is after its read, and the usual interval
    is between reads. A lone row (or a lone read): `_lone_row_rate`. Ranks are rated
    together, a numpy call per statistic for all of them (stacked_by_length), in the order
    they came."""
    rates: dict[K, float | None] = {}
    spans: dict[K, tuple[np.ndarray, np.ndarray]] = {}
    for key, (t, covered, step_time, samples) in ranks:
        # A rank's rows are in time order: its window is a slice (no masks to build, at
        # every frame, for each of a job's thousands of ranks).
        first, end = np.searchsorted(t, (now - window_s, now), side="right").tolist()
        if end > first and t[first] != t[end - 1]:
            spans[key] = (t[first:end], covered[first:end])
            rates[key] = None  # (its place in the order: rated below)
        elif end > first:  # one row, or rows of one read (sharing its stamp): its last
            last = end - 1
            rates[key] = _lone_row_rate(step_time[last], samples[last], covered[last],
                                        float(t[last]), now)
    for keys, (t, covered) in stacked_by_length(spans):
        intervals = np.diff(t, axis=1)
        unknown = np.isnan(covered).all(axis=1)
        if intervals.all():  # a read a row
            typical = np.median(intervals, axis=1)
            done = np.nansum(covered[:, 1:], axis=1)
        else:  # rows read together: the intervals between reads; the rows read after the
            # first row's read (its other rows were written before it)
            typical = np.nanmedian(np.where(intervals > 0, intervals, np.nan), axis=1)
            done = np.nansum(np.where(t[:, 1:] > t[:, :1], covered[:, 1:], 0.0), axis=1)
        for row, key in enumerate(keys):
            start = t[row, 0]
            span = max(t[row, -1] - start, (now - start) - typical[row])
            rates[key] = (None if unknown[row] else
                          float(done[row]) / span if span > 0 else 0.0)
    return rates


def total_rate(rates: Iterable[float | None]) -> float | None:
    """window_rates summed: 0.0 when no rank has a row in the window (a stall), None when
    none of those that have says its samples (unknown, not 0: 0 is a stall)."""
    rates = list(rates)
    known = [r for r in rates if r is not None]
    return None if rates and not known else float(sum(known))


def current_throughput(steps: pd.DataFrame, now: float,
                       window_s: float = DEFAULT_WINDOW_S) -> float | None:
    """window_throughput over a step table, as of `now`: the ranks of the latest attempt so
    far. None when there are no steps at all."""
    moment, window = finite_or_none(now), positive(window_s)
    if moment is None or window is None:
        return None
    df = with_step_time(until(steps, moment))
    if not len(df):
        return None
    latest = df[df["attempt"] == df["attempt"].max()]
    return window_throughput(_per_rank(latest), moment, window)


def _per_rank(df: pd.DataFrame) -> Iterable[RankRows]:
    """The rows of each rank of a with_step_time table (one attempt), time-sorted."""
    for _, rows in df.groupby("rank", sort=True):
        yield tuple(rows[c].to_numpy(dtype=float)  # type: ignore[misc]
                    for c in ("t", "samples_covered", "step_time", "samples"))


def throughput_series(steps: pd.DataFrame, bucket_s: float = DEFAULT_BUCKET_S,
                      start: float | None = None, end: float | None = None) -> pd.DataFrame:
    """Whole-job samples/s (all ranks summed) in time buckets, for the throughput chart.

    Columns: t (bucket start), seconds (time the bucket covers), samples, samples_per_s.
    Buckets start at `start` (the run's started_at; default: when the first step began) and
    run to `end` (now or ended_at; default: the last step). Buckets with no steps are 0, so
    compile stalls show as gaps. The last bucket is usually partial: it is rated over the time
    it covers, and left out while it covers less than half a bucket (too noisy to show).
    """
    import pandas as pd  # the batch form: its callers hold DataFrames already

    columns = ["t", "seconds", "samples", "samples_per_s"]
    bucket = positive(bucket_s)
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


def total_samples(steps: pd.DataFrame, now: float | None = None, *,
                  timed: bool = False) -> float:
    """All samples processed so far (all ranks, all attempts; sparse records count for the
    steps they stand for). `timed`: `steps` already comes from with_step_time."""
    df = until(steps, now) if timed else with_step_time(until(steps, now))
    return float(np.nansum(floats(df["samples_covered"]))) if len(df) else 0.0


def latest_step(steps: pd.DataFrame, now: float | None = None) -> int | None:
    """The step the run is at: the furthest of the ranks' last steps in the latest attempt
    (a per-epoch step number that started again is where it is now, not its old highest),
    or None before any step."""
    df = until(steps, now)
    if not has_rows(df, "t", "step", "attempt", "rank"):
        return None
    attempt = floats(df["attempt"])
    latest = np.flatnonzero(attempt == np.nanmax(attempt))
    t, step, rank = (floats(df[name])[latest] for name in ("t", "step", "rank"))
    order = np.lexsort((step, t))  # stable, NaN last: as sort_values(["t", "step"])
    # Each rank's last known step in that order (groupby's `last` skips a missing one).
    known = order[~np.isnan(step[order]) & ~np.isnan(rank[order])]
    if not len(known):
        return None
    ranks_last_first = rank[known][::-1]
    _, at = np.unique(ranks_last_first, return_index=True)
    return int(step[known][::-1][at].max())
