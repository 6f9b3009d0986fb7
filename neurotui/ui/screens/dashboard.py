"""The dashboard: header, throughput, accelerator, host, processes, alerts, log, footer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widget import Widget

from neurotui.ui.widgets.accelerator import AcceleratorPanel
from neurotui.ui.widgets.alerts import AlertsPanel
from neurotui.ui.widgets.footer import KeysFooter
from neurotui.ui.widgets.header import SessionHeader
from neurotui.ui.widgets.host import HostPanel
from neurotui.ui.widgets.logs import LogPanel
from neurotui.ui.widgets.nodes import NodesPanel
from neurotui.ui.widgets.panel import Panel
from neurotui.ui.widgets.processes import ProcessesPanel
from neurotui.ui.widgets.throughput import ThroughputPanel

if TYPE_CHECKING:
    from neurotui.live.model import DashboardState


class DashboardScreen(Screen[None]):
    # Panels pick their detail from their own size; the screen only shares out the rows.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (140, "-wide")]

    def __init__(self, *, bar: Widget | None = None, replay: bool = False, job: bool = False,
                 id: str | None = None) -> None:
        """`bar`: a line above the footer (the replay's controls); `replay`: the header says
        that quitting ends a replay, not that training goes on; `job`: a job of many nodes,
        with a row per node (the machine panels show the node in focus)."""
        super().__init__(id=id)
        self.bar = bar
        self.replay = replay
        self.job = job

    def compose(self) -> ComposeResult:
        yield SessionHeader(replay=self.replay)
        with Horizontal(id="top"):
            yield ThroughputPanel(id="throughput")
            yield AcceleratorPanel(id="accelerator")
        with Horizontal(id="middle"):
            yield HostPanel(id="host")
            yield ProcessesPanel(id="processes")
        if self.job:
            yield NodesPanel(id="nodes")
        yield AlertsPanel(id="alerts")
        yield LogPanel()
        if self.bar is not None:
            yield self.bar
        yield KeysFooter()

    def show_state(self, state: DashboardState) -> None:
        self.query_one(SessionHeader).show(state.header)
        self.query_one(ThroughputPanel).show(state.throughput)
        self.query_one(AcceleratorPanel).show(state.accelerator)
        self.query_one(HostPanel).show(state.host)
        self.query_one(ProcessesPanel).show(state.procs)
        self.query_one(AlertsPanel).show((state.alerts, state.problems))
        if state.nodes is not None and self.job:
            self.query_one(NodesPanel).show(state.nodes)
            # The machine panels are one node's: their titles say which.
            for panel in self.query("#accelerator, #host, #processes").results(Panel):
                if panel.node != state.nodes.focus:
                    panel.node = state.nodes.focus
                    panel.retitle()

    def redraw(self) -> None:
        """Repaint every panel (a display setting changed, not the data)."""
        for widget in self.query("SessionHeader, Panel"):
            if isinstance(widget, Panel):
                widget.retitle()  # a title may depend on the setting too (ascii)
            widget.refresh()
