"""The job's process tree (launcher, ranks, DataLoader workers, compilers) with CPU and RSS."""

from __future__ import annotations

from textual.content import Content

from neurotui.ui import fmt
from neurotui.ui.model import ProcRow, ProcsState
from neurotui.ui.widgets.panel import Line, Panel
from neurotui.ui.widgets.styles import LABEL, MUTED, VALUE, WARN, usage_style
from neurotui.ui.widgets.wrap import wrapped

ROLE_STYLES = {"launcher": MUTED, "rank": "$text-accent", "worker": "", "compiler": WARN}


class ProcessesPanel(Panel):
    TITLE = "Processes"

    def lines(self, s: ProcsState, width: int, height: int) -> list[Line]:
        if not s.rows:
            self.border_title = "Processes"
            return wrapped(s.note or "no process sample", width, MUTED, 9)
        self.border_title = (f"Processes: {len(s.rows)}, {fmt.percent(s.total_cpu)} CPU, "
                             f"{fmt.size(s.total_rss)}")
        out: list[Line] = [(10, Content.styled(
            f"{'PID':>7} {'CPU%':>5} {'RSS':>6} {'ROLE':<8} NAME", f"bold {LABEL}"))]
        room = height - 1
        rows = list(s.rows)
        shown = rows if len(rows) <= room else rows[:max(0, room - 1)]
        for i, p in enumerate(shown):
            out.append((9 - min(i, 5), self._row(p)))
        if len(shown) < len(rows):
            out.append((9, Content.styled(f"{'':>7} … {len(rows) - len(shown)} more", MUTED)))
        return out

    def _row(self, p: ProcRow) -> Content:
        tree = ("  " * min(p.depth, 4)) + ("└ " if p.depth and not self.ascii_mode else
                                           "` " if p.depth else "")
        return Content.assemble(
            (f"{p.pid:>7} ", MUTED), (f"{_cpu(p.cpu):>5}", usage_style(p.cpu) or VALUE),
            (f" {fmt.size(p.rss):>6} ", ""), (f"{p.role:<8} ", ROLE_STYLES.get(p.role, "")),
            (tree, MUTED), (p.name, ""))


def _cpu(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.0f}"
