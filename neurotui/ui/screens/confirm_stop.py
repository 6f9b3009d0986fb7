"""Stopping training is deliberate: a modal that says what will happen, default No."""

from __future__ import annotations

from textual.binding import Binding

from neurotui.ui.screens.confirm import Confirm


class ConfirmStop(Confirm):
    ACT, KEEP = "Stop training", "Keep training"
    BINDINGS = [
        Binding("y", "answer(True)", "Stop training"),
        Binding("n,escape", "answer(False)", "Keep training"),
    ]

    def __init__(self, session: str) -> None:
        super().__init__(f"Stop training {session}?",
                         "The job gets SIGINT, then SIGTERM, then SIGKILL if it does not exit. "
                         "To leave it running, close the dashboard with q instead.")
        self.session = session
