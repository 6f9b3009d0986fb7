"""`neurotui compare --tui`: the compare screen on its own, without a session to follow."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.driver import Driver
from textual.reactive import reactive
from textual.screen import Screen

from neurotui.ui.driver import quiet
from neurotui.ui.screens.compare import CompareScreen
from neurotui.ui.themes import DARK, LIGHT, THEMES


class CompareApp(App[None]):
    TITLE = "neurotui compare"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("t", "toggle_theme", "Theme", show=False),
        Binding("a", "toggle_ascii", "ASCII", show=False),
    ]
    ascii_mode: reactive[bool] = reactive(False)
    """Read by the screen as on the dashboard: plain ASCII marks and rules."""

    def get_driver_class(self) -> type[Driver]:
        return quiet(super().get_driver_class())  # an input thread that sleeps until input

    def __init__(self, root: Path, chosen: Sequence[Path] = (), *,
                 baseline: Path | None = None, ascii_mode: bool | None = None,
                 theme: str | None = None) -> None:
        super().__init__()
        self.root = Path(root)
        self.chosen = list(chosen)
        self.baseline = baseline
        for t in THEMES:
            self.register_theme(t)
        self.theme = theme or (LIGHT.name if os.environ.get("NEUROTUI_THEME") == "light"
                               else DARK.name)
        if ascii_mode is None:
            from neurotui.ui.app import want_ascii  # the dashboard's rule (NEUROTUI_ASCII)

            ascii_mode = want_ascii()
        self._ascii_default = ascii_mode

    def get_default_screen(self) -> Screen[None]:
        return CompareScreen(self.root, self.chosen, baseline=self.baseline)

    def on_mount(self) -> None:
        self.ascii_mode = self._ascii_default

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT.name if self.current_theme.dark else DARK.name

    def action_toggle_ascii(self) -> None:
        self.ascii_mode = not self.ascii_mode


def run_compare_app(root: Path, chosen: Sequence[Path] = (), *,
                    baseline: Path | None = None) -> int:
    """Show the compare screen until the user quits (q or escape). Blocking; returns 0."""
    CompareApp(root, chosen, baseline=baseline).run()
    return 0
