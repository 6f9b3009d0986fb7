"""Deleting a session is for good: a modal that names the folder, default No."""

from __future__ import annotations

from textual.binding import Binding

from neurotui.ui.screens.confirm import Confirm


class ConfirmDelete(Confirm):
    ACT, KEEP = "Delete", "Keep it"
    BINDINGS = [
        Binding("y", "answer(True)", "Delete"),
        Binding("n,escape", "answer(False)", "Keep"),
    ]
    DEFAULT_CSS = "ConfirmDelete > Vertical { width: 72; }"  # room for the folder's path

    def __init__(self, session: str, folder: str) -> None:
        super().__init__(f"Delete session {session}?",
                         f"Its folder {folder} is removed with everything in it (events, logs, "
                         "probe records). This cannot be undone.")
        self.session = session
        self.folder = folder
