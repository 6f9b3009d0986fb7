"""Accelerator: per-NeuronCore (or per-GPU) utilisation and memory, or why there is none."""

from __future__ import annotations

import math

from textual.content import Content

from neurotui import charts, fmt
from neurotui.live.model import AcceleratorState, CoreRow
from neurotui.ui.widgets.cells import heat_lines
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE, WARN, Line, Panel, usage_style
from neurotui.ui.widgets.wrap import wrapped


class AcceleratorPanel(Panel):
    TITLE = "Accelerator"

    def title(self, s: AcceleratorState) -> str:
        if s.kind is None or not s.cores:
            return self.TITLE
        unit = "NeuronCore" if s.kind == "neuron" else "GPU"
        return f"{self.TITLE}: {len(s.cores)} {unit}{'s' if len(s.cores) > 1 else ''}"

    def lines(self, s: AcceleratorState, width: int, height: int) -> list[Line]:
        if s.kind is None or not s.cores:
            return wrapped(s.note or "no accelerator telemetry", width, WARN, 9)
        utils = [c.util for c in s.cores]
        known = [u for u in utils if u is not None]
        mem = [c.mem_used for c in s.cores if c.mem_used is not None]
        out: list[Line] = []
        mean = sum(known) / len(known) if known else None
        out.append((10, Content.assemble(
            ("util ", LABEL), (fmt.percent(mean), VALUE), (" mean", LABEL), "  ",
            ("mem ", LABEL), (fmt.size(sum(mem)) if mem else fmt.MISSING, VALUE),
            (_mem_total(s.cores), LABEL), _age(s.age_s))))
        per_core_rows = height - 2
        if len(s.cores) <= per_core_rows:
            out.extend((7, self._core_line(c, width)) for c in s.cores)
        else:
            out.extend(heat_lines(utils, "per core ", width, self.ascii_mode))
        if s.util_history and height >= 5:
            label = "history  "
            room = max(4, width - len(label))
            spark = charts.sparkline(s.util_history, room, self.ascii_mode, top=100.0, gap="?")
            out.append((6, Content.assemble((label, LABEL), (spark, "$text-accent"))))
        return out

    def _core_line(self, c: CoreRow, width: int) -> Content:
        bar_w = max(4, min(30, width - 30))
        frac = None if c.util is None else c.util / 100.0
        mem = fmt.size(c.mem_used)
        if c.mem_total:
            mem += f"/{fmt.size(c.mem_total)}"
        return Content.assemble((f"{c.label:<6}", LABEL),
                                (charts.bar(frac, bar_w, self.ascii_mode), "$text-accent"),
                                (f" {fmt.percent(c.util):>4}", usage_style(c.util) or VALUE),
                                (f" {mem}", ""), (f" {c.extra}" if c.extra else "", MUTED))


def _mem_total(cores: tuple[CoreRow, ...]) -> str:
    totals = [c.mem_total for c in cores if c.mem_total]
    return f" of {fmt.size(sum(totals))}" if totals else " used"


def _age(age: float | None) -> tuple[str, str]:
    if age is None or not math.isfinite(age) or age < 10:
        return ("", "")
    return (f"  last sample {fmt.short_duration(age)} ago", WARN)
