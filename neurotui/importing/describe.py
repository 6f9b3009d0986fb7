"""How a session's times were known, in words: for `ls`, compare and the home screen. Pure
(meta.json in, text out), loading nothing."""

from __future__ import annotations

from typing import Any


def imported_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """meta.json's `imported` where it is an object (FORMAT.md), else None (a recorded run)."""
    imported = meta.get("imported")
    return imported if isinstance(imported, dict) else None


def times_note(meta: dict[str, Any]) -> str:
    """"imported (tensorboard): times from tensorboard wall time, 0.01 s" or "recorded live
    (log lines stamped by inotify)": how the run's step times were known."""
    imported = imported_of(meta)
    if imported is None:
        timing = meta.get("log_timing")
        method = timing.get("method") if isinstance(timing, dict) else None
        return "recorded live" + (f" (log lines stamped by {method})" if method else "")
    times = str(imported.get("times") or "none")
    if times == "none":
        return f"imported ({imported.get('kind')}): no times (steps counted, never timed)"
    said = f"imported ({imported.get('kind')}): times from {times}"
    resolution = imported.get("resolution_s")
    if isinstance(resolution, (int, float)) and not isinstance(resolution, bool):
        said += f", to {resolution:g} s"
    span = imported.get("span_steps")
    if isinstance(span, int) and not isinstance(span, bool) and span > 1:
        said += f"; step time over spans of {span} steps"
    return said


def ls_marker(meta: dict[str, Any]) -> str | None:
    """`ls`'s COMMAND column for an imported run: what it was imported from and how timed."""
    imported = imported_of(meta)
    if imported is None:
        return None
    sources = imported.get("sources")
    first = str(sources[0]) if isinstance(sources, list) and sources else "?"
    more = f" +{len(sources) - 1}" if isinstance(sources, list) and len(sources) > 1 else ""
    return f"[imported, times: {imported.get('times') or 'none'}] {first}{more}"
