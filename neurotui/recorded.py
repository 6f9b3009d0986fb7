"""What the session says about its own troubles: the supervisor's `alert` records and the
writers' `lost` records, read the same way by --headless, the dashboard, replay and compare."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

Record = Mapping[str, Any]


def active_alerts(alerts: Iterable[Record], now: float | None = None) -> dict[str, Record]:
    """Key -> the `start` record of each alert still on at `now` (None: at the end)."""
    active: dict[str, Record] = {}
    for record in alerts:
        if now is not None and float(record.get("t", 0.0)) > now:
            break
        key = str(record.get("key"))
        if record.get("state") == "start":
            active[key] = record
        elif record.get("state") == "end":
            active.pop(key, None)
    return active


def alert_episodes(alerts: Iterable[Record]) -> dict[str, int]:
    """Key -> how many times the alert started (a start while it was on is the same one)."""
    on: set[str] = set()
    counts: dict[str, int] = {}
    for record in alerts:
        key = str(record.get("key"))
        if record.get("state") == "start":
            if key not in on:
                counts[key] = counts.get(key, 0) + 1
                on.add(key)
        elif record.get("state") == "end":
            on.discard(key)
    return counts


def lost_totals(lost: Iterable[Record]) -> dict[str, float]:
    """What the session lost, summed: `events`, `log bytes`, `probe steps`."""
    totals: dict[str, float] = {}
    for record in lost:
        what = str(record.get("what"))
        name = "log bytes" if what == "log" else what
        amount = record.get("bytes") if what == "log" else record.get("count")
        if isinstance(amount, (int, float)) and not isinstance(amount, bool):
            totals[name] = totals.get(name, 0) + amount
    return totals


def lost_text(lost: Iterable[Record]) -> str | None:
    """'lost 12 events, 56,789 log bytes (No space left on device, 12:00:01 to 12:00:09)'."""
    records = list(lost)
    totals = lost_totals(records)
    if not totals:
        return None
    errors = sorted({str(r.get("error")) for r in records if r.get("error")})
    starts = [float(r["from"]) for r in records if isinstance(r.get("from"), (int, float))]
    ends = [float(r["to"]) for r in records if isinstance(r.get("to"), (int, float))]
    when = f", {clock(min(starts))} to {clock(max(ends))}" if starts and ends else ""
    amounts = ", ".join(f"{value:,.0f} {name}" for name, value in totals.items())
    return f"lost {amounts} ({'; '.join(errors) or 'write failed'}{when})"


def notice(record: Record) -> str:
    """One line for --headless: an alert starting or ending, or a loss."""
    if record.get("kind") == "lost":
        return f"neurotui: {lost_text([record])}"
    if record.get("state") == "end":
        why = f" ({record['why']})" if record.get("why") else ""
        return f"neurotui: alert over: {record.get('key')}{why}"
    evidence = "; ".join(str(e) for e in record.get("evidence") or ())
    return (f"neurotui: alert ({record.get('severity')}): {record.get('title')}"
            + (f": {evidence}" if evidence else ""))


def clock(t: float) -> str:
    """Local wall-clock time of day, as the user's terminal shows it."""
    return time.strftime("%H:%M:%S", time.localtime(t))
