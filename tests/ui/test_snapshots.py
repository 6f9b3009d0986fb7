"""Snapshot tests (pytest-textual-snapshot): recorded sessions, a frozen clock, no blinking.

Update after an intended change with `pytest tests/ui/test_snapshots.py --snapshot-update`,
then look at the SVGs under __snapshots__/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from neurotui.session.status import SessionStatus
from neurotui.ui.app import DashboardApp
from tests.ui.conftest import make_app, settle
from tests.ui.sessions import cpu_only_session, reference_session

Compare = Callable[..., bool]
FAILED = SessionStatus("failed", False, "failed")


async def _settled(pilot: Pilot[object]) -> None:
    await settle(pilot)


async def _settled_blurred(pilot: Pilot[object]) -> None:
    await settle(pilot)
    pilot.app.screen.set_focus(None)
    await pilot.pause()


class TestReferenceRun:
    """The reference case: CPU-bound input, a straggler, backward-pass swings."""

    def test_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path))
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)

    def test_160x48(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path))
        assert snap_compare(app, terminal_size=(160, 48), run_before=_settled_blurred)

    def test_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path))
        assert snap_compare(app, terminal_size=(120, 36), run_before=_settled_blurred)

    def test_ascii_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path), ascii_mode=True)
        assert snap_compare(app, terminal_size=(120, 36), run_before=_settled_blurred)

    def test_light_theme_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path), theme="neurotui-light")
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)

    def test_ascii_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path), ascii_mode=True)
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)


class TestEndsAndGaps:
    def test_crashed_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path, end=True), at=80, status=FAILED)
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)

    def test_no_accelerator_no_price_80x24(self, snap_compare: Compare,
                                           tmp_path: Path) -> None:
        app = make_app(cpu_only_session(tmp_path), at=3)
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)


class TestScreens:
    def test_help(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path))
        assert snap_compare(app, terminal_size=(100, 40), press=["question_mark"],
                            run_before=_settled)

    def test_stop_confirmation(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path))
        assert snap_compare(app, terminal_size=(80, 24), press=["S"], run_before=_settled)

    def test_rank_one_stderr_log(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(reference_session(tmp_path))

        async def pick_log(pilot: Pilot[object]) -> None:
            await settle(pilot)
            await pilot.press("right_square_bracket", "e")
            await settle(pilot)
            pilot.app.screen.set_focus(None)
            await pilot.pause()

        assert snap_compare(app, terminal_size=(80, 24), run_before=pick_log)


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


class TestReplay:
    def test_replay_paused_mid_run_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        from neurotui.ui.replay import ReplayApp

        app = ReplayApp(reference_session(tmp_path, end=True), at="0:30", paused=True,
                        interval_s=3600.0, ascii_mode=False)
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)


async def _heat_screen(pilot: Pilot[object]) -> None:
    await settle(pilot)
    await pilot.press("h")
    await settle(pilot)


class TestCpuHeatMap:
    """192 vCPUs (trn2.48xlarge), a starved DataLoader: after 30 s of compiling, each rank's
    one worker pins its CPU (marked W) while the rank's (R) waits half busy; rows grouped
    where they do not fit. Seen by a dashboard that followed the run for its last 4 minutes
    (a reader keeping the heat map's whole history, as one following it live has)."""

    def _app(self, tmp_path: Path, ascii_mode: bool = False) -> DashboardApp:
        from neurotui.live.clock import FixedClock
        from neurotui.live.cpuheat import HEAT_HISTORY
        from neurotui.live.model import DashboardModel
        from neurotui.session.reader import SessionReader
        from tests.ui.sessions import RUNNING, T0, many_cpus_session

        session = many_cpus_session(tmp_path)
        clock = FixedClock(T0 + 250)
        model = DashboardModel(SessionReader(session, telemetry_history=HEAT_HISTORY), clock,
                               status=lambda: RUNNING, throttle=False)
        return DashboardApp(session, clock=clock, model=model, ascii_mode=ascii_mode,
                            interval_s=3600.0)

    def test_screen_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path), terminal_size=(80, 24),
                            run_before=_heat_screen)

    def test_screen_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path), terminal_size=(120, 36),
                            run_before=_heat_screen)

    def test_screen_ascii_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path, ascii_mode=True), terminal_size=(120, 36),
                            run_before=_heat_screen)

    def test_screen_160x48(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path), terminal_size=(160, 48),
                            run_before=_heat_screen)

    def test_screen_ascii_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path, ascii_mode=True), terminal_size=(80, 24),
                            run_before=_heat_screen)

    def test_screen_ascii_160x48(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path, ascii_mode=True), terminal_size=(160, 48),
                            run_before=_heat_screen)

    def test_dashboard_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        assert snap_compare(self._app(tmp_path), terminal_size=(80, 24),
                            run_before=_settled_blurred)


async def _breakdown_screen(pilot: Pilot[object]) -> None:
    await settle(pilot)
    await pilot.press("b")
    await settle(pilot)
    pilot.app.screen.set_focus(None)
    await pilot.pause()


class TestStepBreakdown:
    """Two CPU ranks whose DataLoader is starved (data 66% of the step) and got slower from
    step 90 (data marked as grown against the first steady steps), on the breakdown screen
    (key b); and a run that reports no phases, told how to add them."""

    def test_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path)), terminal_size=(80, 24),
                            run_before=_breakdown_screen)

    def test_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path)), terminal_size=(120, 36),
                            run_before=_breakdown_screen)

    def test_ascii_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path), ascii_mode=True),
                            terminal_size=(120, 36), run_before=_breakdown_screen)

    def test_160x48(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path)), terminal_size=(160, 48),
                            run_before=_breakdown_screen)

    def test_ascii_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path), ascii_mode=True),
                            terminal_size=(80, 24), run_before=_breakdown_screen)

    def test_ascii_160x48(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path), ascii_mode=True),
                            terminal_size=(160, 48), run_before=_breakdown_screen)

    def test_no_phases_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        from tests.ui.phased_sessions import phased_session

        assert snap_compare(make_app(phased_session(tmp_path, phases=False)),
                            terminal_size=(80, 24), run_before=_breakdown_screen)
