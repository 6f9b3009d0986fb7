"""Compare runs side by side: one row per session, like the reference study's table.

Each row: instance and accelerator, cores used, global batch, DataLoader workers, time to the
first step (compile), steady-state step time (median, p90), a column per step phase the runs
reported (data, forward, ...: median over the steady steps, metrics/breakdown.py), throughput,
price, samples per dollar (steady and all-in), price-performance relative to a baseline
session, and on Neuron the NeuronCores' FLOPs utilisation and execution errors (live/neuron.py,
as the dashboard's accelerator panel works them out). The figures
come from neurotui.summary.summarize, so compare, the dashboard and meta.json's summary agree.
A figure that cannot be known is missing (None / NaN / "n/a"), never 0.

`neurotui compare S1 S2 ... [--baseline S] [--format table|markdown|csv|json]` (the command:
compare_command.py);
`compare_frame()` gives the rows as a DataFrame and `throughput_overlay()` the samples/s
curves of several runs on one time axis, for the dashboard's compare screen.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui import fmt, metrics, recorded
from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.live.neuron import (
    NO_SAMPLES,
    RunNeuron,
    RunTally,
    combine,
    errors_text,
    flops_percent,
)
from neurotui.metrics import compiles
from neurotui.metrics.breakdown import phase_order, steady_phase_medians
from neurotui.metrics.common import floats, has_rows, missing, numbers
from neurotui.metrics.steady import (  # the batch form's own rule, taken node by node
    _steady_state,
    _sums_by_rank,
    overlaps_compile,
    steady_step_time_without_data,
)
from neurotui.metrics.steptime import past_warmup, with_step_time
from neurotui.pricing.table import PriceTable, UnknownInstanceError, builtin_table
from neurotui.session import neurontally
from neurotui.session.columns import Columns
from neurotui.session.jobs import job_meta
from neurotui.session.jsonfile import dumps_strict
from neurotui.session.reader import STEP_SOURCES, SessionReader, json_loads
from neurotui.session.status import session_status
from neurotui.summary import summarize

if TYPE_CHECKING:  # pandas only where a table is made: a job's figures need none
    import pandas as pd

MISSING = "n/a"
_RUNNING_STATES = frozenset({"running", "unsupervised", "starting"})
# `--workers 4`, `--workers=4` and the spellings of common training scripts.
_WORKER_FLAGS = ("--workers", "--num-workers", "--num_workers", "--dataloader-num-workers",
                 "--dataloader_num_workers")
_WORKERS_RE = re.compile(r"^(" + "|".join(re.escape(f) for f in _WORKER_FLAGS) + r")=(\d+)$")
_NICE_BUCKETS_S = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200)
OVERLAY_POINTS = 300
"""About this many points per curve in throughput_overlay() when no bucket is given."""


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    """Table and markdown header."""
    kind: str
    """How the table shows it: text, int, ms, s, rate, usd, count, ratio, percent (a
    fraction shown as a percentage)."""


COLUMNS: tuple[Column, ...] = (
    Column("session", "SESSION", "text"),
    Column("state", "STATE", "text"),
    Column("instance_type", "INSTANCE", "text"),
    Column("accelerator", "ACCELERATOR", "text"),
    Column("cores_used", "CORES", "int"),
    Column("global_batch", "BATCH", "count"),
    Column("workers", "WORKERS", "int"),
    Column("time_to_first_step_s", "FIRST STEP", "s"),
    Column("compile_s", "COMPILE", "s"),
    Column("recompiles", "RECOMPILES", "int"),
    Column("compile_usd", "COMPILE $", "usd"),
    Column("step_time_median_s", "STEP MEDIAN", "ms"),
    Column("step_time_p90_s", "STEP P90", "ms"),
    Column("samples_per_s", "SAMPLES/S", "rate"),
    Column("usd_per_hour", "PRICE/H", "usd"),
    Column("samples_per_dollar_steady", "SAMPLES/$", "count"),
    Column("samples_per_dollar_all_in", "SAMPLES/$ ALL-IN", "count"),
    Column("relative_price_performance", "RELATIVE", "ratio"),
    Column("flops_util", "FLOPS UTIL", "percent"),
    Column("exec_errors", "EXEC ERRORS", "count"),
    Column("alerts", "ALERTS", "int"),
)
"""What `neurotui compare` shows, in order, then a column per step phase (table_columns).
Data rows hold these keys, the phase keys and EXTRA_KEYS."""
EXTRA_KEYS = ("step_source", "step_time_without_data_s", "dataset_size", "epoch_s",
              "usd_per_epoch", "cores_available", "baseline", "alerts_by_key", "lost",
              "problems", "path", "job", "nodes", "node_states", "flops_peak", "flops_note",
              "exec_errors_by_type", "first_step_compile_s", "compile_graphs",
              "compile_mismatch", "graph_breaks", "recompile_reasons")
"""Also in every row (CSV, JSON, DataFrame), not in the text table (a job's nodes are its
footnote there)."""
_INT_KEYS = ("cores_used", "workers", "cores_available", "alerts", "nodes", "recompiles",
             "graph_breaks")
_TEXT_KEYS = ("session", "state", "instance_type", "accelerator", "step_source",
              "alerts_by_key", "lost", "problems", "path", "job", "node_states", "flops_peak",
              "flops_note", "exec_errors_by_type", "compile_graphs", "recompile_reasons")


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
        return self.state in _RUNNING_STATES


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
        state=next((s for s in _RUNNING_STATES if s in states), None)
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


def job_figures(job: LoadedJob, now: float | None = None,
                dataset_size: float | None = None,
                warmup_steps: int = DEFAULT_WARMUP_STEPS
                ) -> tuple[dict[str, Any], int | float | None, dict[str, float]]:
    """summarize()'s figures of a job (those a comparison row shows), its global batch and
    its steady phase medians, as over one table of all its nodes' steps, worked out node
    by node: each rank's rows are on one node (an attempt's), so step times, warm-up and
    compile hits (against every node's compile events, as over one table) are the node's
    own; the steady rule is applied job-wide (compile-hit steps left out unless that leaves
    none anywhere), and the statistics are taken over the steady steps of all nodes
    together. Phase medians recompute step times from the steady rows: exact where steps
    report their `dt` (those of the probe and the automatic probe, which report phases)."""
    meta = job.meta
    parts = [p.steps for p in job.parts if len(p.steps)]
    compiles = Columns.concat([p.compiles for p in job.parts])
    phases = Columns.concat([p.phases for p in job.parts])
    started, ended = meta.get("started_at"), meta.get("ended_at")
    end = ended if ended is not None else now
    price = (meta.get("price") or {}).get("usd_per_hour")
    # Only what the figures read: sorting a part's rows moves every column it has.
    timed = [with_step_time(Columns({n: s[n] for n in _TIMED if n in s})) for s in parts]
    keep = [np.asarray(past_warmup(t, warmup_steps)) for t in timed]
    if has_rows(compiles, "t") and any(k.any() for k in keep):
        hits = [np.asarray(overlaps_compile(t, compiles)) for t in timed]
        if not all(h[k].all() for h, k in zip(hits, keep, strict=True)):
            keep = [k & ~h for k, h in zip(keep, hits, strict=True)]
    keep = [k & ~np.isnan(floats(t["step_time"])) for t, k in zip(timed, keep, strict=True)]
    # As steady_state over one table: each rank's rows lie in runs, now one after another.
    times = _joined([floats(t["step_time"])[k] for t, k in zip(timed, keep, strict=True)])
    rank = _joined([numbers(t["rank"])[k] for t, k in zip(timed, keep, strict=True)])
    samples = _joined([floats(t["samples"])[k] for t, k in zip(timed, keep, strict=True)]) \
        if all("samples" in t for t in timed) else None
    steady = None
    if len(times):
        ranked = ~missing(rank)
        steady = _steady_state(times, *_sums_by_rank(
            rank[ranked], times[ranked], None if samples is None else samples[ranked]),
            warmup_steps)
    # The steady rows themselves, for the phase figures, where a node reported phases.
    steady_rows = Columns.concat([
        Columns({n: t[n] for n in _TIMED_ALL if n in t}).rows(k)
        for t, k in zip(timed, keep, strict=True)]) if has_rows(phases, "t", "rank") \
        else Columns()
    rate = steady.samples_per_s if steady else None
    samples = float(sum(metrics.total_samples(t, timed=True) for t in timed)) \
        if parts else None
    cost = metrics.cost_so_far(price, started, end, ended)
    first_t = min((float(np.nanmin(floats(s["t"]))) for s in parts), default=None)
    size = metrics.finite_or_none(dataset_size if dataset_size is not None else
                                  (meta.get("config") or {}).get("dataset_size"))
    epoch = metrics.per_epoch(size, rate, price)
    # Distinct ranks: those where a with_step_time table's rank changes (it is sorted by it).
    changes = (floats(t["rank"]) for t in timed)
    ranks = [np.unique(r[np.r_[True, r[1:] != r[:-1]]]) for r in changes]
    ranks = [r[~np.isnan(r)] for r in ranks]
    figures = {
        "ranks": len(np.unique(np.concatenate(ranks))) if ranks else 0,
        "time_to_first_step_s": first_t - float(started)
        if first_t is not None and started else None,
        "steady_samples_per_s": rate,
        "step_time_median_s": steady.step_time_median if steady else None,
        "step_time_p90_s": steady.step_time_p90 if steady else None,
        "step_time_without_data_s": steady_step_time_without_data(
            steady_rows, phases, 0, None, timed=True) if len(steady_rows) else None,
        "step_source": metrics.step_sources(
            set().union(*(metrics.steps_sources(s, STEP_SOURCES) for s in parts)),
            job.probe_info, job.samples_from),
        "usd_per_hour": price,
        "samples_per_dollar_steady": metrics.samples_per_dollar(rate, price),
        "samples_per_dollar_all_in": metrics.all_in_samples_per_dollar(samples, cost),
        "dataset_size": size,
        "epoch_s": epoch.remaining_s if epoch else None,
        "usd_per_epoch": epoch.remaining_usd if epoch else None,
    }
    medians = steady_phase_medians(steady_rows, phases, None, 0) if len(steady_rows) else {}
    return figures, _global_batch_of_parts(timed), medians


_TIMED = ("t", "rank", "step", "attempt", "dt", "samples")
"""The step columns the figures read (not `loss`, nor `src`: steps_sources reads the part)."""
_TIMED_ALL = (*_TIMED, "step_time")


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0)


def _global_batch_of_parts(parts: Sequence[Columns]) -> int | float | None:
    """global_batch() over the parts' steps taken together: each rank's median samples per
    step (NaN left out, as pandas' median) in the job's latest attempt, summed."""
    if not parts:
        return None
    attempts = [numbers(s["attempt"]) for s in parts]
    latest = max(float(np.nanmax(a.astype(float))) for a in attempts)
    total = 0.0
    counted = 0
    for steps, attempt in zip(parts, attempts, strict=True):
        mine = attempt == latest
        rank, samples = floats(steps["rank"])[mine], floats(steps["samples"])[mine]
        ranked = ~np.isnan(rank)
        rank, samples = rank[ranked], samples[ranked]
        if not len(rank):
            continue
        order = np.lexsort((samples, rank))  # each rank's samples ascending, NaN last
        rank, samples = rank[order], samples[order]
        firsts = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
        known = np.add.reduceat(~np.isnan(samples), firsts)
        if (known == 0).any():
            return None  # a rank that never reports its samples
        low = samples[firsts + (known - 1) // 2]
        high = samples[firsts + known // 2]
        total += float(((low + high) / 2).sum())
        counted += len(firsts)
    if not counted or total <= 0:
        return None
    return int(total) if total.is_integer() else total


def phase_key(name: str) -> str:
    """The row key of a step phase's median seconds."""
    return f"phase_{name}_s"


def phase_columns(rows: Sequence[dict[str, Any]]) -> tuple[Column, ...]:
    """A column per step phase any of the rows reports (in the order a step runs), each
    the phase's median over the steady steps; a run without it shows it missing."""
    names = phase_order({n for row in rows for n in row.get("phases_s") or {}})
    # `step` is the automatic probe's rest of the step: not to be read as the step time.
    return tuple(Column(phase_key(n), "STEP PHASE" if n == "step" else n.upper(), "ms")
                 for n in names)


def table_columns(rows: Sequence[dict[str, Any]]) -> tuple[Column, ...]:
    """COLUMNS, then the rows' phase columns: last, so that on a screen of 160 columns the
    study's own figures (samples/s, samples per dollar, relative) stay in sight."""
    return (*COLUMNS, *phase_columns(rows))


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


# -- figures ------------------------------------------------------------------------------

def dataloader_workers(meta: dict[str, Any]) -> int | None:
    """DataLoader workers from `--workers N` (or --num-workers ...) in the user's command."""
    command = meta.get("user_command") or []
    if not isinstance(command, list):
        return None
    tokens = [str(x) for x in command]
    if meta.get("shell"):  # one shell line: split it as the shell would
        try:
            tokens = shlex.split(" ".join(tokens))
        except ValueError:
            tokens = " ".join(tokens).split()
    found = None
    for i, token in enumerate(tokens):
        m = _WORKERS_RE.match(token)
        if m:
            found = int(m.group(2))
        elif token in _WORKER_FLAGS and i + 1 < len(tokens) and tokens[i + 1].isdigit():
            found = int(tokens[i + 1])
    return found  # the last one wins, as with argparse


def global_batch(steps: pd.DataFrame) -> int | float | None:
    """Samples per step of the whole job: each rank's median samples per step, summed over
    the ranks of the latest attempt. None when a rank does not report its samples."""
    import pandas as pd

    if not len(steps):
        return None
    latest = steps[steps["attempt"] == steps["attempt"].max()]
    per_rank = pd.to_numeric(latest["samples"], errors="coerce").groupby(latest["rank"]).median()
    if per_rank.isna().any() or not len(per_rank):
        return None
    total = float(per_rank.sum())
    if total <= 0:
        return None
    return int(total) if total.is_integer() else total


def instance_figures(instance_type: str | None,
                     table: PriceTable | None = None) -> tuple[str | None, int | None]:
    """('1x Trainium', 2 cores) from the price table's specs; Nones when the type is unknown."""
    if not instance_type:
        return None, None
    try:
        spec = (table or builtin_table()).spec(instance_type)
    except UnknownInstanceError:
        return None, None
    name = spec.accelerator
    if name and spec.accelerators:
        name = f"{spec.accelerators}x {name}"
    return name, spec.neuron_cores or spec.gpus


def session_row(session: LoadedSession, *, table: PriceTable | None = None,
                now: float | None = None, dataset_size: float | None = None) -> dict[str, Any]:
    """One comparison row (relative price-performance and baseline filled in by
    compare_rows). `now` matters only for a running session (default: the clock);
    `dataset_size` (samples in an epoch) replaces the run's own."""
    meta = session.meta
    end = None
    if meta.get("ended_at") is None:
        # Running: up to now. Ended without an end record (lost): up to its last record,
        # not to now, or its bill would grow for ever.
        end = (time.time() if now is None else now) if session.running else session.last_seen
    if isinstance(session, LoadedJob):
        figures, batch, phases = job_figures(session, now=end, dataset_size=dataset_size)
    else:
        figures = summarize(meta, session.steps, session.compiles, now=end,
                            phases=session.phases, probe_info=session.probe_info,
                            samples_from=session.samples_from, dataset_size=dataset_size)
        batch = global_batch(session.steps)
        phases = steady_phase_medians(session.steps, session.phases, session.compiles)
    instance_type = (meta.get("instance") or {}).get("type")
    accelerator, cores_available = instance_figures(instance_type, table)
    # The cores as the SDK counted them on the machine (64 logical on a trn2.48xlarge under
    # LNC 2, where the price table's spec counts 128 physical ones).
    cores_available = session.logical_cores or cores_available
    episodes = recorded.alert_episodes(session.alerts)
    compile_row = _compile_row(session, end, figures["usd_per_hour"])
    return {
        "session": session.meta["name"] if session.job else session.name,
        "state": session.state,
        "job": session.job,
        "nodes": len(session.nodes) or 1,
        "node_states": ", ".join(f"{n.node} {n.state}" for n in session.nodes) or None,
        "instance_type": instance_type,
        "accelerator": accelerator,
        "cores_used": figures["ranks"] or None,
        "global_batch": batch,
        "workers": dataloader_workers(meta),
        "time_to_first_step_s": figures["time_to_first_step_s"],
        **compile_row,
        "step_time_median_s": figures["step_time_median_s"],
        "step_time_p90_s": figures["step_time_p90_s"],
        **{phase_key(name): seconds for name, seconds in phases.items()},
        "phases_s": phases,
        "samples_per_s": figures["steady_samples_per_s"],
        "usd_per_hour": figures["usd_per_hour"],
        "samples_per_dollar_steady": figures["samples_per_dollar_steady"],
        "samples_per_dollar_all_in": figures["samples_per_dollar_all_in"],
        "relative_price_performance": None,
        **_neuron_row(session.neuron),
        # Sessions from before the supervisor recorded alerts: unknown, not 0.
        "alerts": sum(episodes.values()) if meta.get("records_alerts") else None,
        "alerts_by_key": ", ".join(f"{key} x{n}" for key, n in sorted(episodes.items()))
        or None,
        "lost": recorded.lost_text(session.lost),
        "step_source": figures["step_source"],
        "step_time_without_data_s": figures["step_time_without_data_s"],
        "dataset_size": figures["dataset_size"],
        "epoch_s": figures["epoch_s"],
        "usd_per_epoch": figures["usd_per_epoch"],
        "cores_available": cores_available,
        "baseline": False,
        "problems": session.problems,
        "path": str(session.path),
    }


def _compile_row(session: LoadedSession, now: float | None,
                 usd_per_hour: float | None) -> dict[str, Any]:
    """What compiling cost the run (metrics/compiles.py: one definition of a compile for
    torch.compile's records and neuronx-cc's lines)."""
    parts = session.parts or [session]
    first: dict[tuple[int, int], float] = {}
    for part in parts:
        first.update(_first_steps(part.steps))
    spans = compiles.compile_spans(session.compile_records)
    found = compiles.compile_figures(spans, first, now)
    reasons = [f"rank {s.rank if s.rank is not None else '?'}: {s.source} "
               + (f"recompiled {s.frame}" if s.frame else "compiled")
               + (f" in {fmt.seconds(s.seconds())}" if s.seconds() is not None else "")
               + (f", because {s.reason.strip().splitlines()[0][:200]}" if s.reason else "")
               for s in found.recompile_spans]
    return {
        "compile_s": found.compile_s,
        "recompiles": found.recompiles,
        "compile_usd": found.usd(usd_per_hour),
        "first_step_compile_s": found.before_first_step_s,
        "compile_graphs": compiles.mismatch_text(found.graphs_by_rank) or None,
        "compile_mismatch": found.mismatch if found.graphs_by_rank else None,
        "graph_breaks": found.graph_breaks,
        "recompile_reasons": "; ".join(reasons) or None,
    }


def _first_steps(steps: Any) -> dict[tuple[int, int], float]:
    """(rank, attempt) -> the time of its first step, of a step table (DataFrame or Columns)."""
    if steps is None or not len(steps):
        return {}
    t, rank, attempt = floats(steps["t"]), floats(steps["rank"]), floats(steps["attempt"])
    ok = ~(np.isnan(t) | np.isnan(rank) | np.isnan(attempt))
    t, rank, attempt = t[ok], rank[ok].astype(np.int64), attempt[ok].astype(np.int64)
    order = np.argsort(t, kind="stable")
    keys = np.stack([rank[order], attempt[order]], axis=1)
    _, at = np.unique(keys, axis=0, return_index=True)
    return {(int(keys[i, 0]), int(keys[i, 1])): float(t[order][i]) for i in at}


def _neuron_row(found: RunNeuron | None) -> dict[str, Any]:
    if found is None:
        return {"flops_util": None, "exec_errors": None, "flops_peak": None,
                "flops_note": NO_SAMPLES, "exec_errors_by_type": None}
    return {"flops_util": found.flops_util, "exec_errors": found.exec_errors,
            "flops_peak": found.peak.label if found.peak is not None else None,
            "flops_note": found.flops_note,
            "exec_errors_by_type": errors_text(found.errors_by_type) or None}


def compare_rows(sessions: Sequence[Path | LoadedSession], baseline: int = 0, *,
                 table: PriceTable | None = None, now: float | None = None,
                 dataset_size: float | None = None) -> list[dict[str, Any]]:
    """Rows in the given order; `baseline` is the index of the session the others are
    measured against (its relative figure is 1.0 when its samples per dollar is known);
    `dataset_size`: samples in an epoch, for every run (default: each run's own)."""
    loaded = [s if isinstance(s, LoadedSession) else load_session(s) for s in sessions]
    rows = [session_row(s, table=table, now=now, dataset_size=dataset_size) for s in loaded]
    if rows:
        base = rows[baseline]
        base["baseline"] = True
        for row in rows:
            row["relative_price_performance"] = _ratio(row["samples_per_dollar_steady"],
                                                       base["samples_per_dollar_steady"])
    return rows


def _ratio(value: float | None, base: float | None) -> float | None:
    if not fmt.known(value) or not fmt.known(base) or base <= 0:  # type: ignore[operator]
        return None
    return float(value) / float(base)  # type: ignore[arg-type]


def rows_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a DataFrame: text columns, Int64 counts (<NA> when missing) and float64
    figures (NaN when missing); one row per session, in order."""
    import pandas as pd

    keys = [c.key for c in table_columns(rows)] + list(EXTRA_KEYS)
    df = pd.DataFrame([{k: row.get(k) for k in keys} for row in rows], columns=keys)
    for key in keys:
        if key in _INT_KEYS:
            df[key] = pd.array([row.get(key) for row in rows], dtype="Int64")
        elif key == "baseline":
            df[key] = df[key].astype(bool)
        elif key not in _TEXT_KEYS:
            df[key] = pd.to_numeric(df[key], errors="coerce").astype("float64")
    return df


def compare_frame(sessions: Sequence[Path | LoadedSession], baseline: int = 0, *,
                  table: PriceTable | None = None, now: float | None = None) -> pd.DataFrame:
    """compare_rows() as a DataFrame (see rows_frame), for the dashboard's compare screen."""
    return rows_frame(compare_rows(sessions, baseline, table=table, now=now))


# -- throughput over time -----------------------------------------------------------------

def overlay_bucket_s(durations: Sequence[float | None], points: int = OVERLAY_POINTS) -> float:
    """A round bucket giving about `points` points on the longest run (10 s at least)."""
    longest = max((d for d in durations if fmt.known(d)), default=0.0)
    want = longest / max(1, points)
    return float(next((b for b in _NICE_BUCKETS_S if b >= want), _NICE_BUCKETS_S[-1]))


def throughput_overlay(sessions: Sequence[Path | LoadedSession],
                       bucket_s: float | None = None, *,
                       now: float | None = None) -> pd.DataFrame:
    """Whole-job samples/s over time of several runs on one axis, to overlay in a chart.

    Long format, columns session, t_s (seconds since that session started, at the bucket's
    start), samples_per_s. One bucket size for all (default: a round size giving about
    OVERLAY_POINTS points on the longest run), so the curves compare. Compile time shows as
    0 samples/s at the start of each curve.
    """
    import pandas as pd

    loaded = [s if isinstance(s, LoadedSession) else load_session(s) for s in sessions]
    spans = []
    for s in loaded:
        started = _float(s.meta.get("started_at"))
        end = _float(s.meta.get("ended_at"))
        if end is None:
            end = (time.time() if now is None else now) if s.running else s.last_seen
        spans.append((started, end))
    bucket = bucket_s or overlay_bucket_s(
        [e - b if b is not None and e is not None else None for b, e in spans])
    parts = []
    for s, (started, end) in zip(loaded, spans, strict=True):
        series = metrics.throughput_series(s.steps, bucket, start=started, end=end)
        if not len(series):
            continue
        origin = started if started is not None else float(series["t"].iloc[0])
        parts.append(pd.DataFrame({"session": s.name,
                                   "t_s": series["t"].to_numpy(dtype=float) - origin,
                                   "samples_per_s": series["samples_per_s"].to_numpy(float)}))
    if not parts:
        return pd.DataFrame({"session": pd.Series(dtype=object),
                             "t_s": pd.Series(dtype=float),
                             "samples_per_s": pd.Series(dtype=float)})
    return pd.concat(parts, ignore_index=True)


# -- rendering ----------------------------------------------------------------------------

def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not fmt.known(value):
        return None
    return float(value)


def format_value(value: Any, kind: str) -> str:
    """A table cell: fmt.format_value's kinds, and `percent` (a fraction, 0.0074 -> 0.74%)."""
    if kind == "percent":
        return flops_percent(float(value)) if fmt.known(value) else MISSING
    return fmt.format_value(value, kind)


def _cells(row: dict[str, Any], columns: Sequence[Column] = COLUMNS) -> list[str]:
    cells = [format_value(row.get(c.key), c.kind) for c in columns]
    cores = next(i for i, c in enumerate(columns) if c.key == "cores_used")
    if fmt.known(row.get("cores_used")) and fmt.known(row.get("cores_available")):
        cells[cores] = f"{int(row['cores_used'])}/{int(row['cores_available'])}"
    return cells


def _footnotes(rows: Sequence[dict[str, Any]]) -> list[str]:
    base = next((r for r in rows if r.get("baseline")), None)
    notes = []
    if base is not None and len(rows) > 1:
        notes.append(f"RELATIVE: samples per dollar (steady state) against {base['session']}; "
                     "> 1 is the better deal.")
    notes.append("CORES: ranks used / cores of the instance. BATCH: samples per step, all ranks.")
    notes.append("STEP, SAMPLES/S, SAMPLES/$: steady state (steps 11.. of each rank); "
                 "ALL-IN: all samples over the whole bill, compile included.")
    phased = phase_columns(rows)
    if phased:
        notes.append(f"{', '.join(c.header for c in phased)}: median of each step phase the "
                     "run reported (probe.step phases=), over its steady steps; n/a: not "
                     "reported" + ("; STEP PHASE: the automatic probe's rest of the step "
                                   "after the data wait" if any(c.header == "STEP PHASE"
                                                               for c in phased) else "") + ".")
    unphased = [r["session"] for r in rows if not r.get("phases_s")]
    if unphased:
        notes.append(f"no step phases recorded in {', '.join(unphased)}: one call per step, "
                     'probe.step(samples=16, phases={"data": 0.01, "forward": 0.05}) '
                     "(seconds), reports them.")
    peaks = list(dict.fromkeys(r["flops_peak"] for r in rows if r.get("flops_peak")))
    if any(fmt.known(r.get("flops_util")) or fmt.known(r.get("exec_errors")) for r in rows):
        notes.append("FLOPS UTIL: NeuronCores' FLOPs (neuron-monitor's flops, a rate) over "
                     "the core's dense peak (AWS Neuron docs), mean over the samples that "
                     "report FLOPs" + (f"; against {'; '.join(peaks)}" if peaks else "") +
                     ". EXEC ERRORS: neuron-monitor's execution errors over the whole run.")
    for r in rows:  # why a run has no FLOPs utilisation; which errors it had
        said = [f"FLOPS UTIL n/a: {r['flops_note']}" if not fmt.known(r.get("flops_util"))
                and r.get("flops_note") not in (None, NO_SAMPLES) else None,
                f"errors: {r['exec_errors_by_type']}" if r.get("exec_errors_by_type") else None]
        if any(said):
            notes.append(f"{r['session']}: " + "; ".join(x for x in said if x))
    for r in rows:  # a job of many nodes: one row, its nodes here
        if r.get("job"):
            notes.append(f"{r['session']}: {r['nodes']} nodes ({r['node_states']}); "
                         "SAMPLES/S sums them, PRICE/H is theirs together")
    for r in rows:  # where each session's steps came from, and the study's own step time
        if r.get("step_source"):
            without = r.get("step_time_without_data_s")
            notes.append(f"{r['session']}: steps from {r['step_source']}" + (
                f"; step time less data wait (the study's own timing): {without * 1000:.1f} ms"
                if fmt.known(without) else ""))
    for r in rows:  # an epoch (--dataset-size) at the steady rate
        if fmt.known(r.get("epoch_s")):
            cost = f", {fmt.usd(r['usd_per_epoch'])}" if fmt.known(r.get("usd_per_epoch")) \
                else " (no price)"
            notes.append(f"{r['session']}: an epoch of {r['dataset_size']:,.0f} samples "
                         f"at the steady rate: {fmt.short_duration(r['epoch_s'])}{cost}")
    if any(fmt.known(r.get("compile_s")) for r in rows):
        notes.append("COMPILE: seconds compiling (torch.compile's compiles and neuronx-cc's), "
                     "the slowest rank's total; COMPILE $: those seconds at the run's price; "
                     "RECOMPILES: graphs compiled after their rank's first step, the most of "
                     "any rank.")
    for r in rows:  # what compiling cost, and why each recompile came
        said = []
        if fmt.known(r.get("first_step_compile_s")) and fmt.known(r.get("time_to_first_step_s")):
            said.append(f"first step after {fmt.short_duration(r['time_to_first_step_s'])}, "
                        f"{fmt.short_duration(r['first_step_compile_s'])} of it compiling")
        if r.get("recompile_reasons"):
            said.append(f"recompiles: {r['recompile_reasons']}")
        if r.get("compile_mismatch"):
            said.append(f"ranks compiled different numbers of graphs ({r['compile_graphs']})")
        if r.get("graph_breaks"):
            said.append(f"{r['graph_breaks']} graph break(s)")
        if said:
            notes.append(f"{r['session']}: " + "; ".join(said))
    for r in rows:  # what the supervisor saw go wrong, and what the session could not record
        said = [f"alerts: {r['alerts_by_key']}" if r.get("alerts_by_key") else None, r.get("lost")]
        if any(said):
            notes.append(f"{r['session']}: " + "; ".join(x for x in said if x))
    notes.extend(f"{r['session']}: {r['problems']}" for r in rows if r.get("problems"))
    return notes


def render_table(rows: Sequence[dict[str, Any]]) -> str:
    columns = table_columns(rows)
    headers = [c.header for c in columns]
    body = [_cells(row, columns) for row in rows]
    widths = [max(len(x) for x in column) for column in zip(headers, *body, strict=True)]
    left = {i for i, c in enumerate(columns) if c.kind == "text"}

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(w) if i in left else cell.rjust(w)
                         for i, (cell, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [line(headers), *(line(cells) for cells in body)]
    return "\n".join([*out, "", *_footnotes(rows)]) + "\n"


def render_markdown(rows: Sequence[dict[str, Any]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    columns = table_columns(rows)
    aligns = ["---" if c.kind == "text" else "---:" for c in columns]
    out = [line([c.header.lower() for c in columns]), "|" + "|".join(aligns) + "|",
           *(line(_cells(row, columns)) for row in rows)]
    return "\n".join([*out, "", *(f"- {note}" for note in _footnotes(rows))]) + "\n"


def render_csv(rows: Sequence[dict[str, Any]]) -> str:
    """Raw figures (seconds, USD, full precision); a missing figure is an empty field."""
    keys = [c.key for c in table_columns(rows)] + list(EXTRA_KEYS)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(keys)
    for row in rows:
        writer.writerow(["" if not fmt.known(row.get(k)) else _plain(row[k]) for k in keys])
    return buf.getvalue()


def render_json(rows: Sequence[dict[str, Any]]) -> str:
    """A list of row objects with raw figures; a missing figure is null."""
    keys = [c.key for c in table_columns(rows)] + list(EXTRA_KEYS)
    data = [{k: _plain(row.get(k)) if fmt.known(row.get(k)) else None for k in keys}
            for row in rows]
    return dumps_strict(data, indent=2) + "\n"  # strict: NaN nowhere, even nested


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers; whole floats of count columns stay as they are."""
    if isinstance(value, np.generic):
        return value.item()
    return value


RENDERERS = {"table": render_table, "markdown": render_markdown, "csv": render_csv,
             "json": render_json}


def render(rows: Sequence[dict[str, Any]], fmt: str = "table") -> str:
    return RENDERERS[fmt](rows)
