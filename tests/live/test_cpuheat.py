"""Every CPU over time in the live model (neurotui/live/cpuheat.py), live and replayed."""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path

import numpy as np

from neurotui.live.clock import FixedClock
from neurotui.live.cpuheat import HEAT_HISTORY, CpuHeatHistory, CpuMarks, cpu_marks
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.session.timeline import Timeline
from tests.ui.sessions import RANK_CPUS, T0, WORKER_CPUS, many_cpus_session, reference_session

RUNNING = SessionStatus("running", True)


def host(t: float, cpu: list[float | None]) -> dict:
    return {"t": t, "kind": "host", "cpu": cpu}


def test_samples_are_kept_in_order_and_bounded() -> None:
    heat = CpuHeatHistory(size=5)
    window: deque[dict] = deque(maxlen=3)  # a reader keeps a window of the last samples
    shown = None
    for s in range(8):
        window.append(host(float(s), [float(s), 100.0 - s]))
        shown = heat.update(window)
    assert shown is not None
    assert shown.times.tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert shown.loads[:, 0].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert shown.cpus == 2 and shown.interval_s == 1.0 and shown.span_s == 4.0
    assert not shown.loads.flags.writeable
    # Nothing new: the same object (the dashboard compares it at every frame).
    assert heat.update(window) is shown


def test_a_gap_in_the_recording_is_a_missing_row_and_odd_values_are_missing() -> None:
    heat = CpuHeatHistory()
    series = [host(0.0, [1.0, 2.0]), host(1.0, [1.0, 2.0]), host(2.0, [1.0, 2.0]),
              host(30.0, [None, "x"]), host(31.0, [5.0, 6.0, 7.0])]  # a CPU more
    shown = heat.update(series)
    assert shown is not None
    assert len(shown.loads) == 6  # the gap between 2 s and 30 s is a row of its own
    assert np.isnan(shown.loads[3]).all() and math.isnan(shown.times[3])
    assert np.isnan(shown.loads[4]).all()  # None and "x" are not recorded, not zero
    assert shown.cpus == 3 and math.isnan(shown.loads[0, 2]) and shown.loads[5, 2] == 7.0


def test_a_sample_s_numbers_are_read_whole_and_anything_else_is_missing() -> None:
    # Plain numbers go the whole-array way; a bool, NaN, infinity or an int past any float
    # among them is not recorded (not 1, not 0, and no error), as one by one.
    heat = CpuHeatHistory()
    shown = heat.update([host(1.0, [12.5, 50, 100.0]),
                         host(2.0, [True, float("nan"), float("inf")]),
                         host(3.0, [10**400, 7, 8.0])])
    assert shown is not None
    np.testing.assert_array_equal(shown.loads[0], np.array([12.5, 50, 100], np.float32))
    assert np.isnan(shown.loads[1]).all()
    assert math.isnan(shown.loads[2, 0]) and list(shown.loads[2, 1:]) == [7.0, 8.0]


def test_back_in_time_or_a_jump_past_the_window_starts_over() -> None:
    heat = CpuHeatHistory()
    heat.update([host(float(s), [10.0]) for s in range(100, 140)])
    back = heat.update([host(float(s), [20.0]) for s in range(10, 50)])  # a replay went back
    assert back is not None and back.times[0] == 10.0 and len(back.times) == 40
    # A replay jumping far ahead: the window holds only new samples, far from the last.
    ahead = heat.update([host(float(s), [30.0]) for s in range(500, 540)])
    assert ahead is not None and ahead.times[0] == 500.0 and len(ahead.times) == 40
    assert not np.isnan(ahead.loads).any()  # no invented gap
    # Playing on: samples adjoining the last ones are appended.
    on = heat.update([host(float(s), [30.0]) for s in range(505, 545)])
    assert on is not None and len(on.times) == 45
    # From a single sample (a replay paused at its start) to the end: the window's own
    # spacing says how far apart samples are.
    heat = CpuHeatHistory()
    heat.update([host(0.0, [1.0])])
    end = heat.update([host(float(s), [2.0]) for s in range(210, 250)])
    assert end is not None and end.times[0] == 210.0 and len(end.times) == 40


def test_states_compare_by_key_cheaply_at_192_cpus() -> None:
    """The dashboard compares states by value every frame: a full 192-CPU history must not
    be compared cell by cell, nor rebuilt when no sample came."""
    heat = CpuHeatHistory()
    rng = np.random.default_rng(0)
    series = [host(float(s), rng.uniform(0, 100, 192).tolist()) for s in range(HEAT_HISTORY)]
    first = heat.update(series)
    assert first is not None and first.loads.shape == (HEAT_HISTORY, 192)
    other = CpuHeatHistory().update(series)
    assert other == first and other is not first  # the same samples: equal
    started = time.perf_counter()
    for _ in range(1000):
        assert other == first
    assert (time.perf_counter() - started) / 1000 < 1e-4
    started = time.perf_counter()
    for _ in range(100):
        heat.update(series)  # nothing new
    assert (time.perf_counter() - started) / 100 < 1e-3
    newer = heat.update([*series[1:], host(float(HEAT_HISTORY), [1.0] * 192)])
    assert newer != first and newer is not None and newer.loads.shape == (HEAT_HISTORY, 192)


def test_marks_are_the_cpus_ranks_and_workers_last_ran_on() -> None:
    rows = [{"pid": 1, "role": "launcher", "cpu_num": 0},
            {"pid": 2, "role": "rank", "cpu_num": 7}, {"pid": 3, "role": "rank", "cpu_num": 3},
            {"pid": 4, "role": "worker", "cpu_num": 9}, {"pid": 5, "role": "worker"},
            {"pid": 6, "role": "compiler", "cpu_num": 1}]
    assert cpu_marks({"procs": rows}) == CpuMarks((3, 7), (9,))
    old = cpu_marks({"procs": [{"pid": 2, "role": "rank", "cpu": 99.0}]})
    assert old.ranks == () and old.note == "ranks' CPUs not recorded"
    assert cpu_marks(None).note == "no process sample yet"
    ended = cpu_marks({"procs": [{"pid": 1, "role": "launcher", "cpu_num": 0}]})
    assert ended.ranks == () and ended.note == "no rank running"
    assert cpu_marks({"procs": []}) == CpuMarks()


def model(session: Path, at: float) -> DashboardModel:
    return DashboardModel(SessionReader(session, telemetry_history=TELEMETRY_HISTORY),
                          FixedClock(at), status=lambda: RUNNING, throttle=False)


def test_the_dashboard_state_carries_the_heat_map_and_the_marks(tmp_path: Path) -> None:
    state = model(many_cpus_session(tmp_path), T0 + 250).refresh()
    heat = state.host.heat
    assert heat is not None and heat.cpus == 192
    assert len(heat.loads) == TELEMETRY_HISTORY  # what the reader keeps: grows as it follows
    assert state.host.marks == CpuMarks(RANK_CPUS, WORKER_CPUS)
    assert (heat.loads[:, list(WORKER_CPUS)] >= 90).all()  # the starved workers: pinned
    assert (heat.loads[:, list(RANK_CPUS)] < 90).all()  # the ranks wait on them
    assert (np.delete(heat.loads, RANK_CPUS + WORKER_CPUS, axis=1) < 10).all()
    ranks = [p for p in state.procs.rows if p.role == "rank"]
    assert [p.cpu_num for p in ranks] == list(RANK_CPUS)
    # A session recorded before cpu_num: shown, its marks said to be missing.
    old = model(reference_session(tmp_path / "old"), T0 + 70).refresh()
    assert old.host.heat is not None and old.host.marks.note == "ranks' CPUs not recorded"
    assert all(p.cpu_num is None for p in old.procs.rows)


def test_replay_gives_the_same_heat_map_as_following_live(tmp_path: Path) -> None:
    session = many_cpus_session(tmp_path)
    end = T0 + 249.0
    view = Timeline(session).view()
    clock = FixedClock(T0)
    replay = DashboardModel(view, clock, status=lambda: RUNNING,  # type: ignore[arg-type]
                            throttle=False)
    live = model(session, end).refresh()
    # Jumping to the end: the reader's window, the same as a dashboard that just attached.
    view.seek(end)
    clock.t = end
    jumped = replay.refresh()
    assert jumped.host.heat == live.host.heat and jumped.host.marks == live.host.marks
    assert live.host.heat is not None and jumped.host.heat is not None
    np.testing.assert_array_equal(jumped.host.heat.loads, live.host.heat.loads)
    # Played from the start, 5 s a frame: the history grows to what the model keeps.
    view.seek(T0)
    clock.t = T0
    replay.refresh()
    for t in [*np.arange(T0 + 5, end, 5.0).tolist(), end]:
        view.seek(t)
        clock.t = t
        played = replay.refresh()
    heat = played.host.heat
    assert heat is not None and len(heat.loads) == min(HEAT_HISTORY, 250)
    assert not np.isnan(heat.loads).any()  # frames adjoin: no gap drawn
    np.testing.assert_array_equal(heat.loads[-len(live.host.heat.loads):],
                                  live.host.heat.loads)
