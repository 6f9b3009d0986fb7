"""Whether a full-screen view can run here (kept apart from ui/ so the command line can ask
without importing Textual), and what a view served to a browser may do."""

from __future__ import annotations

import os
import sys

READ_ONLY_ENV = "NEUROTUI_READ_ONLY"
"""Set to 1 by `neurotui serve` (without --allow-control) for the views it launches: they show
the runs but refuse to stop or adopt a job."""


def served() -> bool:
    """Whether Textual draws into a browser (textual-serve's web driver, which it names in
    TEXTUAL_DRIVER): keys and the screen then travel over pipes, not a terminal."""
    return "web_driver" in os.environ.get("TEXTUAL_DRIVER", "")


def on_a_terminal() -> bool:
    """Whether a full-screen view can run: keys come from, and the screen goes to, a terminal
    (or a browser, through `neurotui serve`)."""
    return served() or (sys.stdout.isatty() and sys.stdin.isatty())


def control_allowed() -> bool:
    """Whether a view may stop or adopt a job: not where `neurotui serve` said read-only."""
    return os.environ.get(READ_ONLY_ENV, "") in ("", "0")
