"""A job of many nodes, a row per node: state, ranks, share of the job's samples/s, median
step time (the slowest node marked), accelerator and host load, when last heard from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.geometry import Size

from neurotui import fmt
from neurotui.ui.widgets.panel import ERROR, LABEL, MUTED, VALUE, WARN, Line, Panel, usage_style

if TYPE_CHECKING:
    from neurotui.live.nodes import NodeRow, NodesState

STATE_STYLES = {"running": "", "lost": f"bold {ERROR}", "failed": ERROR, "stopped": WARN,
                "unsupervised": WARN}
HEARD_AFTER_S = 10.0
"""A running node's last record older than this is worth showing (a node going quiet)."""


class NodesPanel(Panel):
    TITLE = "Nodes"

    def show(self, state: NodesState) -> None:
        rows_before = None if self.state is None else len(self.state.rows)
        super().show(state)
        if len(state.rows) != rows_before:
            self.refresh(layout=True)  # its height is its rows': the screen lays out anew

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Height is "auto" (capped in CSS): a line per node and the column heads.
        return 1 if self.state is None else 1 + len(self.state.rows)

    def title(self, s: NodesState) -> str:
        lost = len(s.lost)
        return (f"Nodes of job {s.job}: {len(s.rows)}" + (f", {lost} lost" if lost else "")
                + f" (panels show {s.focus}: [ ] picks a rank and its node)")

    def lines(self, s: NodesState, width: int, height: int) -> list[Line]:
        wide = width >= 78
        head = (f"  {'NODE':<12} {'STATE':<10} {'RANKS':>5} {'SAMPLES/S':>10} {'STEP':>9}"
                + (f" {'ACCEL':>6} {'CPU':>5}" if wide else "") + "  LAST HEARD")
        out: list[Line] = [(10, Content.styled(head, f"bold {LABEL}"))]
        room = max(0, height - 1)
        rows = list(s.rows)
        # The nodes that need a look first when they do not all fit: lost, slowest, focus.
        if len(rows) > room:
            rows.sort(key=lambda r: (r.state != "lost", not r.slowest, not r.focused))
            shown = rows[:max(0, room - 1)]
            more = len(rows) - len(shown)
        else:
            shown, more = rows, 0
        for i, row in enumerate(shown):
            out.append((9 - min(i, 5), self._row(row, wide)))
        if more:
            out.append((9, Content.styled(f"  … {more} more nodes", MUTED)))
        return out

    def _row(self, r: NodeRow, wide: bool) -> Content:
        focus = (">" if self.ascii_mode else "▸") if r.focused else " "
        slow = ("  slowest", f"bold {WARN}") if r.slowest else ("", "")
        if r.heard_s is None:
            heard = "never"
        elif r.running and r.heard_s < HEARD_AFTER_S:
            heard = "now"
        else:
            heard = f"{fmt.short_duration(r.heard_s)} ago"
        parts: list[tuple[str, str]] = [
            (f"{focus} ", VALUE), (f"{r.name[:12]:<12} ", VALUE if r.focused else ""),
            (f"{r.state[:10]:<10} ", STATE_STYLES.get(r.state, MUTED)),
            (f"{len(r.ranks):>5} ", ""),
            (f"{fmt.rate(r.samples_per_s, ''):>10} ", VALUE),
            (f"{fmt.seconds(r.median_step_s):>9}", "")]
        if wide:
            parts += [(f" {fmt.percent(r.accel_util):>6}", usage_style(r.accel_util)),
                      (f" {fmt.percent(r.host_cpu):>5}", usage_style(r.host_cpu))]
        parts += [(f"  {heard}", ERROR if r.state == "lost" else MUTED), slow]
        return Content.assemble(*parts)

