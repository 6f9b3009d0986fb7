"""Profiling the running job slows its next steps: a modal that says so first, default No."""

from __future__ import annotations

from textual.binding import Binding

from neurotui.ui.screens.confirm import Confirm


class ConfirmProfile(Confirm):
    ACT, KEEP = "Profile", "Cancel"
    BINDINGS = [
        Binding("y", "answer(True)", "Profile"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, session: str, steps: int) -> None:
        super().__init__(
            f"Profile the next {steps} steps of {session}?",
            f"Each rank runs its next {steps} optimizer steps under torch.profiler: they take "
            "longer, and the step after writes the trace. Training goes on; the traces go to "
            "the session's profiles/ folder, and the alerts panel says where.")
