"""Layout of the CPU heat map, as pure functions (no Textual: unit-tested on plain arrays).

Rows are CPUs (grouped when there are more CPUs than rows: a row then shows the busiest CPU of
its group, and says so), columns are time (newest at the right; several samples averaged per
column when the history is longer than the width), a cell's shade is the load. The widgets
(cells.heat_map_lines, the host panel and the full-screen view) only style what this gives.

numpy is imported by the functions that compute with it, as in charts.py: the host panel's
first frame (no data yet) is drawn before numpy loads.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neurotui import fmt

if TYPE_CHECKING:
    import numpy as np

SHADES = " ░▒▓█"
ASCII_SHADES = " .:-=+*#%@"
MISSING_CELL = "?"
IDLE = 10.0
"""Below this a CPU is idle: a blank cell (the few percent of an idle core is noise, not load,
and a grouped row, the busiest of its CPUs, would show that noise on every row)."""
PINNED = 90.0
"""From here a cell has the darkest shade (and the panels' warning colour)."""
MISSING = -1
"""A cell's level when no sample covers it (a gap in the recording)."""
NO_DATA = -2
"""A cell's level left of the oldest sample kept: nothing to show, drawn blank."""
MARK_W = 2
"""The gutter's mark columns: R (a rank ran on a CPU of the row) and W (a DataLoader worker)."""


def shades(ascii_mode: bool) -> str:
    return ASCII_SHADES if ascii_mode else SHADES


def levels(values: np.ndarray, ascii_mode: bool = False) -> np.ndarray:
    """Shade index of each load (0 blank .. len(shades)-1 darkest), MISSING for NaN."""
    import numpy as np

    top = len(shades(ascii_mode)) - 1
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        # IDLE..PINNED spread evenly over the shades between blank and the darkest.
        middle = 1 + np.floor((values - IDLE) / (PINNED - IDLE) * (top - 1))
        out = np.where(values < IDLE, 0, np.where(values >= PINNED, top,
                                                  np.clip(middle, 1, top - 1)))
    return np.where(np.isfinite(values), out, MISSING).astype(int)


def cells(row_levels: Collection[int], ascii_mode: bool = False) -> str:
    chars = shades(ascii_mode)
    return "".join(" " if lv == NO_DATA else MISSING_CELL if lv == MISSING else chars[lv]
                   for lv in row_levels)


def group_size(cpus: int, rows: int) -> int:
    """CPUs per row so that `cpus` fit in `rows` rows: a round number (2, 3, 4, 6, 8, 12, 16,
    24, 32, 48, ...) so that rows start at CPUs easy to read (0-23, 24-47, ...)."""
    need = max(1, math.ceil(cpus / max(1, rows)))
    size = 1
    while size < need:
        # 1, 2, 3, 4, 6, 8, 12, 16, ...: each power of two, and one and a half times it.
        size = size * 3 // 2 if size >= 2 and size & (size - 1) == 0 else \
            (size + 1 if size < 2 else size * 4 // 3)
    return size


def panel_plan(cpus: int, room: int) -> tuple[int, bool]:
    """For `room` lines: CPUs per heat-map row, and whether a legend line fits below it.
    A CPU per row comes first, then the legend; grouped rows leave a line for the legend
    (which says they are grouped) from three lines up."""
    if cpus <= 0 or room <= 0:
        return 1, False
    if cpus < room:
        return 1, True
    if cpus == room:
        return 1, False
    rows = room - 1 if room >= 3 else room
    return group_size(cpus, rows), room >= 3


BLOCK_MIN_COLUMNS = 60
"""A full-screen map is split into side-by-side blocks of rows (more CPUs shown apart) only
while each block keeps this many columns of time. Not the samples at hand: the layout would
jump as the history fills."""
BLOCK_GAP = 3
MAX_BLOCKS = 4


def blocks_plan(cpus: int, width: int, rows: int, latest_w: int = 0) -> tuple[int, int]:
    """For a full screen of `rows` rows and `width` columns: how many blocks of rows side by
    side, and CPUs per row. More blocks while the CPUs do not fit one a row and each block
    keeps BLOCK_MIN_COLUMNS columns of time."""
    rows = max(1, rows)
    blocks = 1
    while blocks < MAX_BLOCKS and cpus > rows * blocks:
        more = blocks + 1
        block_w = (width - BLOCK_GAP * (more - 1)) // more
        cells = block_w - gutter_width(cpus, group_size(cpus, rows * more)) - latest_w
        if cells < BLOCK_MIN_COLUMNS:
            break
        blocks = more
    return blocks, group_size(cpus, rows * blocks)


@dataclass(frozen=True)
class HeatRow:
    first: int
    last: int
    """CPUs first..last (inclusive) are drawn on this row."""
    rank: bool
    worker: bool
    levels: tuple[int, ...]
    """Per column, oldest first: a shade index, MISSING or NO_DATA."""
    latest: float | None
    """The row's load in the newest sample (its busiest CPU's); None if not recorded."""

    def label(self) -> str:
        return row_label(self.first, self.last)

    def marks(self) -> str:
        return ("R" if self.rank else " ") + ("W" if self.worker else " ")


@dataclass(frozen=True)
class HeatGrid:
    rows: tuple[HeatRow, ...]
    per_row: int
    columns: int
    samples_per_column: float
    span_s: float
    """Time from the oldest sample drawn to the newest."""
    column_s: float
    """About how much time a column covers (0: unknown, a single sample)."""

    @property
    def label_width(self) -> int:
        return max((len(r.label()) for r in self.rows), default=1)

    @property
    def gutter_width(self) -> int:
        """Label, a space, the marks, a space."""
        return self.label_width + MARK_W + 2


def row_label(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def gutter_width(cpus: int, per_row: int) -> int:
    """What HeatGrid.gutter_width will be, before the grid is made (to size its columns)."""
    per_row = max(1, per_row)
    widest = max((len(row_label(g, min(cpus, g + per_row) - 1))
                  for g in range(0, cpus, per_row)), default=1)
    return widest + MARK_W + 2


def heat_grid(loads: np.ndarray, times: np.ndarray | None, per_row: int, columns: int,
              ascii_mode: bool = False, ranks: Collection[int] = (),
              workers: Collection[int] = ()) -> HeatGrid:
    """`loads`: samples x CPUs (percent, NaN not recorded), oldest first. Rows of `per_row`
    CPUs (a row's value: its busiest CPU's), `columns` columns of time ending at the newest
    sample (a column's value: the mean of the samples it covers)."""
    import numpy as np

    loads = np.asarray(loads, dtype=float)
    samples, cpus = loads.shape if loads.ndim == 2 else (0, 0)
    columns = max(1, columns)
    per_row = max(1, per_row)
    if cpus == 0:
        return HeatGrid((), per_row, columns, 1.0, 0.0, 0.0)
    starts = np.arange(0, cpus, per_row)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN groups: NaN, as meant
        # fmax: NaN only where every CPU of the group is NaN.
        grouped = np.fmax.reduceat(loads, starts, axis=1) if samples else \
            np.zeros((0, len(starts)))
    shown = min(samples, columns)
    means = _time_bins(grouped, shown)
    shaded = levels(means, ascii_mode)  # shown x rows
    blank = columns - shown
    span = 0.0
    if times is not None and samples:
        drawn = np.asarray(times, dtype=float)
        drawn = drawn[np.isfinite(drawn)]
        span = float(drawn[-1] - drawn[0]) if len(drawn) > 1 else 0.0
    per_column = span / (samples - 1) * samples / shown if samples > 1 else 0.0
    rank_rows = {c // per_row for c in ranks}
    worker_rows = {c // per_row for c in workers}
    newest = grouped[-1].tolist() if samples else [math.nan] * len(starts)
    rows = []
    for r, (first, row_levels) in enumerate(zip(starts.tolist(), shaded.T.tolist(),
                                                strict=True)):
        latest = newest[r] if math.isfinite(newest[r]) else None
        rows.append(HeatRow(first, min(cpus, first + per_row) - 1, r in rank_rows,
                            r in worker_rows, (NO_DATA,) * blank + tuple(row_levels), latest))
    return HeatGrid(tuple(rows), per_row, columns, samples / max(1, shown), span,
                    per_column)


def _time_bins(series: np.ndarray, bins: int) -> np.ndarray:
    """`series` (samples x rows) squeezed into `bins` rows of means (NaN-aware). Where the
    sizes cannot be even the oldest bins take a sample more (np.array_split's sizes)."""
    import numpy as np

    samples = len(series)
    if bins <= 0 or samples == 0:
        return np.zeros((0, series.shape[1] if series.ndim == 2 else 0))
    if bins >= samples:
        return series.astype(float)
    sizes = np.full(bins, samples // bins)
    sizes[:samples % bins] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    finite = np.isfinite(series)
    sums = np.add.reduceat(np.where(finite, series, 0.0), starts, axis=0)
    counts = np.add.reduceat(finite.astype(np.int64), starts, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def grouping_note(per_row: int) -> str:
    return f"{per_row} CPUs per row, max" if per_row > 1 else ""


def legend_parts(grid: HeatGrid, ascii_mode: bool, marks_note: str | None,
                 key_hint: str = "") -> list[str]:
    """The legend's pieces, most useful first (a narrow view keeps the first few)."""
    parts = [grouping_note(grid.per_row)] if grid.per_row > 1 else []
    parts.append(f"{fmt.short_duration(grid.span_s)} to now" if grid.span_s > 0 else "now")
    if grid.samples_per_column > 1 and grid.column_s > 0:
        parts.append(f"{fmt.short_duration(grid.column_s)} a column")
    parts.append(f"load {shades(ascii_mode)[1:]} {IDLE:g}-{PINNED:g}%+")
    parts.append(marks_note or "R rank, W DataLoader worker")
    if key_hint:
        parts.append(key_hint)
    return parts


def separator(ascii_mode: bool) -> str:
    return " | " if ascii_mode else " · "


def fit_parts(parts: list[str], width: int, ascii_mode: bool = False) -> str:
    """As many leading parts as fit `width`."""
    sep = separator(ascii_mode)
    out = ""
    for part in parts:
        candidate = f"{out}{sep}{part}" if out else part
        if len(candidate) > width:
            break
        out = candidate
    return out


def time_axis(grid: HeatGrid, width: int) -> str:
    """A line under the columns: how long ago the oldest column was, and `now` at the right."""
    if width <= 0:
        return ""
    right = "now"
    drawn = grid.columns - sum(1 for lv in (grid.rows[0].levels if grid.rows else ())
                               if lv == NO_DATA)
    left = f"-{fmt.short_duration(grid.span_s)}" if grid.span_s > 0 else ""
    start = max(0, width - drawn)  # the oldest drawn column
    line = [" "] * width
    if left and start + len(left) + len(right) + 1 <= width:
        line[start:start + len(left)] = left
    if len(right) <= width:
        line[width - len(right):] = right
    return "".join(line)
