"""The CPU heat map on the whole screen: every CPU over the history kept (one row each when
they fit), the ranks' and DataLoader workers' CPUs marked. Follows the dashboard's frames, live
or replayed (the app hands it each new state); escape goes back."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget

from neurotui import fmt, heatmap
from neurotui.live.model import DashboardState, HostState
from neurotui.ui.widgets.cells import heat_map_lines
from neurotui.ui.widgets.footer import KeysFooter
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE

LATEST_W = 6  # " 100%" after each row


@dataclass(frozen=True)
class HeatView:
    """What the view shows: the host state and the header's session and elapsed time."""

    host: HostState
    session: str
    elapsed_s: float


class CpuHeatView(Widget):
    DEFAULT_CSS = """
    CpuHeatView {
        height: 1fr;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self) -> None:
        super().__init__(id="cpu-heat")
        self.view: HeatView | None = None

    def show(self, view: HeatView) -> None:
        if view != self.view:  # states compare cheaply (the history by its key)
            self.view = view
            self.refresh()

    def render(self) -> Content:
        view = self.view
        if view is None:
            return Content.styled("reading the session...", MUTED)
        ascii_mode = bool(getattr(self.app, "ascii_mode", False))
        size = self.content_size
        width, height = max(1, size.width), max(1, size.height)
        s = view.host
        heat = s.heat
        title = Content.assemble(("CPU heat map", "bold $text-primary"),
                                 (f"  {view.session}", VALUE),
                                 (f"  at {fmt.duration(view.elapsed_s)}", LABEL))
        if heat is None or not heat.cpus or not len(heat.loads):
            note = s.note or "no CPU sample recorded yet"
            return Content("\n").join([title, Content.styled(note, MUTED)])
        room = max(1, height - 3)  # the title, the time axis and the legend
        # Many CPUs on a wide screen: blocks of rows side by side, so more CPUs get a row.
        blocks, per_row = heatmap.blocks_plan(heat.cpus, width, room, LATEST_W)
        block_w = (width - heatmap.BLOCK_GAP * (blocks - 1)) // blocks
        gutter = heatmap.gutter_width(heat.cpus, per_row)
        columns = max(1, block_w - gutter - LATEST_W)
        grid = heatmap.heat_grid(heat.loads, heat.times, per_row, columns, ascii_mode,
                                  s.marks.ranks, s.marks.workers)
        what = f"{heat.cpus} CPUs" + (f", {per_row} per row (max)" if per_row > 1 else "")
        title = Content.assemble(title, ("  ", ""), (what, VALUE))
        rows = [line for _, line in heat_map_lines(grid, ascii_mode, latest=True)]
        tall = min(room, -(-len(rows) // blocks))  # rows per block
        gap = Content(" " * heatmap.BLOCK_GAP)
        axis = Content.styled(" " * gutter + heatmap.time_axis(grid, columns), LABEL)
        lines = [title]
        for i in range(tall + 1):  # the last: each block's time axis
            cells = []
            for b in range(blocks):
                j = b * tall + i
                cell = axis if i == tall else rows[j] if j < len(rows) else Content("")
                cells.append(cell.truncate(block_w).pad_right(block_w - cell.cell_length)
                             if b < blocks - 1 else cell)
            lines.append(gap.join(cells))
        legend = heatmap.fit_parts(heatmap.legend_parts(grid, ascii_mode, s.marks.note,
                                                          "escape: back"), width, ascii_mode)
        lines.append(Content.styled(legend, MUTED))
        return Content("\n").join(lines)


class CpuHeatScreen(Screen[None]):
    BINDINGS = [Binding("escape,h", "close", "Back", key_display="esc")]

    def __init__(self, state: DashboardState | None = None) -> None:
        super().__init__(id="cpu-heat-screen")
        self._first = state

    def compose(self) -> ComposeResult:
        yield CpuHeatView()
        yield KeysFooter()

    def on_mount(self) -> None:
        if self._first is not None:
            self.show_state(self._first)
        # ASCII mode is the app's: redraw when it is switched here.
        self.watch(self.app, "ascii_mode", lambda _: self.query_one(CpuHeatView).refresh(),
                   init=False)

    def show_state(self, state: DashboardState) -> None:
        self.query_one(CpuHeatView).show(HeatView(state.host, state.header.session,
                                                  state.header.elapsed_s))

    def action_close(self) -> None:
        self.dismiss(None)
