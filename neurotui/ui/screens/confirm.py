"""A question that acts for good (stop training, delete a session): a modal that says what
will happen, with No as the default (focused, and escape)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class Confirm(ModalScreen[bool]):
    """Dismissed with True for the act, False to keep things as they are. A subclass names
    the act (ACT, KEEP: the button labels) and its keys' footer labels (BINDINGS)."""

    ACT = "Do it"
    KEEP = "Keep"
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical {
        width: 64; max-width: 100%; height: auto; padding: 1 2;
        border: thick $error; background: $surface;
    }
    Confirm Horizontal { height: auto; margin-top: 1; }
    Confirm Button { margin-right: 2; }
    """

    def __init__(self, question: str, consequence: str) -> None:
        super().__init__()
        self.question = question
        self.consequence = consequence

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, classes="title", markup=False)
            yield Static(self.consequence, markup=False)
            with Horizontal():
                yield Button(f"{self.KEEP} (n)", id="keep", variant="primary")
                yield Button(f"{self.ACT} (y)", id="act", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "act")

    def action_answer(self, act: bool) -> None:
        self.dismiss(act)

