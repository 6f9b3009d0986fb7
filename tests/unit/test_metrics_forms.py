"""Each figure's two forms agree: the batch form over the whole step table and the incremental
form over rows taken a few at a time (metrics/__init__ lists the pairs), on random runs handed
over in random pieces, asked at random moments."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui import metrics
from neurotui.metrics.ranks import last_compiles
from tests.strategies import Run, runs

FACTOR, MIN_SILENCE_S = 3.0, 0.5  # small, so that random runs stall


class Incremental:
    """The incremental forms fed as the live model feeds them, keeping every row."""

    def __init__(self) -> None:
        self.clock = metrics.StepClock(metrics.DEFAULT_WARMUP_STEPS)
        self.tracker = metrics.SteadyTracker()
        self.rows: dict[tuple[int, int], list[dict[str, np.ndarray]]] = defaultdict(list)
        self.last_t: float | None = None

    def take(self, new: pd.DataFrame) -> None:
        for (attempt, rank), rows in new.groupby(["attempt", "rank"], sort=False):
            cols = self.clock.take(int(attempt), int(rank), *(
                rows[c].to_numpy(dtype=float) for c in ("t", "step", "dt", "samples")))
            self.tracker.add_group(int(attempt), int(rank), cols["t"], cols["past"],
                                   cols["step_time"], cols["samples"])
            self.rows[(int(attempt), int(rank))].append(cols)
        if len(new):
            self.last_t = max(self.last_t or -math.inf, float(new["t"].max()))

    def latest(self) -> dict[int, dict[str, np.ndarray]]:
        attempt = max(a for a, _ in self.rows)
        return {r: {k: np.concatenate([c[k] for c in parts]) for k in parts[0]}
                for (a, r), parts in self.rows.items() if a == attempt}


def derived(run: Run, pieces: Incremental) -> pd.DataFrame:
    """The incremental step times, samples covered and warm-up flags as one table."""
    frames = []
    for (attempt, rank), parts in pieces.rows.items():
        cols = {k: np.concatenate([c[k] for c in parts]) for k in parts[0]}
        frames.append(pd.DataFrame({"attempt": attempt, "rank": rank, **cols}))
    return pd.concat(frames).sort_values(["attempt", "rank", "t", "step"], kind="stable",
                                         ignore_index=True)


@settings(max_examples=80, deadline=None)
@given(runs(), st.data())
def test_batch_and_incremental_forms_agree(run: Run, data: st.DataObject) -> None:
    pieces = Incremental()
    before: dict = {}
    for stage in run.stages:
        taken = run.taken(stage)
        new = taken[~taken.index.isin(run.taken(before).index)] if before else taken
        pieces.take(new)
        before = stage
        silence = data.draw(st.floats(0.0, 60.0))
        now = float(taken["t"].max()) + silence if len(taken) else 100.0
        if len(taken):
            _agree(run, taken, pieces, now)

    # Step time, samples covered and warm-up, row by row.
    batch = metrics.with_step_time(run.steps).reset_index(drop=True)
    batch["past"] = metrics.past_warmup(batch, metrics.DEFAULT_WARMUP_STEPS).to_numpy()
    incremental = derived(run, pieces)
    for column in ("t", "step", "step_time", "samples_covered", "past"):
        np.testing.assert_array_equal(incremental[column].to_numpy(),
                                      batch[column].to_numpy(dtype=incremental[column].dtype),
                                      err_msg=column)


def _agree(run: Run, taken: pd.DataFrame, pieces: Incremental, now: float) -> None:
    latest = pieces.latest()
    # The steady state, compile-hit steps left out.
    expected = metrics.steady_state(taken, compiles=run.compiles)
    got = pieces.tracker.result(run.compiles)
    assert (got is None) == (expected is None)
    if expected is not None:
        assert vars(got) == pytest.approx(vars(expected), rel=1e-6)
    # Throughput now.
    per_rank = [(v["t"], v["samples_covered"], v["step_time"], v["samples"])
                for _, v in sorted(latest.items())]
    assert metrics.window_throughput(per_rank, now) == pytest.approx(
        metrics.current_throughput(taken, now))
    # Per-rank medians.
    medians = {r: m for r, v in latest.items()
               if (m := metrics.rank_median(v["step_time"], v["past"])) is not None}
    table = metrics.rank_step_times(taken)
    assert {r: m for r, (m, _) in medians.items()} == pytest.approx(
        table["median_step_s"].to_dict())
    assert {r: n for r, (_, n) in medians.items()} == table["steps"].to_dict()
    # Stalled ranks.
    compiled = last_compiles(((c["t"], c["rank"]) for c in run.compile_events()), now)
    silent = metrics.stalled(now, {r: float(v["t"][-1]) for r, v in latest.items()},
                             {r: m for r, (m, _) in medians.items()}, compiled, FACTOR,
                             MIN_SILENCE_S)
    assert silent == pytest.approx(metrics.stalled_ranks(
        taken, now, FACTOR, MIN_SILENCE_S, compiles=run.compiles))
    # The phase, running and ended.
    past = any(bool(v["past"][-1]) for v in latest.values())
    last_compile = compiled and max(compiled.values())
    for meta in ({}, {"exit": {"code": 0}, "ended_at": now - 1}):
        assert metrics.phase_of(meta, now, pieces.last_t, last_compile or None, past) == \
            metrics.phase(meta, taken, run.compiles, now)
