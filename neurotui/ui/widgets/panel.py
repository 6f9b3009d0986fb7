"""Base of the dashboard panels: render a frozen state to lines fitted to the panel's size.

Panels draw only when their state changed (states are frozen dataclasses compared by value),
so a quiet run costs almost nothing to display. Each panel picks what to show for its size:
the essentials first, detail as the terminal grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual.content import Content
from textual.filter import ANSIToTruecolor, LineFilter
from textual.geometry import Region
from textual.widget import Widget

from neurotui.ui.widgets.linecache import CachedLines, LineStrips

# Theme-relative styles shared by the panels ($variables resolve against the active theme,
# so light, dark and 256-colour terminals all get readable contrasts).
MUTED = "$text-muted"
LABEL = "$text-muted"
VALUE = "bold"
WARN = "$text-warning"
ERROR = "$text-error"
GOOD = "$text-success"
ACCENT = "$text-accent"

PHASE_STYLES = {
    "starting": MUTED,
    "compiling": "bold $text-warning",
    "warm-up": "bold $text-accent",
    "steady": "bold $text-success",
    "finished": "bold $text-primary",
    "crashed": "bold $text-error",
    "ended": "bold",
    "stopped": "bold $text-warning",
}
SEVERITY_STYLES = {"error": "bold $text-error", "warning": "bold $text-warning",
                   "info": "bold $text-accent"}
SEVERITY_MARKS = {"error": ("✖", "X"), "warning": ("▲", "!"), "info": ("●", "i")}


def usage_style(percent: float | None) -> str:
    """Busy is not bad in itself: only pinned (>= 90%) stands out."""
    if percent is None:
        return MUTED
    return WARN if percent >= 90 else ""


Line = tuple[int, Content]
"""A line and its priority: when space is short the lowest priorities go first."""


def fit(lines: list[Line], height: int) -> list[Content]:
    """Keep the most important lines that fit `height`, in their original order."""
    if len(lines) <= height:
        return [c for _, c in lines]
    ranked = sorted(range(len(lines)), key=lambda i: (-lines[i][0], i))[:max(0, height)]
    return [lines[i][1] for i in sorted(ranked)]


class Panel(Widget, can_focus=True):
    TITLE: ClassVar[str] = ""
    DEFAULT_CSS = """
    Panel {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state: Any = None
        self.border_title = self.TITLE
        self.node: str | None = None
        """The node of a job of many nodes whose figures this panel shows (named in its
        title); None: a run of one node."""
        self.line_strips = LineStrips()
        """The strips of the last frame's lines: a line unchanged is not drawn again."""

    def show(self, state: Any) -> None:
        if state != self.state:
            self.state = state
            self.retitle()  # (a new title repaints the whole panel, border and all)
            # Only the lines inside the border: a whole panel's repaint draws its border's
            # title again too, about a tenth of the dashboard's cost at 32 ranks.
            self.refresh(Region(0, 0, *self.content_size))

    def retitle(self) -> None:
        """Set the border's title for the state shown (a display setting may change it)."""
        title = self.TITLE if self.state is None else self.title(self.state)
        if self.node is not None:
            title = f"{title} · node {self.node}"
        if title != self.border_title:  # (each assignment repaints the widget)
            self.border_title = title

    def title(self, state: Any) -> str:
        """The border's title for `state` (set with the state, never while rendering: a
        title set then would have the panel render twice)."""
        return self.TITLE

    def get_line_filters(self) -> Sequence[LineFilter]:
        # Textual passes every line drawn through a filter that turns ANSI colours and dim
        # text into the theme's colours: a new copy of each changed line, about 7% of what
        # the dashboard costs at 32 ranks. A panel's styles are all theme colours (no ANSI
        # colour, no dim) and data is shown literally, so that filter would change nothing.
        return [f for f in super().get_line_filters() if not isinstance(f, ANSIToTruecolor)]

    @property
    def ascii_mode(self) -> bool:
        return bool(getattr(self.app, "ascii_mode", False))

    def render(self) -> Content:
        if self.state is None:
            return Content.styled("reading the session...", "$text-muted")
        size = self.content_size
        lines = self.lines(self.state, max(1, size.width), max(1, size.height))
        return CachedLines(fit(lines, max(1, size.height)), self.line_strips, self.app.theme)

    def lines(self, state: Any, width: int, height: int) -> list[Line]:
        raise NotImplementedError
