"""Alerts, each with the evidence it was raised on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.geometry import Size

from neurotui.textsafe import visible_text
from neurotui.ui.widgets.panel import MUTED, SEVERITY_MARKS, SEVERITY_STYLES, Line, Panel
from neurotui.ui.widgets.wrap import wrapped

if TYPE_CHECKING:
    from neurotui.live.alerts import Alert


class AlertsPanel(Panel):
    TITLE = "Alerts"

    def show(self, state: tuple[tuple[Alert, ...], str | None]) -> None:
        super().show(state)
        self.set_class(bool(state[0]), "-active")

    def title(self, state: tuple[tuple[Alert, ...], str | None]) -> str:
        alerts, _ = state
        return f"{self.TITLE}: {len(alerts)}" if alerts else self.TITLE

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Height is "auto" (capped in CSS): as many lines as the full text needs.
        if self.state is None:
            return 1
        alerts, problems = self.state
        return len(self._lines(alerts, problems, max(1, width), compact=False))

    def lines(self, state: tuple[tuple[Alert, ...], str | None], width: int,
              height: int) -> list[Line]:
        alerts, problems = state
        full = self._lines(alerts, problems, width, compact=False)
        return full if len(full) <= height else self._lines(alerts, problems, width, True)

    def _lines(self, alerts: tuple[Alert, ...], problems: str | None, width: int,
               compact: bool) -> list[Line]:
        out: list[Line] = []
        if not alerts:
            out.append((10, Content.styled("no alerts", MUTED)))
        for n, alert in enumerate(alerts):
            top = 100 - n * 10  # every alert's title before any alert's evidence
            mark = SEVERITY_MARKS.get(alert.severity, ("●", "*"))[1 if self.ascii_mode else 0]
            style = SEVERITY_STYLES.get(alert.severity, "bold")
            evidence = [visible_text(e) for e in alert.evidence]
            if compact and evidence:
                # Short of room: the title carries the first piece of evidence.
                out.append((top, Content.assemble((f"{mark} {alert.title}", style),
                                                  (f": {evidence[0]}", ""))))
                evidence = evidence[1:]
            else:
                out.append((top, Content.styled(f"{mark} {alert.title}", style)))
            for line in evidence:
                out.extend(wrapped(line, width, "", top - 60, indent="    ", first_indent="  ",
                                   max_lines=3 if compact else None))
            if alert.advice:
                arrow = "->" if self.ascii_mode else "→"
                out.extend(wrapped(f"{arrow} {alert.advice}", width, MUTED, top - 70,
                                   indent="     ", first_indent="  ",
                                   max_lines=2 if compact else None))
        return out
