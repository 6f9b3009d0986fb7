"""Text charts: sparklines, bars and one-character heat cells. Block elements by default,
plain ASCII on request: no braille anywhere (it breaks in many SSH/tmux font setups).

numpy is imported by the functions that compute with it: the dashboard's panels import this
module, and their first frame (no data yet) is drawn before numpy loads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII_LEVELS = " .:-=+*#%@"
EIGHTHS = " ▏▎▍▌▋▊▉█"
MISSING_CELL = "?"
ASCII_COLUMN = " ...#####"
"""columns() in ASCII: a cell filled by n eighths, n = 0..8 (half or more: `#`)."""
ABOVE = ("▲", "^")
"""The mark of a column holding values drawn apart, above the chart's scale (block, ASCII)."""


def _levels(ascii_mode: bool) -> str:
    return ASCII_LEVELS if ascii_mode else BLOCKS


def resample(values: Sequence[float], width: int) -> list[float]:
    """At most `width` points: consecutive values averaged (NaN-aware) when there are more."""
    import numpy as np

    if width <= 0 or not len(values):
        return []
    arr = np.asarray(values, dtype=float)
    if len(arr) <= width:
        return arr.tolist()
    starts = _starts(len(arr), width)
    finite = np.isfinite(arr)
    sums = np.add.reduceat(np.where(finite, arr, 0.0), starts)
    counts = np.add.reduceat(finite.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, math.nan).tolist()


def resample_any(flags: Sequence[bool], width: int) -> list[bool]:
    """`flags` grouped as resample() groups values: a slot is true when any of its is."""
    import numpy as np

    if width <= 0 or not len(flags):
        return []
    arr = np.asarray(flags, dtype=bool)
    if len(arr) <= width:
        return arr.tolist()
    return (np.add.reduceat(arr.astype(np.int64), _starts(len(arr), width)) > 0).tolist()


def _starts(n: int, width: int) -> np.ndarray:
    """Where each of np.array_split(range(n), width)'s parts starts, worked out at once (a
    chart redrawn every refresh would otherwise take a numpy call per cell)."""
    import numpy as np

    sizes = np.full(width, n // width)
    sizes[:n % width] += 1
    return np.concatenate([[0], np.cumsum(sizes)[:-1]])


def level(value: float, top: float, ascii_mode: bool = False) -> str:
    """One cell for `value` on a 0..top scale; a blank cell is zero, `?` is unknown."""
    chars = _levels(ascii_mode)
    if not math.isfinite(value):
        return MISSING_CELL
    if top <= 0 or value <= 0:
        return chars[0]
    steps = len(chars) - 1
    return chars[max(1, min(steps, math.ceil(value / top * steps)))]


def sparkline(values: Sequence[float], width: int, ascii_mode: bool = False,
              top: float | None = None, gap: str = " ",
              above: Sequence[bool] | None = None) -> str:
    """`values` squeezed into `width` cells; NaN (no data in that slot) is `gap`. A slot
    holding an `above` value (drawn apart, over the scale) is the ABOVE mark."""
    points = resample(values, width)
    finite = [v for v in points if math.isfinite(v)]
    if top is None:
        top = max(finite) if finite else 0.0
    cells = [gap if not math.isfinite(v) else level(v, top, ascii_mode) for v in points]
    if above is not None:
        mark = ABOVE[ascii_mode]
        cells = [mark if flag else cell
                 for cell, flag in zip(cells, resample_any(above, width), strict=True)]
    return "".join(cells)


def heat(values: Sequence[float | None], ascii_mode: bool = False, top: float = 100.0) -> str:
    """One cell per value (per CPU, per core): pinned cores stand out at a glance."""
    return "".join(level(math.nan if v is None else float(v), top, ascii_mode) for v in values)


def bar(fraction: float | None, width: int, ascii_mode: bool = False) -> str:
    """A horizontal bar `width` cells wide; unknown is a row of `?`."""
    if width <= 0:
        return ""
    if fraction is None or not math.isfinite(fraction):
        return MISSING_CELL * min(width, 3) + " " * max(0, width - 3)
    fraction = min(1.0, max(0.0, fraction))
    if ascii_mode:
        full = round(fraction * width)
        return "#" * full + " " * (width - full)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part and full < width else "")
    return text + " " * (width - len(text))


def columns(values: Sequence[float], width: int, height: int, ascii_mode: bool = False,
            top: float | None = None, bottom: float = 0.0,
            above: Sequence[bool] | None = None) -> list[str]:
    """A bar chart `height` rows tall (top row first), one column per resampled value, in
    eighths of a cell, over the axis bottom..top; a slot with no data stays blank. A slot
    holding an `above` value (drawn apart, clipped over the scale) has the ABOVE mark in the
    top row: its other values are drawn to scale below it."""
    points = [v - bottom for v in resample(values, width)]
    finite = [v for v in points if math.isfinite(v)]
    top = (max(finite) if finite else 0.0) if top is None else top - bottom
    if height <= 0:
        return []
    # Column by column, the rows then read across them (the throughput panel draws two of
    # these at every refresh): a column is its height in eighths of a cell, rounded up, and
    # columns of one height are drawn once. A row `floor` eighths up holds that height less
    # `floor` (0..8): the same as the height's fraction less `floor` rounded up, `floor` being
    # a whole number.
    chars = ASCII_COLUMN if ascii_mode else BLOCKS
    floors = [(height - 1 - r) * 8 for r in range(height)]  # top row first
    blank = " " * height
    drawn: dict[int, str] = {}
    cols = []
    for v in points:
        if not math.isfinite(v) or top <= 0:
            cols.append(blank)
            continue
        eighths = min(math.ceil(max(0.0, v) / top * height * 8), height * 8)
        col = drawn.get(eighths)
        if col is None:
            col = drawn[eighths] = "".join([chars[min(8, max(0, eighths - floor))]
                                            for floor in floors])
        cols.append(col)
    rows = ["".join(row) for row in zip(*cols, strict=True)] if cols else [""] * height
    if above is not None and rows:
        mark = ABOVE[ascii_mode]
        rows[0] = "".join(mark if flag else cell for cell, flag in
                          zip(rows[0], resample_any(above, len(points)), strict=True))
    return rows


OVERLAP = -1
"""overlay(): a cell where more than one curve passes."""


def overlay(curves: Sequence[tuple[Sequence[float], Sequence[float]]], width: int, height: int,
            x_max: float | None = None, top: float | None = None) -> list[list[int | None]]:
    """Several (x, y) curves on one grid `height` rows tall (top row first), to draw with one
    mark per curve: each cell holds the index of the curve passing there, OVERLAP where
    several do, None where none does. Each column shows a curve's mean over the x range it
    covers (NaN-aware); the axes run 0..x_max and 0..top (default: the data's maxima)."""
    import numpy as np

    grid: list[list[int | None]] = [[None] * max(0, width) for _ in range(max(0, height))]
    if width <= 0 or height <= 0:
        return grid
    points = [(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)) for xs, ys in curves]
    finite = [(x[ok], y[ok]) for x, y in points for ok in [np.isfinite(x) & np.isfinite(y)]]
    if x_max is None:
        x_max = max((float(x.max()) for x, _ in finite if len(x)), default=0.0)
    if top is None:
        top = max((float(y.max()) for _, y in finite if len(y)), default=0.0)
    for index, (x, y) in enumerate(finite):
        if not len(x):
            continue
        # Column of each point: the x axis split into `width` equal spans, x_max in the last.
        cols = (np.zeros(len(x), dtype=int) if x_max <= 0 else
                np.clip((x / x_max * width).astype(int), 0, width - 1))
        for col in np.unique(cols):
            mean = float(y[cols == col].mean())
            r = 0 if top <= 0 else round(min(1.0, max(0.0, mean / top)) * (height - 1))
            cell = grid[height - 1 - r]
            cell[col] = index if cell[col] in (None, index) else OVERLAP
    return grid
