"""The CPU heat map's layout (neurotui/heatmap.py): pure functions on arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from neurotui import heatmap
from neurotui.heatmap import (
    ASCII_SHADES,
    MISSING,
    NO_DATA,
    SHADES,
    blocks_plan,
    group_size,
    gutter_width,
    heat_grid,
    levels,
    panel_plan,
)


def loads(samples: int, cpus: int, hot: tuple[int, ...] = (), idle: float = 2.0) -> np.ndarray:
    out = np.full((samples, cpus), idle)
    out[:, list(hot)] = 100.0
    return out


@pytest.mark.parametrize("ascii_mode", [False, True])
def test_shades_blank_when_idle_darkest_when_pinned_and_missing_apart(ascii_mode: bool) -> None:
    chars = ASCII_SHADES if ascii_mode else SHADES
    top = len(chars) - 1
    got = levels(np.array([0.0, 2.0, heatmap.IDLE, 50.0, 89.9, heatmap.PINNED, 100.0,
                           math.nan]), ascii_mode).tolist()
    assert got[:2] == [0, 0]
    assert got[2] == 1  # busy at all: the lightest shade
    assert 1 <= got[3] < top and got[3] <= got[4] < top
    assert got[5:7] == [top, top]
    assert got[7] == MISSING
    # More load never gives a lighter shade.
    ramp = levels(np.linspace(0, 100, 201), ascii_mode)
    assert (np.diff(ramp) >= 0).all() and set(ramp.tolist()) == set(range(top + 1))
    assert heatmap.cells([NO_DATA, MISSING, 0, top], ascii_mode) == f" ?{chars[0]}{chars[top]}"


def test_group_sizes_are_round_and_fit() -> None:
    round_sizes = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256}
    for cpus in (1, 2, 3, 8, 12, 64, 96, 128, 192):
        for rows in range(1, 50):
            size = group_size(cpus, rows)
            assert size in round_sizes
            assert math.ceil(cpus / size) <= rows
            if rows >= cpus:
                assert size == 1
    assert group_size(192, 9) == 24 and group_size(192, 2) == 96 and group_size(8, 2) == 4


def test_panel_plan_prefers_a_cpu_a_row_then_the_legend() -> None:
    assert panel_plan(8, 9) == (1, True)
    assert panel_plan(8, 8) == (1, False)
    assert panel_plan(8, 7) == (2, True)  # grouped: a line says so
    assert panel_plan(8, 2) == (4, False)  # 80x24: the panel's title says so
    assert panel_plan(192, 3) == (96, True)
    assert panel_plan(2, 1) == (2, False)
    assert panel_plan(0, 5) == (1, False) and panel_plan(8, 0) == (1, False)


@pytest.mark.parametrize("cpus", [2, 8, 192])
@pytest.mark.parametrize("width", [40, 60, 80, 120, 160])
@pytest.mark.parametrize("height", [3, 4, 6, 10, 24, 40])
def test_every_size_fits_and_keeps_the_hot_cpus_darkest(cpus: int, width: int,
                                                         height: int) -> None:
    """The panel's layout from 2 to 192 CPUs: rows fit the room, each row fits the width,
    and a hot CPU's row is the darkest shade however its CPUs are grouped."""
    hot = (cpus - 1,) if cpus < 8 else (5, cpus - 1)
    per_row, _ = panel_plan(cpus, height - 2)
    columns = width - gutter_width(cpus, per_row)
    grid = heat_grid(loads(240, cpus, hot), np.arange(240.0), per_row, columns,
                     ranks=[hot[0]], workers=[hot[-1]])
    assert len(grid.rows) <= max(1, height - 2)
    assert grid.gutter_width == gutter_width(cpus, per_row)
    top = len(SHADES) - 1
    for row in grid.rows:
        assert len(row.levels) == columns
        assert grid.gutter_width + len(row.levels) <= width
        has_hot = any(row.first <= c <= row.last for c in hot)
        assert all(lv == top for lv in row.levels) == has_hot
        assert has_hot or all(lv == 0 for lv in row.levels)
        assert row.rank == (row.first <= hot[0] <= row.last)
        assert row.worker == (row.first <= hot[-1] <= row.last)
    covered = [c for row in grid.rows for c in range(row.first, row.last + 1)]
    assert covered == list(range(cpus))


def test_rows_show_their_busiest_cpu_and_labels_say_the_range() -> None:
    data = loads(3, 8)
    data[:, 6] = 50.0
    grid = heat_grid(data, None, 4, 3)
    assert [r.label() for r in grid.rows] == ["0-3", "4-7"]
    assert grid.rows[1].latest == 50.0 and grid.rows[0].latest == 2.0
    assert grid.rows[1].levels == tuple(levels(np.array([50.0] * 3)).tolist())
    assert [r.label() for r in heat_grid(loads(1, 7), None, 3, 5).rows] == ["0-2", "3-5", "6"]


def test_time_runs_to_the_right_and_long_histories_are_averaged() -> None:
    data = np.zeros((10, 1))
    data[-1] = 100.0  # only the newest sample is busy
    grid = heat_grid(data, np.arange(10.0), 1, 20)
    row = grid.rows[0].levels
    assert row[:10] == (NO_DATA,) * 10  # before the first sample: blank, not "idle"
    assert row[-1] == len(SHADES) - 1 and set(row[10:-1]) == {0}
    assert grid.span_s == 9.0 and grid.samples_per_column == 1
    # 240 samples in 60 columns: 4 a column, each the mean of its samples.
    data = np.zeros((240, 1))
    data[-4:] = 100.0
    data[-8:-4] = 50.0
    grid = heat_grid(data, np.arange(240.0), 1, 60)
    row = grid.rows[0].levels
    assert len(row) == 60 and NO_DATA not in row
    assert row[-1] == len(SHADES) - 1 and row[-2] == levels(np.array([50.0]))[0]
    assert grid.samples_per_column == 4 and grid.column_s == pytest.approx(4.0)
    # Uneven: 10 samples in 4 columns, the older columns take the extra samples.
    grid = heat_grid(np.arange(10.0).reshape(10, 1) * 10, None, 1, 4)
    assert len(grid.rows[0].levels) == 4


def test_gaps_are_missing_not_idle() -> None:
    data = loads(5, 2)
    data[2] = math.nan  # a gap row
    data[:, 1] = math.nan  # a CPU the samples never listed
    grid = heat_grid(data, None, 1, 5)
    assert grid.rows[0].levels[2] == MISSING and grid.rows[0].levels[1] == 0
    assert set(grid.rows[1].levels) == {MISSING} and grid.rows[1].latest is None
    # Grouped with a recorded CPU, the group shows the recorded one.
    assert MISSING not in heat_grid(loads(5, 2) * [1, math.nan], None, 2, 5).rows[0].levels


def test_no_samples_or_no_cpus() -> None:
    assert heat_grid(np.zeros((0, 4)), None, 1, 10).rows[0].levels == (NO_DATA,) * 10
    assert heat_grid(np.zeros((0, 0)), None, 1, 10).rows == ()


def test_blocks_side_by_side_only_while_each_keeps_its_time() -> None:
    # 192 CPUs on a 160x48 screen (44 rows): two blocks give each CPU group half the size.
    blocks, per_row = blocks_plan(192, 158, 44, latest_w=6)
    assert blocks == 2 and math.ceil(192 / per_row) <= 88
    assert blocks_plan(192, 78, 20, 6)[0] == 1  # 80 columns: one block
    assert blocks_plan(8, 158, 44, 6) == (1, 1)  # they fit one a row
    assert blocks_plan(192, 400, 20, 6)[0] == heatmap.MAX_BLOCKS
    for width in range(40, 300, 7):
        blocks, per_row = blocks_plan(192, width, 20, 6)
        block_w = (width - heatmap.BLOCK_GAP * (blocks - 1)) // blocks
        assert blocks == 1 or block_w - gutter_width(192, per_row) - 6 >= \
            heatmap.BLOCK_MIN_COLUMNS


def test_legend_and_axis() -> None:
    grid = heat_grid(loads(240, 192, (5,)), np.arange(240.0), 24, 60)
    parts = heatmap.legend_parts(grid, False, None, "h: full screen")
    assert parts[0] == "24 CPUs per row, max"
    assert parts[1] == "3m59s to now" and parts[2] == "4.0s a column"
    assert parts[-2] == "R rank, W DataLoader worker" and parts[-1] == "h: full screen"
    assert "ranks' CPUs not recorded" in heatmap.legend_parts(
        grid, True, "ranks' CPUs not recorded")
    assert heatmap.fit_parts(parts, 35) == "24 CPUs per row, max · 3m59s to now"
    assert heatmap.fit_parts(parts, 35, ascii_mode=True).isascii()
    assert heatmap.fit_parts(parts, 5) == ""
    axis = heatmap.time_axis(grid, 60)
    assert len(axis) == 60 and axis.endswith("now") and axis.startswith("-3m59s")
    short = heat_grid(loads(10, 2), np.arange(10.0), 1, 30)
    axis = heatmap.time_axis(short, 30)
    assert axis.index("-9.0s") == 20  # under the oldest drawn column
