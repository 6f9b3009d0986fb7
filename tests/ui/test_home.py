"""The home screen (plain `neurotui`) driven by keys (Pilot): the sessions of a folder, and the
dashboard, replay and compare views it opens in the same app."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from neurotui import cli
from neurotui.compare import compare_rows, format_value
from neurotui.live.logtail import LogChoice
from neurotui.terminal import READ_ONLY_ENV
from neurotui.ui.messages import LogLines, StateUpdated
from neurotui.ui.screens.compare import CompareScreen
from neurotui.ui.screens.confirm_delete import ConfirmDelete
from neurotui.ui.screens.dashboard import DashboardScreen
from neurotui.ui.screens.help import HelpScreen
from neurotui.ui.screens.home import READING, HomeScreen
from tests.ui.conftest import screen_text, settle
from tests.ui.home_sessions import CORRUPT, NO_META, many_folder, mixed_folder, starting_session
from tests.ui.sessions import reference_session

HomeApp = "neurotui.ui.home_app.NeurotuiApp"


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def home(root: Path, session: Path | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
    from neurotui.ui.home_app import NeurotuiApp

    kwargs.setdefault("interval_s", 3600.0)  # frames only when a test asks
    kwargs.setdefault("ascii_mode", False)
    return NeurotuiApp(root, session, **kwargs)  # type: ignore[arg-type]


def table(pilot: Pilot[object]) -> DataTable:  # type: ignore[type-arg]
    return pilot.app.screen.query_one("#home-table", DataTable)


def names(pilot: Pilot[object]) -> list[str]:
    t = table(pilot)
    return [Path(str(row.key.value)).name for row in t.ordered_rows]


def row_text(pilot: Pilot[object], name: str) -> str:
    t = table(pilot)
    key = next(str(k.value) for k in t.rows if Path(str(k.value)).name == name)
    return " | ".join(str(cell) for cell in t.get_row(key))


async def highlight(pilot: Pilot[object], name: str) -> None:
    t = table(pilot)
    t.move_cursor(row=names(pilot).index(name), animate=False)
    await pilot.pause()


async def test_empty_folder_says_how_to_record_one(tmp_path: Path) -> None:
    app = home(tmp_path / "sessions")
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)
        text = screen_text(app)
        assert "0 sessions" in text
        # Read as words: the folder's path (pytest's, of any length) moves where it wraps.
        words = " ".join(text.split())
        assert "no sessions under" in words and "neurotui run -- COMMAND" in words
        await pilot.press("enter", "space", "c", "d")  # nothing to act on: nothing breaks
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)
        await pilot.press("ctrl+p", *"theme")  # the command palette has the app's own
        await pilot.pause(0.3)
        assert "theme" in screen_text(app).lower()
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)


async def test_lists_every_session_with_its_state_and_figures(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "sessions")
    app = home(root)
    async with app.run_test(size=(160, 30), notifications=True) as pilot:
        await settle(pilot)
        assert sorted(names(pilot)) == sorted(p.name for p in root.iterdir())
        assert names(pilot)[:2] == ["sample-xla-cpu", "sample-cpu-gloo"]  # newest first
        gloo = row_text(pilot, "sample-cpu-gloo")
        assert "completed" in gloo and "2,573.2" in gloo  # from its meta.json summary
        assert "no price" in gloo  # a CPU run without a price: n/a, said why
        assert "lost" in row_text(pilot, "20260101-130000-cpu")
        crashed = row_text(pilot, "20260101-120000-vit-b16")
        assert "crashed" in crashed and "trn1.2xlarge" in crashed
        # No summary in its meta.json: read after the first frame, through compare's path.
        expected = compare_rows([root / "20260101-120000-vit-b16"])[0]
        assert format_value(expected["samples_per_s"], "rate") in crashed
        assert format_value(expected["samples_per_dollar_steady"], "count") in crashed
        assert READING not in screen_text(app)


async def test_a_corrupt_session_is_listed_with_its_problem(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "sessions")
    app = home(root)
    async with app.run_test(size=(160, 30), notifications=True) as pilot:
        await settle(pilot)
        assert "unreadable" in row_text(pilot, CORRUPT)
        assert "broken" in row_text(pilot, NO_META)
        assert "no meta.json" in row_text(pilot, NO_META)
        await highlight(pilot, CORRUPT)
        assert "meta.json: unreadable: Expecting" in screen_text(app)  # whole, below
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)  # not opened
        assert "cannot open" in screen_text(app)


async def test_a_frame_of_a_session_left_is_not_drawn_on_the_next_one(tmp_path: Path) -> None:
    """A frame (and log lines) read for a session, still queued when it was left and another
    opened, are dropped: not drawn on the new dashboard, whose panels may not even be there
    yet (CI caught it as NoMatches: a replay playing as `l` and Enter were pressed)."""
    root = mixed_folder(tmp_path / "sessions")
    app = home(root)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await highlight(pilot, "20260101-120000-vit-b16")
        await pilot.press("enter")
        await settle(pilot)
        old_model, old_state = app.model, app.last_state
        assert old_state is not None
        await pilot.press("l")
        await settle(pilot)
        await highlight(pilot, "sample-cpu-gloo")
        await pilot.press("enter")
        # As the poll worker would have posted them just before the session was left.
        app.post_message(StateUpdated(old_state, old_model))
        app.post_message(LogLines(LogChoice(), ["a line of the session left"], True, None,
                                  old_model))
        await settle(pilot)
        assert app.session_dir.name == "sample-cpu-gloo"
        assert app.last_state is not old_state and app.last_state is not None
        assert "a line of the session left" not in screen_text(app)
        assert "vit-b16" not in screen_text(app)


async def test_enter_replays_a_finished_session_and_l_comes_back(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "sessions")
    app = home(root)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await highlight(pilot, "20260101-120000-vit-b16")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert app.replaying and app.session_dir.name == "20260101-120000-vit-b16"
        assert "replay" in screen_text(app)
        await pilot.press("space")  # the player's keys work here
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen) and not app.following
        assert len(app.screen_stack) == 1
        assert app.timeline is None and not hasattr(app, "model")  # the recording let go
        commands = {c.title for c in app.get_system_commands(app.screen)}
        assert "Play / pause" not in commands and "Stop training" not in commands
        # The home screen's own space marks again (the player's space rests here).
        await pilot.press("space")
        assert "1 marked" in screen_text(app)
        # Another session opens anew.
        await highlight(pilot, "sample-cpu-gloo")
        await pilot.press("enter")
        await settle(pilot)
        assert app.session_dir.name == "sample-cpu-gloo" and isinstance(app.screen,
                                                                          DashboardScreen)


async def test_enter_opens_a_running_session_live(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    running = starting_session(root)
    reference_session(root, end=True)
    app = home(root)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert "starting" in row_text(pilot, running.name)
        await highlight(pilot, running.name)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert app.session_dir == running and not app.replaying
        assert app.check_action("play", ()) is False  # no player over a live run


async def test_started_on_a_session_l_leads_home(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "sessions")
    session = root / "20260101-120000-vit-b16"
    app = home(root, session)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen) and app.session_dir == session
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "back to the home screen" in screen_text(app)
        assert "Sessions" in {c.title for c in app.get_system_commands(app.screen)}
        await pilot.press("escape", "l")
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen) and len(app.screen_stack) == 1
        assert app.exit_code_for_cli() == 0
        await pilot.press("question_mark")
        assert "every session of the sessions folder" in screen_text(app)


async def test_a_sessions_first_frame_sets_its_heap_aside_until_it_is_left(
        tmp_path: Path) -> None:
    """What a session's first frame built is set aside from the garbage collector's full
    collections (live/heap.py), and given back when the session is left, and when the app
    ends: what it held in cycles must not stay for the life of the process."""
    import gc

    root = mixed_folder(tmp_path / "sessions")
    session = root / "20260101-120000-vit-b16"
    app = home(root, session)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert app.last_state is not None
        assert gc.get_freeze_count() > 0
        await pilot.press("l")  # back to the home screen
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)
        assert gc.get_freeze_count() == 0
        await pilot.press("enter")  # a session again: set aside again at its first frame
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen) and app.last_state is not None
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


async def test_sort_and_filter(tmp_path: Path) -> None:
    root = many_folder(tmp_path / "sessions", 12)
    app = home(root)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        newest_first = names(pilot)
        assert newest_first == sorted(newest_first, reverse=True)
        await pilot.press("r")
        assert names(pilot) == sorted(newest_first)
        await pilot.press("s")  # started -> state
        states = [row_text(pilot, n).split(" | ")[1] for n in names(pilot)]
        assert states == sorted(states)
        assert "STATE ^" in screen_text(app)
        await pilot.press("s", "s", "s", "s")  # name, instance, duration, samples/s
        rates = [float(row_text(pilot, n).split(" | ")[6].replace(",", ""))
                 for n in names(pilot)]
        assert rates == sorted(rates, reverse=True) and "SAMPLES/S v" in screen_text(app)
        await pilot.press("slash", *"inf2")
        await settle(pilot)
        shown = names(pilot)
        assert shown and all("inf2.xlarge" in row_text(pilot, n) for n in shown)
        assert f"{len(shown)} of 12 sessions" in screen_text(app)
        await pilot.press("enter", "escape")
        await settle(pilot)
        assert len(names(pilot)) == 12


async def test_marked_sessions_are_compared(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "sessions")
    app = home(root)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await highlight(pilot, "sample-xla-cpu")
        await pilot.press("space", "space")  # marks it and the next one (sample-cpu-gloo)
        assert "2 marked" in screen_text(app)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert {p.name for p in app.screen.picked()} == {"sample-xla-cpu", "sample-cpu-gloo"}
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)


async def test_delete_asks_and_never_deletes_a_running_session(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path / "sessions")
    running = starting_session(root)
    app = home(root)
    async with app.run_test(size=(160, 30), notifications=True) as pilot:
        await settle(pilot)
        await highlight(pilot, running.name)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen) and running.exists()
        assert "is running" in screen_text(app)

        await highlight(pilot, CORRUPT)
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmDelete)
        await pilot.press("n")
        await settle(pilot)
        assert (root / CORRUPT).exists()

        await pilot.press("d")
        assert isinstance(app.screen, ConfirmDelete)
        await pilot.press("y")
        await settle(pilot)
        assert not (root / CORRUPT).exists()
        assert CORRUPT not in names(pilot)


async def test_served_read_only_deletes_nothing(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(READ_ONLY_ENV, "1")
    root = mixed_folder(tmp_path / "sessions")
    app = home(root)
    async with app.run_test(size=(160, 30), notifications=True) as pilot:
        await settle(pilot)
        await highlight(pilot, CORRUPT)
        assert app.screen.check_action("delete", ()) is None  # greyed in the footer
        await pilot.press("d")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDelete)
        await pilot.press("y")
        await settle(pilot)
        assert (root / CORRUPT).exists()
        assert "deleting is off" in screen_text(app)


async def test_five_hundred_sessions_are_listed(tmp_path: Path) -> None:
    root = many_folder(tmp_path / "sessions", 500)
    app = home(root)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert len(names(pilot)) == 500
        assert "500 sessions" in screen_text(app)
        assert READING not in screen_text(app)  # every figure from meta.json's summary


def test_plain_neurotui_opens_home_without_a_running_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = mixed_folder(tmp_path / "sessions")
    opened: list[tuple[Path, Path | None]] = []
    monkeypatch.setattr(cli, "on_a_terminal", lambda: True)
    monkeypatch.setattr("neurotui.ui.home_app.run_app",
                        lambda root, session=None, **kw: opened.append((root, session)) or 0)
    assert cli.main(["--sessions-dir", str(root)]) == 0
    assert opened == [(root.resolve(), None)]

    # With one running: its dashboard, as before (the same app, on that session).
    running = starting_session(root)
    assert cli.main(["--sessions-dir", str(root)]) == 0
    assert opened[-1] == (root.resolve(), running.resolve())


def test_plain_neurotui_off_a_terminal_keeps_its_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = mixed_folder(tmp_path / "sessions")
    monkeypatch.setattr(cli, "on_a_terminal", lambda: False)
    monkeypatch.setattr("neurotui.ui.home_app.run_app", lambda *a, **kw: pytest.fail("home"))
    assert cli.main(["--sessions-dir", str(root)]) == 2  # as before: no session to follow
    assert "5 sessions match; name one of" in capsys.readouterr().err
