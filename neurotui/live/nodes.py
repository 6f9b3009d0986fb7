"""The per-node rows of a job of many nodes (session/jobreader.py): each node's state, share
of the job's throughput, step time, accelerator and host load, and when it was last heard
from. No Textual in here: the nodes panel and headless mode render these."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from neurotui.live import alerts as rules
from neurotui.live.stepstate import StepState
from neurotui.metrics import finite_or_none

if TYPE_CHECKING:
    from neurotui.session.jobreader import JobReader, NodePart

SLOWEST_MARGIN = 0.01
"""The slowest node is marked when its median step is this much above the fastest's: in a
synchronous job every node waits for it, so the medians differ little, and a mark on a
difference under 1% would point at noise."""


@dataclass(frozen=True)
class NodeRow:
    name: str
    session: str
    state: str
    running: bool
    ranks: tuple[int, ...]
    samples_per_s: float | None
    median_step_s: float | None
    slowest: bool
    accel_kind: str | None
    accel_util: float | None
    """Mean utilisation of its cores or GPUs in its last sample (percent)."""
    host_cpu: float | None
    """Mean CPU use of its host in its last sample (percent)."""
    heard_s: float | None
    """Seconds since its supervisor last wrote (None: never)."""
    focused: bool


@dataclass(frozen=True)
class NodesState:
    job: str
    rows: tuple[NodeRow, ...]
    focus: str
    """The node whose host, accelerator, processes and logs the other panels show."""

    @property
    def lost(self) -> tuple[NodeRow, ...]:
        return tuple(r for r in self.rows if r.state == "lost")


def nodes_state(reader: JobReader, steps: StepState,
                medians: Mapping[int, tuple[float, int]], view_now: float) -> NodesState:
    """Every node's row at `view_now` (the statuses are the reader's, a few seconds old)."""
    wall_now = time.time() if reader.live else view_now  # (a replay: its cursor)
    focus = reader.focused().name
    rows = []
    for part in reader.parts:
        mine = [medians[r][0] for r in part.ranks if r in medians]
        status = part.status
        heard = part.last_heard()
        accel_kind, accel = _accelerator(part)
        rows.append(NodeRow(
            name=part.name, session=part.dir.name,
            state=status.state if status is not None else "?",
            running=bool(status is not None and status.running),
            ranks=tuple(sorted(part.ranks)),
            samples_per_s=steps.throughput(view_now, ranks=part.ranks) if part.ranks else None,
            median_step_s=float(np.median(mine)) if mine else None, slowest=False,
            accel_kind=accel_kind, accel_util=accel, host_cpu=_host_cpu(part),
            heard_s=max(0.0, wall_now - heard) if heard is not None else None,
            focused=part.name == focus))
    timed = [r.median_step_s for r in rows if r.median_step_s is not None]
    if len(timed) > 1 and max(timed) > min(timed) * (1 + SLOWEST_MARGIN):
        slowest = max(timed)
        rows = [replace(r, slowest=True) if r.median_step_s == slowest else r for r in rows]
    return NodesState(reader.job_id, tuple(rows), focus)


def _accelerator(part: NodePart) -> tuple[str | None, float | None]:
    events = part.reader.events
    kind = rules.accelerator_kind(events)
    if kind is None:
        return None, None
    return kind, finite_or_none(rules.mean_util(events[kind][-1]))


def _host_cpu(part: NodePart) -> float | None:
    last = part.reader.last("host")
    return finite_or_none(rules.mean_cpu(last)) if last is not None else None
