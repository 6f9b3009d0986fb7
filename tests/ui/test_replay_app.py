"""`neurotui replay`: the dashboard driven by a recorded clock, through its keys (Pilot)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from neurotui.session import layout
from neurotui.ui.replay import GoTo, ReplayApp
from neurotui.ui.screens.help import HelpScreen
from neurotui.ui.widgets.header import SessionHeader
from neurotui.ui.widgets.logs import LogPanel
from tests.ui.conftest import screen_text, settle
from tests.ui.sessions import T0, Recorder, cpu_only_session, reference_session

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ended(tmp_path: Path) -> Path:
    return reference_session(tmp_path, end=True)


def replay(session: Path, **kwargs: object) -> ReplayApp:
    kwargs.setdefault("paused", True)
    kwargs.setdefault("interval_s", 3600.0)  # frames only when a key or a test asks
    kwargs.setdefault("ascii_mode", False)
    return ReplayApp(session, **kwargs)  # type: ignore[arg-type]


async def frame(pilot: Pilot[object]) -> str:
    await settle(pilot)
    return screen_text(pilot.app)


async def answer_go_to(pilot: Pilot[object], where: str) -> None:
    """`g`, then `where` typed into the prompt and entered."""
    await pilot.press("g")
    await pilot.pause()
    await pilot.press(*where, "enter")


def bar_text(app: ReplayApp) -> str:
    return str(app.bar.render())


async def test_opens_at_the_start_paused_and_jumps_to_the_end(ended: Path) -> None:
    app = replay(ended)
    async with app.run_test(size=(100, 30)) as pilot:
        text = await frame(pilot)
        assert "STARTING" in text and "no step yet/500" in text
        assert "⏸ 10x  00:00:00 / 00:01:12" in bar_text(app)
        assert "replay: q quits" in text
        await pilot.press("end")
        text = await frame(pilot)
        assert "CRASHED" in text and "step 120/500" in text
        assert "step 120" in bar_text(app) and "00:01:12 / 00:01:12" in bar_text(app)
        assert "training crashed" in text
        # Back to the start: the model starts afresh instead of keeping the end's steps.
        await pilot.press("home")
        text = await frame(pilot)
        assert "STARTING" in text and "no step yet" in text


async def test_go_to_a_step_and_a_time(ended: Path) -> None:
    app = replay(ended)
    async with app.run_test(size=(100, 30)) as pilot:
        await frame(pilot)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, GoTo)
        await pilot.press(*"step 50")
        assert app.screen.query_one(Input).value == "step 50"  # space typed, not "play"
        await pilot.press("end", "home")  # the input's cursor keys, not the player's
        assert app.replay_clock is not None and app.replay_clock.now() == T0
        await pilot.press("enter")
        text = await frame(pilot)
        assert not isinstance(app.screen, GoTo)
        assert not app.replay_clock.playing
        assert "step 50/500" in text
        assert app.replay_clock is not None
        assert app.replay_clock.now() == app.timeline.time_of_step(50)  # type: ignore[union-attr]
        await answer_go_to(pilot, "0:30")
        text = await frame(pilot)
        assert app.replay_clock.now() == T0 + 30
        assert "00:00:30" in text and ("WARM-UP" in text or "STEADY" in text)


async def test_go_to_rejects_nonsense_and_stays_open(ended: Path) -> None:
    app = replay(ended)
    async with app.run_test(size=(100, 30)) as pilot:
        await frame(pilot)
        await answer_go_to(pilot, "step 9999")
        await pilot.pause()
        assert isinstance(app.screen, GoTo)
        assert "step 9,999 was never reached" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, GoTo)
        assert app.replay_clock is not None and app.replay_clock.now() == T0


async def test_speed_keys_and_seek_keys(ended: Path) -> None:
    app = replay(ended, speed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await frame(pilot)
        clock = app.replay_clock
        assert clock is not None
        await pilot.press("plus", "plus")
        assert clock.speed == 5 and "5x" in bar_text(app)
        await pilot.press("minus")
        assert clock.speed == 2
        for _ in range(8):
            await pilot.press("plus")
        assert "max" in bar_text(app)
        await pilot.press("full_stop")  # +1% of a 72 s run: the minimum second
        assert clock.now() == T0 + 1
        tenth = (clock.end - clock.start) / 10
        await pilot.press("greater_than_sign")
        assert clock.now() == pytest.approx(T0 + 1 + tenth)
        await pilot.press("comma")
        assert clock.now() == pytest.approx(T0 + tenth)


async def test_playing_moves_the_cursor_and_stops_at_the_end(ended: Path) -> None:
    app = replay(ended, speed=float("inf"))
    async with app.run_test(size=(100, 30)) as pilot:
        await frame(pilot)
        clock = app.replay_clock
        assert clock is not None and not clock.playing
        await pilot.press("space")
        assert clock.playing or clock.now() == clock.end  # 72 quick frames may be done
        for _ in range(200):  # as fast as possible: frames back to back
            await pilot.pause(0.01)
            if not clock.playing:
                break
        assert not clock.playing and clock.now() == clock.end
        text = await frame(pilot)
        assert "CRASHED" in text and "step 120/500" in text


async def test_no_stop_in_a_replay_and_replay_help(ended: Path) -> None:
    app = replay(ended)
    async with app.run_test(size=(100, 30)) as pilot:
        text = await frame(pilot)
        assert "Stop training" not in text
        await pilot.press("S")
        await pilot.pause()
        assert app.screen is app.dashboard  # no confirmation: nothing to stop
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Replay keys" in screen_text(app)


async def test_start_at_the_end_from_the_command_line(ended: Path) -> None:
    app = replay(ended, at="end")
    async with app.run_test(size=(100, 30)) as pilot:
        text = await frame(pilot)
        assert "step 120/500" in text


async def test_a_session_with_garbage_lines_replays_and_says_where(tmp_path: Path) -> None:
    session = reference_session(tmp_path, end=True)
    with open(session / layout.EVENTS, "a") as f:
        f.write("{not json\n")
    app = replay(session, at="end")
    async with app.run_test(size=(120, 40)) as pilot:
        text = await frame(pilot)
        assert "unreadable line" in text and "events.jsonl:" in text
        assert "step 120/500" in text


async def test_an_unreadable_recording_is_said_in_the_bar(tmp_path: Path) -> None:
    session = reference_session(tmp_path, end=True)
    app = replay(session)
    (session / layout.META).write_text(json.dumps({"format": 99}))
    async with app.run_test(size=(100, 30)) as pilot:
        await frame(pilot)
        assert "cannot read the recording" in bar_text(app)
        assert "format 99 is newer" in bar_text(app)
        # No first frame comes, so the first read's progress is asked on every half second,
        # up to the app's end, when the header is taken down before the timer (CI met it).
        await app.dashboard.query_one(SessionHeader).remove()
        assert app.last_state is None and app._first_read_timer is not None
        app._show_first_read()  # a tick with no header to show it on: nothing, no error


def test_cli_replay_refuses_a_corrupt_session_naming_the_file(tmp_path: Path) -> None:
    session = tmp_path / "20260101-120000-broken"
    session.mkdir()
    (session / layout.META).write_text("{truncated")
    result = subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(tmp_path),
                             "replay", "broken"], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert result.returncode == 2
    assert f"{session / layout.META}: unreadable" in result.stderr


def test_cli_replay_without_a_terminal_says_so(ended: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir",
                             str(ended.parent), "replay", ended.name, "--speed", "max"],
                            capture_output=True, text=True, cwd=REPO, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert "replay needs a terminal" in result.stderr


def test_cli_replay_rejects_a_bad_speed(ended: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir",
                             str(ended.parent), "replay", "--speed", "0"],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2 and "speed must be above 0" in result.stderr


async def test_over_the_compare_screen_space_picks_a_session(ended: Path) -> None:
    from textual.widgets import SelectionList

    from neurotui.ui.screens.compare import CompareScreen

    other = cpu_only_session(ended.parent)
    app = replay(ended)
    async with app.run_test(size=(120, 40)) as pilot:
        await frame(pilot)
        await pilot.press("c")
        await frame(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        picker = screen.query_one(SelectionList)
        picker.focus()
        values = [picker.get_option_at_index(i).value for i in range(picker.option_count)]
        picker.highlighted = values.index(other)
        await pilot.press("space")
        await frame(pilot)
        assert set(screen.picked()) == {ended, other}
        assert app.replay_clock is not None and not app.replay_clock.playing


def timed_log_session(root: Path) -> Path:
    """One rank, a step and a log line a second for 40 s; the supervisor's `log_offsets` mark
    every 2 s how far the log had been written (as logfollow.py writes them)."""
    rec = Recorder(root, "20260101-150000-timed-logs", config={"step_target": 40})
    log = rec.dir / layout.TORCHRUN_LOG_DIR / "run_0" / "attempt_0" / "0" / "stdout.log"
    rel = log.relative_to(rec.dir).as_posix()
    log.parent.mkdir(parents=True)
    written = 0
    for n in range(1, 41):
        rec.step(T0 + n, 0, n, 1.0, loss=1.0)
        line = f"training line {n}\n".encode()
        with open(log, "ab") as f:
            f.write(line)
        written += len(line)
        if n % 2 == 0:
            rec.event(T0 + n + 0.5, "log_offsets", files={rel: written})
    return rec.close()


def log_lines(app: ReplayApp) -> list[str]:
    return [strip.text.rstrip() for strip in app.query_one(LogPanel).lines]


async def test_the_log_stands_as_it_was_written_at_the_cursor(tmp_path: Path) -> None:
    app = replay(timed_log_session(tmp_path))
    async with app.run_test(size=(100, 40)) as pilot:
        await frame(pilot)
        assert log_lines(app) == []  # nothing written yet at the start
        for where, last in (("0:13", 12), ("0:30", 28), ("end", 40), ("0:05", 4)):
            if where == "end":
                await pilot.press("end")
            else:
                await answer_go_to(pilot, where)
            text = await frame(pilot)
            assert log_lines(app)[-1] == f"training line {last}", where
            assert f"training line {last + 1}" not in text, where
        assert log_lines(app)[0] == "training line 1"  # gone back: read afresh, not appended
        assert len(log_lines(app)) == 4
        assert "Log: rank 0 stdout" in text and "Log (whole run)" not in text


async def test_an_older_recording_shows_its_logs_whole_and_says_so(ended: Path) -> None:
    app = replay(ended)  # recorded without log_offsets
    async with app.run_test(size=(160, 48)) as pilot:
        text = await frame(pilot)
        assert "Log (whole run): rank 0 stdout" in text
        assert "not markup" in "\n".join(log_lines(app))  # the last line, at the start
