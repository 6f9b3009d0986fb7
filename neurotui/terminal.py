"""Whether a full-screen view can run here (kept apart from ui/ so the command line can ask
without importing Textual)."""

from __future__ import annotations

import sys


def on_a_terminal() -> bool:
    """Whether a full-screen view can run: keys come from, and the screen goes to, a terminal."""
    return sys.stdout.isatty() and sys.stdin.isatty()
