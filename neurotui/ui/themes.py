"""Light and dark themes built from xterm-256 palette colours.

Over SSH COLORTERM is often dropped and terminals fall back to 256 colours; colours picked from
that palette survive the fallback unchanged, so contrast tested in truecolor still holds.
"""

from __future__ import annotations

from textual.theme import Theme

DARK = Theme(
    name="neurotui-dark",
    primary="#5fafff",     # 75
    secondary="#87afd7",   # 110
    accent="#5fd7ff",      # 81
    warning="#ffaf00",     # 214
    error="#ff5f5f",       # 203
    success="#5fd75f",     # 77
    foreground="#e4e4e4",  # 254
    background="#121212",  # 233
    surface="#1c1c1c",     # 234
    panel="#303030",       # 236
    dark=True,
)

LIGHT = Theme(
    name="neurotui-light",
    primary="#005faf",     # 25
    secondary="#5f5f87",   # 60
    accent="#005f87",      # 24
    warning="#af5f00",     # 130
    error="#d70000",       # 160
    success="#008700",     # 28
    foreground="#121212",  # 233
    background="#ffffff",  # 231
    surface="#eeeeee",     # 255
    panel="#e4e4e4",       # 254
    dark=False,
)

THEMES = (DARK, LIGHT)
