"""Replay: a recorded session seen as it stood at a time, the replay clock, and "go to"."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest

from neurotui.live.clock import SPEEDS, FixedClock, ReplayClock
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.session.timeline import Timeline, parse_position
from tests.ui.sessions import T0, reference_session

REPLAYING = SessionStatus("running", True, "replay")


def cut_copy(session: Path, dest: Path, until: float) -> Path:
    """The session as a live reader would have found it at `until`: every record after it
    dropped (what was on disk then)."""
    shutil.copytree(session, dest)
    for path in [dest / layout.EVENTS, *layout.probe_files(dest).values()]:
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(x for x in lines if json.loads(x)["t"] <= until))
    return dest


def same(a: object, b: object) -> bool:
    """Equal, NaN included (a missing step time is NaN in both)."""
    return repr(a) == repr(b)


def close(a: object, b: object) -> bool:
    """Equal but for the last bits of float sums (rows taken in other batches add up in
    another order); NaN equals NaN."""
    if is_dataclass(a) and is_dataclass(b):
        return type(a) is type(b) and all(close(getattr(a, f.name), getattr(b, f.name))
                                          for f in fields(a))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b


def live_state(session: Path, at: float):
    model = DashboardModel(SessionReader(session, telemetry_history=TELEMETRY_HISTORY),
                           FixedClock(at), status=lambda: REPLAYING, throttle=False)
    return model.refresh()


def replay_state(timeline: Timeline, at: float):
    view = timeline.view()
    view.seek(at)
    model = DashboardModel(view, FixedClock(at), status=lambda: REPLAYING,  # type: ignore[arg-type]
                           throttle=False)
    return model.refresh()


@pytest.mark.parametrize("offset", [2.5, 12.0, 30.0, 55.0])
def test_replay_shows_what_the_live_view_showed_then(tmp_path: Path, offset: float) -> None:
    """The whole point of replay: at time t it is the live dashboard over the files as they
    were at t (every panel, alerts included)."""
    session = reference_session(tmp_path / "rec")
    at = T0 + offset
    live = live_state(cut_copy(session, tmp_path / "cut", at), at)
    replayed = replay_state(Timeline(session), at)
    assert same(replayed, live)
    assert replayed.header.step is None or replayed.header.step > 0


def test_replay_frames_moving_forward_match_the_live_view(tmp_path: Path) -> None:
    """Frame after frame (the model takes only what each frame adds), the figures agree with a
    fresh live view at that time; only the sparklines, which remember earlier frames, differ."""
    session = reference_session(tmp_path / "rec")
    timeline = Timeline(session)
    view = timeline.view()
    clock = FixedClock(T0)
    model = DashboardModel(view, clock, status=lambda: REPLAYING,  # type: ignore[arg-type]
                           throttle=False)
    for offset in (5.0, 20.0, 21.0, 40.0, 62.0):
        clock.t = T0 + offset
        view.seek(clock.t)
        replayed = model.refresh()
        live = live_state(cut_copy(session, tmp_path / f"cut{offset}", clock.t), clock.t)
        assert close(replayed.header, live.header)
        assert close(replace(replayed.throughput, steady_age_s=0.0),
                     replace(live.throughput, steady_age_s=0.0))
        assert same(replayed.host.cpu, live.host.cpu)
        assert same(replayed.accelerator.cores, live.accelerator.cores)
        assert close(replayed.alerts, live.alerts)


def test_timeline_bounds_steps_and_events(tmp_path: Path) -> None:
    session = reference_session(tmp_path / "rec", end=True)
    timeline = Timeline(session)
    ended_at = timeline.meta["ended_at"]
    assert timeline.start == T0
    assert timeline.end == ended_at
    assert timeline.time_of_step(11) == pytest.approx(T0 + 4 + 10 * 0.6 + 0.4)
    assert timeline.time_of_step(10_000) is None
    view = timeline.view()
    view.seek(T0 + 2.5)
    assert view.poll() > 0
    assert len(view.events["compile"]) == 2  # compiles at +1, +2 (the third is at +3)
    assert [e["t"] for e in view.events["host"]] == [T0, T0 + 1, T0 + 2]
    assert timeline.steps_until(view.until) == 0
    assert view.poll() == 0  # nothing moved
    view.seek(ended_at)
    assert view.poll() > 0
    assert timeline.steps_until(view.until) == 240
    assert len(view.events["host"]) == TELEMETRY_HISTORY  # a window, not the whole run
    assert view.events["host"][-1]["t"] == max(e["t"] for e in SessionReader(session).load()
                                               .events["host"])
    # Back in time: the telemetry window is read again, not left at the end.
    view.seek(T0 + 10.2)
    view.poll()
    assert view.events["host"][-1]["t"] == T0 + 10
    assert timeline.status_at(T0 + 10).running
    assert timeline.status_at(ended_at).state == "failed"


def test_a_session_that_stops_without_an_end_record_is_lost_at_its_end(tmp_path: Path) -> None:
    timeline = Timeline(reference_session(tmp_path / "rec"))
    assert timeline.status_at(timeline.end - 1).running
    assert timeline.status_at(timeline.end).state == "lost"


def test_replay_needs_no_telemetry_in_memory(tmp_path: Path) -> None:
    """Telemetry is read from disk at the cursor, never held whole."""
    timeline = Timeline(reference_session(tmp_path / "rec"))
    assert "host" not in timeline.events and "procs" not in timeline.events
    assert len(timeline.samples["host"]) == 72  # one a second over the 71.6 s run


def test_parse_position() -> None:
    def step_time(step: int) -> float | None:
        return T0 + step * 0.5 if step <= 100 else None

    assert parse_position("step 40", step_time, T0) == T0 + 20
    assert parse_position("s40", step_time, T0) == T0 + 20
    assert parse_position("1:02:03", step_time, T0) == T0 + 3723
    assert parse_position("12:30", step_time, T0) == T0 + 750
    assert parse_position("1h5m", step_time, T0) == T0 + 3900
    assert parse_position("90s", step_time, T0) == T0 + 90
    assert parse_position(" 90 ", step_time, T0) == T0 + 90
    with pytest.raises(ValueError, match="never reached"):
        parse_position("step 500", step_time, T0)
    for bad in ("", "soon", "1:x", "-5", "1:2:3:4"):
        with pytest.raises(ValueError):
            parse_position(bad, step_time, T0)


class ManualMonotonic:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_replay_clock_plays_pauses_and_stops_at_the_end() -> None:
    wall = ManualMonotonic()
    clock = ReplayClock(1000.0, 1100.0, speed=10, monotonic=wall)
    assert clock.tick() == 1000.0  # paused: time stands still
    wall.t += 5
    assert clock.tick() == 1000.0
    clock.play()
    wall.t += 2
    assert clock.tick() == 1020.0
    clock.set_speed(2)
    wall.t += 5
    assert clock.tick() == 1030.0
    clock.play()  # pause
    wall.t += 50
    assert clock.tick() == 1030.0
    clock.play()
    wall.t += 1000
    assert clock.tick() == 1100.0 and not clock.playing  # the end stops it
    clock.play()  # playing from the end starts over
    assert clock.now() == 1000.0 and clock.playing


def test_replay_clock_fastest_moves_by_frames_and_seek_clamps() -> None:
    wall = ManualMonotonic()
    clock = ReplayClock(0.0, 4000.0, speed=math.inf, monotonic=wall)
    clock.play()
    assert clock.tick() == clock.frame_s == 10.0  # 4000 s in 400 frames
    assert clock.tick() == 20.0
    assert clock.seek(-50) == 0.0
    assert clock.seek(1e9) == 4000.0
    clock.set_speed(1)
    assert clock.faster(1) == 2 and clock.faster(-1) == 1 and clock.faster(-1) == 1
    clock.set_speed(100)
    assert clock.faster(1) == math.inf == SPEEDS[-1]
    assert clock.faster(1) == math.inf


def test_a_minimal_older_session_replays(tmp_path: Path) -> None:
    """A session from an earlier writer: meta with only the format and start, steps parsed
    from logs into events.jsonl, no telemetry at all, a truncated last line."""
    session = tmp_path / "20250101-000000-old"
    session.mkdir()
    (session / layout.META).write_text(json.dumps({"format": 1, "started_at": T0}))
    with open(session / layout.EVENTS, "w") as f:
        for n in range(1, 31):
            f.write(json.dumps({"t": T0 + n, "kind": "step", "rank": 0, "step": n,
                                "samples": 8, "src": "log"}) + "\n")
        f.write('{"t": 1767268831.0, "kind": "st')  # the writer died mid-line
    timeline = Timeline(session)
    assert (timeline.start, timeline.end) == (T0, T0 + 30)
    state = replay_state(timeline, T0 + 20)
    assert state.header.step == 20
    assert state.throughput.total_samples == 8 * 20
    assert state.host.note == "no host telemetry recorded yet"
    assert state.header.price_per_hour is None and state.header.cost_usd is None
    # Still "running" by its meta (no exit), but nothing answers: lost at its last record.
    assert timeline.status_at(T0 + 30).state == "lost"


def test_replay_from_the_columnar_cache_shows_the_same(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A big session opens from its cache; telemetry is then found through the cached byte
    index, which must point at the same records."""
    from neurotui.session import cache

    session = reference_session(tmp_path / "rec", end=True)
    fresh = [replay_state(Timeline(session), T0 + t) for t in (3.0, 33.3, 71.0)]
    monkeypatch.setattr(cache, "MIN_SOURCE_BYTES", 0)
    assert Timeline(session).reader.cache_state == "written"
    cached = Timeline(session)
    assert cached.reader.cache_state == "restored"
    assert [repr(replay_state(cached, T0 + t)) for t in (3.0, 33.3, 71.0)] == [
        repr(s) for s in fresh]


def test_one_model_follows_a_replay_back_in_time(tmp_path: Path) -> None:
    """Going back, the view says to start over (take_steps gives None) and the model's step
    figures are those of the earlier time, not kept from the later one."""
    session = reference_session(tmp_path / "rec")
    view = Timeline(session).view()
    clock = FixedClock(T0 + 60)
    model = DashboardModel(view, clock, status=lambda: REPLAYING,  # type: ignore[arg-type]
                           throttle=False)
    view.seek(clock.t)
    ahead = model.refresh().header.step
    clock.t = T0 + 20
    view.seek(clock.t)
    back = model.refresh()
    assert model.resets == 1
    assert ahead is not None and back.header.step is not None
    assert back.header.step < ahead
    live = live_state(cut_copy(session, tmp_path / "cut", clock.t), clock.t)
    assert close(back.header, live.header)
    assert close(replace(back.throughput, steady_age_s=0.0),
                 replace(live.throughput, steady_age_s=0.0))
    # The sparklines start over too, rather than keeping the later time's samples.
    assert same(back.host.cpu_history, live.host.cpu_history)
    assert same(back.accelerator.util_history, live.accelerator.util_history)


def test_a_run_still_in_progress_replays_up_to_now_and_stays_running(tmp_path: Path) -> None:
    """Replaying a live run: its end is its newest record, and there it is still running."""
    import os

    import psutil

    from neurotui.session.writer import write_json_atomic

    session = reference_session(tmp_path / "rec")
    meta = json.loads((session / layout.META).read_text())
    me = psutil.Process(os.getpid())  # stands for the job: alive, with its create time
    write_json_atomic(session / layout.META, {**meta, "job_pid": me.pid,
                                              "job_create_time": me.create_time()})
    timeline = Timeline(session)
    assert timeline.end == pytest.approx(T0 + 71.6)  # rank 1's last step, the newest record
    at_end = timeline.status_at(timeline.end)
    assert at_end.running and at_end.state == "running"
    assert replay_state(timeline, timeline.end).header.phase in ("steady", "warm-up")
