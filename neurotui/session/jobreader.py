"""A job of many nodes read as one session: a SessionReader per node's part, behind the
reader interface the live model follows (poll, take_steps, meta, events, last, problems).

Every part records the job's global ranks (FORMAT.md, meta.json `job`), so the parts' steps
are the job's steps side by side: handed over a batch per node, the model's throughput is the
sum of the nodes' and its per-rank rows are the job's ranks. What is one machine's (host,
accelerator and process telemetry) is not summed: `events` gives the telemetry of the node in
focus (`focus`: the node of the rank whose log is shown), and `parts` every node's reader, for
the per-node rows (live/nodes.py). Everything else recorded (compiles, exits, alerts,
restarts) is the job's: the parts' records merged in time order.

Nodes that start late are found as they come: the sessions folder is listed again every few
seconds, and only new folders' meta.json are read.
"""

from __future__ import annotations

import heapq
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurotui.session.columns import Columns, distinct_ints
from neurotui.session.jobs import job_meta, job_of, last_heard, node_of
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.reader import (
    DEFAULT_TELEMETRY_HISTORY,
    LOG_OFFSETS,
    SessionReader,
)
from neurotui.session.status import SessionStatus, session_status
from neurotui.session.steptable import TakenSteps

if TYPE_CHECKING:
    from neurotui.session.timeline import TimelineView

NODE_KINDS = frozenset({"host", "neuron", "gpu", "procs", "source_status", LOG_OFFSETS})
"""Records of one machine: shown for the node in focus, never merged across nodes."""
DISCOVER_EVERY_S = 5.0
OTHER_NODES_HISTORY = 2
"""Telemetry samples kept per kind for the nodes out of focus at the start (each row shows
its last): a node brought into focus fills its sparklines from then on."""
STATUS_EVERY_S = 5.0


@dataclass
class NodePart:
    """One node's part of the job: its session and the reader of it."""

    name: str
    dir: Path
    reader: SessionReader | TimelineView
    ranks: set[int] = field(default_factory=set)
    """The job's ranks whose steps came from this part."""
    status: SessionStatus | None = None

    def local_rank_of(self, global_rank: int) -> int | None:
        """The torchrun local rank (the log files' number) of one of this node's ranks."""
        for record in reversed(self.reader.events.get("ranks", ())):
            mapping = record.get("global_ranks")
            if isinstance(mapping, Mapping):
                for local, rank in mapping.items():
                    if rank == global_rank and str(local).isdigit():
                        return int(local)
        return None

    def last_heard(self) -> float | None:
        """When its supervisor last wrote: its events file's modification time; in a replay,
        its last telemetry sample up to the cursor."""
        if not isinstance(self.reader, SessionReader):
            times = [float(e["t"]) for kind in ("host", "procs")
                     if (e := self.reader.last(kind)) is not None]
            return max(times) if times else None
        return last_heard(self.dir)


class JobProblems:
    """The parts' unreadable-line summaries, each named by its node."""

    def __init__(self, parts: Callable[[], Sequence[NodePart]]) -> None:
        self._parts = parts

    def summary(self) -> str | None:
        found = [f"{p.name}: {s}" for p in self._parts() if (s := p.reader.problems.summary())]
        return "; ".join(found) or None


class JobReader:
    """Incremental reader of every node's part of job `job_id` under `root`."""

    def __init__(self, root: Path, job_id: str,
                 telemetry_history: int | None = DEFAULT_TELEMETRY_HISTORY, *,
                 use_cache: bool = True, focus: str | None = None,
                 parts: Sequence[NodePart] | None = None) -> None:
        """`parts`: these parts, read by readers of their own (a replay's timeline views),
        and no others: the folder is not looked at for more."""
        self.root = Path(root)
        self.job_id = job_id
        self.telemetry_history = telemetry_history
        self.use_cache = use_cache
        self.parts: list[NodePart] = list(parts or ())
        self.focus = focus
        """The node whose telemetry `events` gives (None: the first node)."""
        self.problems = JobProblems(lambda: self.parts)
        self._discovering = parts is None
        self.live = True
        """False for a replay's view: its nodes' last records are timed by its cursor."""
        self._seen: set[str] = set()
        self._listed_at = -math.inf
        self._merged: dict[str, tuple[tuple[int, ...], list[dict[str, Any]]]] = {}
        self._status_at = -math.inf
        if self._discovering:
            self._discover()
        if not self.parts:
            raise LookupError(f"no session of job {job_id} under {self.root}")
        self.meta: dict[str, Any] = job_meta(job_id, [p.reader.meta for p in self.parts])

    # -- the parts -------------------------------------------------------------------------
    def _discover(self) -> None:
        """Take in the parts not seen yet (a node that started late)."""
        self._listed_at = time.monotonic()
        try:
            names = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        except OSError:
            return
        found: list[tuple[str, Path]] = []
        for name in names:
            if name in self._seen:
                continue
            path = self.root / name
            try:
                meta = load_meta(path)
            except SessionFormatError:
                continue  # not a session (yet: a part being created is looked at again)
            self._seen.add(name)
            if job_of(meta) != self.job_id:
                continue
            found.append((node_of(meta) or name, path))
        if not found:
            return
        # The node in focus shows its telemetry's recent past (sparklines, alerts); the
        # others' rows need their last samples only, and a job may have a hundred nodes.
        focus = self.focus or min([n for n, _ in found] + [p.name for p in self.parts])
        for node, path in found:
            history = self.telemetry_history if node == focus else min(
                self.telemetry_history or OTHER_NODES_HISTORY, OTHER_NODES_HISTORY)
            self.parts.append(NodePart(node, path, SessionReader(
                path, history, use_cache=self.use_cache)))
        self.parts.sort(key=lambda p: (p.name, p.dir.name))

    @property
    def dir(self) -> Path:
        """The session folder of the node in focus (its logs are the ones shown)."""
        return self.focused().dir

    def focused(self) -> NodePart:
        return next((p for p in self.parts if p.name == self.focus), self.parts[0])

    def part_of_rank(self, rank: int) -> NodePart | None:
        return next((p for p in self.parts if rank in p.ranks), None)

    # -- the reader interface ----------------------------------------------------------
    def poll(self, *, final: bool = False) -> int:
        if self._discovering and time.monotonic() - self._listed_at >= DISCOVER_EVERY_S:
            self._discover()
        added = sum(p.reader.poll(final=final) for p in self.parts)
        self.meta = job_meta(self.job_id, [p.reader.meta for p in self.parts])
        return added

    @property
    def first_read(self) -> tuple[int, int] | None:
        """(bytes read, bytes to read) over the parts still in their first read."""
        reads = [r for p in self.parts if (r := getattr(p.reader, "first_read", None))]
        return (sum(r[0] for r in reads), sum(r[1] for r in reads)) if reads else None

    @property
    def samples_from(self) -> set[str]:
        return set().union(*(p.reader.samples_from for p in self.parts))

    def take_steps(self) -> TakenSteps | None:
        """Every part's new steps, a batch per node (TakenSteps.more: their ranks differ);
        None when any part dropped rows it had handed out (the model then starts over with
        `reopened()`)."""
        taken = [p.reader.take_steps() for p in self.parts]
        if any(t is None for t in taken):
            return None
        batches = []
        for part, got in zip(self.parts, taken, strict=True):
            assert got is not None
            for batch in got.batches():  # (a node's cached rows, then those read since)
                if len(batch.steps):
                    part.ranks.update(distinct_ints(batch.steps["rank"]).tolist())
                if len(batch.steps) or len(batch.phases) or batch.late_losses:
                    batches.append(replace(batch, more=()))
        if not batches:
            return TakenSteps(Columns(), Columns())
        return replace(batches[0], more=tuple(batches[1:]))

    def reopened(self) -> JobReader:
        reader = JobReader(self.root, self.job_id, self.telemetry_history,
                           use_cache=self.use_cache, focus=self.focus)
        reader.poll()
        return reader

    @property
    def events(self) -> Mapping[str, Sequence[dict[str, Any]]]:
        """The focused node's telemetry; every other kind merged over the nodes by time."""
        focused = self.focused().reader.events
        kinds = {k for p in self.parts for k in p.reader.events} - NODE_KINDS
        out: dict[str, Sequence[dict[str, Any]]] = {
            k: focused[k] for k in NODE_KINDS if k in focused}
        for kind in kinds:
            out[kind] = self._merged_kind(kind)
        return out

    def _merged_kind(self, kind: str) -> list[dict[str, Any]]:
        lists = [p.reader.events.get(kind, ()) for p in self.parts]
        key = tuple(len(x) for x in lists)
        cached = self._merged.get(kind)
        if cached is None or cached[0] != key:
            merged = list(heapq.merge(*lists, key=lambda e: float(e.get("t", 0.0))))
            self._merged[kind] = cached = (key, merged)
        return cached[1]

    def last(self, kind: str) -> dict[str, Any] | None:
        items = self.events.get(kind)
        return items[-1] if items else None

    # -- the job's state -----------------------------------------------------------------
    def status(self) -> SessionStatus:
        """The job's state from its nodes': running while any node runs (a lost node is
        named in the detail); once none runs, the nodes' end states."""
        now = time.monotonic()
        if now - self._status_at >= STATUS_EVERY_S or any(
                p.status is None or (p.status.running and p.reader.meta.get("exit") is not None)
                for p in self.parts):  # (asked again at once when a node's end is recorded)
            for part in self.parts:
                part.status = self.part_status(part)
            self._status_at = now
        return job_status(self.parts)

    def part_status(self, part: NodePart) -> SessionStatus:
        return session_status(part.dir)


def job_status(parts: Sequence[NodePart]) -> SessionStatus:
    """The job's state from its nodes' (each part's `status`): running while any node runs
    (the others named in the detail); once none runs, the nodes' end states."""
    states = [(p.name, p.status) for p in parts if p.status is not None]
    running = [name for name, s in states if s.running]
    others = [f"{name} {s.state}" for name, s in states if not s.running]
    if running:
        detail = f"{len(running)} of {len(states)} nodes running" + (
            f"; {', '.join(others)}" if others else "")
        return SessionStatus("running", True, detail)
    ends = sorted({s.state for _, s in states})
    return SessionStatus("/".join(ends), False, "; ".join(others) if len(ends) > 1 else "")

