"""The step record: one type for a `step` line of a session (FORMAT.md), whoever wrote it
and whoever reads it.

The step recorder (supervisor/steprecorder.py) makes one for each log step line and encodes
it (its C kernel, _steprecords.c, builds it by position: STEP_RECORD_FIELDS); the stall watch
decodes the probe files' lines with it; the bulk reader (session/bulk.py) decodes a piece's
step lines with it into columns. msgspec builds and checks it: hundreds a second at 32 ranks,
where a dict a line cost most of a line's handling.

Encoded, a record has its `kind` first, then every field to `attempt` (null where None), and
the later ones only where set: they are UNSET where a line printed none of them (most lines).
Decoded, a line missing one of the earlier fields takes its default, as the per-line reader
does; a line with a value of another type is not a step record here (the bulk reader leaves
it to the per-line path, which says what is wrong with it).
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType


class StepRecord(msgspec.Struct, tag_field="kind", tag="step", gc=False):
    """One step of one rank (`t`, `rank` and `step` always; the rest where known)."""

    t: float
    rank: int
    step: int
    samples: float | None = None
    loss: float | None = None
    dt: float | None = None
    phases: msgspec.Raw | UnsetType = UNSET
    """Seconds per phase (the automatic probe's `data` and `step`, probe.step's own), as its
    JSON text: an object of numbers, or null (NO_PHASES). Left undecoded here: the stall
    watch, which decodes every probe record, has no use for it (a dict a record cost it 1,100
    instructions), and the bulk reader decodes a piece's in one call (decode_phases)."""
    src: str | None = None
    """Who timed it: `probe`, `auto` or `log` (session/stepprecedence.py)."""
    attempt: int = 0
    out: tuple[int, int, int] | UnsetType | None = UNSET
    """The automatic probe's: where the rank's stdout stood when the step was done, as
    [device, inode, offset] (supervisor/stepoffsets.py places log lines by it). Decoded as
    tuples by msgspec: kept as JSON text and decoded by the stall watch in one call a read
    cost it 5,300 instructions a record more (tests/bench/bench_poll_work.py, `placed`)."""
    err: tuple[int, int, int] | UnsetType | None = UNSET
    samples_from: str | UnsetType = UNSET
    """Where a log step's samples came from: `line` (printed) or `throughput` (rate x time)."""
    after_step: int | UnsetType = UNSET
    """A placed log line's: the automatic probe's step of its rank it was printed after (its
    loss goes on that step)."""
    throughput: float | UnsetType = UNSET
    """What a log line printed beyond the step: samples/s, a running total, the job's batch."""
    samples_total: float | UnsetType = UNSET
    global_batch: float | UnsetType = UNSET
    lr: float | UnsetType = UNSET
    """An imported TensorBoard step's learning rate (importing/build.py)."""


NO_PHASES = msgspec.Raw(b"null")
"""A record's phases where it has none (a log line's), written as null."""

STEP_RECORD_FIELDS = ("t", "rank", "step", "samples", "loss", "dt", "phases", "src", "attempt",
                      "out", "err", "samples_from", "after_step")
"""The fields _steprecords.c gives a StepRecord, by position, in this order (from `out` on
only where the line printed its samples or was placed, `out` and `err` then UNSET): checked
against the struct's at import by the step recorder. The order is the writers' own (the
probes write `t`, `kind`, `rank`, `step`, ..., `out`, `err`): msgspec decodes keys met in
its fields' order about 360 instructions a record quicker."""

decode_step = msgspec.json.Decoder(StepRecord).decode
decode_steps = msgspec.json.Decoder(StepRecord).decode_lines
"""A step record, or each line's (raises msgspec.DecodeError, or its ValidationError, on a
line that is not one: another kind, a value of another type)."""
encode_steps = msgspec.json.Encoder().encode_lines
_decode_phase_list = msgspec.json.Decoder(list[dict[str, float] | None]).decode
_decode_phases = msgspec.json.Decoder(dict[str, float] | None).decode


def decode_phases(records: list[StepRecord]) -> list[dict[str, float] | None]:
    """Each record's phases, decoded in one call (None where null or absent); raises
    msgspec.ValidationError where one is not an object of numbers (phases_of then says
    which)."""
    raws = [record.phases for record in records]
    try:
        text = b",".join(raws)  # type: ignore[arg-type]
    except TypeError:  # (an absent one)
        text = b",".join(NO_PHASES if raw is UNSET else raw for raw in raws)  # type: ignore[misc]
    if len(text) == 5 * len(raws) - 1 and text.count(b"null") == len(raws):
        return [None] * len(raws)  # (none has any: log lines', most probe.step()s')
    return _decode_phase_list(b"[%b]" % text)


def phases_of(record: StepRecord) -> dict[str, float] | None:
    """One record's phases (raises msgspec.DecodeError, or its ValidationError, where they
    are not an object of numbers)."""
    return None if record.phases is UNSET else _decode_phases(record.phases)
