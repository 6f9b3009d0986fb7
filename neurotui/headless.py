"""Plain progress lines for nohup, Slurm and CI: the dashboard's numbers as text."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from neurotui import fmt, metrics, recorded
from neurotui.session.reader import SessionReader


def progress_line(reader: SessionReader, now: float) -> str:
    """One line: elapsed, phase, step, throughput, step time, cost when a price is known."""
    meta = reader.meta
    started = float(meta.get("started_at") or now)
    end = meta.get("ended_at") or now
    steps = reader.steps()
    phase = metrics.phase(meta, steps, reader.frame("compile"), now)
    parts = [f"[{fmt.duration(end - started)}]", phase]
    if len(steps):
        ranks = steps["rank"].nunique()
        parts.append(f"step {metrics.latest_step(steps)}")
        parts.append(f"{ranks} rank{'s' if ranks != 1 else ''}")
        rate = metrics.current_throughput(steps, now if meta.get("exit") is None else end)
        parts.append("samples/s n/a" if rate is None else f"{rate:,.1f} samples/s")
        steady = metrics.steady_state(steps, compiles=reader.frame("compile"))
        if steady is not None:
            parts.append(f"{steady.step_time_median:.3f} s/step (steady median)")
    else:
        parts.append("no step yet")
        steady = None
    price = (meta.get("price") or {}).get("usd_per_hour")
    if price:
        cost = metrics.cost_so_far(price, started, now, meta.get("ended_at"))
        if cost is not None:
            parts.append(f"${cost:,.4f} so far")
        spd = metrics.samples_per_dollar(steady.samples_per_s if steady else None, price)
        if spd is not None:
            parts.append(f"{spd:,.0f} samples/$")
    else:
        parts.append("no price")
    if len(steps):
        source = metrics.step_sources(metrics.steps_sources(steps),
                                      list(reader.events.get("probe_info", ())),
                                      reader.samples_from)
        parts.append(f"steps from {source}")
    return " | ".join(parts)


def new_notices(reader: SessionReader, printed: dict[str, int]) -> list[str]:
    """Lines for the alerts and losses recorded since the last call (`printed` keeps count)."""
    records = []
    for kind in ("alert", "lost"):
        bucket = list(reader.events.get(kind, ()))
        records += bucket[printed.get(kind, 0):]
        printed[kind] = len(bucket)
    return [recorded.notice(r) for r in sorted(records, key=lambda r: float(r["t"]))]


def follow(reader: SessionReader, *, interval_s: float = 5.0, out: TextIO = sys.stdout,
           alive: Callable[[], bool] | None = None) -> dict | None:
    """Print a progress line every interval until the session ends, and each alert and loss
    the session records as it comes; returns its exit record."""
    next_print = 0.0
    printed: dict[str, int] = {}
    while True:
        reader.poll()
        for line in new_notices(reader, printed):
            print(line, file=out, flush=True)
        now = time.time()
        ended = reader.meta.get("exit")
        if now >= next_print or ended is not None:
            print(progress_line(reader, now), file=out, flush=True)
            next_print = now + interval_s
        if ended is not None:
            reader.poll(final=True)
            for line in new_notices(reader, printed):
                print(line, file=out, flush=True)
            problems = reader.problems.summary()
            if problems:
                print(f"neurotui: {problems}", file=out, flush=True)
            return ended
        if alive is not None and not alive():
            # The exit may have been recorded between our read and this check: read again.
            reader.poll(final=True)
            ended = reader.meta.get("exit")
            if ended is not None:
                print(progress_line(reader, time.time()), file=out, flush=True)
            return ended
        time.sleep(min(1.0, interval_s))
