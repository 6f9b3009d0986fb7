"""The job's process tree (launcher, ranks, DataLoader workers, compilers) with CPU and RSS."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from neurotui import fmt
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE, WARN, Line, Panel, usage_style
from neurotui.ui.widgets.wrap import wrapped

if TYPE_CHECKING:
    from neurotui.live.model import ProcRow, ProcsState

ROLE_STYLES = {"launcher": MUTED, "rank": "$text-accent", "worker": "", "compiler": WARN}


class ProcessesPanel(Panel):
    TITLE = "Processes"

    def title(self, s: ProcsState) -> str:
        if not s.rows:
            return self.TITLE
        return (f"{self.TITLE}: {len(s.rows)}, {fmt.percent(s.total_cpu)} CPU, "
                f"{fmt.size(s.total_rss)}" + (" (last sample, job ended)" if s.ended else ""))

    def lines(self, s: ProcsState, width: int, height: int) -> list[Line]:
        if not s.rows:
            return wrapped(s.note or "no process sample", width, MUTED, 9)
        wide = width >= 56
        head = f"{'PID':>7} {'CPU%':>5} {'RSS':>6} " + (f"{'ROLE':<8} " if wide else "") + "NAME"
        out: list[Line] = [(10, Content.styled(head, f"bold {LABEL}"))]
        room = height - 1
        rows = list(s.rows)
        shown = rows if len(rows) <= room else rows[:max(0, room - 1)]
        for i, p in enumerate(shown):
            out.append((9 - min(i, 5), self._row(p, wide)))
        if len(shown) < len(rows):
            out.append((9, Content.styled(f"{'':>7} … {len(rows) - len(shown)} more", MUTED)))
        return out

    def _row(self, p: ProcRow, wide: bool) -> Content:
        branch = "`" if self.ascii_mode else "└"
        tree = (" " * min(p.depth - 1, 4) + branch) if p.depth else ""
        role = (f"{p.role:<8} ", ROLE_STYLES.get(p.role, "")) if wide else ("", "")
        name_style = ROLE_STYLES.get(p.role, "") if not wide else ""
        return Content.assemble(
            (f"{p.pid:>7} ", MUTED), (f"{_cpu(p.cpu):>5}", usage_style(p.cpu) or VALUE),
            (f" {fmt.size(p.rss):>6} ", ""), role, (tree, MUTED), (p.name, name_style),
            (f" {p.role}" if not wide else "", MUTED))


def _cpu(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.0f}"
