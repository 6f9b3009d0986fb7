"""A panel's lines drawn once: a line unchanged since the last frame keeps its strip.

Textual turns a widget's Content into strips anew at each refresh: for every span of every
line a new Rich style carrying the span's place (its meta, pickled), which is how a mouse
selection finds its text. A panel's state changes every second while training runs, but most
of its lines do not (the process table, the NeuronCore grid, the captions and axes): drawing
them again was a quarter of what the dashboard costs following a 32-rank run. `CachedLines`
is the panel's Content as before (its text and spans: selection, width and height work as for
any Content); only its strips come from `LineStrips`, the panel's strips of the last frame,
by line and place.

Each line is drawn as Content draws a line of itself where the panel sets no wrap and an
ellipsis (Panel's CSS), through Content's own line formatter. Where that formatter is not
there (another Textual) or the frame asks for more (a selection shown, a post style, other
text rules), the whole Content is drawn as Content draws it.
"""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions

try:  # Content's formatter of one line (private to Textual: used only if it is there)
    from textual.content import _FormattedLine
except ImportError:  # pragma: no cover - a Textual without it draws every line each time
    _FormattedLine = None  # type: ignore[assignment,misc]

_TAB_SIZE = 8  # as Content's render_strips expands tabs


class LineStrips:
    """One widget's strips of its last frame, by (place, text, spans), for the frame's
    width, base style and `look` (what else decides colours: the theme)."""

    def __init__(self) -> None:
        self._frame: tuple[Any, ...] | None = None
        self._strips: dict[tuple[Any, ...], Strip] = {}
        self.drawn = 0
        """Lines drawn anew (not taken from the last frame), counted for tests."""

    def strips(self, lines: list[Content], width: int, style: Style,
               options: RenderOptions, look: object) -> list[Strip]:
        frame = (width, style, look)
        last = self._strips if frame == self._frame else {}
        now: dict[tuple[Any, ...], Strip] = {}
        out = []
        for y, line in enumerate(lines):
            key = (y, line.plain, tuple(line.spans))
            strip = last.get(key)
            if strip is None:
                strip = _draw(line, y, width, style, options)
                self.drawn += 1
            now[key] = strip
            out.append(strip)
        self._frame, self._strips = frame, now  # only this frame's lines are kept
        return out


def _draw(line: Content, y: int, width: int, style: Style, options: RenderOptions) -> Strip:
    """Line `y` of a Content, as its render_strips draws it with no wrap and an ellipsis."""
    line = line.expand_tabs(_TAB_SIZE).truncate(width, ellipsis=True)
    formatted = _FormattedLine(options.get_style, line, width, y=y, align="left")
    return Strip(*formatted.to_strip(style))


class CachedLines(Content):
    """`lines` joined as one Content, drawn line by line through `cache`."""

    def __init__(self, lines: list[Content], cache: LineStrips, look: object) -> None:
        joined = Content("\n").join(lines)
        super().__init__(joined.plain, list(joined.spans), strip_control_codes=False)
        self._lines = lines
        self._cache = cache
        self._look = look

    def render_strips(self, width: int, height: int | None, style: Style,
                      options: RenderOptions) -> list[Strip]:
        rules = options.rules.get
        plain_lines = (options.selection is None and options.post_style is None
                       and rules("text_wrap", "wrap") == "nowrap"
                       and rules("text_overflow", "fold") == "ellipsis"
                       and rules("text_align", "left") in ("left", "start")
                       and not rules("line_pad", 0))
        if not width or not plain_lines or _FormattedLine is None \
                or any("\n" in line.plain for line in self._lines):
            return super().render_strips(width, height, style, options)
        lines = self._lines if height is None else self._lines[:height]
        return self._cache.strips(lines, width, style, options, self._look)
