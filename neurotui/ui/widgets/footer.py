"""The footer: Textual's, with the keys in the screen's first frame."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's Footer composes empty and fills in its keys only when the screen first says
    its bindings, a refresh later: the first frame lacked the keys for about 100 ms of a
    dashboard's start (tests/bench/bench_dashboard.py's first frame is the footer's `Quit`).
    Composed with the bindings active then (the app's and the screen's; nothing has focus
    yet), and again, as Textual's, whenever they change."""

    def compose(self) -> ComposeResult:
        self._bindings_ready = True  # Textual's flag (private): set when bindings are said
        yield from super().compose()
