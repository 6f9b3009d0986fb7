"""The step-time chart shows the steady state: a compiled first step of seconds is drawn
apart (marked, counted), so a 2% regression of 30 ms steps is visible on the chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui.charts import BLOCKS
from neurotui.ui.widgets.throughput import ThroughputPanel
from tests.ui.conftest import make_app, settle
from tests.ui.sessions import T0, Recorder

STEADY, SLOWER, COMPILED = 0.030, 0.0306, 4.85
AXIS = 7  # the label column left of the chart


def regression_session(root: Path) -> Path:
    """One rank: a 4.85 s compiled first step, 1000 steps of 30 ms, then 1000 steps 2% slower
    (a little noise on each: +-1%)."""
    rec = Recorder(root, "20260101-150000-regression")
    t = T0 + 1.0
    for n in range(1, 2002):
        base = COMPILED if n == 1 else (STEADY if n <= 1001 else SLOWER)
        dt = base * (1 + 0.01 * ((n * 7919) % 11 - 5) / 5) if n > 1 else base
        t += dt
        rec.step(round(t, 6), 0, n, round(dt, 6))
    return rec.close()


def chart(app: object) -> tuple[str, list[str]]:
    """The throughput panel's step-time chart: its caption and its rows (top first), the
    axis labels cut off."""
    panel = app.query_one(ThroughputPanel)  # type: ignore[attr-defined]
    lines = panel.render().plain.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("step time, "))
    rows = []
    for line in lines[at + 1:]:
        if line.startswith(("samples/s", "r0", "1 rank", "samples/$")):
            break
        if not line.startswith("▲"):  # (the marks' line, when not on the caption's)
            rows.append(line[AXIS:])
    return lines[at], rows


def heights(rows: list[str]) -> list[int]:
    """Each column's bar in eighths of a cell (marks above the scale not counted)."""
    width = max(len(r) for r in rows)
    out = []
    for col in range(width):
        cells = [r[col] if col < len(r) else " " for r in rows]
        out.append(sum(BLOCKS.index(c) for c in cells if c in BLOCKS))
    return out


@pytest.mark.parametrize("size", [(120, 36), (160, 48)])
async def test_a_2_percent_regression_is_drawn_higher(tmp_path: Path,
                                                      size: tuple[int, int]) -> None:
    app = make_app(regression_session(tmp_path), at=68)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        caption, rows = chart(app)
    assert len(rows) >= 3
    # The compiled step is apart: marked in the top row, counted and its time said.
    assert "▲ 1 warm-up step" in caption and "up to 4.85s" in caption
    assert "▲" in rows[0][:len(rows[0]) // 8]  # at the run's start
    assert "4.85s" not in "".join(rows)  # not the axis: the steady steps are
    h = heights(rows)
    drawn = [i for i, x in enumerate(h) if x > 0]
    first, last = drawn[0], drawn[-1]
    # Steps run ~35 s at 30 ms then ~31 s 2% slower: the first and last thirds of the run.
    third = (last - first) // 3
    before = h[first + 2:first + third]
    after = h[last - third:last]
    assert min(after) >= max(before) + 8  # at least one whole cell higher, every column
    # Before this chart's scale, both were the same bottom row under a 4.85 s axis.


async def test_ascii_marks_steps_above_with_a_caret(tmp_path: Path) -> None:
    app = make_app(regression_session(tmp_path), at=68, ascii_mode=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        caption, rows = chart(app)
    assert "^ 1 warm-up step" in caption and "^" in rows[0]
    assert "▲" not in caption + "".join(rows)


async def test_one_line_history_marks_steps_above(tmp_path: Path) -> None:
    """At 80x24 the history is one sparkline: the steady range, and what is above it."""
    app = make_app(regression_session(tmp_path), at=68)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = app.query_one(ThroughputPanel).render().plain.split("\n")
    line = next(x for x in lines if x.startswith("step time "))
    assert "▲" in line and line.rstrip().endswith("▲4.85s")
    assert "ms-4.85s" not in line  # the range said is the steady steps'


def test_marks_above_the_scale_follow_the_resampling() -> None:
    from neurotui import charts

    nan = float("nan")
    # A slot holding a value drawn apart: the mark in the top row, its other values below.
    assert charts.columns([nan, 1.0, 2.0], 3, 2, above=[True, True, False]) == \
        ["▲▲█", " ██"]
    assert charts.columns([nan, 1.0], 2, 1, ascii_mode=True, above=[True, False]) == ["^#"]
    assert charts.sparkline([nan, 1.0, 2.0, 2.0], 2, above=[False, True, False, False]) == \
        "▲█"
    assert charts.resample_any([False, True, False, False, False], 2) == [True, False]


async def test_the_shipped_xla_samples_steady_steps_set_the_scale() -> None:
    """Issue #16's "done when": on the shipped XLA sample (compiled first steps of up to
    4.9 s, steady steps of 30 ms) the chart's scale is the steady steps', in milliseconds,
    and the compile steps are counted and marked above it."""
    from tests.ui.test_header import xla_sample_app

    app = xla_sample_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        lines = app.query_one(ThroughputPanel).render().plain.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("step time, "))
    caption = lines[at]
    assert "warm-up steps above, up to 4.9" in caption, caption
    top, bottom = lines[at + 1][:AXIS].strip(), lines[at + 5][:AXIS].strip()
    for label in (top, bottom):
        assert label.endswith("ms") and 20.0 <= float(label[:-2]) <= 60.0, (top, bottom)
    assert float(top[:-2]) - float(bottom[:-2]) < 20.0  # a 2% change is a visible step
    assert "▲" in lines[at + 1]  # the compiled steps' columns, marked above the scale
