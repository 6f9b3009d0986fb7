"""The figures (neurotui.metrics) on small hand-made step tables whose right answers are
worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui import metrics as m
from neurotui.metrics.steady import overlaps_compile

TRN1_2XL = 1.34375  # USD/h, us-east-1, built-in table
INF2_XL = 0.7582
T0 = 1_000_000.0


def make_steps(ranks: int = 2, n: int = 500, step_s: float = 0.1, batch: float = 16,
               t0: float = T0, attempt: int = 0, first_step: int = 1, with_dt: bool = True,
               warmup_s: float | None = None, every: int = 1) -> pd.DataFrame:
    """Lock-step ranks; the first 10 steps take `warmup_s` each when given (compile)."""
    rows = []
    for rank in range(ranks):
        t = t0
        for i in range(n):
            step = first_step + i
            took = warmup_s if warmup_s is not None and i < 10 else step_s
            t += took
            if i % every:
                continue
            rows.append({"t": t, "rank": rank, "step": step, "samples": float(batch),
                         "loss": 1.0, "dt": took if with_dt else math.nan, "src": "probe",
                         "attempt": attempt})
    return pd.DataFrame(rows).sort_values("t", kind="stable").reset_index(drop=True)


def compiles(*events: tuple[float, int | None]) -> pd.DataFrame:
    return pd.DataFrame([{"t": t, "rank": r, "what": "compile"} for t, r in events])


EMPTY = pd.DataFrame(columns=["t", "rank", "step", "samples", "loss", "dt", "src", "attempt"])


# -- the hand-checked reference figures ------------------------------------------------------

def test_reference_figures_320_samples_per_s_and_857302_per_dollar() -> None:
    """0.1 s/step, 2 workers, batch 16: 2 x 16 / 0.1 = 320 samples/s;
    320 x 3600 / 1.34375 = 857,302.33 samples per dollar."""
    steady = m.steady_state(make_steps())
    assert steady is not None
    assert steady.samples_per_s == pytest.approx(320.0)
    assert steady.step_time_median == pytest.approx(0.1)
    assert steady.step_time_mean == pytest.approx(0.1)
    assert steady.step_time_p90 == pytest.approx(0.1)
    assert (steady.steps, steady.ranks, steady.warmup_steps) == (2 * 490, 2, 10)
    spd = m.samples_per_dollar(steady.samples_per_s, TRN1_2XL)
    assert spd == pytest.approx(857_302.3255813953)
    assert round(spd) == 857_302
    assert m.cost_per_million_samples(320, TRN1_2XL) == pytest.approx(1.16644965)
    # ImageNet-1k train split, 1,281,167 images: 4003.6 s = 1.1121 h x $1.34375
    epoch = m.per_epoch(1_281_167, 320, TRN1_2XL)  # an ImageNet epoch: 4,004 s, $1.49
    assert epoch.remaining_usd == pytest.approx(1.49441680)
    assert epoch.remaining_s == pytest.approx(1_281_167 / 320)
    assert m.per_epoch(1_281_167, 320).remaining_usd is None  # no price: time only


def test_faster_but_dearer_instance_wins_or_loses_exactly_by_the_ratio() -> None:
    """trn1.2xlarge costs 1.34375/0.7582 = 1.7723x inf2.xlarge. If inf2 is 1.275x slower
    (0.1275 vs 0.1 s/step), inf2 gives 1.7723/1.275 = 1.390x the samples per dollar (~39%
    better, the study's finding); at exactly 1.7723x slower they tie; slower still, trn1 wins."""
    trn1 = m.steady_state(make_steps(step_s=0.1)).samples_per_s
    inf2 = m.steady_state(make_steps(step_s=0.1275)).samples_per_s
    assert trn1 > inf2  # trn1 is faster in absolute terms
    assert m.samples_per_dollar(inf2, INF2_XL) == pytest.approx(1_191_676.88, rel=1e-8)
    ratio = m.relative_price_performance(inf2, INF2_XL, trn1, TRN1_2XL)
    assert ratio == pytest.approx(1.3900310849742166)
    price_ratio = TRN1_2XL / INF2_XL
    tie = m.relative_price_performance(320 / price_ratio, INF2_XL, 320, TRN1_2XL)
    assert tie == pytest.approx(1.0)
    worse = m.relative_price_performance(320 / (price_ratio * 1.01), INF2_XL, 320, TRN1_2XL)
    assert worse == pytest.approx(1 / 1.01) and worse < 1


# -- steady state --------------------------------------------------------------------------

def test_warmup_steps_are_left_out() -> None:
    steps = make_steps(warmup_s=60.0)  # steps 1..10 take 60 s each (compile)
    steady = m.steady_state(steps)
    assert steady.samples_per_s == pytest.approx(320.0)
    assert steady.step_time_median == pytest.approx(0.1)
    everything = m.steady_state(steps, warmup_steps=0)
    assert everything.step_time_mean == pytest.approx((10 * 60 + 490 * 0.1) / 500)
    assert everything.samples_per_s == pytest.approx(2 * 16 * 500 / (10 * 60 + 490 * 0.1))
    assert m.steady_state(steps, warmup_steps=600) is None


def test_step_time_derived_from_t_when_dt_is_unknown() -> None:
    steady = m.steady_state(make_steps(with_dt=False))
    assert steady.samples_per_s == pytest.approx(320.0)
    assert steady.step_time_median == pytest.approx(0.1)
    # log lines every 10 steps (samples is per step): 10 steps' time over 10 steps
    sparse_steps = make_steps(with_dt=False, every=10)
    sparse = m.steady_state(sparse_steps)
    assert sparse.step_time_median == pytest.approx(0.1)
    assert sparse.samples_per_s == pytest.approx(320.0)
    assert m.current_throughput(sparse_steps, now=T0 + 49.1) == pytest.approx(320.0)
    # each record after the first stands for 10 steps: 2 ranks x (16 + 49 x 160)
    assert m.total_samples(sparse_steps) == 2 * (16 + 49 * 160)


def test_per_epoch_step_counter_resets() -> None:
    """A script that numbers steps per epoch: only the run's first steps are warm-up."""
    epoch1 = make_steps(ranks=1, n=50)
    epoch2 = make_steps(ranks=1, n=50, t0=T0 + 5.0)
    steps = pd.concat([epoch1, epoch2], ignore_index=True)
    steady = m.steady_state(steps)
    assert steady.steps == 90  # 50 - 10 in epoch 1, all 50 of epoch 2
    assert steady.step_time_median == pytest.approx(0.1)
    assert m.total_samples(steps) == 16 * 100


def test_step_time_statistics() -> None:
    steps = make_steps(ranks=1, n=30, step_s=0.1)
    # steady steps 11..30 (20 rows): make 5 of them 0.3 s
    slow = steps["step"].isin([12, 14, 16, 18, 20])
    steps.loc[slow, "dt"] = 0.3
    steady = m.steady_state(steps)
    assert steady.steps == 20
    assert steady.step_time_median == pytest.approx(0.1)
    assert steady.step_time_mean == pytest.approx((15 * 0.1 + 5 * 0.3) / 20)
    assert steady.step_time_p90 == pytest.approx(0.3)
    assert steady.samples_per_s == pytest.approx(16 * 20 / 3.0)


def test_each_attempt_has_its_own_warmup() -> None:
    first = make_steps(n=300)
    second = make_steps(n=100, first_step=250, attempt=1, t0=T0 + 100, warmup_s=30.0)
    steady_rows = m.steady_steps(pd.concat([first, second]))
    again = steady_rows[steady_rows["attempt"] == 1]
    assert again["step"].min() == 260  # 250..259 are warm-up again
    assert m.steady_state(pd.concat([first, second])).step_time_median == pytest.approx(0.1)


def test_steps_with_a_compile_are_left_out() -> None:
    steps = make_steps(ranks=1, n=100)
    hit = steps["step"] == 50
    steps.loc[hit, "dt"] = 20.0  # a recompile in the middle of step 50
    t50 = float(steps.loc[hit, "t"].iloc[0])
    with_compile = m.steady_state(steps, compiles=compiles((t50 - 5.0, 0)))
    assert with_compile.steps == 89
    assert with_compile.step_time_mean == pytest.approx(0.1)
    assert m.steady_state(steps).steps == 90
    # an event of another rank does not count; one with no rank does
    assert m.steady_state(steps, compiles=compiles((t50 - 5.0, 1))).steps == 90
    assert m.steady_state(steps, compiles=compiles((t50 - 5.0, None))).steps == 89


def overlaps_compile_per_rank(df: pd.DataFrame, compiles: pd.DataFrame) -> pd.Series:
    """The previous _overlaps_compile (a search per rank group, .loc assignment): the
    semantics the vectorised one must keep."""
    ct = pd.to_numeric(compiles["t"], errors="coerce")
    crank = pd.to_numeric(compiles["rank"], errors="coerce")
    anyrank = np.sort(ct[crank.isna()].dropna().to_numpy())
    hit = pd.Series(False, index=df.index)
    for rank, rows in df[df["step_time"].notna()].groupby("rank"):
        times = np.sort(np.concatenate([anyrank, ct[crank == rank].dropna().to_numpy()]))
        if not len(times):
            continue
        end = rows["t"].to_numpy()
        start = end - rows["step_time"].to_numpy()
        inside = np.searchsorted(times, end, "right") - np.searchsorted(times, start, "right")
        hit.loc[rows.index] = inside > 0
    return hit


def test_compile_overlap_per_rank_and_for_all_ranks() -> None:
    """Steps (t - step_time, t]: 1 s steps ending at 11..16 on ranks 0-2, two attempts of
    rank 0, a rank-less row, rank 1 without dt (its first step's length is unknown)."""
    rows = [{"t": 10.0 + k, "rank": r, "step": k, "samples": 16.0, "dt": 1.0, "attempt": 0}
            for k in range(1, 7) for r in range(3)]
    rows += [{"t": 30.0 + k, "rank": 0, "step": k, "samples": 16.0, "dt": 1.0, "attempt": 1}
             for k in range(1, 4)]
    rows.append({"t": 16.0, "rank": np.nan, "step": 6, "samples": 16.0, "dt": 1.0,
                 "attempt": 0})
    steps = pd.DataFrame(rows).sample(frac=1.0, random_state=3)  # any order in
    steps.loc[steps["rank"] == 1, "dt"] = np.nan
    df = m.with_step_time(steps)
    events = compiles((12.5, 0),  # inside rank 0's step ending at 13
                      (14.0, 1),  # at the end of rank 1's step 14 (in), start of 15 (out)
                      (11.0, 1),  # rank 1's first step: length unknown, so no hit
                      (15.2, None),  # every rank's step ending at 16
                      (31.5, 0),  # rank 0, attempt 1
                      (12.2, 7),  # a rank with no steps
                      (math.nan, 2))  # no time: ignored
    hit = overlaps_compile(df, events)
    pd.testing.assert_series_equal(hit, overlaps_compile_per_rank(df, events),
                                   check_names=False)
    hits = df.loc[hit, ["rank", "t"]]
    assert sorted(map(tuple, hits.to_numpy().tolist())) == [
        (0.0, 13.0), (0.0, 16.0), (0.0, 32.0), (1.0, 14.0), (1.0, 16.0), (2.0, 16.0)]
    # the rank-less row is never hit; without rank-less events only ranks 0 and 1 are
    own = events[events["rank"].notna()]
    pd.testing.assert_series_equal(overlaps_compile(df, own),
                                   overlaps_compile_per_rank(df, own), check_names=False)
    assert set(df.loc[overlaps_compile(df, own), "rank"]) == {0, 1}


def with_step_time_by_groupby(steps: pd.DataFrame) -> pd.DataFrame:
    """with_step_time written with sort_values and groupby: a read (rows of a rank sharing
    one stamp) has the time since the rank's previous stamp over the steps since then."""
    df = steps.sort_values(["attempt", "rank", "t", "step"], kind="stable").copy()
    grouped = df.groupby(["attempt", "rank"], sort=False)
    elapsed, advanced = grouped["t"].diff(), grouped["step"].diff()
    rising = advanced > 0
    by_read = [df["attempt"], df["rank"], (elapsed != 0).cumsum()]
    read_elapsed = elapsed.groupby(by_read).transform(lambda x: x.iloc[0])
    read_advanced = advanced.groupby(by_read).transform(lambda x: x.sum(skipna=False))
    derived = (read_elapsed / read_advanced).where(
        rising & (read_elapsed > 0) & (read_advanced > 0))
    dt = pd.to_numeric(df["dt"], errors="coerce")
    df["step_time"] = dt.where(np.isfinite(dt) & (dt > 0)).fillna(derived)
    df["steps_covered"] = advanced.where(rising, 1.0).astype(float)
    df["samples_covered"] = pd.to_numeric(df["samples"]) * df["steps_covered"]
    return df


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 40), time_sorted=st.booleans(),
       missing_keys=st.booleans())
def test_vectorised_step_times_match_the_groupby_ones(data: st.DataObject, n: int,
                                                      time_sorted: bool,
                                                      missing_keys: bool) -> None:
    """Same rows, order, values and warm-up flags as the groupby version, in the reader's
    time order (the radix-sort path) or any order, with resets, ties, NaNs."""
    ints = st.integers(0, 3)
    keys = st.one_of(ints, st.just(math.nan)) if missing_keys else ints
    maybe = st.one_of(st.floats(0.0, 2.0), st.just(math.nan))
    rows = [{"t": data.draw(st.sampled_from([1.0, 2.0, 2.5, 3.0, 7.0, math.nan])),
             "rank": data.draw(keys), "step": data.draw(st.integers(0, 12)),
             "samples": 16.0, "dt": data.draw(maybe), "attempt": data.draw(keys)}
            for _ in range(n)]
    steps = pd.DataFrame(rows)
    if time_sorted:
        steps = steps.sort_values(["t", "step"], kind="stable")
    got, want = m.with_step_time(steps), with_step_time_by_groupby(steps)
    pd.testing.assert_frame_equal(got, want)
    warmup = data.draw(st.integers(0, 5))
    # A rank's first step is the first it recorded (time order), its first known one.
    progress = (want["step"] - want.groupby(["attempt", "rank"])["step"].transform("first")
                ).groupby([want["attempt"], want["rank"]]).cummax()
    pd.testing.assert_series_equal(m.past_warmup(got, warmup), progress >= warmup,
                                   check_names=False)


def test_unknown_samples_gives_step_times_but_no_throughput() -> None:
    steps = make_steps()
    steps["samples"] = np.nan
    steady = m.steady_state(steps)
    assert steady.samples_per_s is None and steady.step_time_median == pytest.approx(0.1)


def test_empty_inputs() -> None:
    assert m.steady_state(EMPTY) is None
    assert len(m.throughput_series(EMPTY)) == 0
    assert m.current_throughput(EMPTY, now=T0) is None
    assert m.total_samples(EMPTY) == 0.0
    assert m.latest_step(EMPTY) is None
    assert len(m.rank_step_times(EMPTY)) == 0
    assert m.stalled_ranks(EMPTY, now=T0) == {}


# -- throughput over time ------------------------------------------------------------------

def test_throughput_series_sums_ranks_per_bucket() -> None:
    steps = make_steps(n=500)  # 50 s of steps after T0
    series = m.throughput_series(steps, bucket_s=10.0, start=T0, end=T0 + 50.0)
    assert list(series["t"]) == [T0 + 10 * i for i in range(5)]
    assert series["samples_per_s"].to_numpy() == pytest.approx([320.0] * 5, rel=0.01)
    assert series["samples"].sum() == pytest.approx(m.total_samples(steps))
    # without a start: from when the first step began (T0), not when it ended
    default = m.throughput_series(steps, bucket_s=10.0)
    assert default["t"].iloc[0] == pytest.approx(T0)
    assert default["samples_per_s"].to_numpy() == pytest.approx([320.0] * 5, rel=0.01)


def test_throughput_series_shows_compile_gaps_as_zero() -> None:
    before = make_steps(n=95, t0=T0)  # T0+0.1 .. T0+9.5
    after = make_steps(n=95, t0=T0 + 30.0)  # T0+30.1 .. T0+39.5, after a 20 s compile stall
    series = m.throughput_series(pd.concat([before, after]), bucket_s=10.0, start=T0,
                                 end=T0 + 40.0)
    # 2 ranks x 16 x 95 steps = 3040 samples per 10 s bucket
    assert series["samples_per_s"].to_numpy() == pytest.approx([304.0, 0.0, 0.0, 304.0])


def test_throughput_series_partial_last_bucket() -> None:
    steps = make_steps(n=150)  # 15 s
    short = m.throughput_series(steps, bucket_s=10.0, start=T0, end=T0 + 14.0)
    assert len(short) == 1  # the 4 s tail is less than half a bucket
    longer = m.throughput_series(steps, bucket_s=10.0, start=T0, end=T0 + 15.0)
    assert list(longer["seconds"]) == [10.0, pytest.approx(5.0)]
    assert longer["samples_per_s"].iloc[-1] == pytest.approx(320.0, rel=0.01)


def test_current_throughput() -> None:
    steps = make_steps(n=500)  # ends at T0+50
    assert m.current_throughput(steps, now=T0 + 50.0) == pytest.approx(320.0)
    assert m.current_throughput(steps, now=T0 + 50.05) == pytest.approx(320.0)
    # right from the first steps, not diluted by an empty window
    assert m.current_throughput(steps, now=T0 + 1.0) == pytest.approx(320.0)
    # a stall drags it down, then to zero once the window holds no step
    stalled = m.current_throughput(steps, now=T0 + 60.0)
    assert 0 < stalled < 320 * 0.75
    assert m.current_throughput(steps, now=T0 + 90.0) == 0.0
    # slow sparse steps: 5 s per step, 16 samples, 2 ranks -> 6.4 samples/s
    slow = make_steps(n=20, step_s=5.0)
    assert m.current_throughput(slow, now=T0 + 100.0) == pytest.approx(6.4)


def test_totals_and_latest_step() -> None:
    steps = make_steps(n=100)
    assert m.total_samples(steps) == 2 * 16 * 100
    assert m.total_samples(steps, now=T0 + 5.0) == pytest.approx(2 * 16 * 50)
    assert m.latest_step(steps) == 100
    assert m.latest_step(steps, now=T0 + 5.0) == 50


# -- ranks ---------------------------------------------------------------------------------

def four_ranks_one_slow(slow_s: float = 0.13) -> pd.DataFrame:
    fast = make_steps(ranks=3, n=100)
    slow = make_steps(ranks=1, n=100, step_s=slow_s)
    slow["rank"] = 3
    return pd.concat([fast, slow], ignore_index=True)


def test_rank_step_times_and_stragglers() -> None:
    per_rank = m.rank_step_times(four_ranks_one_slow())
    assert list(per_rank.index) == [0, 1, 2, 3]
    assert per_rank["median_step_s"].to_numpy() == pytest.approx([0.1, 0.1, 0.1, 0.13])
    assert list(per_rank["steps"]) == [90, 90, 90, 90]
    assert m.find_stragglers(per_rank) == [3]  # 30% over the others, threshold 20%
    assert m.find_stragglers(per_rank, threshold=0.5) == []
    assert m.find_stragglers({0: 0.1, 1: 0.1}) == []
    assert m.find_stragglers({0: 0.1}) == []
    assert m.find_stragglers({0: 0.1, 1: 0.25}) == [1]


def test_rank_step_times_use_the_latest_attempt() -> None:
    old = four_ranks_one_slow()
    new = make_steps(ranks=4, n=50, attempt=1, t0=T0 + 100)
    per_rank = m.rank_step_times(pd.concat([old, new]))
    assert m.find_stragglers(per_rank) == []
    assert m.find_stragglers(m.rank_step_times(pd.concat([old, new]), attempt=0)) == [3]


def test_stalled_ranks() -> None:
    steps = make_steps(n=100)  # both ranks last step at T0+10
    rank1 = steps["rank"] == 1
    steps = steps[~(rank1 & (steps["step"] > 50))]  # rank 1 went quiet at T0+5
    assert m.stalled_ranks(steps, now=T0 + 10.0) == {}  # 5 s < min_silence_s
    stalled = m.stalled_ranks(steps, now=T0 + 19.0)
    assert list(stalled) == [1] and stalled[1] == pytest.approx(14.0)
    assert m.stalled_ranks(steps, now=T0 + 19.0, min_silence_s=1.0) == {
        0: pytest.approx(9.0), 1: pytest.approx(14.0)}
    assert m.stalled_ranks(steps, now=T0 + 19.0, min_silence_s=1.0, factor=100.0) == {
        1: pytest.approx(14.0)}
    # compiling is not stalling: a compile event restarts the rank's clock
    assert m.stalled_ranks(steps, now=T0 + 19.0, compiles=compiles((T0 + 18.0, 1))) == {}
    assert m.stalled_ranks(steps, now=T0 + 19.0, compiles=compiles((T0 + 18.0, 0))) == {
        1: pytest.approx(14.0)}
    assert m.stalled_ranks(steps, now=T0 + 19.0, compiles=compiles((T0 + 18.0, None))) == {}


# -- phase ---------------------------------------------------------------------------------

RUNNING = {"started_at": T0 - 60, "ended_at": None, "exit": None,
           "config": {"step_target": 500}}


def ended(code: int | None, signal: str | None = None, reason: str = "exited") -> dict:
    return {**RUNNING, "ended_at": T0 + 100,
            "exit": {"code": code, "signal": signal, "reason": reason, "attempts": 1}}


def test_phases_of_a_running_job() -> None:
    steps = make_steps(n=300, warmup_s=2.0)  # steps 1..10 end at T0+2 .. T0+20, 300 at +49
    none = pd.DataFrame(columns=["t", "rank", "what"])
    assert m.phase(RUNNING, EMPTY, none, now=T0) == "starting"
    assert m.phase(RUNNING, None, None, now=T0) == "starting"
    early = compiles((T0 - 30, None))
    assert m.phase(RUNNING, EMPTY, early, now=T0) == "compiling"
    assert m.phase(RUNNING, steps, early, now=T0 + 5.0) == "warm-up"
    assert m.phase(RUNNING, steps, early, now=T0 + 22.5) == "steady"
    late = compiles((T0 - 30, None), (T0 + 35.0, 0))
    assert m.phase(RUNNING, steps.iloc[:0], late, now=T0 + 10) == "compiling"
    midrun = steps[steps["t"] <= T0 + 34.0]
    assert m.phase(RUNNING, midrun, late, now=T0 + 36.0) == "compiling"
    assert m.phase(RUNNING, steps, late, now=T0 + 40.0) == "steady"
    assert m.phase(RUNNING, steps, late, now=T0 + 40.0, warmup_steps=250) == "warm-up"


def test_phases_of_an_ended_job() -> None:
    steps = make_steps(n=100)
    assert m.phase(ended(0), steps, None, now=T0 + 200) == "finished"
    assert m.phase(ended(1), steps, None, now=T0 + 200) == "crashed"
    assert m.phase(ended(None, "SIGKILL"), steps, None, now=T0 + 200) == "crashed"
    assert m.phase(ended(-15, "SIGTERM", "stopped by user"), steps, None,
                   now=T0 + 200) == "stopped"
    assert m.phase(ended(0, None, "stop_request"), steps, None, now=T0 + 200) == "stopped"
    assert m.phase({**RUNNING, "ended_at": T0 + 100}, steps, None, now=None) == "stopped"
    # a replay before the end still shows the running phase
    assert m.phase(ended(0), steps, None, now=T0 + 5.0) == "steady"
    # adopted after its supervisor died: the exit code is unknown, neither success nor crash
    assert m.phase(ended(None, None, "ended"), steps, None, now=T0 + 200) == "ended"
    assert set(m.PHASES) == {"starting", "compiling", "warm-up", "steady", "finished",
                             "crashed", "stopped", "ended"}


# -- cost ----------------------------------------------------------------------------------

def test_cost_so_far_bills_all_wall_time() -> None:
    assert m.cost_so_far(TRN1_2XL, T0, T0 + 3600) == pytest.approx(1.34375)
    assert m.cost_so_far(TRN1_2XL, T0, T0 + 7200, ended_at=T0 + 1800) == pytest.approx(
        1.34375 / 2)
    assert m.cost_so_far(TRN1_2XL, T0, None, ended_at=T0 + 1800) == pytest.approx(0.671875)
    assert m.cost_so_far(TRN1_2XL, T0, T0 - 5) == 0.0
    all_in = m.all_in_samples_per_dollar(320 * 3000, m.cost_so_far(TRN1_2XL, T0, T0 + 3600))
    assert all_in == pytest.approx(960_000 / 1.34375)  # 714,418.6: compile hour included


def test_projections() -> None:
    # step 100 of 500 at 0.1 s/step: 40 s, 40/3600 x 1.34375 = $0.0149306
    p = m.project_to_step(100, 500, 0.1, TRN1_2XL, spent_usd=1.0, now=T0)
    assert p.remaining_s == pytest.approx(40.0)
    assert p.remaining_usd == pytest.approx(0.014930555555)
    assert p.total_usd == pytest.approx(1.014930555555)
    assert p.eta == pytest.approx(T0 + 40.0)
    assert m.project_to_step(600, 500, 0.1, TRN1_2XL).remaining_s == 0.0
    no_price = m.project_to_step(100, 500, 0.1, None)
    assert no_price.remaining_usd is None and no_price.total_usd is None


NOTHING = [None, 0, 0.0, -1.0, math.nan, math.inf, "x"]


@pytest.mark.parametrize("bad", NOTHING)
def test_unknown_inputs_give_none_never_a_number(bad: object) -> None:
    assert m.samples_per_dollar(bad, TRN1_2XL) is None
    assert m.samples_per_dollar(320, bad) is None
    assert m.all_in_samples_per_dollar(bad, 1.0) is None
    assert m.all_in_samples_per_dollar(1000, bad) is None
    assert m.cost_per_million_samples(bad, TRN1_2XL) is None
    assert m.cost_per_million_samples(320, bad) is None
    assert m.per_epoch(bad, 320, TRN1_2XL) is None
    assert m.per_epoch(1000, bad, TRN1_2XL) is None
    assert m.per_epoch(1000, 320, bad).remaining_usd is None
    assert m.cost_so_far(bad, T0, T0 + 10) is None
    assert m.relative_price_performance(bad, 1.0, 320, 1.0) is None
    assert m.project_to_step(100, 500, bad, TRN1_2XL) is None
    assert m.project_to_step(100, bad, 0.1, TRN1_2XL) is None


def test_unknown_times_give_none() -> None:
    assert m.cost_so_far(TRN1_2XL, None, T0) is None
    assert m.cost_so_far(TRN1_2XL, math.nan, T0) is None
    assert m.cost_so_far(TRN1_2XL, T0, None) is None
    assert m.project_to_step(None, 500, 0.1, TRN1_2XL) is None


@settings(max_examples=30, deadline=None)
@given(ranks=st.integers(1, 4), step_s=st.floats(0.01, 5.0), batch=st.integers(1, 256),
       price=st.floats(0.01, 100.0))
def test_steady_throughput_is_batch_times_ranks_over_step_time(
        ranks: int, step_s: float, batch: int, price: float) -> None:
    steady = m.steady_state(make_steps(ranks=ranks, n=15, step_s=step_s, batch=batch))
    expected = ranks * batch / step_s
    assert steady.samples_per_s == pytest.approx(expected, rel=1e-6)
    spd = m.samples_per_dollar(steady.samples_per_s, price)
    assert spd == pytest.approx(expected * 3600 / price, rel=1e-6)
    assert m.cost_per_million_samples(steady.samples_per_s, price) * spd == pytest.approx(1e6)


def test_current_throughput_of_steps_without_samples_is_unknown_not_zero() -> None:
    from neurotui.live.stepstate import StepState

    steps = pd.DataFrame({"t": [100.0 + i for i in range(5)], "rank": 0, "step": range(1, 6),
                          "samples": np.nan, "loss": np.nan, "dt": 1.0, "attempt": 0})
    assert m.current_throughput(steps, 105.0) is None
    live = StepState(started_at=99.0)
    live.add(steps)
    assert live.throughput(105.0) is None
    # A stall of steps that do say their samples is still 0, not unknown.
    known = steps.assign(samples=16.0)
    assert m.current_throughput(known, 200.0) == 0.0
