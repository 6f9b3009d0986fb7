"""The dashboard driven by keys (Pilot) on recorded sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neurotui.live.logtail import LAUNCHER
from neurotui.session.status import SessionStatus
from neurotui.ui.screens.confirm_stop import ConfirmStop
from neurotui.ui.screens.help import HelpScreen
from neurotui.ui.widgets.logs import LogPanel
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.sessions import NASTY_LINE, cpu_only_session, empty_session, reference_session


@pytest.fixture
def ref(tmp_path: Path) -> Path:
    return reference_session(tmp_path)


def log_text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.query_one(LogPanel).lines)


async def test_essentials_at_80x24(ref: Path) -> None:
    app = make_app(ref)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    for expected in ("trn1.2xlarge", "$1.34/h", "00:01:10", "STEADY", "step 120/500", "ETA",
                     "samples/s", "straggler", "NeuronCore", "4 per row (max)", "PID",
                     "input starvation", "Log: rank 0 stdout", "training continues",
                     "S Stop training"):
        assert expected in text, expected


async def test_log_line_is_shown_literally(ref: Path) -> None:
    app = make_app(ref)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        shown = log_text(app)
    assert "[bold red]not markup[/] \\x1b[31mred?\\x1b[0m \\x1b]0;title\\x07" in shown
    assert "[link=http://x]click[/link] bell\\x07 done" in shown
    assert "\x1b" not in shown and "\x07" not in shown
    assert NASTY_LINE not in shown  # the raw escapes never reach the terminal


async def test_rank_switching_and_stream(ref: Path) -> None:
    app = make_app(ref)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.follower.choice is not None and app.follower.choice.rank == 0
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert app.log_choice is not None and app.log_choice.rank == 1
        assert "rank 1 says hello" in log_text(app)
        assert "[bold]also literal[/bold]" in log_text(app)
        assert "Log: rank 1 stdout" in screen_text(app)
        await pilot.press("e")
        await settle(pilot)
        assert "warning: slow disk" in log_text(app)
        assert "rank 1 says hello" not in log_text(app)
        assert "Log: rank 1 stderr" in screen_text(app)
        await pilot.press("right_square_bracket")  # wraps round to the launcher log
        await settle(pilot)
        assert app.log_choice.rank == LAUNCHER
        assert "W torchrun: starting 2 workers" in log_text(app)
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert app.log_choice.rank == 1


async def test_help_screen_opens_and_closes(ref: Path) -> None:
    app = make_app(ref)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "training keeps running" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_theme_and_ascii_toggles(ref: Path) -> None:
    app = make_app(ref)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.theme == "neurotui-dark"
        await pilot.press("t")
        assert app.theme == "neurotui-light"
        assert "█" in screen_text(app)
        await pilot.press("a")
        await pilot.pause()
        text = screen_text(app)
        assert app.ascii_mode
        assert not any(ch in text for ch in "█▁▂▃▄▅▆▇")  # no block elements at all
        assert not any(0x2800 <= ord(ch) <= 0x28FF for ch in text)  # and never braille


async def test_stop_asks_first_and_no_keeps_training(ref: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr("neurotui.supervisor.control.send",
                        lambda d, req, timeout=5.0: sent.append(req) or {"ok": True})
    app = make_app(ref)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmStop)
        assert "Stop training 20260101-120000-vit-b16?" in screen_text(app)
        await pilot.press("n")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmStop)
        assert sent == []
        await pilot.press("S")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
        assert sent == [{"cmd": "stop", "by": "dashboard"}]


async def test_stop_without_supervisor_stops_directly(ref: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> dict[str, Any]:
        raise ConnectionRefusedError("no supervisor")

    direct: list[Path] = []
    monkeypatch.setattr("neurotui.supervisor.control.send", refuse)
    monkeypatch.setattr("neurotui.supervisor.direct_stop.stop_unsupervised",
                        lambda d, by: direct.append(d) or True)
    app = make_app(ref)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("S", "y")
        await settle(pilot)
    assert direct == [ref]


async def test_stop_is_refused_when_training_is_not_running(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    session = reference_session(tmp_path, end=True)
    app = make_app(session, at=80, status=SessionStatus("failed", False, "failed"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmStop)


async def test_quit_leaves_training_and_returns_zero(ref: Path) -> None:
    app = make_app(ref)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 0


async def test_crashed_run_shows_evidence_and_returns_its_code(tmp_path: Path) -> None:
    session = reference_session(tmp_path, end=True)
    app = make_app(session, at=80, status=SessionStatus("failed", False, "failed"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "CRASHED" in text and "training crashed" in text
        assert "RuntimeError: [red]boom[/red] \\x1b[1m" in text
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 1


async def test_missing_data_is_said_not_zeroed(tmp_path: Path) -> None:
    app = make_app(cpu_only_session(tmp_path), at=5)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    assert "no accelerator telemetry: neuron-monitor not" in text  # wrapped in its panel
    assert "price ?" in text and "instance unknown" in text
    assert "samples/$ n/a  no price: instance type unknown" in text  # why, by the figure
    assert "no process sample recorded yet" in text


async def test_empty_session_waits_for_data(tmp_path: Path) -> None:
    app = make_app(empty_session(tmp_path), at=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    assert "no step yet" in text and "STARTING" in text
    assert "no host telemetry recorded yet" in text


async def test_follows_appended_steps(tmp_path: Path) -> None:
    """New lines in the session files show up on the next poll (the live path)."""
    from neurotui.live.clock import FixedClock
    from tests.ui.sessions import T0, Recorder

    rec = Recorder(tmp_path, "20260101-150000-live")
    clock = FixedClock(T0 + 1)
    app = make_app(rec.dir)
    app.clock = app.model.clock = clock  # the clock this test moves
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "no step yet" in screen_text(app)
        for n in range(1, 31):
            rec.step(T0 + 1 + n * 0.1, 0, n, 0.1)
        clock.t = T0 + 4.2
        app._poll()
        await settle(pilot)
        text = screen_text(app)
        assert "step 30" in text and "STEADY" in text
    rec.close()


async def test_command_palette_offers_dashboard_commands(ref: Path) -> None:
    from textual.command import CommandPalette

    app = make_app(ref)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"log: rank 1")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert app.log_choice is not None and app.log_choice.rank == 1


async def test_zoom_a_panel_and_back(ref: Path) -> None:
    from neurotui.ui.widgets.host import HostPanel

    app = make_app(ref)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.query_one(HostPanel).focus()
        await pilot.press("z")
        await pilot.pause()
        assert isinstance(app.screen.maximized, HostPanel)
        text = screen_text(app)
        # A heat-map row per CPU once it has the room (grouped 4 a row before), each with
        # its latest load.
        assert "Host: 8 CPUs ·" in text and "████  100%" in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.maximized is None


def test_themes_stay_readable_at_256_colours() -> None:
    """Over SSH COLORTERM is often dropped and colours fall back to the xterm-256 palette:
    after that fallback, text still contrasts with every background it is drawn on."""
    from rich.color import Color, ColorSystem

    from neurotui.ui.themes import THEMES

    def luminance(value: str) -> float:
        r, g, b = Color.parse(value).downgrade(ColorSystem.EIGHT_BIT).get_truecolor()

        def channel(c: int) -> float:
            c = c / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)

    def contrast(a: str, b: str) -> float:
        la, lb = sorted((luminance(a), luminance(b)), reverse=True)
        return (la + 0.05) / (lb + 0.05)

    for theme in THEMES:
        for ground in (theme.background, theme.surface, theme.panel):
            assert contrast(theme.foreground, ground) >= 7, (theme.name, ground)
            for name in ("primary", "accent", "warning", "error", "success"):
                assert contrast(getattr(theme, name), ground) >= 3, (theme.name, name, ground)


async def test_compare_key_opens_the_compare_screen_on_this_run(tmp_path: Path) -> None:
    from neurotui.ui.screens.compare import CompareScreen

    ref = reference_session(tmp_path)
    other = cpu_only_session(tmp_path)
    app = make_app(ref)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.picked() == [ref]  # this run, with the others of its folder to pick
        assert other.name in screen_text(app)
        # The dashboard's own keys rest over it: nothing to stop or switch out of sight.
        await pilot.press("S", "right_square_bracket", "c")
        await settle(pilot)
        assert app.screen is screen and app.log_choice is None
        assert "Stop training" not in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.dashboard
        assert "Stop training" in screen_text(app)


async def test_the_header_says_how_far_the_first_read_got() -> None:
    from textual.app import App, ComposeResult

    from neurotui.ui.widgets.header import SessionHeader

    class HeaderOnly(App[None]):
        def compose(self) -> ComposeResult:
            yield SessionHeader()

    app = HeaderOnly()
    async with app.run_test(size=(80, 4)) as pilot:
        header = app.query_one(SessionHeader)
        await pilot.pause()
        assert "reading the session..." in screen_text(app) and "%" not in screen_text(app)
        header.show_first_read((50 * 2**20, 200 * 2**20))
        await pilot.pause()
        assert "reading the session... 25% (50.0M of 200.0M)" in screen_text(app)


async def test_adopt_key_hands_an_unsupervised_job_to_a_new_supervisor(tmp_path: Path) -> None:
    """A real job (sleep) whose supervisor is gone: `A` starts a real supervisor that takes it
    over, the key leaves once the job is supervised, and the job's end is recorded."""
    import subprocess
    import sys
    import time

    import psutil

    from neurotui.session.reader import load_meta
    from neurotui.session.status import pid_alive, session_status
    from neurotui.ui.app import DashboardApp
    from tests.ui.sessions import Recorder

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    session = tmp_path / "20260101-200000-orphan"
    job = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        Recorder(tmp_path, session.name, command=["sleep", "120"],
                           job_pid=job.pid, supervisor_pid=gone.pid,
                           job_create_time=psutil.Process(job.pid).create_time()).close()
        assert session_status(session).state == "unsupervised"
        app = DashboardApp(session, interval_s=0.2, ascii_mode=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "A Adopt job" in screen_text(app)
            await pilot.press("A")
            for _ in range(300):
                await pilot.pause(0.1)
                if load_meta(session).get("adopted_at") and \
                        app.last_state.header.status == "running":  # type: ignore[union-attr]
                    break
            await settle(pilot)
            assert load_meta(session).get("adopted_at")
            assert "A Adopt job" not in screen_text(app)  # supervised again
        job.kill()
        job.wait()
        deadline = time.time() + 30
        while load_meta(session).get("exit") is None and time.time() < deadline:
            time.sleep(0.1)
        assert load_meta(session)["exit"]["reason"] == "ended"
    finally:
        job.kill()
        job.wait()
        supervisor = load_meta(session).get("supervisor_pid") if session.exists() else None
        if pid_alive(supervisor) and supervisor != gone.pid:
            psutil.Process(supervisor).kill()
