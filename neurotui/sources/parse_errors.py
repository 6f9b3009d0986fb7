"""The one exception every telemetry parser raises for input it cannot make sense of.

Collectors feed the parsers whatever a tool printed (truncated pipes, error banners, a doc
example with `...` in it). They need a single type to catch, log and skip, without also
swallowing real programming errors; hence one subclass of ValueError, with the tool name and a
short excerpt of the offending text in the message.
"""

from __future__ import annotations

_SNIPPET_MAX = 80


class TelemetryParseError(ValueError):
    """Input to a telemetry parser is malformed: not the format that parser understands."""

    def __init__(self, source: str, reason: str, snippet: str | None = None) -> None:
        self.source = source
        self.reason = reason
        self.snippet = None if snippet is None else _shorten(snippet)
        message = f"{source}: {reason}"
        if self.snippet is not None:
            message += f" (near {self.snippet!r})"
        super().__init__(message)


def _shorten(text: str) -> str:
    text = text.strip()
    if len(text) > _SNIPPET_MAX:
        return text[: _SNIPPET_MAX - 3] + "..."
    return text
