"""The dashboard as `neurotui serve` launches it without --allow-control: it shows the run
but refuses to stop or adopt the job, and says so when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neurotui.session.status import SessionStatus
from neurotui.terminal import READ_ONLY_ENV
from neurotui.ui.screens.confirm_stop import ConfirmStop
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.sessions import reference_session


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Requests that reached the supervisor's control channel (none may, read-only)."""
    requests: list[dict[str, Any]] = []
    monkeypatch.setattr("neurotui.supervisor.control.send",
                        lambda d, req, timeout=5.0: requests.append(req) or {"ok": True})
    monkeypatch.setattr("neurotui.supervisor.spawn.adopt",
                        lambda d: requests.append({"cmd": "adopt"}))
    return requests


async def test_read_only_refuses_the_stop_key_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sent: list[dict[str, Any]]) -> None:
    monkeypatch.setenv(READ_ONLY_ENV, "1")
    app = make_app(reference_session(tmp_path))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await settle(pilot)
        assert app.check_action("stop_training", ()) is None  # greyed in the footer
        await pilot.press("S")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmStop)
        await pilot.press("y")  # what would have confirmed a stop
        await settle(pilot)
        assert "Control is off" in screen_text(app)
        app.action_stop_training()  # as the command palette or any other caller would
        app.action_adopt()
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmStop)
    assert sent == []


async def test_read_only_refuses_adopting_a_job_without_supervisor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sent: list[dict[str, Any]]) -> None:
    monkeypatch.setenv(READ_ONLY_ENV, "1")
    app = make_app(reference_session(tmp_path),
                   status=SessionStatus("unsupervised", True, "its supervisor died"))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await settle(pilot)
        assert app.check_action("adopt", ()) is None
        await pilot.press("A")
        await settle(pilot)
        assert "Control is off" in screen_text(app)
    assert sent == []


async def test_the_command_palette_offers_no_stop_when_read_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = reference_session(tmp_path)
    titles: dict[bool, list[str]] = {}
    for read_only in (True, False):
        monkeypatch.setenv(READ_ONLY_ENV, "1" if read_only else "0")
        app = make_app(session)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            titles[read_only] = [c.title for c in app.get_system_commands(app.screen)]
    assert "Stop training" not in titles[True]
    assert "Stop training" in titles[False] and "Help" in titles[True]


async def test_control_stays_on_outside_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              sent: list[dict[str, Any]]) -> None:
    monkeypatch.delenv(READ_ONLY_ENV, raising=False)
    app = make_app(reference_session(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmStop)
        await pilot.press("y")
        await settle(pilot)
    assert sent == [{"cmd": "stop", "by": "dashboard"}]
