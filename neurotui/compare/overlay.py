"""Throughput over time: the samples/s curves of several runs on one time axis, for the
compare screen's chart and the compare page."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurotui import fmt, metrics
from neurotui.compare.load import LoadedSession, load_session

if TYPE_CHECKING:  # pandas only where a table is made: a job's figures need none
    import pandas as pd


_NICE_BUCKETS_S = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200)
OVERLAY_POINTS = 300
"""About this many points per curve in throughput_overlay() when no bucket is given."""


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not fmt.known(value):
        return None
    return float(value)


def overlay_bucket_s(durations: Sequence[float | None], points: int = OVERLAY_POINTS) -> float:
    """A round bucket giving about `points` points on the longest run (10 s at least)."""
    longest = max((d for d in durations if fmt.known(d)), default=0.0)
    want = longest / max(1, points)
    return float(next((b for b in _NICE_BUCKETS_S if b >= want), _NICE_BUCKETS_S[-1]))


def throughput_overlay(sessions: Sequence[Path | LoadedSession],
                       bucket_s: float | None = None, *,
                       now: float | None = None) -> pd.DataFrame:
    """Whole-job samples/s over time of several runs on one axis, to overlay in a chart.

    Long format, columns session, t_s (seconds since that session started, at the bucket's
    start), samples_per_s. One bucket size for all (default: a round size giving about
    OVERLAY_POINTS points on the longest run), so the curves compare. Compile time shows as
    0 samples/s at the start of each curve.
    """
    import pandas as pd

    loaded = [s if isinstance(s, LoadedSession) else load_session(s) for s in sessions]
    spans = []
    for s in loaded:
        started = _float(s.meta.get("started_at"))
        end = _float(s.meta.get("ended_at"))
        if end is None:
            end = (time.time() if now is None else now) if s.running else s.last_seen
        spans.append((started, end))
    bucket = bucket_s or overlay_bucket_s(
        [e - b if b is not None and e is not None else None for b, e in spans])
    parts = []
    for s, (started, end) in zip(loaded, spans, strict=True):
        series = metrics.throughput_series(s.steps, bucket, start=started, end=end)
        if not len(series):
            continue
        origin = started if started is not None else float(series["t"].iloc[0])
        parts.append(pd.DataFrame({"session": s.name,
                                   "t_s": series["t"].to_numpy(dtype=float) - origin,
                                   "samples_per_s": series["samples_per_s"].to_numpy(float)}))
    if not parts:
        return pd.DataFrame({"session": pd.Series(dtype=object),
                             "t_s": pd.Series(dtype=float),
                             "samples_per_s": pd.Series(dtype=float)})
    return pd.concat(parts, ignore_index=True)
