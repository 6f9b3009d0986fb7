"""Messages from the worker threads to the UI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # types only: the home screen starts without the live model (numpy)
    from neurotui.live.logtail import LogChoice
    from neurotui.live.model import DashboardState


class StateUpdated(Message):
    """A fresh view of the session. Only the newest matters: an older one still queued is
    dropped (coalesced) rather than drawn. `source`: the model that made it (a view of a
    session left since, still queued when another opened, is not drawn on that one)."""

    def __init__(self, state: DashboardState, source: object) -> None:
        super().__init__()
        self.state = state
        self.source = source

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StateUpdated)


class LogLines(Message):
    """Lines of the followed log; `reset` when they replace what is shown (a new choice)."""

    def __init__(self, choice: LogChoice, lines: list[str], reset: bool = False,
                 path: str | None = None, source: object = None) -> None:
        super().__init__()
        self.choice = choice
        self.lines = lines
        self.reset = reset
        self.path = path
        self.source = source  # the model of the session they were read for, as StateUpdated's


class JobActionAnswered(Message):
    """How a stop or an adoption asked from the dashboard went."""

    def __init__(self, ok: bool, text: str) -> None:
        super().__init__()
        self.ok = ok
        self.text = text
