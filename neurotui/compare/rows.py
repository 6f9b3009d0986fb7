"""The comparison's rows and figures: one row per session, like the reference study's table.

Each row: instance and accelerator, cores used, global batch, DataLoader workers, time to the
first step (compile), steady-state step time (median, p90), a column per step phase the runs
reported (data, forward, ...: median over the steady steps, metrics/breakdown.py), throughput,
price, samples per dollar (steady and all-in), price-performance relative to a baseline
session, and on Neuron the NeuronCores' FLOPs utilisation and execution errors (live/neuron.py,
as the dashboard's accelerator panel works them out). The figures
come from neurotui.summary.summarize, so compare, the dashboard and meta.json's summary agree.
A figure that cannot be known is missing (None / NaN / "n/a"), never 0.

The columns (COLUMNS, table_columns), a row (session_row, job_figures for a job of many
nodes), the rows against a baseline (compare_rows) and as a DataFrame (compare_frame)."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui import fmt, metrics, recorded
from neurotui.compare.load import LoadedJob, LoadedSession, load_session
from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.importing.describe import imported_of, times_note
from neurotui.live.neuron import NO_SAMPLES, RunNeuron, errors_text
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
from neurotui.session.columns import Columns
from neurotui.session.stepprecedence import STEP_SOURCES
from neurotui.summary import summarize

if TYPE_CHECKING:  # pandas only where a table is made: a job's figures need none
    import pandas as pd


# `--workers 4`, `--workers=4` and the spellings of common training scripts.
_WORKER_FLAGS = ("--workers", "--num-workers", "--num_workers", "--dataloader-num-workers",
                 "--dataloader_num_workers")
_WORKERS_RE = re.compile(r"^(" + "|".join(re.escape(f) for f in _WORKER_FLAGS) + r")=(\d+)$")


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
              "compile_mismatch", "graph_breaks", "recompile_reasons", "times_from",
              "imported")
"""Also in every row (CSV, JSON, DataFrame), not in the text table (a job's nodes are its
footnote there)."""
_INT_KEYS = ("cores_used", "workers", "cores_available", "alerts", "nodes", "recompiles",
             "graph_breaks")
_TEXT_KEYS = ("session", "state", "instance_type", "accelerator", "step_source",
              "alerts_by_key", "lost", "problems", "path", "job", "node_states", "flops_peak",
              "flops_note", "exec_errors_by_type", "compile_graphs", "recompile_reasons",
              "times_from")


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
        "times_from": times_note(meta),
        "imported": imported_of(meta) is not None,
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
        elif key in ("baseline", "imported"):
            df[key] = df[key].astype(bool)
        elif key not in _TEXT_KEYS:
            df[key] = pd.to_numeric(df[key], errors="coerce").astype("float64")
    return df


def compare_frame(sessions: Sequence[Path | LoadedSession], baseline: int = 0, *,
                  table: PriceTable | None = None, now: float | None = None) -> pd.DataFrame:
    """compare_rows() as a DataFrame (see rows_frame), for the dashboard's compare screen."""
    return rows_frame(compare_rows(sessions, baseline, table=table, now=now))
