"""Rendering the rows: a text table, markdown, CSV or JSON (`neurotui compare --format`),
with the footnotes that say what each figure is and where it came from."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from neurotui import fmt
from neurotui.compare.rows import COLUMNS, EXTRA_KEYS, Column, phase_columns, table_columns
from neurotui.live.neuron import NO_SAMPLES, flops_percent
from neurotui.session.jsonfile import dumps_strict

MISSING = "n/a"


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
    if any(r.get("imported") for r in rows):  # how each run's times were known
        notes.extend(f"{r['session']}: {r['times_from']}" for r in rows if r.get("times_from"))
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
