"""Number formatting for the panels. A missing value is never shown as 0: it becomes `n/a`
(or a short reason) so "unknown" cannot be read as "idle"."""

from __future__ import annotations

import math
from typing import Any

MISSING = "n/a"


def known(value: object) -> bool:
    """Whether a figure is known: not None, NaN, infinite, nor pandas' NA (text is known).
    The one check of the views, compare and export; metrics.finite_or_none is its converting
    twin for computations."""
    if value is None:
        return False
    try:
        return math.isfinite(value)  # type: ignore[arg-type]  # numbers, numpy scalars
    except TypeError:
        return type(value).__name__ != "NAType"


def duration(seconds: float | None) -> str:
    """00:05:07 style; days are spelled out for long runs."""
    if not known(seconds):
        return MISSING
    s = max(0, int(seconds))  # type: ignore[arg-type]
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}d {text}" if days else text


def short_duration(seconds: float | None) -> str:
    """4.2s, 3m10s, 2h05m: for evidence lines and ETAs."""
    if not known(seconds):
        return MISSING
    s = float(seconds)  # type: ignore[arg-type]
    if s < 60:
        return f"{s:.1f}s" if s < 10 else f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


def price(value: float | None) -> str:
    """A published price, exactly as published (no float noise): 1.34375 -> $1.34375,
    0.7582 -> $0.7582, 21.5 -> $21.50. Money spent or projected is `usd`."""
    if not known(value):
        return MISSING
    whole, _, cents = f"{float(value):.6f}".rstrip("0").partition(".")  # type: ignore[arg-type]
    return f"${whole}.{cents.ljust(2, '0')}"


def usd(value: float | None) -> str:
    """Money spent or projected, rounded as a bill is read: $0.0012, $3.41, $1,204."""
    if not known(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    if v < 1:
        return f"${v:.4f}"
    if v < 100:
        return f"${v:.2f}"
    return f"${v:,.0f}"


def rate(value: float | None, unit: str = "/s") -> str:
    if not known(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    if v >= 1000:
        return f"{v:,.0f}{unit}"
    if v >= 10:
        return f"{v:.1f}{unit}"
    return f"{v:.2f}{unit}"


def count(value: float | None) -> str:
    """Large counts compactly: 857,302 -> 857.3k; 12,300,000 -> 12.3M."""
    if not known(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= size:
            return f"{v / size:.1f}{suffix}"
    return f"{v:.0f}"


def seconds(value: float | None) -> str:
    """Step times: 0.0123 s -> 12.3ms, 1.5 s -> 1.50s."""
    if not known(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    if v < 1:
        return f"{v * 1000:.1f}ms" if v < 0.1 else f"{v * 1000:.0f}ms"
    return f"{v:.2f}s" if v < 100 else f"{v:.0f}s"


def size(value: float | None) -> str:
    """Bytes in binary units: 1.5G, 512M."""
    if not known(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    for unit, scale in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if v >= scale:
            return f"{v / scale:.1f}{unit}"
    return f"{v:.0f}B"


def percent(value: float | None) -> str:
    return MISSING if not known(value) else f"{float(value):.0f}%"  # type: ignore[arg-type]


def format_value(value: Any, kind: str) -> str:
    """How compare's table and markdown (and the home screen) show one figure; MISSING when
    unknown. `kind`: text, int, ms, s, rate, usd, count, ratio."""
    if not known(value):
        return MISSING
    if kind == "text":
        return str(value)
    v = float(value)
    if kind == "int":
        return f"{int(v)}"
    if kind == "ms":
        return f"{v * 1000:.1f} ms"
    if kind == "s":
        return f"{v:.1f} s"
    if kind == "rate":
        return f"{v:,.1f}"
    if kind == "usd":
        return price(v)
    if kind == "count":
        return f"{v:,.0f}"
    if kind == "ratio":
        return f"{v:.2f}x"
    raise ValueError(f"unknown column kind {kind!r}")
