"""The live dashboard: a Textual app over one session folder (see app.py).

UI-free parts (clock, model, alerts, history, log tail, text safety, formatting) sit beside
the Textual parts so they can be tested and reused without a terminal.
"""

from __future__ import annotations

import sys


def on_a_terminal() -> bool:
    """Whether a full-screen view can run: keys come from, and the screen goes to, a terminal."""
    return sys.stdout.isatty() and sys.stdin.isatty()
