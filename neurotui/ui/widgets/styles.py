"""Theme-relative styles shared by the panels ($variables resolve against the active theme,
so light, dark and 256-colour terminals all get readable contrasts)."""

from __future__ import annotations

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
