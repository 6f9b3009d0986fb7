"""Snapshot tests of the home screen (pytest-textual-snapshot), as test_snapshots.py does them:
real recorded sessions, UTC, no blinking; the folder named relatively so that no temporary
path reaches the pictures.

Update after an intended change with
`pytest tests/ui/test_home_snapshots.py --snapshot-update`, then look at the SVGs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.ui.conftest import settle
from tests.ui.home_sessions import CORRUPT, many_folder, mixed_folder

Compare = Callable[..., bool]
ROOT = Path("sessions")


@pytest.fixture(autouse=True)
def _stable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.chdir(tmp_path)


def home():  # type: ignore[no-untyped-def]
    from neurotui.ui.home_app import NeurotuiApp

    return NeurotuiApp(ROOT, interval_s=3600.0, ascii_mode=False)


async def _settled(pilot: Pilot[object]) -> None:
    await settle(pilot)


def _on(name: str) -> Callable[[Pilot[object]], object]:
    async def highlight(pilot: Pilot[object]) -> None:
        await settle(pilot)
        from textual.widgets import DataTable

        table = pilot.app.screen.query_one("#home-table", DataTable)
        keys = [str(row.key.value) for row in table.ordered_rows]
        table.move_cursor(row=next(i for i, k in enumerate(keys) if k.endswith(name)),
                          animate=False)
        await pilot.pause()

    return highlight


class TestHome:
    def test_empty_folder_80x24(self, snap_compare: Compare) -> None:
        ROOT.mkdir()
        assert snap_compare(home(), terminal_size=(80, 24), run_before=_settled)

    def test_many_sessions_120x36(self, snap_compare: Compare) -> None:
        """Real recordings, a crash (its figures read from its steps), a lost run, broken
        ones, and thirty finished runs on various instances (figures from their summary)."""
        mixed_folder(ROOT)
        many_folder(ROOT, 30)
        assert snap_compare(home(), terminal_size=(120, 36), run_before=_settled)

    def test_corrupt_session_named_with_its_problem_120x36(self, snap_compare: Compare) -> None:
        mixed_folder(ROOT)
        assert snap_compare(home(), terminal_size=(120, 36), run_before=_on(CORRUPT))
