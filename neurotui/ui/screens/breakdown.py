"""The step breakdown on a screen of its own (key `b`): the session's header, then where a
step's time goes, for the job and per rank, now and over time. Escape goes back.

The app hands it each new DashboardState as it does the dashboard, so it follows the run (or
the replay's cursor) live.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen

from neurotui.live.model import DashboardState
from neurotui.ui.widgets.breakdown import BreakdownPanel
from neurotui.ui.widgets.footer import KeysFooter
from neurotui.ui.widgets.header import SessionHeader


class BreakdownScreen(Screen[None]):
    BINDINGS = [Binding("escape,b", "close", "Back")]
    DEFAULT_CSS = """
    BreakdownScreen { layout: vertical; overflow: hidden; }
    BreakdownScreen BreakdownPanel { height: 1fr; }
    BreakdownScreen.-ascii BreakdownPanel { border-top: ascii $foreground 30%; }
    BreakdownScreen.-ascii BreakdownPanel:focus { border-top: ascii $primary; }
    """

    def __init__(self, state: DashboardState | None = None, *, replay: bool = False) -> None:
        super().__init__()
        self.state = state
        self.replay = replay

    def compose(self) -> ComposeResult:
        yield SessionHeader(replay=self.replay)
        yield BreakdownPanel(id="breakdown")
        yield KeysFooter()

    def on_mount(self) -> None:
        if self.state is not None:
            self.show_state(self.state)
        self._ascii_changed()
        if hasattr(self.app, "ascii_mode"):
            self.watch(self.app, "ascii_mode", lambda _: self._ascii_changed(), init=False)

    def show_state(self, state: DashboardState) -> None:
        self.state = state
        try:
            header, panel = self.query_one(SessionHeader), self.query_one(BreakdownPanel)
        except NoMatches:  # not composed yet: on_mount shows it
            return
        header.show(state.header)
        panel.show(state.breakdown)

    def _ascii_changed(self) -> None:
        self.set_class(bool(getattr(self.app, "ascii_mode", False)), "-ascii")
        panel = self.query_one(BreakdownPanel)
        panel.retitle()
        panel.refresh()
        self.query_one(SessionHeader).refresh()

    def action_close(self) -> None:
        self.app.pop_screen()
