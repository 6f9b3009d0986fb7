"""The footer shows the keys in the screen's first frame, not a refresh later."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets._footer import FooterKey

from neurotui.ui.widgets.footer import KeysFooter


async def test_the_keys_are_in_the_footer_when_it_is_mounted() -> None:
    shown: dict[str, list[str]] = {}

    class OneScreen(App[None]):
        BINDINGS = [("q", "quit", "Quit"), ("?", "help", "Help")]

        def compose(self) -> ComposeResult:
            yield KeysFooter()

        def on_mount(self) -> None:
            # Before any refresh: Textual's own Footer is still empty here.
            shown["at mount"] = [key.description for key in self.query(FooterKey)]

    async with OneScreen().run_test() as pilot:
        await pilot.pause()
        shown["settled"] = [key.description for key in pilot.app.query(FooterKey)]
    assert shown["at mount"][:2] == ["Quit", "Help"]
    assert shown["at mount"] == shown["settled"]
