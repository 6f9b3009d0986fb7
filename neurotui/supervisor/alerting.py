"""Alerts the supervisor raises, recorded in the session as they start and end.

The supervisor runs whether or not anyone watches, so what it sees (a rank stalled, the
sessions disk nearly full) is written to events.jsonl as `alert` records: `state: "start"`
with the alert's title and evidence (again when its title changes), `state: "end"` when
it is over. `--headless` prints them, the dashboard and replay show them, compare counts them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from neurotui.session.writer import EventWriter

LOW_DISK_FRACTION = 0.10
LOW_DISK_BYTES = 1 << 30
"""The sessions disk is nearly full below min(10% of it, 1 GiB) free."""


@dataclass(frozen=True)
class Raised:
    severity: str  # "error", "warning" or "info", as the dashboard's alerts
    title: str
    evidence: tuple[str, ...]
    advice: str | None = None


class AlertRecorder:
    def __init__(self, writer: EventWriter) -> None:
        self.writer = writer
        self.active: dict[str, Raised] = {}

    def update(self, key: str, raised: Raised | None, now: float) -> None:
        """`raised`: the alert as it stands now (None: not raised). A start is written again
        only when its title changes (a second rank stalls), not for each new figure."""
        if raised is None:
            if self.active.pop(key, None) is not None:
                self.writer.write("alert", t=now, key=key, state="end")
            return
        before = self.active.get(key)
        if before is None or (before.severity, before.title) != (raised.severity, raised.title):
            self.active[key] = raised
            self.writer.write("alert", t=now, key=key, state="start",
                              severity=raised.severity, title=raised.title,
                              evidence=list(raised.evidence), advice=raised.advice)

    def end_all(self, now: float, why: str) -> None:
        for key in list(self.active):
            del self.active[key]
            self.writer.write("alert", t=now, key=key, state="end", why=why)


def low_disk(path: Path) -> Raised | None:
    """The sessions disk nearly full: said while it still has room to be said."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    free, size = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    if size <= 0 or free >= min(LOW_DISK_FRACTION * size, LOW_DISK_BYTES):
        return None
    return Raised("warning", "sessions disk nearly full", (
        f"{_mib(free)} free of {_mib(size)} on the disk holding {path}",),
        "free space there, or point --sessions-dir at a larger disk; when it is full, "
        "training goes on and the session records what it lost")


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"
