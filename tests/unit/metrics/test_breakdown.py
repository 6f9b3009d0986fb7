"""The step breakdown (metrics/breakdown.py): its rule on hand-made runs, and its two forms
held equal on random runs handed over in random pieces (as the live model takes them)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui.live.stepstate import StepState
from neurotui.metrics import breakdown as bd
from tests.strategies import Run, runs

T0 = 100.0


def steps_and_phases(per_rank: dict[int, list[dict[str, float]]], dt: float | None = None,
                     attempt: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Step and phase tables of ranks whose steps took the phases given (dt: their sum, or
    `dt`), one after the other from T0."""
    steps, phases = [], []
    for rank, rows in per_rank.items():
        t = T0 + rank * 0.001
        for n, p in enumerate(rows, start=1):
            step_dt = dt if dt is not None else sum(p.values())
            t += step_dt
            steps.append({"t": t, "rank": rank, "step": n, "samples": 16.0, "loss": 1.0,
                          "dt": step_dt, "src": "probe", "attempt": attempt})
            if p:
                phases.append({"t": t, "rank": rank, **p})
    table = pd.DataFrame(phases, columns=["t", "rank", *dict.fromkeys(
        k for p in phases for k in p if k not in ("t", "rank"))])
    return (pd.DataFrame(steps).sort_values(["t", "step"], ignore_index=True),
            table.sort_values("t", kind="stable", ignore_index=True))


def starved(n: int = 80) -> dict[str, float]:
    return {"data": 0.30, "forward": 0.05, "backward": 0.09, "optimizer": 0.01}


def healthy() -> dict[str, float]:
    return {"data": 0.002, "forward": 0.05, "backward": 0.09, "optimizer": 0.01}


def test_a_starved_loader_is_the_largest_share_and_a_healthy_one_is_not() -> None:
    steps, phases = steps_and_phases({0: [starved()] * 60, 1: [starved()] * 60})
    got = bd.step_breakdown(steps, phases)
    assert got.job is not None and got.job.largest() == "data"
    assert got.job.names == ("data", "forward", "backward", "optimizer")
    assert got.job.share("data") == pytest.approx(0.30 / 0.45)
    assert sum(got.job.shares) == pytest.approx(1.0)
    assert [s.rank for s in got.ranks] == [0, 1]
    assert got.job.steps == 2 * 50  # the window: the last 50 steps past warm-up of each rank
    steps, phases = steps_and_phases({0: [healthy()] * 60})
    job = bd.step_breakdown(steps, phases).job
    assert job is not None and job.largest() == "backward"


def test_warm_up_steps_do_not_count() -> None:
    rows = [{"data": 5.0, "forward": 0.1}] * 10 + [{"data": 0.01, "forward": 0.1}] * 5
    steps, phases = steps_and_phases({0: rows})
    job = bd.step_breakdown(steps, phases).job
    assert job is not None and job.steps == 5 and job.median_s[0] == pytest.approx(0.01)


def test_time_no_phase_covers_is_other_only_when_it_matters() -> None:
    steps, phases = steps_and_phases({0: [{"data": 0.01, "forward": 0.05}] * 30}, dt=0.1)
    job = bd.step_breakdown(steps, phases).job
    assert job is not None and job.names == ("data", "forward", "other")
    assert job.median_s[-1] == pytest.approx(0.04)
    assert job.share("other") == pytest.approx(0.4)
    # 2% of the step unaccounted (the probe call, a print): no `other`.
    steps, phases = steps_and_phases({0: [{"data": 0.01, "forward": 0.088}] * 30}, dt=0.1)
    job = bd.step_breakdown(steps, phases).job
    assert job is not None and job.names == ("data", "forward")


def test_the_phase_that_grew_is_marked_against_the_steady_baseline() -> None:
    before = [{"data": 0.02, "forward": 0.05, "backward": 0.09}] * 70
    after = [{"data": 0.05, "forward": 0.051, "backward": 0.09}] * 50
    steps, phases = steps_and_phases({0: before + after, 1: before + after})
    got = bd.step_breakdown(steps, phases)
    assert got.job is not None and got.job.grew == bd.Growth("data", 0.02, 0.05)
    assert got.job.grew.ratio == pytest.approx(1.5)
    assert all(s.grew is not None and s.grew.phase == "data" for s in got.ranks)
    # A steady run: nothing grew; under 10% or under 1 ms is not growth.
    steps, phases = steps_and_phases({0: before + before})
    assert bd.step_breakdown(steps, phases).job.grew is None  # type: ignore[union-attr]
    small = [{"data": 0.0205, "forward": 0.05, "backward": 0.09}] * 50
    steps, phases = steps_and_phases({0: before + small})
    assert bd.step_breakdown(steps, phases).job.grew is None  # type: ignore[union-attr]
    # Too few steps for a baseline apart from the window: not judged.
    steps, phases = steps_and_phases({0: before[:40] + after[:40]})
    assert bd.step_breakdown(steps, phases).job.grew is None  # type: ignore[union-attr]


def test_compile_hit_steps_are_left_out() -> None:
    rows = [{"data": 0.01, "forward": 0.1}] * 30
    steps, phases = steps_and_phases({0: rows})
    slow_t = float(steps["t"].iloc[20])
    phases.loc[phases["t"] == slow_t, "forward"] = 50.0
    steps.loc[steps["t"] == slow_t, "dt"] = 50.0
    compiles = pd.DataFrame({"t": [slow_t - 0.05], "rank": [None]})
    with_hit = bd.step_breakdown(steps, phases).job
    without = bd.step_breakdown(steps, phases, compiles).job
    assert with_hit is not None and without is not None
    assert (with_hit.steps, without.steps) == (20, 19)


def test_no_phases_no_breakdown() -> None:
    steps, _ = steps_and_phases({0: [{}] * 30}, dt=0.1)
    assert bd.step_breakdown(steps, pd.DataFrame(columns=["t", "rank"])) == \
        bd.StepBreakdown(None, ())
    assert bd.breakdown_history(steps, pd.DataFrame(columns=["t", "rank"]), T0, T0 + 5) is None
    assert bd.steady_phase_medians(steps, pd.DataFrame(columns=["t", "rank"])) == {}
    assert "probe.step(" in bd.NO_PHASES_NOTE and "phases=" in bd.NO_PHASES_NOTE


def test_steady_phase_medians_for_compare() -> None:
    rows = [{"data": 9.0, "step": 9.0}] * 10 + [{"data": 0.01, "step": 0.1}] * 20
    steps, phases = steps_and_phases({0: rows, 1: rows})
    assert bd.steady_phase_medians(steps, phases) == pytest.approx(
        {"data": 0.01, "step": 0.1})
    assert list(bd.steady_phase_medians(steps, phases)) == ["data", "step"]


def test_phase_order() -> None:
    assert bd.phase_order(["zeta", "other", "optimizer", "data", "alpha", "forward"]) == (
        "data", "forward", "optimizer", "alpha", "zeta", "other")


def test_history_shares_per_bucket() -> None:
    rows = [{"data": 0.1, "forward": 0.3}] * 40 + [{"data": 0.3, "forward": 0.1}] * 40
    steps, phases = steps_and_phases({0: rows})
    end = float(steps["t"].max())
    h = bd.breakdown_history(steps, phases, T0, end, buckets=8)
    assert h is not None and h.names == ("data", "forward")
    assert h.bucket_s == 8.0  # 32 s of steps in 8 buckets of a width that doubles from 1 s
    data = [x for x in h.shares[0] if math.isfinite(x)]
    assert data[1] == pytest.approx(0.25) and data[-1] == pytest.approx(0.75)


# -- the two forms ---------------------------------------------------------------------------

@st.composite
def phased_runs(draw: st.DrawFn) -> tuple[Run, pd.DataFrame]:
    """A random run and the phases its steps reported: some steps none, some a few names,
    some NaN; names coming and going."""
    run = draw(runs())
    names = draw(st.lists(st.sampled_from(["data", "forward", "backward", "extra"]),
                          min_size=1, max_size=4, unique=True))
    rows = []
    for t, rank in zip(run.steps["t"], run.steps["rank"], strict=True):
        if draw(st.integers(0, 9)) == 0:
            continue  # this step reported no phases
        picked = [n for n in names if draw(st.integers(0, 5))]
        values = {n: draw(st.one_of(st.floats(0.0, 1.0), st.just(math.nan))) for n in picked}
        if values:
            rows.append({"t": float(t), "rank": int(rank), **values})
    phases = pd.DataFrame(rows, columns=["t", "rank", *names])
    return run, phases


def _assert_same(got: bd.StepBreakdown, expected: bd.StepBreakdown) -> None:
    assert (got.job is None) == (expected.job is None)
    pairs = list(zip(got.ranks, expected.ranks, strict=True))
    if got.job is not None:
        pairs.append((got.job, expected.job))  # type: ignore[arg-type]
    for a, b in pairs:
        assert (a.rank, a.names, a.steps) == (b.rank, b.names, b.steps)
        assert a.median_s == pytest.approx(b.median_s)
        assert a.shares == pytest.approx(b.shares)
        assert a.step_s == pytest.approx(b.step_s)
        assert (a.grew is None) == (b.grew is None)
        if a.grew is not None and b.grew is not None:
            assert a.grew.phase == b.grew.phase
            assert (a.grew.before_s, a.grew.now_s) == pytest.approx(
                (b.grew.before_s, b.grew.now_s))


def _assert_same_history(got: bd.BreakdownHistory | None,
                         expected: bd.BreakdownHistory | None) -> None:
    assert (got is None) == (expected is None)
    if got is None or expected is None:
        return
    assert (got.start, got.bucket_s, got.names) == (expected.start, expected.bucket_s,
                                                    expected.names)
    for a, b in zip(got.shares, expected.shares, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.step_s, expected.step_s, rtol=1e-9)


@settings(max_examples=80, deadline=None)
@given(phased_runs(), st.integers(1, 8), st.integers(1, 8), st.sampled_from([2, 4, 8]),
       st.sampled_from([1, 3, 1_000_000]))
def test_batch_and_incremental_forms_agree(case: tuple[Run, pd.DataFrame], window: int,
                                           baseline: int, buckets: int, chunk: int) -> None:
    run, phases = case
    state = StepState(started_at=T0)
    state.breakdown = bd.BreakdownTracker(T0, window=window, baseline=baseline,
                                          buckets=buckets)
    before: dict = {}
    for stage in run.stages:
        taken = run.taken(stage)
        new = taken[~taken.index.isin(run.taken(before).index)] if before else taken
        keys = set(zip(new["t"], new["rank"], strict=True))
        mine = [(t, r) in keys for t, r in zip(phases["t"], phases["rank"], strict=True)]
        state.add(new.reset_index(drop=True), chunk, phases=phases[mine])
        before = stage
        if not len(taken):
            continue
        done = set(zip(taken["t"], taken["rank"], strict=True))
        so_far = phases[[(t, r) in done for t, r in
                         zip(phases["t"], phases["rank"], strict=True)]]
        expected = bd.step_breakdown(taken, so_far, run.compiles, window=window,
                                     baseline=baseline)
        _assert_same(state.breakdown.result(run.compiles), expected)
        end = float(taken["t"].max()) + 3.0
        _assert_same_history(state.breakdown.history(end), bd.breakdown_history(
            taken, so_far, T0, end, buckets=buckets))
