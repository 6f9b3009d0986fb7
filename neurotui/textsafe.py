"""Log lines are data: shown literally, never interpreted.

Rich markup (`[bold red]`) is inert because lines become `Text` objects, never markup
strings. Control characters would reach the terminal and act on it (ANSI colours, cursor moves,
a title change, a bell), so each one is replaced by a visible escape such as `\\x1b`, styled
apart so it cannot be mistaken for the line's own text.
"""

from __future__ import annotations

import re

from rich.text import Text

ESCAPE_STYLE = "reverse"
TAB_SIZE = 4
# C0 controls (tab handled apart), DEL, C1 controls, and line/paragraph separators, which
# some terminals treat as line breaks.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible_text(line: str) -> str:
    """The line as plain text with control characters spelled out (for tests and tmux)."""
    return _CONTROL.sub(lambda m: escape_char(m.group()), _collapse_cr(line)).expandtabs(
        TAB_SIZE)


def safe_text(line: str, style: str = "") -> Text:
    """A `Text` showing `line` literally; control characters appear as styled escapes."""
    line = _collapse_cr(line).expandtabs(TAB_SIZE)
    text = Text(style=style, no_wrap=True, overflow="ellipsis")
    pos = 0
    for m in _CONTROL.finditer(line):
        if m.start() > pos:
            text.append(line[pos:m.start()])
        text.append(escape_char(m.group()), style=ESCAPE_STYLE)
        pos = m.end()
    if pos < len(line):
        text.append(line[pos:])
    return text


def _collapse_cr(line: str) -> str:
    """Progress bars rewrite one terminal line with carriage returns; a log file then holds
    every rewrite on one line. Keep the last rewrite, after a visible `\\r` marker saying
    earlier text was overwritten, instead of thousands of updates."""
    line = line.rstrip("\r")
    if "\r" not in line:
        return line
    last = next((part for part in reversed(line.split("\r")) if part), "")
    return "\r" + last
