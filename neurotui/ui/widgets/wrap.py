"""Wrapping for the few prose lines (notes, evidence) that must be read whole."""

from __future__ import annotations

import textwrap

from textual.content import Content

from neurotui.ui.widgets.panel import Line


def wrapped(text: str, width: int, style: str, priority: int, indent: str = "",
            max_lines: int | None = None, first_indent: str = "") -> list[Line]:
    rows = textwrap.wrap(text, max(10, width), initial_indent=first_indent,
                         subsequent_indent=indent, break_on_hyphens=False) or [""]
    if max_lines is not None and len(rows) > max_lines:
        rows = rows[:max_lines]
        rows[-1] = rows[-1][:max(0, width - 1)] + "…"
    # Later wrapped lines go first when space is short, so a note keeps its beginning.
    return [(priority - (i > 0), Content.styled(row, style)) for i, row in enumerate(rows)]
