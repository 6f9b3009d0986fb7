"""Host: per-CPU utilisation (a few pinned cores with an idle accelerator is the input-bound
signature), memory and load."""

from __future__ import annotations

import math

from textual.content import Content

from neurotui import charts, fmt
from neurotui.live.model import HostState
from neurotui.ui.widgets.cells import heat_lines
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE, WARN, Line, Panel, usage_style
from neurotui.ui.widgets.wrap import wrapped

PINNED = 90.0


class HostPanel(Panel):
    TITLE = "Host"

    def title(self, s: HostState) -> str:
        return f"{self.TITLE}: {len(s.cpu)} CPUs" if s.cpu else self.TITLE

    def lines(self, s: HostState, width: int, height: int) -> list[Line]:
        if not s.cpu:
            return wrapped(s.note or "no host telemetry", width, MUTED, 9)
        mean = sum(s.cpu) / len(s.cpu)
        pinned = sum(1 for c in s.cpu if c >= PINNED)
        load = " ".join(f"{x:.1f}" for x in s.load) if s.load else fmt.MISSING
        out: list[Line] = [(10, Content.assemble(
            ("cpu ", LABEL), (fmt.percent(mean), VALUE), (" avg  ", LABEL),
            (f"{pinned} pinned", WARN if pinned else MUTED), ("  load ", LABEL), (load, ""),
            _age(s.age_s)))]
        cells_rows = self._cells(s.cpu, width, height)
        out.extend(cells_rows)
        frac = s.mem_used / s.mem_total if s.mem_used is not None and s.mem_total else None
        bar_w = max(4, min(20, width - 30))
        out.append((9, Content.assemble(
            ("mem ", LABEL), (charts.bar(frac, bar_w, self.ascii_mode), "$text-accent"),
            (f" {fmt.size(s.mem_used)} / {fmt.size(s.mem_total)}", VALUE))))
        if s.cpu_history and height >= 6:
            label = "avg cpu  "
            spark = charts.sparkline(s.cpu_history, max(4, width - len(label)), self.ascii_mode,
                                     top=100.0, gap="?")
            out.append((5, Content.assemble((label, LABEL), (spark, "$text-accent"))))
        return out

    def _cells(self, cpu: tuple[float, ...], width: int, height: int) -> list[Line]:
        """Bars per CPU when there is room, else one cell per CPU (128 CPUs still fit)."""
        cell_w = 14  # "  3 ████ 100% "
        columns = max(1, width // cell_w)
        if height - 3 >= math.ceil(len(cpu) / columns) and len(cpu) <= 64 and width >= 40:
            lines: list[Line] = []
            for row in range(0, len(cpu), columns):
                parts: list[str | tuple[str, str]] = []
                for i in range(row, min(len(cpu), row + columns)):
                    parts += [(f"{i:>3} ", LABEL),
                              (charts.bar(cpu[i] / 100, 4, self.ascii_mode), "$text-accent"),
                              (f"{cpu[i]:>4.0f}%", usage_style(cpu[i]) or VALUE), " "]
                lines.append((7, Content.assemble(*parts)))
            return lines
        return heat_lines(cpu, "per cpu ", width, self.ascii_mode)


def _age(age: float | None) -> tuple[str, str]:
    if age is None or not math.isfinite(age) or age < 10:
        return ("", "")
    return (f"  {fmt.short_duration(age)} old", WARN)
