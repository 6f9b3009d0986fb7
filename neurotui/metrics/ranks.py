"""Per-rank figures: each rank's median step time, the stragglers, the stalled ranks.

Two forms of each rule, side by side: over a whole step table (`rank_step_times`,
`stalled_ranks`) and over what a live model keeps per rank (`rank_median`, `stalled`). Both
forms use `rank_median` and `stalled`; tests/unit/metrics/test_metrics_forms.py holds them equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from neurotui.defaults import (
    DEFAULT_MIN_STALL_S,
    DEFAULT_STALL_FACTOR,
    DEFAULT_WARMUP_STEPS,
    stall_limit_s,
)
from neurotui.metrics.common import finite_or_none, has_rows, positive, until
from neurotui.metrics.steptime import past_warmup, with_step_time

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_STRAGGLER_THRESHOLD = 0.2


def rank_median(step_time: np.ndarray, past: np.ndarray) -> tuple[float, int] | None:
    """One rank's median step time and the steps it is over (`median_steps`)."""
    use = median_steps(step_time, past)
    return (float(np.median(use)), len(use)) if len(use) else None


def median_steps(step_time: np.ndarray, past: np.ndarray) -> np.ndarray:
    """The step times a rank's median is over: its steady steps, or, before it has one, all
    its timed steps (so that a slow rank shows up early too)."""
    known = ~np.isnan(step_time)
    steady = known & past
    return step_time[steady] if steady.any() else step_time[known]


def stalled(now: float, last_seen: Mapping[int, float], medians: Mapping[int, float],
            compiled_at: Mapping[int | None, float], factor: float = DEFAULT_STALL_FACTOR,
            min_silence_s: float = DEFAULT_MIN_STALL_S) -> dict[int, float]:
    """Ranks silent past defaults.stall_limit_s of their median step time -> seconds.

    `last_seen`: each rank's last step; `compiled_at`: the last compile event of each rank
    (None: of no rank), which restarts the clock, since compiling is not stalling. Ranks
    without a median are not judged.
    """
    any_rank = compiled_at.get(None, -math.inf)
    out = {}
    for rank, seen in last_seen.items():
        if rank not in medians:
            continue
        silence = now - max(seen, compiled_at.get(rank, -math.inf), any_rank)
        if silence > stall_limit_s(medians[rank], factor, min_silence_s):
            out[rank] = silence
    return out


def last_compiles(events: Iterable[tuple[float, int | None]], now: float
                  ) -> dict[int | None, float]:
    """The time of the last compile event up to `now` per rank (None: of no rank)."""
    out: dict[int | None, float] = {}
    for t, rank in events:
        if t <= now and t > out.get(rank, -math.inf):
            out[rank] = t
    return out


# -- the whole table -------------------------------------------------------------------------

def rank_step_times(steps: pd.DataFrame, warmup_steps: int = DEFAULT_WARMUP_STEPS,
                    attempt: int | None = None) -> pd.DataFrame:
    """rank_median per rank of the latest attempt (or `attempt`); index: rank; columns
    median_step_s, steps."""
    import pandas as pd  # the batch form: its callers hold DataFrames already

    columns = ["median_step_s", "steps"]
    df = with_step_time(steps)
    if len(df):
        df = df[df["attempt"] == (df["attempt"].max() if attempt is None else attempt)]
    rows = {}
    if len(df):
        past = past_warmup(df, warmup_steps).to_numpy()
        step_time = df["step_time"].to_numpy(dtype=float)
        for rank, index in df.groupby("rank").indices.items():
            median = rank_median(step_time[index], past[index])
            if median is not None:
                rows[int(rank)] = median
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
    if hasattr(per_rank, "columns"):  # rank_step_times()' DataFrame
        per_rank = per_rank.get("median_step_s", {})
    medians = {int(r): v for r, v in dict(per_rank).items() if positive(v) is not None}
    if len(medians) < 2 or finite_or_none(threshold) is None:
        return []
    ranks, values = list(medians), np.fromiter(medians.values(), float, len(medians))
    others = median_of_others(values)
    return sorted(r for r, slow in zip(ranks, values > others * (1.0 + threshold),
                                       strict=True) if slow)


def median_of_others(values: np.ndarray) -> np.ndarray:
    """For each value, the median of all the other values (two or more values).

    From one sort: leaving out the value at sorted position k shifts the sorted values after
    it down by one, so the others' middle element(s) are found by index. The dashboard asks
    this at every frame, for a job's 2,048 ranks too (an n x n table of "others" took 30 ms).
    """
    n = len(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)

    def others_at(j: int) -> np.ndarray:  # element j of each value's sorted others
        return np.where(j < position, ordered[j], ordered[j + 1])

    m = n - 1
    if m % 2:
        return others_at(m // 2).astype(float)
    return (others_at(m // 2 - 1) + others_at(m // 2)) / 2.0


def stalled_ranks(steps: pd.DataFrame, now: float, factor: float = DEFAULT_STALL_FACTOR,
                  min_silence_s: float = DEFAULT_MIN_STALL_S,
                  compiles: pd.DataFrame | None = None,
                  warmup_steps: int = DEFAULT_WARMUP_STEPS) -> dict[int, float]:
    """`stalled` for the ranks of a step table's latest attempt as of `now` (log-parsed
    steps arrive in bursts: hence the minimum silence). The caller asks this only while the
    job runs."""
    import pandas as pd  # the batch form: its callers hold DataFrames already

    moment = finite_or_none(now)
    if moment is None or positive(factor) is None:
        return {}
    df = until(steps, moment)
    per_rank = rank_step_times(df, warmup_steps)
    if not len(per_rank):
        return {}
    latest = df[df["attempt"] == df["attempt"].max()]
    last_seen = {int(r): float(t) for r, t in latest.groupby("rank")["t"].max().items()}
    events: list[tuple[float, int | None]] = []
    if has_rows(compiles, "t"):
        assert compiles is not None
        ct = pd.to_numeric(compiles["t"], errors="coerce")
        cr = (pd.to_numeric(compiles["rank"], errors="coerce") if "rank" in compiles
              else pd.Series(np.nan, index=compiles.index))
        events = [(float(t), None if math.isnan(r) else int(r))
                  for t, r in zip(ct, cr, strict=True) if not math.isnan(t)]
    medians = per_rank["median_step_s"].to_dict()
    return stalled(moment, last_seen, medians, last_compiles(events, moment), factor,
                   min_silence_s)
