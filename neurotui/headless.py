"""Plain progress lines for nohup, Slurm and CI: the dashboard's figures as text.

The lines are printed from the same live model states as the dashboard's panels (one path:
the same figures, and memory bounded as the dashboard's is, however long the run), with the
same formatting helpers; alerts and losses the session records are printed as they come.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from neurotui import fmt, recorded
from neurotui.live import heap
from neurotui.live.clock import WallClock
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel, DashboardState
from neurotui.live.neuron import errors_text, flops_percent
from neurotui.live.nodes import NodesState
from neurotui.session import layout
from neurotui.session.jobreader import JobReader
from neurotui.session.metawait import MetaWait
from neurotui.session.reader import SessionReader
from neurotui.session.timeline import TimelineView


def progress_line(state: DashboardState) -> str:
    """One line: elapsed, phase, step, throughput, step time, cost when a price is known."""
    header, tp = state.header, state.throughput
    parts = [f"[{fmt.duration(header.elapsed_s)}]", header.compiling or header.phase]
    if header.step is not None:
        ranks = len(state.ranks)
        parts.append(f"step {header.step}")
        parts.append(f"{ranks} rank{'s' if ranks != 1 else ''}")
        parts.append(fmt.rate(tp.now_sps, " samples/s") if fmt.known(tp.now_sps)
                     else "samples/s n/a")
        if tp.steady is not None:
            parts.append(f"{fmt.seconds(tp.steady.step_time_median)}/step (steady median)")
    else:
        parts.append("no step yet")
    if header.price_per_hour is not None:
        if header.cost_usd is not None:
            parts.append(f"{fmt.usd(header.cost_usd)} so far")
        if tp.spd_steady is not None:
            parts.append(f"{fmt.count(tp.spd_steady)} samples/$ (steady)")
    else:
        parts.append("no price")
    if tp.epoch is not None:  # the run gave --dataset-size, and it is steady
        cost = tp.epoch.remaining_usd
        parts.append(f"epoch {fmt.short_duration(tp.epoch.remaining_s)}"
                     + (f", {fmt.usd(cost)}" if cost is not None else ""))
    neuron = state.accelerator.neuron
    if neuron is not None and neuron.flops_util is not None:
        parts.append(f"FLOPs util {flops_percent(neuron.flops_util)} of "
                     f"{neuron.peak.short_label}")
    if neuron is not None and neuron.errors is not None and neuron.errors.total:
        parts.append(f"exec errors {neuron.errors.total:,} ({errors_text(neuron.errors.by_type)})")
    if header.step is not None and tp.source:
        parts.append(f"steps from {tp.source}")
    return " | ".join(parts)


def nodes_line(nodes: NodesState) -> str:
    """A job of many nodes: each node's state, ranks, samples/s and median step, a lost
    node's last record, the slowest node marked."""
    shown = []
    for r in nodes.rows:
        bits = [r.name, r.state, f"{len(r.ranks)} ranks"]
        if r.samples_per_s is not None:
            bits.append(fmt.rate(r.samples_per_s, " samples/s"))
        if r.median_step_s is not None:
            bits.append(f"{fmt.seconds(r.median_step_s)}/step"
                        + (" (slowest)" if r.slowest else ""))
        if r.state == "lost":
            bits.append("last heard from " + (f"{fmt.short_duration(r.heard_s)} ago"
                                              if r.heard_s is not None else "never"))
        shown.append(" ".join(bits))
    return f"  nodes of job {nodes.job}: " + " | ".join(shown)


def new_notices(reader: SessionReader | TimelineView | JobReader,
                printed: dict[str, int]) -> list[str]:
    """Lines for the alerts and losses recorded since the last call (`printed` keeps count)."""
    records = []
    for kind in ("alert", "lost"):
        bucket = list(reader.events.get(kind, ()))
        records += bucket[printed.get(kind, 0):]
        printed[kind] = len(bucket)
    return [recorded.notice(r) for r in sorted(records, key=lambda r: float(r["t"]))]


def model_for(session_dir: Path) -> DashboardModel:
    """The model headless prints from: the dashboard's, on the wall clock."""
    reader = SessionReader(session_dir, telemetry_history=TELEMETRY_HISTORY)
    return DashboardModel(reader, WallClock())


NOTICE_S = 1.0
"""How often the session is read for alerts and losses to print (they come as recorded)."""
ALIVE_S = 5.0
"""How often the follower asks whether the run goes on (that looks at its processes)."""


def follow(model: DashboardModel, *, interval_s: float = 5.0, out: TextIO = sys.stdout,
           alive: Callable[[], bool] | None = None) -> dict | None:
    """Print a progress line every interval until the session ends, and each alert and loss
    the session records as it comes; returns its exit record.

    The session is read each NOTICE_S (the alerts), but the steps are taken in and the
    figures worked out (the model's refresh) only for a line: at 32 ranks x 10 steps a
    second, working them out each second was most of what following cost (1.3% of a core on
    the dev VM, as much as the dashboard), for a line printed every five seconds."""
    next_print = next_alive = 0.0
    printed: dict[str, int] = {}
    meta_changes = MetaWait(model.reader.dir / layout.META)
    try:
        while True:
            model.read()
            for line in new_notices(model.reader, printed):
                print(line, file=out, flush=True)
            ended = model.reader.meta.get("exit")
            now = time.time()
            if now >= next_print or ended is not None:
                state = model.refresh(all_steps=True)
                print(progress_line(state), file=out, flush=True)
                if state.nodes is not None:
                    print(nodes_line(state.nodes), file=out, flush=True)
                if not next_print:  # the first line: what it built stays (heap.py)
                    heap.settle()
                next_print = now + interval_s
            if ended is None and alive is not None and now >= next_alive:
                next_alive = now + ALIVE_S
                if not alive():
                    # The run may have ended between our read and this check (its last
                    # alerts, then its exit in meta.json): read again, and finish as below,
                    # those alerts too.
                    state = model.refresh(all_steps=True)
                    ended = model.reader.meta.get("exit")
                    if ended is None:
                        return None
                    print(progress_line(state), file=out, flush=True)
            if ended is not None:
                if isinstance(model.reader, SessionReader):
                    model.reader.poll(final=True)  # a last line without its newline: cut
                for line in new_notices(model.reader, printed):
                    print(line, file=out, flush=True)
                problems = model.reader.problems.summary()
                if problems:
                    print(f"neurotui: {problems}", file=out, flush=True)
                return ended
            meta_changes.wait(min(NOTICE_S, interval_s, max(0.0, next_print - time.time())))
    finally:
        meta_changes.close()
        heap.release()
