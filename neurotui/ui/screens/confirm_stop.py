"""Stopping training is deliberate: a modal that says what will happen, default No."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmStop(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Stop training"),
        Binding("n,escape", "answer(False)", "Keep training"),
    ]
    DEFAULT_CSS = """
    ConfirmStop { align: center middle; }
    ConfirmStop > Vertical {
        width: 64; max-width: 100%; height: auto; padding: 1 2;
        border: thick $error; background: $surface;
    }
    ConfirmStop Horizontal { height: auto; margin-top: 1; }
    ConfirmStop Button { margin-right: 2; }
    """

    def __init__(self, session: str) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Stop training {self.session}?", classes="title", markup=False)
            yield Static("The job gets SIGINT, then SIGTERM, then SIGKILL if it does not "
                         "exit. To leave it running, close the dashboard with q instead.",
                         markup=False)
            with Horizontal():
                yield Button("Keep training (n)", id="keep", variant="primary")
                yield Button("Stop training (y)", id="stop", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "stop")

    def action_answer(self, stop: bool) -> None:
        self.dismiss(stop)
