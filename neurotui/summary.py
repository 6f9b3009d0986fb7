"""One run in figures: the row of a comparison, and meta.json's `summary` at the end of a run.

Pure over recorded data (meta, steps, compile events), so the supervisor, `compare` and the
dashboard agree. A figure that cannot be known is None, never 0. The tables are DataFrames
(compare) or the reader's numpy Columns (the supervisor's summary at a run's end: pandas
would be most of its time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui import metrics
from neurotui.metrics.common import floats
from neurotui.session.stepprecedence import STEP_SOURCES

if TYPE_CHECKING:
    import pandas as pd

    from neurotui.session.columns import Columns


def summarize(meta: dict[str, Any], steps: pd.DataFrame | Columns,
              compiles: pd.DataFrame | Columns, now: float | None = None,
              phases: pd.DataFrame | Columns | None = None,
              probe_info: list[dict[str, Any]] | None = None,
              samples_from: set[str] | None = None,
              dataset_size: float | None = None) -> dict[str, Any]:
    """`dataset_size`: samples in an epoch, for the epoch's time and cost (default: the
    run's own --dataset-size)."""
    started = meta.get("started_at")
    ended = meta.get("ended_at")
    end = ended if ended is not None else now
    price = (meta.get("price") or {}).get("usd_per_hour")
    # Step times derived once for both figures: on a long run that is most of the work.
    timed = metrics.with_step_time(steps)
    steady = metrics.steady_state(timed, compiles=compiles, timed=True)
    samples = metrics.total_samples(timed, timed=True) if len(steps) else None
    cost = metrics.cost_so_far(price, started, end, ended)
    first_step = float(np.nanmin(floats(steps["t"]))) - float(started) \
        if len(steps) and started else None
    rate = steady.samples_per_s if steady else None
    size = metrics.finite_or_none(dataset_size if dataset_size is not None else
                                  (meta.get("config") or {}).get("dataset_size"))
    epoch = metrics.per_epoch(size, rate, price)
    return {
        "ranks": _distinct(floats(steps["rank"])),
        "steps": metrics.latest_step(steps) if len(steps) else None,
        "total_samples": samples,
        "time_to_first_step_s": first_step,
        "wall_s": float(end) - float(started) if end is not None and started else None,
        "steady_samples_per_s": rate,
        "step_time_median_s": steady.step_time_median if steady else None,
        "step_time_p90_s": steady.step_time_p90 if steady else None,
        "step_time_without_data_s": metrics.steady_step_time_without_data(
            timed, phases, compiles=compiles, timed=True),
        "step_source": metrics.step_sources(
            metrics.steps_sources(steps, STEP_SOURCES), probe_info, samples_from),
        "usd_per_hour": price,
        "cost_usd": cost,
        "samples_per_dollar_steady": metrics.samples_per_dollar(rate, price),
        "samples_per_dollar_all_in": metrics.all_in_samples_per_dollar(samples, cost),
        "usd_per_million_samples": metrics.cost_per_million_samples(rate, price),
        "dataset_size": size,
        "epoch_s": epoch.remaining_s if epoch else None,
        "usd_per_epoch": epoch.remaining_usd if epoch else None,
    }


def _distinct(values: np.ndarray) -> int:
    """How many different known values (as pandas' nunique)."""
    return len(np.unique(values[~np.isnan(values)]))
