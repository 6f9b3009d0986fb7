"""Dashboard test helpers: apps on recorded sessions with a fixed clock, and screen text."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.pilot import Pilot

from neurotui.live.clock import FixedClock
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.ui.app import DashboardApp
from tests.ui.sessions import RUNNING, T0


def make_app(session: Path, at: float = 70.0, status: SessionStatus = RUNNING,
             **kwargs: object) -> DashboardApp:
    """The dashboard at T0 + `at` seconds, frozen there (no wall clock anywhere)."""
    kwargs.setdefault("ascii_mode", False)
    kwargs.setdefault("interval_s", 3600.0)  # polls only when a test asks (settle)
    clock = FixedClock(T0 + at)
    model = DashboardModel(SessionReader(session, telemetry_history=TELEMETRY_HISTORY), clock,
                           status=lambda: status, throttle=False)
    return DashboardApp(session, clock=clock, model=model, **kwargs)  # type: ignore[arg-type]


async def settle(pilot: Pilot[object]) -> None:
    """Let the poll worker finish and its messages be drawn."""
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def until_drawn(pilot: Pilot[object], tries: int = 40) -> None:
    """Until two frames 50 ms apart are the same: a DataTable sizes its columns on a later
    refresh than the one showing the rows it was given (seen on a loaded machine)."""
    shown = screen_text(pilot.app)
    for _ in range(tries):
        await pilot.pause(0.05)
        now = screen_text(pilot.app)
        if now == shown:
            return
        shown = now


def screen_text(app: App[object]) -> str:
    """What the terminal shows, as plain text (the compositor's rendered lines)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


@pytest.fixture(autouse=True)
def _no_env_leaks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEUROTUI_ASCII", raising=False)
    monkeypatch.delenv("NEUROTUI_THEME", raising=False)
