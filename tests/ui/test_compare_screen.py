"""The compare screen on the shipped sample sessions (copied, so the tests see only them).

Update the snapshot after an intended change with
`pytest tests/ui/test_compare_screen.py --snapshot-update`, then look at the SVG.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, SelectionList, Static

import neurotui.ui.screens.compare as compare_screen
from neurotui import charts
from neurotui.compare import COLUMNS, compare_rows, format_value
from neurotui.ui.compare_app import CompareApp
from neurotui.ui.screens.compare import MARK_COLUMN, CompareScreen
from tests.ui.conftest import screen_text, until_drawn

SAMPLES = Path(__file__).resolve().parents[2] / "sessions"
GLOO, XLA = "sample-cpu-gloo", "sample-xla-cpu"
Compare = Callable[..., bool]


def copy_sample(name: str, root: Path, as_name: str | None = None,
                **meta_changes: Any) -> Path:
    dest = root / (as_name or name)
    shutil.copytree(SAMPLES / name, dest, ignore=shutil.ignore_patterns(".cache"))
    if meta_changes:
        meta = json.loads((dest / "meta.json").read_text())
        meta.update(meta_changes)
        (dest / "meta.json").write_text(json.dumps(meta))
    return dest


def broken_session(root: Path, name: str = "broken") -> Path:
    dest = root / name
    dest.mkdir(parents=True)
    (dest / "meta.json").write_text('{"format": 1, "id": ')  # cut short mid-write
    return dest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    copy_sample(GLOO, root)
    copy_sample(XLA, root)
    return root


async def settle(pilot: Pilot[object]) -> None:
    """Until the screen has drawn its newest comparison (workers start after a refresh)."""
    for _ in range(50):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        screen = pilot.app.screen
        if not isinstance(screen, CompareScreen) or not (screen._loading or screen._busy):
            break
    await pilot.pause()


def table_cells(app: App[object]) -> dict[str, dict[str, str]]:
    """Session name -> column key -> the cell's text, as shown."""
    table = app.screen.query_one("#compare-table", DataTable)
    out = {}
    for row_key in table.rows:
        cells = {str(key.value): str(table.get_cell(row_key, key))
                 for key in table.columns if key.value != MARK_COLUMN}
        out[cells["session"]] = cells
    return out


def baseline_of(app: App[object]) -> list[str]:
    table = app.screen.query_one("#compare-table", DataTable)
    return [str(table.get_cell(key, "session")) for key in table.rows
            if str(table.get_cell(key, MARK_COLUMN)) == "base"]


def notes(app: App[object]) -> str:
    return str(app.screen.query_one("#compare-notes", Static).visual)


async def test_table_shows_what_compare_rows_computes(root: Path) -> None:
    app = CompareApp(root, [root / GLOO, root / XLA], ascii_mode=False)
    async with app.run_test(size=(320, 40)) as pilot:  # room for every column
        await settle(pilot)
        cells = table_cells(app)
        expected = compare_rows([root / GLOO, root / XLA])
        for row in expected:
            shown = cells[row["session"]]
            for column in COLUMNS:
                assert shown[column.key] == format_value(row[column.key], column.kind)
        # The recorded figures themselves (2 ranks, 16 samples each, --workers 1).
        assert cells[GLOO]["samples_per_s"] == "2,573.2"
        assert cells[XLA]["samples_per_s"] == "990.7"
        assert cells[GLOO]["step_time_median_s"] == "11.8 ms"
        assert cells[XLA]["time_to_first_step_s"] == "10.1 s"
        assert cells[GLOO]["global_batch"] == cells[XLA]["global_batch"] == "32"
        assert cells[GLOO]["workers"] == "1"
        # No price recorded: n/a, never 0, and the notes say why.
        for name in (GLOO, XLA):
            for key in ("usd_per_hour", "samples_per_dollar_steady",
                        "samples_per_dollar_all_in", "relative_price_performance"):
                assert cells[name][key] == "n/a"
        assert baseline_of(app) == [GLOO]
        assert "no price recorded" in notes(app)
        assert "loading" not in notes(app)


async def test_a_column_per_step_phase_and_how_to_add_them(root: Path) -> None:
    """The CPU sample's runner reports data, forward, backward and optimizer; the XLA sample
    none: its phase cells are n/a and the notes say how to report them."""
    app = CompareApp(root, [root / GLOO, root / XLA], ascii_mode=False)
    async with app.run_test(size=(320, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#compare-table", DataTable)
        headers = [str(c.label) for c in table.columns.values()]
        phases = [h for h in headers if h in ("DATA", "FORWARD", "BACKWARD", "OPTIMIZER")]
        assert phases == ["DATA", "FORWARD", "BACKWARD", "OPTIMIZER"]
        # After the columns that decide (session ... relative): phases are read last.
        assert headers.index("DATA") > headers.index("RELATIVE")
        by_session = {str(table.get_cell(k, "session")): k for k in table.rows}
        gloo = [str(table.get_cell(by_session[GLOO], f"phase_{n}_s"))
                for n in ("data", "forward", "backward", "optimizer")]
        xla = [str(table.get_cell(by_session[XLA], f"phase_{n}_s"))
               for n in ("data", "forward", "backward", "optimizer")]
        assert all(cell.endswith(" ms") for cell in gloo) and xla == ["n/a"] * 4
        assert f"no step phases recorded in {XLA}" in notes(app)
        assert "probe.step(" in notes(app) and "phases=" in notes(app)


@pytest.mark.parametrize("width", [100, 120])
async def test_the_table_fits_the_screen_and_the_deciding_columns_come_first(
        root: Path, width: int) -> None:
    """At 100x30 the table used to be cut after STEP MEDIAN: samples/s, samples per dollar
    and relative were never on screen."""
    app = CompareApp(root, [root / GLOO, root / XLA], ascii_mode=False)
    async with app.run_test(size=(width, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#compare-table", DataTable)
        headers = [str(c.label) for c in table.columns.values()]
        assert headers[1:8] == ["SESSION", "INSTANCE", "STEP MEDIAN", "SAMPLES/S", "PRICE/H",
                                "SAMPLES/$", "RELATIVE"]
        assert table.virtual_size.width <= width  # nothing cut at the right edge
        shown = screen_text(app)
        for header in headers:
            assert header in shown
        left_out = app.screen.left_out
        assert left_out and all(c.header not in headers for c in left_out)
        assert "more columns than fit: widen the terminal" in notes(app)
        assert "Better deal: unknown, no run has a price" in notes(app)
        wider = width + 40
        await pilot.resize_terminal(wider, 30)
        await settle(pilot)
        more = [str(c.label) for c in table.columns.values()]
        assert more[:8] == headers[:8] and set(more) > set(headers)


async def test_the_decision_line_names_the_better_deal(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    copy_sample(GLOO, root, price={"usd_per_hour": 1.34375, "source": "override",
                                   "as_of": None, "spot": False})
    copy_sample(XLA, root, price={"usd_per_hour": 0.7582, "source": "override",
                                  "as_of": None, "spot": False})
    app = CompareApp(root, [root / GLOO, root / XLA], ascii_mode=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        said = " ".join(notes(app).split())
        # 2,573.2 x 3600 / 1.34375 = 6.89M against 990.7 x 3600 / 0.7582 = 4.70M: 1.47x.
        assert "Better deal: sample-cpu-gloo, 1.47x (+47%) the samples per dollar of " \
               "sample-xla-cpu: 6.9M vs 4.7M, at $1.34375/h vs $0.7582/h." in said


async def test_picking_sessions_in_the_picker(root: Path) -> None:
    app = CompareApp(root, ascii_mode=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert table_cells(app) == {}
        assert "pick sessions" in notes(app)
        picker = app.screen.query_one("#compare-picker", SelectionList)
        picker.focus()
        await pilot.press("down", "space", "down", "space")
        await settle(pilot)
        assert set(table_cells(app)) == {GLOO, XLA}
        assert baseline_of(app) == [GLOO]
        await pilot.press("space")  # unpick the highlighted one (the xla run)
        await settle(pilot)
        assert set(table_cells(app)) == {GLOO}


async def test_baseline_key_changes_the_relative_column(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    gloo = copy_sample(GLOO, root, price={"usd_per_hour": 1.34375},
                       instance={"type": "trn1.2xlarge"})
    xla = copy_sample(XLA, root, price={"usd_per_hour": 0.7582},
                      instance={"type": "inf2.xlarge"})
    app = CompareApp(root, [gloo, xla], ascii_mode=False)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        first = compare_rows([gloo, xla], 0)
        cells = table_cells(app)
        assert cells[GLOO]["relative_price_performance"] == "1.00x"
        assert cells[XLA]["relative_price_performance"] == format_value(
            first[1]["relative_price_performance"], "ratio")
        assert cells[XLA]["usd_per_hour"] == "$0.7582"
        assert cells[GLOO]["cores_used"] == "2/2"  # ranks used / NeuronCores of a trn1.2xlarge
        assert cells[GLOO]["accelerator"] == "1x Trainium"

        app.screen.query_one("#compare-table", DataTable).focus()
        await pilot.press("down", "b")
        await settle(pilot)
        second = compare_rows([gloo, xla], 1)
        cells = table_cells(app)
        assert baseline_of(app) == [XLA]
        assert cells[XLA]["relative_price_performance"] == "1.00x"
        assert cells[GLOO]["relative_price_performance"] == format_value(
            second[0]["relative_price_performance"], "ratio")
        assert math.isclose(second[0]["relative_price_performance"],
                            1 / first[1]["relative_price_performance"])
        assert cells[GLOO]["relative_price_performance"] != "1.00x"
        assert "against sample-xla-cpu" in notes(app)


async def test_unreadable_session_is_named_and_the_others_still_compare(root: Path) -> None:
    broken = broken_session(root)
    app = CompareApp(root, [root / GLOO, broken], ascii_mode=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = notes(app)
        assert "cannot read broken" in text
        assert str(broken / "meta.json") in text  # the file at fault
        assert set(table_cells(app)) == {GLOO}
        assert app.is_running
        await pilot.press("r")  # reading it again fails again, the same way
        await settle(pilot)
        assert "cannot read broken" in notes(app)


async def test_names_from_disk_are_shown_literally(tmp_path: Path) -> None:
    # A folder name cannot hold "/", so no closing tag: "[bold red]x" would still turn the
    # rest bold red (and lose its brackets) if read as markup.
    root = tmp_path / "sessions"
    nasty = copy_sample(GLOO, root, as_name="[bold red]x")
    bad = broken_session(root, "[b]bad[i]")
    app = CompareApp(root, [nasty, bad], ascii_mode=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "[bold red]x" in table_cells(app)
        assert text.count("[bold red]x") >= 3  # picker, table, chart legend
        assert "cannot read [b]bad[i]" in text
        assert "[b]bad[i]" in app.screen.query_one("#compare-picker", SelectionList) \
            .get_option_at_index(0).prompt.plain


async def test_sessions_are_read_in_a_worker(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    real = compare_screen.load_session

    def slow_load(path: Path) -> Any:
        gate.wait(10)
        return real(path)

    monkeypatch.setattr(compare_screen, "load_session", slow_load)
    app = CompareApp(root, [root / GLOO], ascii_mode=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await pilot.pause()
        assert "loading..." in notes(app)
        # The UI answers while the session is being read.
        await pilot.press("t")
        assert not app.current_theme.dark
        gate.set()
        await settle(pilot)
        assert set(table_cells(app)) == {GLOO}
        assert "loading" not in notes(app)


async def test_escape_goes_back_to_the_screen_below(root: Path) -> None:
    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(CompareScreen(root, [root / XLA]))

    app = Host()  # no ascii_mode attribute: unicode marks
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert "■" not in screen_text(app) and "●" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
        assert isinstance(app.screen, Screen)
        assert app.is_running

    alone = CompareApp(root, [root / XLA], ascii_mode=True)
    async with alone.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert not alone.is_running


def test_overlay_marks_each_curve_and_their_overlap() -> None:
    grid = charts.overlay([([0, 5, 10], [0, 10, 10]), ([0, 10], [0, float("nan")])],
                          width=3, height=3)
    assert grid[2][0] == charts.OVERLAP  # both at 0 at the start
    assert grid[0][1] == 0 and grid[0][2] == 0  # curve 0 at the top
    assert all(cell in (None, 0, charts.OVERLAP) for row in grid for cell in row)  # NaN: none
    assert charts.overlay([], 4, 2) == [[None] * 4, [None] * 4]


class TestSnapshot:
    def test_both_samples_100x30(self, snap_compare: Compare, root: Path) -> None:
        app = CompareApp(root, [root / GLOO, root / XLA], ascii_mode=False,
                         theme="neurotui-dark")

        async def settled(pilot: Pilot[object]) -> None:
            await settle(pilot)
            pilot.app.screen.set_focus(None)
            await until_drawn(pilot)

        assert snap_compare(app, terminal_size=(100, 30), run_before=settled)


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
