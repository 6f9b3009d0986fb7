"""Adding up what several runtimes or devices report, where any figure may be missing: a
missing one stays missing (None), never 0. Shared by the neuron-monitor and /metrics
summaries, which merge the same figures the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def add_known(total: Any, value: Any) -> Any:
    """`total + value`, where None is "not reported" (not zero) on either side."""
    if value is None:
        return total
    return value if total is None else total + value


def sum_known(values: Iterable[int | None]) -> int | None:
    """The sum of the reported values; None when none was."""
    total = None
    for value in values:
        total = add_known(total, value)
    return total


def add_counts(acc: Mapping[str, int] | None, new: Mapping[str, int]) -> dict[str, int]:
    """Counts by name, added."""
    out = dict(acc or {})
    for name, value in new.items():
        out[name] = out.get(name, 0) + value
    return out


def highest_percentiles(acc: Mapping[str, Mapping[str, float]] | None,
                        new: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per kind and percentile, the highest either reported: percentiles of separate
    runtimes cannot be merged, and the worst one is what a latency alarm wants."""
    out = {kind: dict(values) for kind, values in (acc or {}).items()}
    for kind, values in new.items():
        slot = out.setdefault(kind, {})
        for p, v in values.items():
            slot[p] = v if p not in slot else max(slot[p], v)
    return out
