"""The CPU heat map in the dashboard (Pilot): a starved DataLoader's CPUs are hot and marked,
a healthy run's are not; the full-screen view, live and in replay."""

from __future__ import annotations

import re
from pathlib import Path

from textual.app import App

from neurotui.ui.replay import ReplayApp
from neurotui.ui.screens.cpu_heat import CpuHeatScreen, CpuHeatView
from neurotui.ui.screens.dashboard import DashboardScreen
from neurotui.ui.widgets.host import HostPanel
from tests.ui.conftest import make_app, settle
from tests.ui.sessions import RANK_CPUS, WORKER_CPUS, many_cpus_session, reference_session

ROW = re.compile(r"^\s*(\d+)(?:-(\d+))? ([R ])([W ]) (.*?)(?:\s+(\d+)%)?\s*$")


def heat_rows(text: str, block_w: int = 0) -> list[tuple[range, str, str]]:
    """(CPUs, marks, cells) of each heat-map row of a rendered text; with `block_w`, of its
    blocks side by side (that wide, 3 columns apart), the first block's rows first."""
    lines = text.splitlines()
    if block_w:
        blocks = max(len(line) for line in lines) // (block_w + 3) + 1
        lines = [line[b * (block_w + 3):(b + 1) * (block_w + 3)] for b in range(blocks)
                 for line in lines]
    rows = []
    for line in lines:
        m = ROW.match(line)
        if m and set(m.group(5)) <= set(" ░▒▓█?.:-=+*#%@"):
            first = int(m.group(1))
            last = int(m.group(2)) if m.group(2) else first
            rows.append((range(first, last + 1), m.group(3) + m.group(4), m.group(5)))
    return rows


def panel_text(app: App[object]) -> str:
    return app.screen.query_one(HostPanel).render().plain


def view_text(app: App[object]) -> str:
    return app.screen.query_one(CpuHeatView).render().plain


def check_rows(text: str, pinned: tuple[int, ...] = WORKER_CPUS,
               busy: tuple[int, ...] = RANK_CPUS, darkest: str = "█",
               block_w: int = 0) -> None:
    """Every CPU has a row; a row with a `pinned` CPU is the darkest shade throughout, one
    with a `busy` one shaded but lighter, any other blank; R and W mark the rows where the
    ranks and the workers last ran."""
    rows = heat_rows(text, block_w)
    assert rows, text
    assert [c for cpus, _, _ in rows for c in cpus] == list(range(192))
    for cpus, marks, cells in rows:
        drawn = set(cells.strip())
        if set(pinned) & set(cpus):
            assert drawn == {darkest}, (cpus, cells)
        elif set(busy) & set(cpus):
            assert drawn and darkest not in drawn and " " not in drawn, (cpus, cells)
        else:
            assert not drawn, (cpus, cells)
        assert ("R" in marks) == bool(set(RANK_CPUS) & set(cpus))
        assert ("W" in marks) == bool(set(WORKER_CPUS) & set(cpus))


async def test_a_starved_dataloader_shows_hot_marked_cpus(tmp_path: Path) -> None:
    app = make_app(many_cpus_session(tmp_path), at=250)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(HostPanel)
        assert str(panel.border_title).startswith("Host: 192 CPUs, 24 per row (max)")
        check_rows(panel_text(app))
        assert "24 CPUs per row, max" in panel_text(app)
        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, CpuHeatScreen)
        text = view_text(app)
        assert "192 CPUs, 3 per row (max)" in text  # two blocks side by side: finer groups
        check_rows(text, block_w=(158 - 3) // 2)
        assert "R rank, W DataLoader worker" in text and text.splitlines()[-2].endswith("now")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_at_80x24_rows_are_grouped_and_said_so(tmp_path: Path) -> None:
    app = make_app(many_cpus_session(tmp_path), at=250, ascii_mode=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(HostPanel)
        assert "96/row (max)" in str(panel.border_title)  # short: the panel is narrow
        check_rows(panel_text(app), darkest="@")
        await pilot.press("h")
        await settle(pilot)
        text = view_text(app)
        assert "192 CPUs, 12 per row (max)" in text
        check_rows(text, darkest="@")
        assert text.isascii()
        await pilot.press("a")  # back to block shades, on this screen too
        await pilot.pause()
        check_rows(view_text(app))
        await pilot.press("h")  # h again closes it
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_a_healthy_run_has_no_hot_cpu(tmp_path: Path) -> None:
    app = make_app(many_cpus_session(tmp_path, starved=False), at=250)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        rows = heat_rows(panel_text(app))
        assert rows and not any("█" in cells for _, _, cells in rows)
        assert {marks for _, marks, _ in rows} == {"R ", " W", "  "}
        await pilot.press("h")
        await settle(pilot)
        rows = heat_rows(view_text(app), block_w=(158 - 3) // 2)
        assert len(rows) == 64 and not any("█" in cells for _, _, cells in rows)
        assert any("▒" in cells for _, _, cells in rows)  # busy, not pinned


async def test_an_older_session_says_the_marks_were_not_recorded(tmp_path: Path) -> None:
    app = make_app(reference_session(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await settle(pilot)
        text = view_text(app)
        assert "ranks' CPUs not recorded" in text
        rows = heat_rows(text)
        assert [r for r, _, _ in rows] == [range(c, c + 1) for c in range(8)]
        assert all(marks == "  " for _, marks, _ in rows)
        hot = [cells.strip() for cpus, _, cells in rows if cpus[0] in (0, 1, 2)]
        assert all(set(c) == {"█"} for c in hot)


async def test_no_host_telemetry_is_said(tmp_path: Path) -> None:
    from tests.ui.sessions import empty_session

    app = make_app(empty_session(tmp_path), at=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await settle(pilot)
        assert "no host telemetry recorded yet" in view_text(app)


async def test_in_replay_the_heat_map_follows_the_cursor(tmp_path: Path) -> None:
    app = ReplayApp(many_cpus_session(tmp_path), paused=True, interval_s=3600.0,
                    ascii_mode=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, CpuHeatScreen)
        assert "at 00:04:09" in view_text(app)
        check_rows(view_text(app))
        # The player's keys work from here: back to the start, the first sample only.
        await pilot.press("home")
        await settle(pilot)
        assert isinstance(app.screen, CpuHeatScreen)
        text = view_text(app)
        assert "at 00:00:00" in text
        # The first sample: the ranks compiling, their CPUs pinned, the workers idle.
        check_rows(text, pinned=RANK_CPUS, busy=())
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_the_host_panel_fits_every_size(tmp_path: Path) -> None:
    """2, 8 and 192 CPUs in host panels 24 to 160 columns wide and 3 to 40 rows tall: no line
    wider than the panel, the CPUs all there whenever the heat map is drawn."""
    from neurotui.ui.widgets.panel import fit
    from tests.ui.sessions import cpu_only_session

    for name, session in [("two", cpu_only_session(tmp_path / "two")),
                          ("eight", reference_session(tmp_path / "eight")),
                          ("many", many_cpus_session(tmp_path / "many"))]:
        app = make_app(session, at=250 if name == "many" else 70)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            panel = app.screen.query_one(HostPanel)
            state = panel.state
            cpus = len(state.cpu)
            for width in (24, 40, 59, 60, 78, 120, 160):
                for height in (3, 4, 5, 6, 8, 10, 24, 40):
                    lines = fit(panel.lines(state, width, height), height)
                    assert len(lines) <= height
                    text = "\n".join(line.plain for line in lines)
                    rows = heat_rows(text)
                    # (The summary may be cut with an ellipsis; the map's rows never are.)
                    assert all(len(line) <= width for line in text.splitlines()
                               if ROW.match(line)), (width, height)
                    assert [c for r, _, _ in rows for c in r] == list(range(cpus)), \
                        (name, width, height, text)
