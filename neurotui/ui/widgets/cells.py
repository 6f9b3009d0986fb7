"""One-character cells per CPU or core, pinned ones styled apart."""

from __future__ import annotations

from textual.content import Content

from neurotui.ui import charts
from neurotui.ui.widgets.panel import Line
from neurotui.ui.widgets.styles import LABEL, WARN

PINNED = 90.0


def heat_lines(values: list[float | None] | tuple[float, ...], label: str, width: int,
               ascii_mode: bool, priority: int = 8) -> list[Line]:
    room = max(8, width - len(label))
    lines: list[Line] = []
    for start in range(0, len(values), room):
        chunk = values[start:start + room]
        parts: list[str | tuple[str, str]] = [(label if not lines else " " * len(label), LABEL)]
        for v in chunk:
            cell = charts.heat([v], ascii_mode)
            parts.append((cell, WARN if v is not None and v >= PINNED else "$text-accent"))
        lines.append((priority - (1 if lines else 0), Content.assemble(*parts)))
    return lines
