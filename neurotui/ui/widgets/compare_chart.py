"""Throughput over time of several runs overlaid on one axis: one mark and colour per run, so
the curves stay apart in ASCII mode and on 256-colour or colourless terminals too."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from textual.content import Content
from textual.widget import Widget

from neurotui import charts, fmt
from neurotui.textsafe import visible_text
from neurotui.ui.widgets.panel import LABEL, MUTED

MARKS = ("●", "■", "▲", "◆", "○", "□")
ASCII_MARKS = ("*", "o", "+", "x", "#", "@")
OVERLAP_MARK = ("≡", "=")
"""(unicode, ASCII) mark of a cell where several runs pass."""
CURVE_STYLES = ("$text-accent", "$text-warning", "$text-success", "$text-error",
                "$text-primary", "$text-secondary")
CAPTION = "samples/s over time, each run from its start (compile shows as 0)"


@dataclass(frozen=True)
class Curve:
    session: str
    t_s: tuple[float, ...]
    samples_per_s: tuple[float, ...]


def curves_from_overlay(frame: pd.DataFrame, order: list[str]) -> tuple[Curve, ...]:
    """compare.throughput_overlay()'s long table as one curve per session, in `order`."""
    out = []
    for name in order:
        part = frame[frame["session"] == name]
        out.append(Curve(name, tuple(part["t_s"].astype(float)),
                         tuple(part["samples_per_s"].astype(float))))
    return tuple(out)


class CompareChart(Widget):
    DEFAULT_CSS = """
    CompareChart {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.curves: tuple[Curve, ...] = ()
        self.note = "no session picked"

    def show(self, curves: tuple[Curve, ...], note: str = "") -> None:
        if (curves, note) != (self.curves, self.note):
            self.curves, self.note = curves, note
            self.refresh()

    @property
    def ascii_mode(self) -> bool:
        return bool(getattr(self.app, "ascii_mode", False))

    def render(self) -> Content:
        width, height = max(1, self.content_size.width), max(1, self.content_size.height)
        drawn = [c for c in self.curves if any(math.isfinite(v) for v in c.samples_per_s)]
        if not drawn:
            return Content.styled(self.note or "no steps recorded yet", MUTED)
        return Content("\n").join(self.lines(width, height))

    def lines(self, width: int, height: int) -> list[Content]:
        ascii_mode = self.ascii_mode
        marks = ASCII_MARKS if ascii_mode else MARKS
        top = max((v for c in self.curves for v in c.samples_per_s if math.isfinite(v)),
                  default=0.0)
        x_max = max((max(c.t_s) for c in self.curves if c.t_s), default=0.0)
        top_label, zero_label = fmt.count(top), "0"
        axis = max(len(top_label), len(zero_label)) + 1
        curves = [(c.t_s, c.samples_per_s) for c in self.curves]
        legend = self._legend(width, ascii_mode, overlap=False)
        grid = charts.overlay(curves, max(1, width - axis), max(1, height - 2 - len(legend)),
                              x_max=x_max, top=top)
        if any(cell == charts.OVERLAP for row in grid for cell in row):
            # Name the overlap mark too; redraw if that legend needs another line.
            longer = self._legend(width, ascii_mode, overlap=True)
            if len(longer) > len(legend):
                grid = charts.overlay(curves, max(1, width - axis),
                                      max(1, height - 2 - len(longer)), x_max=x_max, top=top)
            legend = longer
        rule = "|" if ascii_mode else "│"
        out = [Content.styled(CAPTION, LABEL)]
        for r, row in enumerate(grid):
            label = top_label if r == 0 else zero_label if r == len(grid) - 1 else ""
            parts: list[tuple[str, str] | str] = [(label.rjust(axis - 1) + rule, MUTED)]
            for cell in row:
                if cell is None:
                    parts.append(" ")
                elif cell == charts.OVERLAP:
                    parts.append((OVERLAP_MARK[ascii_mode], "bold"))
                else:
                    parts.append((marks[cell % len(marks)],
                                  CURVE_STYLES[cell % len(CURVE_STYLES)]))
            out.append(Content.assemble(*parts))
        end = fmt.short_duration(x_max)
        room = max(0, width - axis - 1 - len(end))
        out.append(Content.styled(" " * axis + "0" + " " * room + end, MUTED))
        return [*out, *legend]

    def _legend(self, width: int, ascii_mode: bool, overlap: bool) -> list[Content]:
        """Mark and name of each run (names literally), as many per line as fit."""
        marks = ASCII_MARKS if ascii_mode else MARKS
        entries = [Content.assemble((marks[i % len(marks)], CURVE_STYLES[i % len(CURVE_STYLES)]),
                                    " ", visible_text(curve.session),
                                    ("" if curve.t_s else " (no steps)", MUTED))
                   for i, curve in enumerate(self.curves)]
        if overlap:
            entries.append(Content.assemble((OVERLAP_MARK[ascii_mode], "bold"),
                                            (" several", MUTED)))
        lines: list[Content] = []
        line = Content("")
        for entry in entries:
            if line.cell_length and line.cell_length + 3 + entry.cell_length > width:
                lines.append(line)
                line = Content("")
            line = entry if not line.cell_length else Content.assemble(line, "   ", entry)
        if line.cell_length:
            lines.append(line)
        return lines
