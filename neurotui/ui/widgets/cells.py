"""One-character cells per CPU or core, and the CPU heat map's rows; pinned ones styled apart."""

from __future__ import annotations

from textual.content import Content

from neurotui import charts, heatmap
from neurotui.heatmap import HeatGrid
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE, WARN, Line, usage_style

PINNED = 90.0


def heat_lines(values: list[float | None] | tuple[float, ...], label: str, width: int,
               ascii_mode: bool, priority: int = 8) -> list[Line]:
    room = max(8, width - len(label))
    lines: list[Line] = []
    for start in range(0, len(values), room):
        chunk = values[start:start + room]
        parts: list[str | tuple[str, str]] = [(label if not lines else " " * len(label), LABEL)]
        cells = charts.heat(chunk, ascii_mode)
        # One span per run of like cells, not per cell: spans are what rendering costs.
        run_start = 0
        for i in range(1, len(chunk) + 1):
            if i == len(chunk) or _pinned(chunk[i]) != _pinned(chunk[run_start]):
                style = WARN if _pinned(chunk[run_start]) else "$text-accent"
                parts.append((cells[run_start:i], style))
                run_start = i
        lines.append((priority - (1 if lines else 0), Content.assemble(*parts)))
    return lines


def _pinned(value: float | None) -> bool:
    return value is not None and value >= PINNED


def heat_map_lines(grid: HeatGrid, ascii_mode: bool, *, latest: bool = False,
                   priority: int = 8) -> list[Line]:
    """The heat map's rows: CPU label, R/W marks, one cell per column (pinned cells in the
    warning colour, gaps muted), and the row's latest load when `latest`."""
    label_w = grid.label_width
    lines: list[Line] = []
    for row in grid.rows:
        marks = row.marks()
        parts: list[str | tuple[str, str]] = [
            (f"{row.label():>{label_w}} ", LABEL),
            (marks[0], MARK_STYLES["R"] if row.rank else ""),
            (marks[1], MARK_STYLES["W"] if row.worker else ""), " "]
        text = heatmap.cells(row.levels, ascii_mode)
        top = len(heatmap.shades(ascii_mode)) - 1
        # One span per run of like cells: spans are what rendering costs.
        run_start = 0
        styles = [_cell_style(lv, top) for lv in row.levels]
        for i in range(1, len(styles) + 1):
            if i == len(styles) or styles[i] != styles[run_start]:
                parts.append((text[run_start:i], styles[run_start]))
                run_start = i
        if latest:
            value = row.latest
            parts.append((f" {value:>4.0f}%" if value is not None else "    ?",
                          usage_style(value) or VALUE))
        lines.append((priority, Content.assemble(*parts)))
    return lines


MARK_STYLES = {"R": "bold $text-accent", "W": "bold"}


def _cell_style(level: int, top: int) -> str:
    if level == heatmap.MISSING:
        return MUTED
    if level == heatmap.NO_DATA:
        return ""
    return WARN if level >= top else "$text-accent"
