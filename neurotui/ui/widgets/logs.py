"""The chosen log's tail, shown literally: lines are Text objects (never markup) and
control characters appear as visible escapes (textsafe.py)."""

from __future__ import annotations

from textual.widgets import RichLog

from neurotui.live.logtail import LogChoice
from neurotui.textsafe import safe_text

MAX_LINES = 1000


class LogPanel(RichLog):
    DEFAULT_CSS = """
    LogPanel {
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 0;
    }
    """

    def __init__(self) -> None:
        super().__init__(max_lines=MAX_LINES, wrap=False, markup=False, highlight=False,
                         auto_scroll=False, id="logs")
        self.choice: LogChoice | None = None
        self.label = "Log"
        """Starts the title; a replay of a recording without log times says "whole run"."""
        self.border_title = self.label

    def on_mount(self) -> None:
        # Anchored rather than auto-scrolled: the last line stays in view when the panel
        # shrinks (the alerts panel above it grows), and a reader who scrolled back keeps
        # their place as lines arrive until they scroll to the end again.
        self.anchor()

    def set_choice(self, choice: LogChoice, path: str | None, ranks: int) -> None:
        self.choice = choice
        where = path or "no such log file (yet)"
        keys = "  ([ ] rank, e stream)" if ranks else ""
        self.border_title = f"{self.label}: {choice.label()}: {where}{keys}"

    def add_lines(self, lines: list[str], reset: bool = False) -> None:
        if reset:
            self.clear()
            self.anchor()  # another log: start at its end
        for line in lines:
            # Whole lines (not cut to the panel): the log scrolls sideways when focused.
            text = safe_text(line)
            self.write(text, width=max(text.cell_len, self.scrollable_content_region.width, 1))
