"""Two header lines: what runs where and at what price, then progress and the way out."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from neurotui import fmt
from neurotui.live.model import HeaderState
from neurotui.ui.widgets.panel import ERROR, LABEL, MUTED, PHASE_STYLES, VALUE, WARN


class SessionHeader(Widget):
    DEFAULT_CSS = """
    SessionHeader {
        dock: top;
        height: 2;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, replay: bool = False) -> None:
        super().__init__()
        self.state: HeaderState | None = None
        self.replay = replay
        self.first_read: tuple[int, int] | None = None

    def show_first_read(self, progress: tuple[int, int] | None) -> None:
        """Before the first frame: how far the first read of the session has got."""
        if progress != self.first_read:
            self.first_read = progress
            self.refresh()

    def show(self, state: HeaderState) -> None:
        if state != self.state:
            self.state = state
            self.refresh()

    def render(self) -> Content:
        s = self.state
        if s is None:
            read = ""
            if self.first_read is not None and self.first_read[1] > 0:
                done, total = self.first_read
                read = (f" {min(100, int(100 * done / total))}% ({fmt.size(done)} of "
                        f"{fmt.size(total)})")
            return Content.styled(f" neurotui: reading the session...{read}", MUTED)
        width = self.content_size.width
        return Content("\n").join([self._first(s, width), self._second(s, width)])

    def _first(self, s: HeaderState, width: int) -> Content:
        phase = (f" {s.phase.upper()} ", f"reverse {PHASE_STYLES.get(s.phase, VALUE)}")
        price = (fmt.usd(s.price_per_hour) + "/h", VALUE) if s.price_per_hour is not None \
            else ("no price", WARN)
        # Where the price comes from (or why there is none), when the line has room.
        note = ("", "")
        if width >= 120 and s.price_note:
            note = (f" ({s.price_note.removeprefix('no price: ')})", MUTED)
        right = Content.assemble(
            (s.instance or "instance unknown", VALUE if s.instance else MUTED), "  ", price,
            note, "  ", (fmt.duration(s.elapsed_s), VALUE), "  ",
            ((fmt.usd(s.cost_usd) + " so far") if s.cost_usd is not None else "cost n/a",
             VALUE if s.cost_usd is not None else MUTED), "  ", phase)
        room = max(8, width - right.cell_length - 3)
        name = s.session if len(s.session) <= room else "…" + s.session[-(room - 1):]
        left = Content.assemble(" ", (name, "bold"))
        gap = max(1, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)

    def _second(self, s: HeaderState, width: int) -> Content:
        parts: list[str | tuple[str, str]] = [" "]
        step = "no step yet" if s.step is None else f"step {s.step:,}"
        if s.step_target is not None:
            step += f"/{s.step_target:,}"
        parts.append((step, VALUE if s.step is not None else MUTED))
        if s.step_target is not None:
            if s.eta_s is not None:
                parts += ["  ", ("ETA ", LABEL), (fmt.short_duration(s.eta_s), VALUE)]
                if s.projected_usd is not None:
                    parts += ["  ", ("projected ", LABEL), (fmt.usd(s.projected_usd), VALUE)]
            if s.projection_note:
                parts += ["  ", (s.projection_note, MUTED)]
        if not s.running:
            detail = f"{s.status}" + (f": {s.status_detail}" if s.status_detail and
                                      s.status_detail != s.status else "")
            parts += ["  ", (detail, ERROR if s.status in ("lost", "failed") else MUTED)]
        left = Content.assemble(*parts)
        if self.replay:  # a recording: nothing to leave running
            right = Content.styled("replay: q quits ", MUTED)
            gap = max(1, width - left.cell_length - right.cell_length)
            return Content.assemble(left, " " * gap, right)
        hint = "q closes this view, training continues" if s.running else "q quits"
        right = Content.styled(hint + " ", MUTED)
        if left.cell_length + right.cell_length + 1 > width:
            right = Content.styled("q closes view; training continues " if s.running else "",
                                   MUTED)
        if left.cell_length + right.cell_length + 1 > width and s.running:
            right = Content.styled("q: training continues ", MUTED)
        gap = max(1, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)
