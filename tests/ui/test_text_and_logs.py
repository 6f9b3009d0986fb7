"""Log lines are data: shown literally; the log tail is bounded and follows new files."""

from __future__ import annotations

import math
import os
from pathlib import Path

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static

from neurotui import charts
from neurotui.live.logtail import LAUNCHER, LogChoice, LogTail, ShownLogFollower
from neurotui.session import layout
from neurotui.textsafe import ESCAPE_STYLE, safe_text, visible_text
from neurotui.ui.widgets.logs import LogPanel
from tests.ui.sessions import NASTY_LINE, Recorder


def test_markup_stays_text_and_escapes_become_visible() -> None:
    text = safe_text(NASTY_LINE)
    assert text.plain == ("[bold red]not markup[/] \\x1b[31mred?\\x1b[0m \\x1b]0;title\\x07 "
                          "[link=http://x]click[/link] bell\\x07 done")
    assert not any(ord(c) < 32 for c in text.plain)
    escapes = [text.plain[s.start:s.end] for s in text.spans if s.style == ESCAPE_STYLE]
    assert escapes == ["\\x1b", "\\x1b", "\\x1b", "\\x07", "\\x07"]


def test_other_controls_tabs_and_carriage_returns() -> None:
    assert visible_text("a\tb") == "a   b"
    assert visible_text("x\x00y\x7fz\x9b") == "x\\x00y\\x7fz\\x9b"
    assert visible_text("line\r") == "line"  # CRLF
    assert visible_text("10%\r50%\r100% done") == "\\x0d100% done"  # progress bar rewrites
    assert visible_text("sep\u2028x") == "sep\\u2028x"


def test_tail_reads_the_backlog_end_then_follows(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(10_000)))
    tail = LogTail(path, backlog_bytes=100)
    first = tail.read()
    assert first[-1] == "line 9999" and len(first) < 15 and first[0].startswith("line ")
    with open(path, "a") as f:
        f.write("partial")
    assert tail.read() == []  # waits for the newline
    with open(path, "ab") as f:
        f.write(b" now whole\n\xff\xfe bad utf8\n")
    assert tail.read() == ["partial now whole", "\ufffd\ufffd bad utf8"]


def test_tail_bounds_a_line_without_end(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"x" * 50_000)
    tail = LogTail(path, backlog_bytes=100_000, max_line_bytes=1000)
    lines = tail.read()
    assert len(lines) == 1 and lines[0].endswith("\x1a") and len(lines[0]) == 1001
    assert visible_text(lines[0]).endswith("x\\x1a")  # the cut is marked visibly


def test_follower_picks_rank_zero_then_follows_a_restart(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "20260101-180000-logs")
    follower = ShownLogFollower(rec.dir, rescan_s=0)
    lines, reset = follower.poll(None, 0.0)
    assert follower.choice == LogChoice(LAUNCHER) and lines == [] and reset
    rec.launcher_log(["torchrun up"])
    assert follower.poll(None, 1.0) == (["torchrun up"], False)
    rec.rank_log(0, ["attempt 0 line"])
    lines, reset = follower.poll(None, 2.0)
    assert follower.choice == LogChoice(0, "stdout") and reset and lines == ["attempt 0 line"]
    newer = rec.dir / layout.TORCHRUN_LOG_DIR / "run_1" / "attempt_0" / "0" / "stdout.log"
    newer.parent.mkdir(parents=True)
    newer.write_text("restarted\n")
    os.utime(newer.parent.parent.parent, (10**10, 10**10))  # the newer torchrun run
    lines, reset = follower.poll(None, 3.0)
    assert reset and lines == ["restarted"] and follower.path == newer
    rec.close()


def test_follower_under_limits_reads_each_file_as_far_as_it_was_written(
        tmp_path: Path) -> None:
    """A replay's cursor: the newest attempt written to by then, up to its limit; a limit
    below what was read (the cursor went back) reads afresh."""
    rec = Recorder(tmp_path, "20260101-190000-limits")
    rec.rank_log(0, ["first", "second", "third"])
    older = "logs/torchrun/run_0/attempt_0/0/stdout.log"
    newer = rec.dir / layout.TORCHRUN_LOG_DIR / "run_1" / "attempt_0" / "0" / "stdout.log"
    newer.parent.mkdir(parents=True)
    newer.write_text("after the restart\n")
    os.utime(newer.parent.parent.parent, (10**10, 10**10))  # the newer torchrun run
    follower = ShownLogFollower(rec.dir, rescan_s=0)
    assert follower.poll(None, 0.0, {older: 0}) == ([], True)  # nothing written yet
    assert follower.choice == LogChoice(LAUNCHER)
    lines, reset = follower.poll(None, 1.0, {older: 13})  # "first\nsecond\n"
    assert (lines, reset, follower.choice) == (["first", "second"], True, LogChoice(0))
    assert follower.poll(None, 2.0, {older: 19}) == (["third"], False)
    assert follower.poll(None, 3.0, {older: 6}) == (["first"], True)
    lines, reset = follower.poll(None, 4.0, {older: 19, newer.relative_to(rec.dir).as_posix(): 18})
    assert (lines, reset, follower.path) == (["after the restart"], True, newer)
    rec.close()


def test_charts_ascii_and_missing() -> None:
    assert charts.sparkline([0, 1, 2, 4], 4) == " ▂▄█"
    assert charts.sparkline([0, 1, 2, 4], 4, ascii_mode=True) == " -+@"
    assert charts.sparkline([1.0, float("nan"), 2.0], 3) == "▄ █"
    assert charts.heat([100, None, 0]) == "█? "
    assert charts.bar(0.5, 4) == "██  " and charts.bar(0.5, 4, True) == "##  "
    assert charts.bar(None, 5) == "???  "
    assert charts.columns([1, 2], 2, 2) == [" █", "██"]
    # Eighths of a cell, rounded up: 2, 6, 16 and 10 of the 16 two rows hold.
    assert charts.columns([1, 3, 8, 5], 4, 2, top=8) == ["  █▂", "▂▆██"]
    assert charts.columns([1, 3, 8, 5], 4, 2, ascii_mode=True, top=8) == ["  #.", ".###"]
    assert charts.resample(list(range(10)), 2) == [2.0, 7.0]
    nan = float("nan")
    # Parts as np.array_split cuts them (the first ones one longer), NaN left out of each
    # mean, and a part of nothing but NaN stays NaN.
    assert charts.resample([1.0, nan, 3.0, 5.0, nan, nan, nan, 8.0], 3) == [2.0, 5.0, 8.0]
    assert math.isnan(charts.resample([1.0, 2.0, nan, nan], 2)[1])


class _LogBelowAPanel(App[None]):
    """A log under a panel that grows, as the alerts panel grows above the dashboard's log."""

    def compose(self) -> ComposeResult:
        yield Static("alerts", id="above")
        yield LogPanel()


def _bottom_line(panel: LogPanel) -> str:
    return panel.lines[int(panel.scroll_y) + panel.scrollable_content_region.height - 1].text


async def _forty_lines(app: _LogBelowAPanel, pilot: Pilot[None]) -> LogPanel:
    panel = app.query_one(LogPanel)
    panel.add_lines([f"line {i}" for i in range(40)])
    await pilot.pause()
    return panel


async def test_log_stays_at_its_last_line_when_a_panel_above_grows() -> None:
    app = _LogBelowAPanel()
    async with app.run_test(size=(60, 20)) as pilot:
        panel = await _forty_lines(app, pilot)
        assert _bottom_line(panel).rstrip() == "line 39"
        app.query_one("#above").styles.height = 8  # the log panel shrinks by 7 rows
        await pilot.pause()
        assert _bottom_line(panel).rstrip() == "line 39"


async def test_log_scrolled_back_holds_its_place_as_lines_arrive() -> None:
    app = _LogBelowAPanel()
    async with app.run_test(size=(60, 20)) as pilot:
        panel = await _forty_lines(app, pilot)
        panel.scroll_up(animate=False)
        await pilot.pause()
        held = _bottom_line(panel)
        panel.add_lines(["line 40"])
        await pilot.pause()
        assert _bottom_line(panel) == held
        panel.scroll_end(animate=False)  # back at the end: follows again
        await pilot.pause()
        panel.add_lines(["line 41"])
        await pilot.pause()
        assert _bottom_line(panel).rstrip() == "line 41"
