"""One-character cells per CPU or core, pinned ones styled apart."""

from __future__ import annotations

from textual.content import Content

from neurotui import charts
from neurotui.ui.widgets.panel import LABEL, WARN, Line

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
