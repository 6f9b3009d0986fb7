"""Two header lines: what runs where and at what price, then progress and the way out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.widget import Widget

from neurotui import fmt
from neurotui.ui.widgets.panel import ERROR, LABEL, MUTED, PHASE_STYLES, VALUE, WARN

if TYPE_CHECKING:
    from neurotui.live.model import HeaderState


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
        first, phase_shown = self._first(s, width)
        return Content("\n").join([first, self._second(s, width, not phase_shown)])

    def _phase(self, s: HeaderState) -> Content:
        return Content.styled(f" {s.phase.upper()} ",
                              f"reverse {PHASE_STYLES.get(s.phase, VALUE)}")

    def _first(self, s: HeaderState, width: int) -> tuple[Content, bool]:
        """The session's name first, whole; then what fits of the rest, the phase last and
        kept. Returns the line, and whether the phase is on it (else line two shows it)."""
        name = Content.assemble(" ", (s.session, "bold"))
        phase = self._phase(s)
        if name.cell_length + 2 + phase.cell_length > width:
            # The name alone fills the line: it keeps it (cut at its end only if longer
            # than the line), the phase moves to line two.
            if name.cell_length > width:
                name = Content.assemble(" ", (s.session[:max(0, width - 2)] + "…", "bold"))
            return name, False
        # (priority, piece), in the order shown: the lowest priorities go first when short.
        items: list[tuple[int, Content]] = [
            (8, Content.styled(s.instance, VALUE) if s.instance else
             Content.styled("instance unknown", MUTED))]
        price: Content | None = None
        if s.price_per_hour is not None:
            price = Content.styled(fmt.usd(s.price_per_hour) + "/h", VALUE)
            items.append((6, price))
        else:
            # Only a mark: why there is none is said by samples/$ in the throughput panel.
            items.append((6, Content.styled("price ?", WARN)))
        items.append((7, Content.styled(fmt.duration(s.elapsed_s), VALUE)))
        if s.cost_usd is not None:
            items.append((5, Content.styled(fmt.usd(s.cost_usd) + " so far", VALUE)))
        elif s.price_per_hour is not None:  # (no price: "price ?" already says why)
            items.append((5, Content.styled("cost n/a", MUTED)))
        room = width - name.cell_length - 2 - phase.cell_length  # items take 2 more each
        while items and sum(c.cell_length + 2 for _, c in items) > room:
            items.remove(min(items, key=lambda item: item[0]))
        # Where the price comes from, beside it, when the line has room for that too.
        note = Content.styled(f" ({s.price_note})", MUTED)
        if s.price_note and sum(c.cell_length + 2 for _, c in items) + note.cell_length <= room:
            items = [(p, c + note if c is price else c) for p, c in items]
        right = Content("  ").join([c for _, c in items] + [phase])
        gap = max(2, width - name.cell_length - right.cell_length)
        return Content.assemble(name, " " * gap, right), True

    def _second(self, s: HeaderState, width: int, with_phase: bool = False) -> Content:
        parts: list[str | tuple[str, str] | Content] = [" "]
        if with_phase:  # (line one holds only a long name)
            parts += [self._phase(s), "  "]
        # While a compile runs, what compiles and for how long, not only "no step yet".
        step = (s.compiling or "no step yet") if s.step is None else f"step {s.step:,}"
        if s.step_target is not None:
            step += f"/{s.step_target:,}"
        parts.append((step, VALUE if s.step is not None else MUTED))
        if s.step is not None and s.compiling:
            parts += ["  ", (s.compiling, MUTED)]
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
