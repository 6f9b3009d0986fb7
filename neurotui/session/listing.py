"""The sessions of a folder as rows for the home screen: read from each meta.json alone.

Fast on purpose (hundreds of sessions in the first frame): no event is parsed here. A
finished run's figures come from the summary its supervisor wrote into meta.json at its end
(neurotui.summary.summarize: the figures `neurotui compare` computes); a session without one
(running, lost, recorded before summaries) is marked `needs_read`, and the view fills its
figures in later from compare's own read. A folder that looks like a session but cannot be
read is listed with its problem, never skipped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.status import status_of

RUNNING_STATES = frozenset({"running", "starting", "unsupervised"})
UNREADABLE = "unreadable"
BROKEN = "broken"
_SESSION_FILES = (layout.EVENTS, layout.PROBE_DIR, layout.LOGS_DIR)
# A folder holding one of these but no meta.json is a broken session (as paths.broken_sessions).
_STATE_NAMES = {"failed": "crashed"}
"""How the table names a status: a run that failed is what users call crashed."""


def _json_number(value: Any) -> float | None:
    """A finite number of meta.json, else None (metrics.finite_or_none for JSON values: the
    metrics and numpy stay out of the home screen's start-up)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class SessionEntry:
    """One row of the home screen."""

    path: Path
    state: str
    """running, starting, unsupervised, completed, crashed, stopped, ended, lost; unreadable
    (meta.json corrupt) or broken (no meta.json)."""
    instance: str | None = None
    started_at: float | None = None
    duration_s: float | None = None
    samples_per_s: float | None = None
    """Steady samples/s (warm-up left out), as compare's SAMPLES/S."""
    samples_per_dollar: float | None = None
    """Steady samples per dollar, as compare's SAMPLES/$."""
    needs_read: bool = False
    """No summary in meta.json: the figures are known only after reading the steps."""
    problem: str | None = None
    """Why the session cannot be opened, or why its figures are missing."""
    command: str = ""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def readable(self) -> bool:
        return self.state not in (UNREADABLE, BROKEN)

    def with_figures(self, samples_per_s: float | None, samples_per_dollar: float | None,
                     problem: str | None = None) -> SessionEntry:
        return replace(self, samples_per_s=samples_per_s,
                       samples_per_dollar=samples_per_dollar, needs_read=False,
                       problem=problem or self.problem)


def read_entries(root: Path, now: float | None = None) -> list[SessionEntry]:
    """Every session folder under `root` (unordered), broken ones included."""
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    entries = []
    for path in root.iterdir():
        if not path.is_dir():
            continue
        if (path / layout.META).exists():
            entries.append(read_entry(path, now))
        elif any((path / name).exists() for name in _SESSION_FILES):
            entries.append(SessionEntry(path, BROKEN, problem="no meta.json (its other files "
                                                              "are there)"))
    return entries


def read_entry(path: Path, now: float) -> SessionEntry:
    try:
        meta = load_meta(path)
    except SessionFormatError as exc:
        # Its own folder is the row: the problem names the file inside it.
        problem = str(exc).removeprefix(f"{path / layout.META}: ")
        return SessionEntry(path, UNREADABLE, problem=f"{layout.META}: {problem}")
    status = status_of(meta)
    state = _STATE_NAMES.get(status.state, status.state)
    started = _json_number(meta.get("started_at"))
    summary = meta.get("summary") if isinstance(meta.get("summary"), dict) else None
    end = _json_number(meta.get("ended_at")) or (now if status.running else None)
    duration = end - started if end is not None and started is not None else \
        _json_number((summary or {}).get("wall_s"))
    instance = meta.get("instance") if isinstance(meta.get("instance"), dict) else {}
    command = meta.get("user_command") or meta.get("command") or []
    entry = SessionEntry(
        path, state, instance=_text(instance.get("type")), started_at=started,
        duration_s=duration, needs_read=summary is None or status.running,
        command=" ".join(str(x) for x in command) if isinstance(command, list) else "")
    if summary is None or status.running:
        return entry
    return entry.with_figures(_json_number(summary.get("steady_samples_per_s")),
                              _json_number(summary.get("samples_per_dollar_steady")))


def _text(value: Any) -> str | None:
    return str(value) if value else None


# -- sorting and filtering -------------------------------------------------------------------
SORT_KEYS = ("started", "state", "name", "instance", "duration", "samples_per_s",
             "samples_per_dollar")


def sort_entries(entries: Iterable[SessionEntry], key: str,
                 descending: bool = False) -> list[SessionEntry]:
    """Sorted by `key` (one of SORT_KEYS); an entry without that figure comes last either way,
    then by name so that the order is stable."""
    by_name = sorted(entries, key=lambda e: e.name)
    known = [e for e in by_name if _value(e, key) is not None]
    unknown = [e for e in by_name if _value(e, key) is None]
    known.sort(key=lambda e: _value(e, key), reverse=descending)  # type: ignore[arg-type,return-value]
    return known + unknown


def _value(entry: SessionEntry, key: str) -> Any:
    if key == "started":
        return entry.started_at
    if key == "state":
        return entry.state
    if key == "name":
        return entry.name.lower()
    if key == "instance":
        return entry.instance
    if key == "duration":
        return entry.duration_s
    if key == "samples_per_s":
        return entry.samples_per_s
    if key == "samples_per_dollar":
        return entry.samples_per_dollar
    raise ValueError(f"unknown sort key {key!r}")


def matches(entry: SessionEntry, text: str) -> bool:
    """Whether every word of `text` is in the entry's name, state, instance or command."""
    haystack = " ".join((entry.name, entry.state, entry.instance or "", entry.command)).lower()
    return all(word in haystack for word in text.lower().split())
