"""StepState / SteadyTracker give metrics' figures, on random runs arriving in random pieces."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui import metrics
from neurotui.live.stepstate import StepState
from tests.strategies import COLUMNS, Run, runs


@settings(max_examples=60, deadline=None)
@given(runs(), st.sampled_from([1, 3, 1_000_000]))
def test_rows_handed_over_once_match_metrics(run: Run, batch_rows: int) -> None:
    """As a live reader hands them over (take_steps): each stage's new rows only, in time
    order, some earlier than rows of other ranks already taken; the steady figures asked for
    after each stage, as the dashboard does, and worked out in batches of any size."""
    state = StepState(started_at=100.0, recent=10_000)
    state.tracker.batch_rows = batch_rows
    before: dict = {}
    for stage in run.stages:
        taken = run.taken(stage)
        new = taken[~taken.index.isin(run.taken(before).index)] if before else taken
        state.add(new.reset_index(drop=True))
        state.tracker.result(run.compiles)
        before = stage
    assert state.late_rows == 0 and state.rows == len(run.steps)
    _assert_matches(state, run)


def _assert_matches(state: StepState, run: Run) -> None:
    df, compiles = run.steps, run.compiles
    now = float(df["t"].max()) + 12.0
    assert state.total_samples == pytest.approx(metrics.total_samples(df), nan_ok=True)
    assert state.throughput(now) == pytest.approx(metrics.current_throughput(df, now))
    assert state.latest_step() == metrics.latest_step(df)
    per_rank = metrics.rank_step_times(df)
    medians = state.rank_medians()
    assert {r: m for r, (m, _) in medians.items()} == pytest.approx(
        per_rank["median_step_s"].to_dict())
    expected = metrics.steady_state(df, compiles=compiles)
    got = state.tracker.result(compiles)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert vars(got) == pytest.approx(vars(expected))
    events = run.compile_events()
    assert state.stalled(now, medians, events) == pytest.approx(
        metrics.stalled_ranks(df, now, compiles=compiles))
    assert state.phase({}, events, now) == metrics.phase({}, df, compiles, now)


def test_a_row_before_its_ranks_last_is_left_out_and_counted() -> None:
    """A clock that went back: the row cannot be placed in the figures any more."""
    rows = [{"t": 100.0 + n, "rank": 0, "step": n, "samples": 8.0, "loss": 1.0, "dt": 1.0,
             "src": "probe", "attempt": 0} for n in (1, 2, 3)]
    state = StepState(started_at=100.0)
    state.add(pd.DataFrame(rows[:2], columns=COLUMNS))
    later = {**rows[2], "step": 4, "t": 104.0}
    state.add(pd.DataFrame([{**rows[2], "t": 101.5}, later], columns=COLUMNS))
    assert (state.late_rows, state.rows, state.latest_step()) == (1, 3, 4)
    kept = pd.DataFrame([*rows[:2], later], columns=COLUMNS)
    assert state.total_samples == metrics.total_samples(kept) == 32.0  # step 4 covers 3 too


def test_history_buckets_widen_and_keep_totals() -> None:
    from neurotui.live.history import RunHistory

    h = RunHistory(0.0, max_buckets=8, bucket_s=1.0)
    t = np.arange(0.5, 40.0, 1.0)
    h.add(t, np.full(len(t), 0.5), np.full(len(t), 10.0))
    series = h.series(40.0)
    assert h.bucket_s == 8.0  # 40 s in 8 buckets of at most: 1 -> 2 -> 4 -> 8 s
    assert len(series.samples_per_s) == 5
    assert np.allclose(series.samples_per_s, 10.0)
    assert np.allclose(series.step_time, 0.5)


def test_a_bucket_without_steps_is_a_gap_not_a_zero_step_time() -> None:
    from neurotui.live.history import RunHistory

    h = RunHistory(0.0, bucket_s=1.0)
    h.add(np.array([0.5, 2.5]), np.array([0.1, 0.3]), np.array([1.0, 1.0]))
    series = h.series(3.0)
    assert series.step_time[0] == 0.1 and math.isnan(series.step_time[1])
    assert series.samples_per_s[1] == 0.0  # no samples in that second: a real zero
