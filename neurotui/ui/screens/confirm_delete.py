"""Deleting a session is for good: a modal that names the folder, default No."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmDelete(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Delete"),
        Binding("n,escape", "answer(False)", "Keep"),
    ]
    DEFAULT_CSS = """
    ConfirmDelete { align: center middle; }
    ConfirmDelete > Vertical {
        width: 72; max-width: 100%; height: auto; padding: 1 2;
        border: thick $error; background: $surface;
    }
    ConfirmDelete Horizontal { height: auto; margin-top: 1; }
    ConfirmDelete Button { margin-right: 2; }
    """

    def __init__(self, session: str, folder: str) -> None:
        super().__init__()
        self.session = session
        self.folder = folder

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Delete session {self.session}?", classes="title", markup=False)
            yield Static(f"Its folder {self.folder} is removed with everything in it "
                         "(events, logs, probe records). This cannot be undone.",
                         markup=False)
            with Horizontal():
                yield Button("Keep it (n)", id="keep", variant="primary")
                yield Button("Delete (y)", id="delete", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "delete")

    def action_answer(self, delete: bool) -> None:
        self.dismiss(delete)
