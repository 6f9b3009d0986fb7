"""Figures worked out for every rank at once (metrics.common.stacked_by_length: one numpy call
per statistic, not one per rank) are each rank's own figure, exactly: the window rates,
the median step times, the spike and variance alerts, each against the rule written out for
one rank at a time."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui import fmt, metrics
from neurotui.live import alerts
from neurotui.live.stepstate import StepState
from neurotui.metrics.common import finite_or_none, positive, stacked_by_length
from neurotui.session.columns import Columns

LENGTHS = st.sampled_from([0, 1, 2, 3, 5, 19, 20, 40, 40, 41])


@st.composite
def rank_rows(draw: st.DrawFn, ranks: int = 6) -> dict[int, dict[str, np.ndarray]]:
    """Per rank: t (time order), step, step_time, samples covered, samples; NaNs included."""
    out = {}
    for rank in draw(st.lists(st.integers(0, 63), max_size=ranks, unique=True)):
        n = draw(LENGTHS)
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        t = np.cumsum(rng.choice([0.05, 0.1, 0.1, 0.5, 3.0], n)) + rng.uniform(0, 20)
        kind = draw(st.sampled_from(["steady", "spiky", "swinging", "zero", "unknown"]))
        step_time = rng.uniform(0.08, 0.12, n)
        if kind == "spiky" and n:
            step_time[rng.integers(0, n, 3)] *= 8
        elif kind == "swinging":
            step_time = rng.choice([0.05, 0.4], n)
        elif kind == "zero":
            step_time[:] = 0.0
        covered = rng.choice([16.0, 32.0, np.nan], n, p=[0.7, 0.2, 0.1])
        if kind == "unknown":
            covered[:] = np.nan
        samples = rng.choice([16.0, np.nan], n, p=[0.9, 0.1])
        out[rank] = {"t": t, "step": np.arange(n) + 1, "step_time": step_time,
                     "covered": covered, "samples": samples}
    return out


def one_rank_rate(t: np.ndarray, covered: np.ndarray, step_time: np.ndarray,
                  samples: np.ndarray, now: float) -> float | None:
    """The window rate's rule (metrics.window_rates) for one rank's rows in the window."""
    if np.isnan(covered).all():
        return None
    if len(t) >= 2:
        typical = float(np.median(np.diff(t)))
        span = max(t[-1] - t[0], (now - t[0]) - typical)
        return float(np.nansum(covered[1:])) / span if span > 0 else 0.0
    seconds, per_step = positive(step_time[0]), finite_or_none(samples[0])
    if seconds is None or per_step is None:
        return None
    return per_step / max(seconds, now - float(t[0]))


@settings(max_examples=300, deadline=None)
@given(rank_rows(), st.sampled_from([10.0, 25.0, 40.0, 200.0]), st.sampled_from([5.0, 30.0]))
def test_window_rates_are_each_ranks_own(ranks: dict, now: float, window_s: float) -> None:
    rows = [(r, (v["t"], v["covered"], v["step_time"], v["samples"])) for r, v in ranks.items()]
    rates = metrics.window_rates(rows, now, window_s)
    expected = {}
    for rank, (t, covered, step_time, samples) in rows:
        inside = (t > now - window_s) & (t <= now)
        if inside.any():
            expected[rank] = one_rank_rate(t[inside], covered[inside], step_time[inside],
                                           samples[inside], now)
    assert list(rates) == list(expected)  # in the order given: the job's sum adds them so
    for rank, rate in rates.items():
        want = expected[rank]
        assert (rate is None) == (want is None), rank
        assert rate is None or rate == want or (math.isnan(rate) and math.isnan(want)), rank


@settings(max_examples=150, deadline=None)
@given(rank_rows(), st.integers(0, 3))
def test_median_step_times_are_each_ranks_own(ranks: dict, warmup: int) -> None:
    state = StepState(0.0, warmup_steps=warmup)
    columns = {"t": [], "rank": [], "step": [], "samples": [], "loss": [], "dt": [],
               "attempt": []}
    for rank, v in ranks.items():
        n = len(v["t"])
        columns["t"] += v["t"].tolist()
        columns["rank"] += [rank] * n
        columns["step"] += v["step"].tolist()
        columns["samples"] += v["samples"].tolist()
        columns["loss"] += [1.0] * n
        columns["dt"] += v["step_time"].tolist()
        columns["attempt"] += [0] * n
    if not columns["t"]:
        return
    order = np.argsort(columns["t"], kind="stable")
    state.add(Columns({k: np.asarray(c)[order] for k, c in columns.items()}))
    medians = state.rank_medians()
    expected = {rank: m for rank, mine in sorted(state.latest().items())
                if (m := metrics.rank_median(mine.cols["step_time"],
                                             mine.cols["past"].astype(bool))) is not None}
    assert medians == expected
    assert list(medians) == list(expected)


def one_rank_spikes(recent: dict, since: float) -> list[str]:
    found = []
    for rank, cols in recent.items():
        times = cols["step_time"]
        if len(times) < 5:
            continue
        median = float(np.median(times))
        if median <= 0:
            continue
        for i in np.flatnonzero((times >= alerts.SPIKE_FACTOR * median) & (cols["t"] > since)):
            found.append((float(cols["t"][i]), f"rank {rank} step {int(cols['step'][i])} took "
                          f"{fmt.seconds(times[i])} ({times[i] / median:.0f}x its median "
                          f"{fmt.seconds(median)})"))
    found.sort(reverse=True)
    return [text for _, text in found]


def one_rank_swings(recent: dict, compiles: Columns | None) -> list[tuple]:
    swinging = []
    for rank, cols in recent.items():
        times = cols["step_time"]
        hit = metrics.compile_hits(cols["t"], cols["t"] - times, np.full(len(times), rank),
                                   compiles)
        times = times[~hit] if not hit.all() else times
        if len(times) < alerts.VARIANCE_MIN_STEPS:
            continue
        median = float(np.median(times))
        if median <= 0:
            continue
        p10, p90 = np.percentile(times, [10, 90])
        cv = float(times.std() / times.mean())
        if p90 / median >= alerts.VARIANCE_P90_RATIO or cv >= alerts.VARIANCE_CV:
            swinging.append((cv, int(rank), median, float(p10), float(p90), len(times)))
    return sorted(swinging, reverse=True)


@settings(max_examples=300, deadline=None)
@given(rank_rows(), st.lists(st.tuples(st.floats(0, 40), st.sampled_from([None, 0, 1, 5, 9])),
                             max_size=3),
       st.sampled_from([-math.inf, 10.0, 20.0]))
def test_spike_and_variance_alerts_are_each_ranks_own(ranks: dict, compiled: list,
                                                       since: float) -> None:
    recent = {r: {"t": v["t"], "step": v["step"], "step_time": v["step_time"]}
              for r, v in ranks.items()}
    compiles = Columns.of_records([{"t": t, "rank": r} for t, r in compiled], ("t", "rank")) \
        if compiled else None
    assert alerts.step_spikes(recent, since) == one_rank_spikes(recent, since)
    swings = one_rank_swings(recent, compiles)
    alert = alerts.step_variance(recent, compiles)
    assert (alert is None) == (not swings)
    if alert is not None:
        shown = [f"rank {rank}: median {fmt.seconds(med)}, p10 {fmt.seconds(p10)}, p90 "
                 f"{fmt.seconds(p90)} over its last {n} steps (CV {cv:.2f})"
                 for cv, rank, med, p10, p90, n in swings[:3]]
        assert list(alert.evidence[:len(shown)]) == shown


def test_ranks_are_stacked_by_length_in_the_order_met() -> None:
    columns = {7: (np.arange(3.0),), 2: (np.arange(5.0),), 4: (np.arange(3.0) + 10,)}
    groups = [(keys, [a.tolist() for a in arrays]) for keys, arrays in
              stacked_by_length(columns)]
    assert groups == [([7, 4], [[[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]]),
                      ([2], [[[0.0, 1.0, 2.0, 3.0, 4.0]]])]


def test_step_sources_of_coded_columns() -> None:
    codes = Columns({"src": np.array([2, 2, 0, 2], dtype=np.int8)})
    assert metrics.steps_sources(codes, ("probe", "log", "auto")) == {"probe", "auto"}


def test_a_rank_whose_every_step_met_a_compile_is_judged_on_all_of_them() -> None:
    times = np.array([0.05, 0.4] * 15)
    t = np.cumsum(times)
    recent = {3: {"t": t, "step": np.arange(1, 31), "step_time": times},
              5: {"t": t, "step": np.arange(1, 31), "step_time": times}}
    # A compile of rank 3 inside each of its steps, and one of rank 5 inside its first.
    compiles = Columns.of_records([*({"t": float(x), "rank": 3} for x in t - times / 2),
                                   {"t": float(t[0] - 0.01), "rank": 5}], ("t", "rank"))
    alert = alerts.step_variance(recent, compiles)
    swings = one_rank_swings(recent, compiles)
    assert {rank: n for _, rank, *_, n in swings} == {3: 30, 5: 29}
    assert alert is not None
    assert alert.evidence[:2] == tuple(
        f"rank {rank}: median {fmt.seconds(med)}, p10 {fmt.seconds(p10)}, p90 "
        f"{fmt.seconds(p90)} over its last {n} steps (CV {cv:.2f})"
        for cv, rank, med, p10, p90, n in swings)
