"""Loading sessions for a comparison: one session, or a job of many nodes put together as
one run, read once into a LoadedSession (its tables, state, alerts and Neuron figures)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui.live.neuron import RunNeuron, RunTally, combine
from neurotui.metrics.common import floats
from neurotui.session import neurontally
from neurotui.session.columns import Columns
from neurotui.session.jobs import job_meta
from neurotui.session.listing import RUNNING_STATES
from neurotui.session.reader import SessionReader, json_loads
from neurotui.session.status import session_status
from neurotui.session.stepprecedence import STEP_SOURCES

if TYPE_CHECKING:  # pandas only where a table is made: a job's figures need none
    import pandas as pd


@dataclass
class LoadedSession:
    """What a comparison needs of one session, read once."""

    path: Path
    meta: dict[str, Any]
    steps: pd.DataFrame
    compiles: pd.DataFrame
    phases: pd.DataFrame
    probe_info: list[dict[str, Any]]
    """The automatic probe's notes: what it timed, on which device."""
    samples_from: set[str]
    """How the steps' samples were known (SessionReader.samples_from)."""
    problems: str | None
    """The reader's summary of skipped lines, with file and line ("events.jsonl:2 ...")."""
    state: str
    """session_status: completed, failed, stopped, running, unsupervised, lost, ..."""
    last_seen: float | None
    """Time of the last record of any kind (where a run without an end record stopped)."""
    alerts: list[dict[str, Any]] = field(default_factory=list)
    """The supervisor's alert records (start and end)."""
    lost: list[dict[str, Any]] = field(default_factory=list)
    """What the writers could not record (a full disk)."""
    job: str | None = None
    """The id of the job of many nodes this stands for (load_job); None: one session."""
    nodes: list[NodePart] = field(default_factory=list)
    """A job's nodes, each with its state and when it was last heard from."""
    parts: list[LoadedSession] = field(default_factory=list)
    """A job's nodes' sessions (LoadedJob)."""
    neuron: RunNeuron | None = None
    """FLOPs utilisation and execution errors over the run's `neuron` samples."""
    logical_cores: int | None = None
    """NeuronCores as the SDK counts them (neuron-ls's logical cores), where recorded."""
    compile_records: list[dict[str, Any]] = field(default_factory=list)
    """The `compile` records (torch.compile's and neuronx-cc's), in time order."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


@dataclass(frozen=True)
class NodePart:
    """One node's part of a job: its session, state and last record."""

    node: str
    session: str
    state: str
    last_seen: float | None


def load_job(job_id: str, parts: Sequence[Path]) -> LoadedJob:
    """A job of many nodes as one run: its nodes' sessions read and put together. The ranks
    are the job's global ranks in every part (FORMAT.md, meta.json `job`), so the steps of
    all parts are the job's steps: its throughput is the sum of its nodes'. Its price is the
    sum of its nodes' (unknown if one is), its cost that price over the job's time.

    The parts' steps stay numpy columns, one table per node: the job's figures are worked
    out node by node (job_figures), never over one table of every node's rows (a day of 64
    nodes x 32 ranks is millions of them)."""
    loaded = [_load_part(path) for path in parts]
    if not loaded:
        raise ValueError(f"no session of job {job_id}")
    meta = job_meta(job_id, [part.meta for part in loaded])  # (as the job's dashboard's)
    nodes = [NodePart(str((part.meta.get("job") or {}).get("node") or part.name), part.name,
                      part.state, part.last_seen) for part in loaded]
    states = {part.state for part in loaded}
    seen = [part.last_seen for part in loaded if part.last_seen is not None]
    return LoadedJob(
        path=loaded[0].path.parent / job_id, meta=meta, steps=None, compiles=None,
        phases=None, probe_info=[i for part in loaded for i in part.probe_info],
        samples_from=set().union(*(part.samples_from for part in loaded)),
        problems="; ".join(f"{part.name}: {part.problems}" for part in loaded
                           if part.problems) or None,
        state=next((s for s in RUNNING_STATES if s in states), None)
        or "/".join(sorted(states)),
        last_seen=max(seen) if seen else None,
        alerts=[a for part in loaded for a in part.alerts],
        lost=[x for part in loaded for x in part.lost],
        job=job_id, nodes=nodes, parts=loaded,
        compile_records=sorted((r for part in loaded for r in part.compile_records),
                               key=lambda r: float(r.get("t", 0.0))),
        neuron=combine([part.neuron for part in loaded if part.neuron is not None]))


def _load_part(path: Path) -> LoadedSession:
    """load_session's read of one node's part, its tables as the reader's numpy columns
    (steps, phase rows; compile events as t and rank): no DataFrame of a million rows."""
    reader = SessionReader(path, telemetry_history=1).load()
    steps = reader.step_columns()
    last_step = float(np.nanmax(floats(steps["t"]))) if len(steps) else None
    return _loaded(path, reader, steps,  # type: ignore[arg-type]
                   Columns.of_records(reader.events.get("compile", ()), ("t", "rank")),
                   reader.phase_columns(), last_step)


class LoadedJob(LoadedSession):
    """load_job's job: `parts` holds its nodes' sessions, their tables as numpy columns.
    `steps`, `compiles` and `phases`, every node's rows in one DataFrame in time order, are
    put together only when asked for (throughput_overlay): compare's row does not need them.
    """

    parts: list[LoadedSession]

    def __init__(self, *, parts: list[LoadedSession], **fields: Any) -> None:
        self._tables: dict[str, pd.DataFrame] = {}
        super().__init__(**fields)
        self.parts = parts

    def _table(self, what: str) -> pd.DataFrame:
        if what not in self._tables:
            frames = [getattr(p, what) for p in self.parts]
            self._tables[what] = _concat_in_time(
                [f.to_frame({"src": STEP_SOURCES} if what == "steps" else None)
                 if isinstance(f, Columns) else f for f in frames])
        return self._tables[what]

    steps = property(lambda self: self._table("steps"),  # type: ignore[assignment]
                     lambda self, value: None)
    compiles = property(lambda self: self._table("compiles"),  # type: ignore[assignment]
                        lambda self, value: None)
    phases = property(lambda self: self._table("phases"),  # type: ignore[assignment]
                      lambda self, value: None)


def _concat_in_time(frames: list[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    joined = pd.concat(frames, ignore_index=True)
    return joined.sort_values("t", kind="stable", ignore_index=True) \
        if "t" in joined.columns else joined


def load_session(path: Path) -> LoadedSession:
    """Read one session for comparing; SessionFormatError when meta.json is unusable."""
    # One record of each telemetry kind is enough to know when the run was last alive; the
    # cache spares re-parsing the steps (see neurotui.session.cache).
    reader = SessionReader(path, telemetry_history=1).load()
    steps = reader.steps()
    return _loaded(path, reader, steps, reader.frame("compile"), reader.phases(),
                   float(steps["t"].max()) if len(steps) else None)


def _loaded(path: Path, reader: SessionReader, steps: pd.DataFrame, compiles: pd.DataFrame,
            phases: pd.DataFrame, last_step: float | None) -> LoadedSession:
    """A session read for comparing, from its reader and its tables (DataFrames, or numpy
    columns for a job's parts)."""
    times = [float(bucket[-1]["t"]) for bucket in reader.events.values() if bucket]
    if last_step is not None:
        times.append(last_step)
    return LoadedSession(path=Path(path), meta=reader.meta, steps=steps, compiles=compiles,
                         phases=phases, probe_info=list(reader.events.get("probe_info", ())),
                         samples_from=set(reader.samples_from),
                         problems=reader.problems.summary(),
                         state=session_status(path).state,
                         last_seen=max(times) if times else None,
                         alerts=list(reader.events.get("alert", ())),
                         lost=list(reader.events.get("lost", ())),
                         neuron=run_neuron_of(reader),
                         logical_cores=_logical_cores(reader.events.get("neuron_devices", ())),
                         compile_records=list(reader.events.get("compile", ())))


def _logical_cores(snapshots: Sequence[dict[str, Any]]) -> int | None:
    found = snapshots[-1].get("logical_cores") if snapshots else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 \
        else None


def run_neuron_of(reader: SessionReader) -> RunNeuron:
    """FLOPs utilisation and errors over every `neuron` sample of the session: from the sums
    the supervisor kept of them (session/neurontally.py) and the samples recorded after, or,
    where there are none or they do not agree with the events, from every sample, read one
    at a time where the reader's index says each lies (the reader keeps only the last)."""
    paths, stream, offset, length = reader.event_locations("neuron")
    locations = list(zip(stream.tolist(), offset.tolist(), length.tolist(), strict=True))
    files: dict[int, Any] = {}

    def sample(at: int) -> dict[str, Any] | None:
        sid, start, size = locations[at]
        f = files.get(sid)
        if f is None:
            f = files[sid] = open(paths[sid], "rb")  # noqa: SIM115 (closed below)
        f.seek(start)
        try:
            record = json_loads(f.read(size))
        except ValueError:  # (the reader indexed it, so it parsed then: a torn file)
            return None
        return record if isinstance(record, dict) else None

    try:
        kept = neurontally.load(reader.dir)
        first = 0
        if kept is not None and 0 < kept.samples <= len(locations):
            # The kept sums are of the first `samples` samples when the last of those is
            # the one they say they took last (a supervisor that died after its last save
            # left samples out: its successor's sums are then read afresh).
            last = sample(kept.samples - 1)
            if last is not None and kept.last_t is not None and \
                    neurontally.finite(last.get("t")) == kept.last_t:
                first = kept.samples
        tally = RunTally(reader.meta, kept if first else None)
        for at in range(first, len(locations)):
            record = sample(at)
            if record is not None:
                tally.add(record)
    finally:
        for f in files.values():
            f.close()
    return tally.result()
