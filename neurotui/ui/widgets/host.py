"""Host: every CPU over time as a heat map (a few pinned cores with an idle accelerator is the
input-bound signature; the ranks' and DataLoader workers' CPUs are marked), memory and load."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from textual.content import Content

from neurotui import charts, fmt, heatmap
from neurotui.ui.widgets.cells import heat_lines, heat_map_lines
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE, WARN, Line, Panel, usage_style
from neurotui.ui.widgets.wrap import wrapped

if TYPE_CHECKING:
    from neurotui.live.model import HostState

PINNED = 90.0
KEY_HINT = "h: full screen"
LATEST_MIN_WIDTH = 60
"""From this width each heat-map row ends with its latest load in figures."""
MERGED_BAR = 10
"""The memory bar's width when it shares the summary's line."""
GAP = "   "


class HostPanel(Panel):
    TITLE = "Host"

    def title(self, s: HostState) -> str:
        if not s.cpu:
            return self.TITLE
        # Grouped heat-map rows are said here too: at 80x24 no legend line fits.
        size = self.content_size
        per_row = self._plan(s, size.width, size.height)[0] if s.heat is not None else 1
        title = f"{self.TITLE}: {len(s.cpu)} CPUs"
        grouped = [f", {per_row} per row (max)", f", {per_row}/row (max)"] if per_row > 1 \
            else [""]
        hints = [f"{heatmap.separator(self.ascii_mode)}{KEY_HINT}", " (h)"]
        # The longest that fits: the grouping first (at 80x24 no legend line says it), then
        # the key to the full-screen map.
        for group, hint in [(g, h) for g in grouped for h in hints] + [(grouped[0], "")]:
            if len(title) + len(group) + len(hint) + 4 <= self.size.width:
                return title + group + hint
        return title + grouped[0]

    def on_resize(self) -> None:
        self.retitle()  # the rows per CPU depend on the size

    def _plan(self, s: HostState, width: int, height: int) -> tuple[int, bool]:
        """CPUs per heat-map row and whether its legend fits, beside the summary and memory
        lines (one line when wide enough for both)."""
        fixed = 1 if self._one_line(s, width) else 2
        return heatmap.panel_plan(s.heat.cpus if s.heat is not None else len(s.cpu),
                                   height - fixed)

    def _one_line(self, s: HostState, width: int) -> bool:
        return _summary(s).cell_length + len(GAP) + self._mem(s, MERGED_BAR).cell_length \
            <= width

    def lines(self, s: HostState, width: int, height: int) -> list[Line]:
        if not s.cpu:
            return wrapped(s.note or "no host telemetry", width, MUTED, 9)
        summary = _summary(s)
        heat = s.heat
        if heat is not None and len(heat.loads) and heat.cpus and height >= 3 and width >= 24:
            per_row, legend = self._plan(s, width, height)
            if self._one_line(s, width):  # a wide panel: a line more for the heat map
                out: list[Line] = [(10, Content.assemble(summary, GAP,
                                                         self._mem(s, MERGED_BAR)))]
                mem = None
            else:
                out, mem = [(10, summary)], (9, self._mem(s, max(4, min(20, width - 30))))
            latest = width >= LATEST_MIN_WIDTH
            columns = width - heatmap.gutter_width(heat.cpus, per_row) - (6 if latest else 0)
            grid = heatmap.heat_grid(heat.loads, heat.times, per_row, columns,
                                      self.ascii_mode, s.marks.ranks, s.marks.workers)
            out.extend(heat_map_lines(grid, self.ascii_mode, latest=latest))
            if legend:
                parts = heatmap.legend_parts(grid, self.ascii_mode, s.marks.note, KEY_HINT)
                legend_text = heatmap.fit_parts(parts, width, self.ascii_mode)
                out.append((6, Content.styled(legend_text, MUTED)))
            if mem is not None:
                out.append(mem)
            return out
        # No history yet (or a tiny panel): the CPUs now, as cells or bars.
        out = [(10, summary)]
        out.extend(self._cells(s.cpu, width, height))
        out.append((9, self._mem(s, max(4, min(20, width - 30)))))
        if s.cpu_history and height >= 6:
            label = "avg cpu  "
            spark = charts.sparkline(s.cpu_history, max(4, width - len(label)), self.ascii_mode,
                                     top=100.0, gap="?")
            out.append((5, Content.assemble((label, LABEL), (spark, "$text-accent"))))
        return out

    def _mem(self, s: HostState, bar_w: int) -> Content:
        frac = s.mem_used / s.mem_total if s.mem_used is not None and s.mem_total else None
        return Content.assemble(
            ("mem ", LABEL), (charts.bar(frac, bar_w, self.ascii_mode), "$text-accent"),
            (f" {fmt.size(s.mem_used)} / {fmt.size(s.mem_total)}", VALUE))

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


def _summary(s: HostState) -> Content:
    mean = sum(s.cpu) / len(s.cpu)
    pinned = sum(1 for c in s.cpu if c >= PINNED)
    load = " ".join(f"{x:.1f}" for x in s.load) if s.load else fmt.MISSING
    return Content.assemble(
        ("cpu ", LABEL), (fmt.percent(mean), VALUE), (" avg  ", LABEL),
        (f"{pinned} pinned", WARN if pinned else MUTED), ("  load ", LABEL), (load, ""),
        _age(s.age_s))


def _age(age: float | None) -> tuple[str, str]:
    if age is None or not math.isfinite(age) or age < 10:
        return ("", "")
    return (f"  {fmt.short_duration(age)} old", WARN)
