"""A panel's lines unchanged since the last frame keep their strips (widgets/linecache.py),
and every frame draws exactly what Content itself draws: text, colours of the theme, and the
place each span carries for a mouse selection. In a real Textual app (run_test)."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.content import Content
from textual.strip import Strip
from textual.theme import Theme
from textual.visual import Visual

from neurotui.ui.widgets.panel import Line, Panel

WIDTH, HEIGHT = 40, 8


class LinesPanel(Panel):
    """A panel whose state is its lines: (text, style) pairs."""

    def lines(self, state: Any, width: int, height: int) -> list[Line]:
        return [(5, Content.styled(text, style)) for text, style in state]


class LinesApp(App[None]):
    def on_mount(self) -> None:
        # Two themes alike but for the accent: the panel's own style (its background) is
        # the same in both, only the colour of `$text-accent` differs.
        for name, accent in (("plain-blue", "#3070f0"), ("plain-red", "#f03040")):
            self.register_theme(Theme(name=name, primary="#808080", accent=accent,
                                      background="#101010", surface="#181818", dark=True))
        self.theme = "plain-blue"

    def compose(self) -> ComposeResult:
        yield LinesPanel(id="lines")


def _drawn_by_content(panel: LinesPanel) -> list[list[Any]]:
    """The panel's strips as Content draws its lines joined (no line kept)."""
    size = panel.content_size
    plain = Content("\n").join(c for _, c in panel.lines(panel.state, size.width, size.height))
    return _segments(Visual.to_strips(panel, plain, size.width, size.height,
                                      panel.visual_style))


def _drawn_now(panel: LinesPanel) -> list[list[Any]]:
    size = panel.content_size
    return _segments(Visual.to_strips(panel, panel.render(), size.width, size.height,
                                      panel.visual_style))


def _segments(strips: list[Strip]) -> list[list[Any]]:
    # A Rich style compares with its meta: the (x, y) place a selection reads.
    return [[(s.text, s.style, s.style.meta if s.style else None) for s in strip]
            for strip in strips]


STATE = (("PID   CPU%  RSS", "bold $text-muted"), ("4001    97  1.9G rank", "$text-accent"),
         ("4002    12  1.1G worker", ""), ("\ta tab, and a line far too long for the panel's "
                                          "forty columns", "$text-warning"),
         ("4003     0  0.2G", "$text-muted"))


async def test_unchanged_lines_keep_their_strips_and_draw_as_content_does() -> None:
    app = LinesApp()
    async with app.run_test(size=(WIDTH + 2, HEIGHT + 2)) as pilot:
        panel = app.query_one(LinesPanel)
        panel.show(STATE)
        await pilot.pause()
        strips = panel.line_strips
        assert strips.drawn == len(STATE)
        assert _drawn_now(panel) == _drawn_by_content(panel)

        changed = list(STATE)
        changed[2] = ("4002    55  1.1G worker", "")  # one figure moved
        panel.show(tuple(changed))
        await pilot.pause()
        assert strips.drawn == len(STATE) + 1  # only that line drawn again
        assert _drawn_now(panel) == _drawn_by_content(panel)

        # Lines moved down a place are drawn again: a span's place says its line.
        panel.show((("a new first line", ""), *changed))
        await pilot.pause()
        assert strips.drawn == 2 * len(STATE) + 2
        assert _drawn_now(panel) == _drawn_by_content(panel)

        # Another theme: the same lines in its colours, every one drawn again, even where
        # the panel's own style is the same in both.
        before, style = _drawn_now(panel), panel.visual_style
        drawn = strips.drawn
        app.theme = "plain-red"
        await pilot.pause()
        now = _drawn_now(panel)
        assert panel.visual_style == style
        assert strips.drawn == drawn + len(changed) + 1
        assert now == _drawn_by_content(panel) and now != before


class TitledPanel(LinesPanel):
    """A bordered panel whose title is its state's first text."""

    DEFAULT_CSS = "TitledPanel { border: round $primary; }"

    def title(self, state: Any) -> str:
        return state[0][0]


class TitledApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TitledPanel(id="titled")


async def test_new_lines_under_the_same_title_do_not_draw_the_border_again(
        monkeypatch: Any) -> None:
    # Textual draws a border's title in render_border_label (the one its styles cache calls):
    # counted here, a title drawn again is a border drawn again.
    import textual._styles_cache

    labels: list[str] = []
    draw_label = textual._styles_cache.render_border_label

    def counted(label: Any, *args: Any, **kwargs: Any) -> Any:
        labels.append(label[0].plain)
        return draw_label(label, *args, **kwargs)

    monkeypatch.setattr(textual._styles_cache, "render_border_label", counted)
    app = TitledApp()
    async with app.run_test(size=(WIDTH + 2, HEIGHT + 2)) as pilot:
        panel = app.query_one(TitledPanel)
        panel.show((("Processes", ""), ("4001    97", "")))
        await pilot.pause()
        assert "Processes" in labels
        labels.clear()

        panel.show((("Processes", ""), ("4001    12", "")))  # a figure moved, same title
        await pilot.pause()
        assert labels == []
        drawn = _drawn_text(panel)
        assert "4001    12" in drawn and "4001    97" not in drawn  # the new line is drawn
        assert "Processes" in drawn.splitlines()[0]  # under the border kept

        panel.show((("Processes: 2 ranks", ""), ("4001    12", "")))  # a new title
        await pilot.pause()
        assert "Processes: 2 ranks" in labels
        assert "Processes: 2 ranks" in _drawn_text(panel)


def _drawn_text(panel: Panel) -> str:
    """The panel's lines as its styles cache holds them for the screen, border and all."""
    return "\n".join(strip.text for strip in panel.render_lines(panel.size.region))
