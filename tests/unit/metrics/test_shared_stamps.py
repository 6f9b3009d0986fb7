"""Step lines read together carry one stamp: the time of the read that found them (logs
polled every POLL_S, or a batched read of a busy log). Such a run of rows stands for the steps
written since the rank's previous stamp, and its rows' step time is that time over those steps:
not the whole gap over one step (the first row) and nothing (the others).

The truth here is the script's own clock: a rank stepping every STEP_S, whose lines are stamped
at the next poll, as the supervisor stamps a polled log's lines."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from neurotui import metrics
from tests.strategies import COLUMNS

STEP_S, POLL_S, SAMPLES, RANKS = 0.1, 0.5, 16.0, 2
TRUE_RATE = RANKS * SAMPLES / STEP_S  # 320 samples/s


def polled_run(seconds: float = 60.0, every: int = 1, offset_ms: int = 13) -> pd.DataFrame:
    """RANKS ranks each printing every `every`th step's line (no dt), read at polls."""
    step_ms, poll_ms = round(STEP_S * 1000), round(POLL_S * 1000)  # whole ms: exact reads
    rows = []
    for rank in range(RANKS):
        for k in range(1, int(seconds / STEP_S) + 1):
            if k % every:
                continue
            written_ms = k * step_ms + rank * offset_ms
            stamp = -(-written_ms // poll_ms) * POLL_S  # the poll that read it
            rows.append({"t": 1000.0 + stamp, "rank": rank, "step": k, "samples": SAMPLES,
                         "loss": 1.0, "dt": math.nan, "src": "log", "attempt": 0})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["t", "step"], kind="stable",
                                                           ignore_index=True)


@pytest.mark.parametrize("every", [1, 5])
def test_each_row_of_a_read_gets_the_reads_time_over_its_steps(every: int) -> None:
    steps = metrics.with_step_time(polled_run(every=every, offset_ms=0))
    timed = steps["step_time"].dropna()
    # Every row but those of each rank's first read (no stamp before it) is timed, and each
    # is the true step time (the ranks step in time with the polls here: reads of 5 steps).
    assert len(timed) == len(steps) - RANKS * (5 // every)
    assert timed.to_numpy() == pytest.approx(STEP_S, rel=1e-6, abs=1e-9)
    # Time covered adds up: each rank's rows' step times x steps cover its stamps' span.
    for _, rank in steps.groupby("rank"):
        covered = (rank["step_time"] * rank["steps_covered"]).sum()
        assert covered == pytest.approx(rank["t"].iloc[-1] - rank["t"].iloc[0])


def test_the_headline_figures_from_polled_logs_are_the_scripts_own() -> None:
    steps = polled_run()
    steady = metrics.steady_state(steps)
    assert steady is not None
    assert steady.samples_per_s == pytest.approx(TRUE_RATE, rel=0.01)
    assert steady.step_time_median == pytest.approx(STEP_S, rel=0.01)
    medians = metrics.rank_step_times(steps)["median_step_s"]
    assert medians.to_numpy() == pytest.approx(STEP_S, rel=0.01)
    # Now, between two polls and right at one: the reads' samples over the time they took.
    # Over a short window too: the other rows of the window's first read were written before
    # it (not after its stamp), and a rank is silent only past its usual interval between
    # reads (not between rows, 0 within a read).
    for now in (1000.0 + 40.0, 1000.0 + 40.3, 1000.0 + 40.49):
        for window in (metrics.DEFAULT_WINDOW_S, 3.0):
            assert metrics.current_throughput(steps, now, window) == pytest.approx(
                TRUE_RATE, rel=0.03)


def test_a_window_holding_one_read_is_rated_like_a_lone_row() -> None:
    """Five steps read at one poll, the rank's only rows in the window: its rate is its
    samples over its step time, not a stall and not five steps over no time."""
    steps = polled_run(seconds=1.0, offset_ms=0)  # reads at 0.5 and 1.0, of 5 steps each
    rate = metrics.current_throughput(steps, 1000.0 + 1.05, window_s=0.4)
    assert rate == pytest.approx(TRUE_RATE, rel=0.01)


def test_the_live_form_continues_a_read_split_between_two_takes() -> None:
    """The live model may take a read's rows in two pieces (it read events.jsonl while the
    supervisor was writing them): the rows after the cut get the whole read's step time."""
    clock = metrics.StepClock(metrics.DEFAULT_WARMUP_STEPS)

    def take(t: list[float], step: list[int]) -> np.ndarray:
        n = len(t)
        return clock.take(0, 0, np.array(t), np.array(step, dtype=float), np.full(n, np.nan),
                          np.full(n, SAMPLES))["step_time"]

    take([10.0], [1])
    first = take([10.5, 10.5], [2, 3])  # the read holds steps 2..6, the take sees 2 and 3
    rest = take([10.5, 10.5, 10.5], [4, 5, 6])
    assert first == pytest.approx([0.25, 0.25])  # what was known then: 0.5 s for 2 steps
    assert rest == pytest.approx([0.1, 0.1, 0.1])  # the whole read: 0.5 s for 5 steps
    assert take([11.0], [11]) == pytest.approx([0.1])  # the next read, from the last one
