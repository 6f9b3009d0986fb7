"""The step breakdown screen (key b) and the one-line breakdown, on recorded sessions."""

from __future__ import annotations

from pathlib import Path

from neurotui.metrics.breakdown import Growth, PhaseSplit
from neurotui.session import layout
from neurotui.ui.replay import ReplayApp
from neurotui.ui.screens.breakdown import BreakdownScreen
from neurotui.ui.screens.dashboard import DashboardScreen
from neurotui.ui.screens.help import HelpScreen
from neurotui.ui.widgets.breakdown import BreakdownPanel, breakdown_line, cells
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.phased_sessions import phased_session

BLOCKS = set("█▓▒░▁▂▃▄▅▆▇")


async def test_b_opens_the_breakdown_and_escape_goes_back(tmp_path: Path) -> None:
    app = make_app(phased_session(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, BreakdownScreen)
        text = screen_text(app)
        for expected in ("Step breakdown", "median of the last 100 steady steps", "job ",
                         "data 302ms 66%", "▲ data +36%", "222ms → 302ms", "per rank", "r0 ",
                         "r1 ", "share of the step over time", "100%",
                         "20260101-150000-starved"):
            assert expected in text, expected
        # The job's bar is mostly the data phase's glyph: data is the largest share.
        bar = next(line for line in text.splitlines() if line.startswith(" job "))
        assert bar.count("█") > bar.count("▒") > bar.count("▓") > 0
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)


async def test_ascii_mode_draws_letters(tmp_path: Path) -> None:
    app = make_app(phased_session(tmp_path), ascii_mode=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert app.screen.query_one(BreakdownPanel).ascii_mode
        text = screen_text(app)
        assert "DDDD" in text and "^ data +36%" in text and "->" in text
        body = text.split("Step breakdown", 1)[1]
        assert not BLOCKS & set(body)
        # Switching ASCII off on this screen redraws it with blocks.
        await pilot.press("a")
        await settle(pilot)
        assert "████" in screen_text(app)


async def test_a_run_without_phases_is_told_how_to_add_them(tmp_path: Path) -> None:
    app = make_app(phased_session(tmp_path, phases=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        text = screen_text(app)
    assert "no step phases recorded" in text
    assert 'probe.step(samples=16, phases={"data": 0.01, "forward": 0.05})' in text
    assert "from neurotui import probe" in text


async def test_the_screen_follows_the_run(tmp_path: Path) -> None:
    session = phased_session(tmp_path)
    # The run as it stood at step 60 of 140: the rest is written while the screen is shown.
    later = {}
    for path in (session / layout.PROBE_DIR).glob("rank-*.jsonl"):
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:60]))
        later[path] = lines[60:]
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        before = screen_text(app)
        assert "no phase grew" in before  # no baseline apart from the window yet
        for path, lines in later.items():
            with path.open("a") as f:
                f.writelines(lines)
        app.poll_now()
        await settle(pilot)
        after = screen_text(app)
        assert isinstance(app.screen, BreakdownScreen)
        assert "▲ data +36%" in after and "no phase grew" not in after


async def test_many_ranks_summed_up_in_a_line(tmp_path: Path) -> None:
    app = make_app(phased_session(tmp_path, ranks=32, steps=100))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        text = screen_text(app)
    assert "32 ranks: data largest on 32; data share from" in text


async def test_help_names_the_key(tmp_path: Path) -> None:
    app = make_app(phased_session(tmp_path))
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "step breakdown" in app.screen.text


async def test_replay_plays_and_seeks_from_the_breakdown(tmp_path: Path) -> None:
    app = ReplayApp(phased_session(tmp_path), paused=True, interval_s=3600.0,
                    ascii_mode=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, BreakdownScreen)
        assert "data" in screen_text(app) and "replay" in screen_text(app)
        assert app.replay_clock is not None
        at_end = app.replay_clock.now()
        await pilot.press("less_than_sign")  # back 10%, from this screen
        await settle(pilot)
        assert app.replay_clock.now() < at_end
        await pilot.press("space")
        assert app.replay_clock.playing
        await pilot.press("space")


def split(names: tuple[str, ...], shares: tuple[float, ...],
          grew: Growth | None = None) -> PhaseSplit:
    return PhaseSplit(None, names, tuple(s * 0.5 for s in shares), shares, 50, 0.5, grew)


def test_breakdown_line_fits_its_width() -> None:
    from neurotui.live.model import BreakdownState

    job = split(("data", "forward", "backward", "optimizer"), (0.6, 0.1, 0.25, 0.05),
                Growth("data", 0.2, 0.3))
    state = BreakdownState(job, (), None, job.grew, None, "the script's probe.step phases")
    for width in (40, 60, 80, 120):
        line = breakdown_line(state, width, ascii_mode=False)
        assert line.cell_length <= width, (width, line.plain)
        assert line.plain.startswith("step █") and "data 60%" in line.plain
        assert line.plain.endswith("▲ data +50%")
    wide = breakdown_line(state, 120, ascii_mode=True).plain
    assert wide.startswith("step DDD") and "bwd 25%" in wide and wide.endswith("^ data +50%")
    assert "reading" in breakdown_line(None, 80, False).plain
    none = BreakdownState(None, (), None, None,
                          "no step phases recorded, so ... unknown", None)
    assert "probe.step(" in breakdown_line(none, 80, False).plain


def test_cells_fill_the_bar_and_keep_small_phases_visible() -> None:
    assert sum(cells([0.6, 0.1, 0.25, 0.05], 40)) == 40
    assert cells([0.97, 0.02, 0.01], 10) == [8, 1, 1]
    assert cells([0.5, 0.5], 0) == [0, 0]
