"""A rule's raw fields made a typed step record: numbers read as printed, a bad field
dropped (not the step)."""

from __future__ import annotations

from neurotui.sources.steplog.records import StepLine, StepValues
from neurotui.sources.steplog.rules import _Fields
from neurotui.sources.steplog.text import _inverse, _printed_time, _to_float, _to_int


def _number_field(value: object) -> float | None:
    """A field as a float: a printed string read as _to_float reads it; None when absent."""
    if isinstance(value, str):
        if len(value) <= 64:
            try:  # the usual case, plain digits (_to_float's first try, without its call)
                return float(value)
            except ValueError:
                pass
        return _to_float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _count_field(value: object) -> int | None:
    """A field as an int: a printed string read as _to_int reads it; None when absent."""
    if isinstance(value, str):
        if len(value) <= 32:
            try:  # the usual case, plain digits (int() strips spaces as _to_int does)
                return int(value)
            except ValueError:
                pass
        return _to_int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _build_step(
    fields: _Fields, prefix_rank: int | None, text: str, values: bool = False
) -> StepLine | StepValues | None:
    """Typed record from raw field strings; None when no value could be read. A StepValues
    when `values` (the supervisor's), else a StepLine.

    Runs for every step line the supervisor reads (hundreds a second at 32 ranks): one pass
    over the fields the rule gave (two or three, most lines), module-level helpers, no
    closures, and no lookup of the many absent ones."""
    step = samples = loss = throughput = samples_total = global_batch = None
    dt = dt_ms = it_per_s = bar_n = bar_total = rank = bar_key = None
    for key, v in fields.items():
        if v is None:
            continue
        # The usual keys first; a rule's key strings are the same objects as these.
        if key == "step":
            step = _count_field(v)
        elif key == "loss":
            loss = _number_field(v)
        elif key == "samples":
            samples = _number_field(v)
        elif key == "dt":
            dt = _number_field(v)
        elif key == "rank":
            rank = _count_field(v)
        elif key == "throughput":
            throughput = _number_field(v)
        elif key == "dt_ms":
            dt_ms = _number_field(v)
        elif key == "it_per_s":
            it_per_s = _number_field(v)
        elif key == "samples_total":
            samples_total = _number_field(v)
        elif key == "global_batch":
            global_batch = _number_field(v)
        elif key == "bar_n":
            bar_n = _count_field(v)
        elif key == "bar_total":
            bar_total = _count_field(v)
        elif key == "bar_key" and isinstance(v, str):
            bar_key = v
    # A bad field drops the field, not the step: a count, rate or time below 0 is no figure
    # (a session's reader refuses a step whose samples or time is negative, and samples are
    # worked out of a rate). The loss may be below 0; the step and rank are the step's own.
    if samples is not None and samples < 0:
        samples = None
    if throughput is not None and throughput < 0:
        throughput = None
    if dt is not None and dt < 0:
        dt = None
    if dt_ms is not None and dt_ms < 0:
        dt_ms = None
    if samples_total is not None and samples_total < 0:
        samples_total = None
    if global_batch is not None and global_batch < 0:
        global_batch = None
    if dt is None:
        dt = dt_ms / 1000.0 if dt_ms is not None else _inverse(it_per_s)
    if (
        step is None
        and samples is None
        and loss is None
        and throughput is None
        and dt is None
        and samples_total is None
        and bar_n is None
    ):
        return None
    if rank is None:
        rank = prefix_rank
    if values:
        return StepValues(step, samples, loss, throughput, dt, rank, samples_total,
                          global_batch, bar_n, bar_total, bar_key)
    return StepLine(step, samples, loss, throughput, dt, rank, samples_total, global_batch,
                    _printed_time(text), bar_n, bar_total, bar_key)
