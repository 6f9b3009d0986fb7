"""The dashboard's figures equal neurotui.metrics' on the same data, however they arrive."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neurotui import metrics
from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel, DashboardState, process_tree
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from tests.ui.sessions import RUNNING, T0, Recorder, reference_session


def model_for(session: Path, at: float, **kwargs: object) -> DashboardModel:
    return DashboardModel(SessionReader(session), FixedClock(T0 + at), status=lambda: RUNNING,
                          throttle=False, **kwargs)  # type: ignore[arg-type]


def test_figures_match_metrics_on_the_reference_session(tmp_path: Path) -> None:
    session = reference_session(tmp_path)
    model = model_for(session, 70)
    state = model.refresh()
    reader = SessionReader(session).load()
    steps, compiles = reader.steps(), reader.frame("compile")
    now = T0 + 70
    tp = state.throughput

    expected = metrics.steady_state(steps, compiles=compiles)
    assert expected is not None and tp.steady is not None
    for name in ("samples_per_s", "step_time_median", "step_time_p90", "step_time_mean"):
        assert getattr(tp.steady, name) == pytest.approx(getattr(expected, name)), name
    assert (tp.steady.steps, tp.steady.ranks) == (expected.steps, expected.ranks)
    assert tp.now_sps == pytest.approx(metrics.current_throughput(steps, now))
    assert tp.total_samples == pytest.approx(metrics.total_samples(steps))
    per_rank = metrics.rank_step_times(steps)
    assert {r.rank: r.median_s for r in tp.ranks} == pytest.approx(
        per_rank["median_step_s"].to_dict())
    assert [r.rank for r in tp.ranks if r.straggler] == metrics.find_stragglers(per_rank) == [1]
    assert state.header.phase == metrics.phase(reader.meta, steps, compiles, now) == "steady"
    assert state.header.step == metrics.latest_step(steps) == 120
    cost = metrics.cost_so_far(1.34375, T0, now)
    assert state.header.cost_usd == pytest.approx(cost)
    proj = metrics.project_to_step(120, 500, expected.step_time_median, 1.34375, cost, now)
    assert proj is not None
    assert state.header.eta_s == pytest.approx(proj.remaining_s)
    assert state.header.projected_usd == pytest.approx(proj.total_usd)
    assert tp.spd_steady == pytest.approx(
        metrics.samples_per_dollar(expected.samples_per_s, 1.34375))
    assert tp.spd_all_in == pytest.approx(
        metrics.all_in_samples_per_dollar(metrics.total_samples(steps), cost))

    series = metrics.throughput_series(steps, bucket_s=1.0, start=T0, end=now)
    assert tp.history is not None and tp.history.bucket_s == 1.0
    assert np.allclose(tp.history.samples_per_s, series["samples_per_s"].to_numpy())


def _append_steps_interleaved(rec: Recorder, start: int, stop: int) -> None:
    """Rank 1's file lags rank 0's by a step: the reader sees late rows and re-sorts."""
    for n in range(start, stop):
        rec.step(T0 + n * 0.5, 0, n, 0.5)
        if n > start:
            rec.step(T0 + (n - 1) * 0.5 + 0.01, 1, n - 1, 0.55)


def test_incremental_following_equals_reading_at_once(tmp_path: Path) -> None:
    live_rec = Recorder(tmp_path / "live", "20260101-150000-live")
    clock = FixedClock(T0)
    live = DashboardModel(SessionReader(live_rec.dir), clock, status=lambda: RUNNING,
                          throttle=False)
    n = 1
    for chunk in (3, 7, 1, 12, 30, 5):
        _append_steps_interleaved(live_rec, n, n + chunk)
        n += chunk
        clock.t = T0 + n * 0.5
        live.refresh()
    state_live = live.refresh()
    assert live.resets == 0  # late rows were found per rank, not by position
    at_once = DashboardModel(SessionReader(live_rec.dir), FixedClock(clock.t),
                             status=lambda: RUNNING).refresh()
    _same(state_live, at_once)
    steps = SessionReader(live_rec.dir).load().steps()
    assert state_live.throughput.total_samples == pytest.approx(metrics.total_samples(steps))
    live_rec.close()


def _same(a: DashboardState, b: DashboardState) -> None:
    ta, tb = a.throughput, b.throughput
    assert ta.steady is not None and tb.steady is not None
    assert vars(ta.steady) == pytest.approx(vars(tb.steady))
    assert ta.ranks == tb.ranks
    assert ta.now_sps == pytest.approx(tb.now_sps)
    assert ta.total_samples == pytest.approx(tb.total_samples)
    assert ta.history is not None and tb.history is not None
    assert np.allclose(ta.history.samples_per_s, tb.history.samples_per_s)
    assert np.allclose(ta.history.step_time, tb.history.step_time, equal_nan=True)
    assert a.header == b.header


def test_dropped_log_rows_start_the_steps_over(tmp_path: Path) -> None:
    """A rank first seen in its log, then in its probe: the reader drops the log rows, and
    the dashboard starts over instead of counting them twice."""
    rec = Recorder(tmp_path, "20260101-160000-mixed")
    for n in range(1, 6):
        rec.event(T0 + n, "step", rank=0, step=n, samples=8, loss=None, dt=1.0, src="log",
                  attempt=0)
    rec._events.flush()
    model = model_for(rec.dir, 6)
    assert model.refresh().throughput.total_samples == 40
    for n in range(6, 9):
        rec.step(T0 + n, 0, n, 1.0, samples=8)
    state = model.refresh()
    assert model.resets == 1
    assert state.throughput.total_samples == 24  # the probe's 3 steps only, as the reader
    rec.close()


class _Ticks:
    """The budgets' clock: a second a reading (so each fetch seems to cost one), or as told."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def _steps(rec: Recorder, first: int, last: int) -> None:
    """A step every 0.2 s: a 30 s window holds fewer than the RECENT steps kept per rank."""
    for n in range(first, last + 1):
        rec.step(T0 + n * 0.2, 0, n, 0.2)


def test_throughput_freezes_at_the_end_with_every_step_counted(tmp_path: Path) -> None:
    """The run's last steps arrive while the steps budget defers them: once the run is over
    they are taken at once, and "now" is the rate at the recorded end however long after."""
    rec = Recorder(tmp_path, "20260101-180000-ended")
    _steps(rec, 1, 50)
    clock = FixedClock(T0 + 10.0)
    status = [RUNNING]
    model = DashboardModel(SessionReader(rec.dir), clock, status=lambda: status[0],
                           monotonic=_Ticks())
    assert model.refresh().header.step == 50
    _steps(rec, 51, 300)
    end = T0 + 60.5
    rec.update_meta(ended_at=end, exit={"code": 0, "signal": None, "reason": "completed",
                                        "attempts": 1})
    status[0] = SessionStatus("completed", False, "completed")
    clock.t = end + 5
    first = model.refresh()
    clock.t = end + 500
    later = model.refresh()
    steps = SessionReader(rec.dir).load().steps()
    expected = metrics.current_throughput(steps, end)
    assert expected is not None and expected > 75  # 80 samples/s, the window's edge aside
    assert first.header.step == later.header.step == 300
    assert first.throughput.now_sps == later.throughput.now_sps == pytest.approx(expected)
    assert later.throughput.total_samples == metrics.total_samples(steps)
    rec.close()


def test_rows_read_while_the_budget_defers_are_taken_once_it_allows(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "20260101-190000-deferred")
    _steps(rec, 1, 50)
    ticks = _Ticks()
    model = DashboardModel(SessionReader(rec.dir), FixedClock(T0 + 10.0),
                           status=lambda: RUNNING, monotonic=ticks)
    assert model.refresh().header.step == 50
    _steps(rec, 51, 60)
    assert model.refresh().header.step == 50  # read, but the budget defers the fetch
    ticks.t += 1000.0  # the budget allows it again; nothing new was written meanwhile
    assert model.refresh().header.step == 60
    rec.close()


def test_a_long_runs_steady_state_is_worked_out_again_as_its_steps_grow(
        tmp_path: Path) -> None:
    """Over a day's steps the quantiles cost tens of ms: once steady, they are worked out
    again only when the steps grew by STEADY_GROWTH (budget allowing), and at the end."""
    rec = Recorder(tmp_path, "20260101-200000-growing")
    _steps(rec, 1, 1000)
    ticks = _Ticks()
    clock = FixedClock(T0 + 200.0)
    model = DashboardModel(SessionReader(rec.dir), clock, status=lambda: RUNNING,
                           monotonic=ticks)
    first = model.refresh().throughput.steady
    assert first is not None and first.steps == 990  # 10 warm-up steps left out
    _steps(rec, 1001, 1004)  # 0.4% more
    ticks.t += 1000.0
    assert model.refresh().throughput.steady == first  # not worked out again
    _steps(rec, 1005, 1006)  # 0.6% more in all
    ticks.t += 1000.0
    assert model.refresh().throughput.steady.steps == 996
    _steps(rec, 1007, 1007)
    rec.update_meta(ended_at=T0 + 202.0, exit={"code": 0, "signal": None,
                                               "reason": "completed", "attempts": 1})
    clock.t = T0 + 205.0
    assert model.refresh().throughput.steady.steps == 997  # the end: complete at once
    rec.close()


def test_a_live_reader_hands_its_steps_over_and_keeps_none(tmp_path: Path) -> None:
    """The dashboard keeps its own running figures: the reader must not also keep the run's
    whole step table (most of a long run's memory)."""
    model = model_for(reference_session(tmp_path), 70)
    assert model.refresh().header.step == 120
    with pytest.raises(RuntimeError):
        model.reader.steps()
    rest = model.reader.take_steps()
    assert rest is not None and len(rest.steps) == 0


def test_restart_shows_the_new_attempt(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "20260101-170000-restart")
    for n in range(1, 31):
        rec.step(T0 + n * 0.1, 0, n, 0.1)
    for n in range(1, 6):  # attempt 1 starts over at step 1
        rec.step(T0 + 10 + n * 0.2, 0, n, 0.2, attempt=1)
    rec.event(T0 + 9.5, "restart", attempt=1, delay_s=1.0, reason="rank 0 exited with 1")
    rec.close()
    state = model_for(rec.dir, 11.1).refresh()
    steps = SessionReader(rec.dir).load().steps()
    assert state.header.step == metrics.latest_step(steps) == 5
    assert state.header.phase == "warm-up"
    assert [r.median_s for r in state.throughput.ranks] == pytest.approx([0.2])
    assert any(a.key == "restarts" for a in state.alerts)


def test_alerts_cite_evidence(tmp_path: Path) -> None:
    session = reference_session(tmp_path)
    state = model_for(session, 70).refresh()
    by_key = {a.key: a for a in state.alerts}
    # The host's busy CPUs and the idle cores are one cause, told once, by the alert that
    # names the busy workers.
    assert "cpu-bound-input" not in by_key
    starved = by_key["input-starved"]
    assert starved.evidence[0].startswith("DataLoader workers busy: 2 of 2 at >= 80% of a CPU")
    assert "pid 4103 100%" in starved.evidence[0]
    assert "NeuronCore utilisation averages 13%" in starved.evidence[1]
    assert "5 of 8 CPUs under 50%" in starved.evidence[2]
    assert starved.advice and "raise DataLoader(num_workers=N) (now 1 per rank" in starved.advice
    variance = by_key["step-variance"]
    assert variance.evidence[0].startswith("rank 0: median 400ms, p10 400ms, p90 900ms")
    assert "stalled" not in by_key and "recompile" not in by_key


def test_compile_after_steady_and_a_silent_rank(tmp_path: Path) -> None:
    session = reference_session(tmp_path)
    with open(session / layout.EVENTS, "a") as f:
        f.write(json.dumps({"t": T0 + 60, "kind": "compile", "rank": 0, "what": "compile",
                            "line": "Compiling graph_9 [x]"}) + "\n")
    state = model_for(session, 120).refresh()  # 50 s after the last step
    by_key = {a.key: a for a in state.alerts}
    assert "1 compile event(s) since steady state (1 compile)" in by_key["recompile"].evidence[0]
    assert "Compiling graph_9 [x]" in by_key["recompile"].evidence[0]
    stalled = by_key["stalled"]
    assert stalled.title == "no progress on rank(s) 0, 1"
    assert any(e.startswith("rank 1: no step for") and "last step 120" in e
               for e in stalled.evidence)


def test_not_running_means_no_stall_alert(tmp_path: Path) -> None:
    session = reference_session(tmp_path)
    model = DashboardModel(SessionReader(session), FixedClock(T0 + 500),
                           status=lambda: SessionStatus("lost", False, "gone"))
    state = model.refresh()
    assert not any(a.key == "stalled" for a in state.alerts)
    assert state.header.status == "lost" and not state.header.running


def test_process_tree_is_depth_first() -> None:
    rows = process_tree([
        {"pid": 3, "ppid": 1, "name": "rank1", "role": "rank"},
        {"pid": 1, "ppid": 0, "name": "torchrun", "role": "launcher"},
        {"pid": 4, "ppid": 2, "name": "worker", "role": "worker"},
        {"pid": 2, "ppid": 1, "name": "rank0", "role": "rank"},
        {"pid": 9, "ppid": 7, "name": "orphan", "role": "worker"},
    ])
    assert [(r.pid, r.depth) for r in rows] == [(1, 0), (2, 1), (4, 2), (3, 1), (9, 0)]
    assert rows[0].cpu is None and rows[0].rss is None  # missing, not zero


def test_a_loss_read_after_its_automatic_step_was_shown_is_the_last_loss(
        tmp_path: Path) -> None:
    """The supervisor records a log line's loss a poll or two after the probe's step it goes
    with (it waits until no unread step can come between): the dashboard has shown that step
    by then, and the loss still becomes the last loss shown."""
    rec = Recorder(tmp_path, "20260101-170000-late-loss")
    auto = layout.PROBE_DIR
    with open(rec.dir / auto / "auto-rank-0.jsonl", "a") as f:
        for n in range(1, 4):
            f.write(json.dumps({"t": T0 + n, "kind": "step", "rank": 0, "step": n,
                                "samples": 8, "loss": None, "dt": 1.0, "src": "auto",
                                "attempt": 0}) + "\n")
    rec.event(T0 + 1, "step", rank=0, step=1, samples=None, loss=2.5, dt=None, src="log",
              attempt=0)
    rec._events.flush()
    model = model_for(rec.dir, 4)
    assert model.refresh().throughput.last_loss == 2.5
    # Step 3's line, placed at step 3's time, read after step 3 was shown.
    rec.event(T0 + 3, "step", rank=0, step=3, samples=None, loss=1.25, dt=None, src="log",
              attempt=0)
    rec._events.flush()
    assert model.refresh().throughput.last_loss == 1.25
    # Read in full, the same loss is on its step.
    steps = SessionReader(rec.dir).load().steps()
    assert steps.set_index("step")["loss"].get(3) == 1.25
    rec.close()
