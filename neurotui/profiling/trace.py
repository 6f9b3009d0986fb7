"""A rank's profile read back: the operators (`cpu_op` events of torch's Chrome trace) by
self time, and the operators whose time differs most between ranks.

Self time is an operator's duration less that of the operators directly inside it on the
same thread (nesting by time: aten::linear holds aten::addmm); other events (Python
functions, user annotations, GPU kernels) neither count nor hold."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPERATOR_CATEGORY = "cpu_op"
MAX_TRACE_BYTES = 2 << 30
"""A trace unpacked beyond this is refused (a gzip bomb, or a capture far too long to read)."""


class TraceError(ValueError):
    """A trace file that is not a Chrome trace this can read."""


@dataclass(frozen=True)
class OperatorTime:
    name: str
    self_us: float
    total_us: float
    calls: int


@dataclass(frozen=True)
class RankProfile:
    rank: int
    operators: tuple[OperatorTime, ...]
    """Every operator, the longest self time first."""

    @property
    def self_us(self) -> float:
        return sum(op.self_us for op in self.operators)

    def top(self, count: int) -> tuple[OperatorTime, ...]:
        return self.operators[:count]


@dataclass(frozen=True)
class RankDifference:
    name: str
    self_us: Mapping[int, float]
    """Rank -> its self time in this operator (0 where the rank never ran it)."""

    @property
    def spread_us(self) -> float:
        return max(self.self_us.values()) - min(self.self_us.values())

    @property
    def slowest_rank(self) -> int:
        return max(self.self_us, key=lambda rank: self.self_us[rank])


def load_trace(path: Path) -> dict[str, Any]:
    """The trace's JSON (gzipped or not), checked to hold a list of traceEvents."""
    try:
        with open(path, "rb") as raw:
            packed = raw.read(2) == b"\x1f\x8b"
        opener = gzip.open if packed else open
        with opener(path, "rb") as f:  # type: ignore[operator]
            data = f.read(MAX_TRACE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: cannot be read ({exc})") from exc
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: over {MAX_TRACE_BYTES >> 20} MB unpacked: not read")
    try:
        trace = json.loads(data)
    except ValueError as exc:
        raise TraceError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{path}: no traceEvents list: not a Chrome trace")
    return trace


def operator_times(events: Iterable[Any]) -> tuple[OperatorTime, ...]:
    """Every operator's self and total time and calls, the longest self time first."""
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    for event in events:
        if not isinstance(event, dict) or event.get("cat") != OPERATOR_CATEGORY \
                or event.get("ph") != "X":
            continue
        ts, dur, name = event.get("ts"), event.get("dur"), event.get("name")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) \
                or not isinstance(name, str) or dur < 0:
            continue
        by_thread.setdefault((event.get("pid"), event.get("tid")), []).append(
            (float(ts), float(dur), name))
    self_us: dict[str, float] = {}
    total_us: dict[str, float] = {}
    calls: dict[str, int] = {}
    for spans in by_thread.values():
        spans.sort(key=lambda span: (span[0], -span[1]))  # an outer op before its first child
        open_spans: list[list[Any]] = []  # [end, name, children's time, duration]
        for ts, dur, name in spans:
            while open_spans and open_spans[-1][0] <= ts:
                _close(open_spans.pop(), self_us)
            if open_spans:
                open_spans[-1][2] += dur
            open_spans.append([ts + dur, name, 0.0, dur])
            total_us[name] = total_us.get(name, 0.0) + dur
            calls[name] = calls.get(name, 0) + 1
        while open_spans:
            _close(open_spans.pop(), self_us)
    return tuple(sorted((OperatorTime(name, self_us.get(name, 0.0), total_us[name], calls[name])
                         for name in calls), key=lambda op: (-op.self_us, op.name)))


def _close(span: list[Any], self_us: dict[str, float]) -> None:
    _end, name, children, dur = span
    self_us[name] = self_us.get(name, 0.0) + max(0.0, dur - children)


def rank_profile(rank: int, path: Path) -> RankProfile:
    return RankProfile(rank, operator_times(load_trace(path)["traceEvents"]))


def rank_differences(profiles: Iterable[RankProfile], count: int) -> list[RankDifference]:
    """The `count` operators whose self time differs most between the ranks (none with
    fewer than two ranks)."""
    profiles = list(profiles)
    if len(profiles) < 2:
        return []
    names = {op.name for profile in profiles for op in profile.operators}
    times = {profile.rank: {op.name: op.self_us for op in profile.operators}
             for profile in profiles}
    differences = [RankDifference(name, {rank: found.get(name, 0.0)
                                         for rank, found in times.items()}) for name in names]
    differences.sort(key=lambda d: (-d.spread_us, d.name))
    return [d for d in differences[:count] if d.spread_us > 0]
