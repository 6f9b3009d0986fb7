"""Session lines decoded in bulk: a long session's bytes read near raw-read speed.

A day of a 32-rank run is millions of step lines and a few hundred thousand telemetry lines.
Parsed one `json.loads` at a time, with a dict per line and a Python branch per field, they
took 26 s for 3 M events (issue #12). Here msgspec decodes a whole piece of lines in one call:
step lines into typed records whose fields become numpy columns, other lines into just their
kind and time, so that a reader keeping the last few hundred telemetry samples parses only
those whole. A piece of known kinds only is decoded so in one call (MixedDecoder); one with
an odd line, its kinds first (`decode_heads`), then its step lines (`decode`). Only lines
that plainly are step records go to `decode` (their `"kind":"step"` says so, as the probe,
the automatic probe and the log follower write it); anything a schema here does not take
exactly, or a value out of range, goes back to the reader's per-line path, which takes it
or says what is wrong with it.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Generic, NamedTuple, TypeVar, overload

import msgspec
import numpy as np
from msgspec import UNSET

from neurotui.session.steprecord import StepRecord, decode_phases, phases_of

_MARK, _MARK_SPACED = b'"kind":"step"', b'"kind": "step"'
"""How the writers spell a step line's kind; a line spelt otherwise takes the per-line path."""
_MARK_WITHIN = 48
"""Bytes from a line's start the kind is looked for in: after a time of up to 30 characters."""
MIN_BATCH = 64
"""Fewer candidate lines than this are not worth a batch (the per-line path is as quick)."""
MIN_BLOCK = 8
"""A piece of step lines only (a probe file's) is decoded whole from this many lines on: a
dashboard's poll finds a score of new lines a file, where one call beats line by line."""
SPAN_MIN_LINE_BYTES = 512
"""Mean length of a piece's first lines from which its lines are found where they lie
(spans_of) rather than split: split copies every byte into a bytes object a line, and a
telemetry line is kilobytes (0.28 s against 0.06 s for 600 MB of them)."""
_SPAN_SAMPLE = 16  # first lines whose length decides (a piece's are alike: one writer's)
_NEWLINE = ord("\n")

MAX_TIME = 1e11
"""Seconds (unix times and durations): about the year 5138."""
MAX_STEP = 2**53
"""Steps, exact in a float64 (figures are computed in floats)."""
MAX_RANK = 2**31 - 1
MAX_SAMPLES = 1e15


_DECODER = msgspec.json.Decoder(StepRecord)
"""Step lines as steprecord.py has them; unknown fields are ignored, as the reader does."""


class Head(msgspec.Struct, gc=False):
    """What every record has (the rest of the line is checked to be JSON, not built)."""

    kind: str
    t: float


_HEAD_DECODER = msgspec.json.Decoder(Head)

V = TypeVar("V")


@dataclass(frozen=True)
class Same(Generic[V]):
    """A column of `rows` rows that all hold `value` (a probe file's src, and its samples_from
    and phases, null in every line): one object rather than a list of a million, which the
    helper process pickled at three times the cost of the numeric columns."""

    value: V
    rows: int

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, which: slice) -> Same[V]:
        return Same(self.value, len(range(self.rows)[which]))


ObjectColumn = list[V] | Same[V]
"""A column of Python values: each row's, or the one they all hold."""


@dataclass
class DecodedSteps:
    """Step lines of one piece, as columns; `line` is each row's index in the piece. `src`,
    `samples_from` and `phases` are Same where every row holds one value."""

    line: np.ndarray
    t: np.ndarray
    step: np.ndarray
    rank: np.ndarray
    attempt: np.ndarray
    samples: np.ndarray
    loss: np.ndarray
    dt: np.ndarray
    src: ObjectColumn[str | None]
    samples_from: ObjectColumn[str | None]
    phases: ObjectColumn[dict[str, float] | None]
    after_step: np.ndarray
    """A placed log line's automatic probe step (StepRecord.after_step); -1 where none."""

    def before(self, line: int) -> tuple[DecodedSteps, DecodedSteps]:
        """The rows of lines before `line`, and the rest."""
        cut = int(np.searchsorted(self.line, line))
        return self._rows(slice(None, cut)), self._rows(slice(cut, None))

    def _rows(self, which: slice) -> DecodedSteps:
        return DecodedSteps(*(getattr(self, f.name)[which] for f in fields(self)))


class Spans(Sequence[bytes]):
    """The complete lines of a piece as where each lies in its bytes: most lines of a
    telemetry piece are only indexed (where they lie, and their kind) and never needed as
    bytes of their own; `spans[i]` makes line i's (without its newline)."""

    def __init__(self, chunk: bytes, ends: np.ndarray) -> None:
        self.chunk = chunk
        self._ends = ends.astype(np.int64, copy=False)
        """Where each line's newline is."""
        self._starts = np.concatenate(([0], self._ends[:-1] + 1)) if len(ends) else self._ends
        self.ends: list[int] = self._ends.tolist()
        self.starts: list[int] = self._starts.tolist()  # list items index quicker

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        return self.chunk[self.starts[i]:self.ends[i]]

    def offsets(self) -> np.ndarray:
        """Where each line begins in the piece."""
        return self._starts

    def lengths(self) -> np.ndarray:
        return self._ends - self._starts

    def split(self) -> list[bytes]:
        """Every line, as chunk.split would make them."""
        return self.chunk[:self.ends[-1]].split(b"\n") if self.ends else []


def spans_of(chunk: bytes, complete: int) -> Spans | None:
    """The complete lines in the first `complete` bytes of `chunk` as Spans; None when its
    first lines are short (SPAN_MIN_LINE_BYTES: step lines), which split makes quicker."""
    at = -1
    for _ in range(_SPAN_SAMPLE):
        at = chunk.find(b"\n", at + 1, complete)
        if at < 0:
            break
    else:
        if at < _SPAN_SAMPLE * SPAN_MIN_LINE_BYTES:
            return None
    # The newlines found by numpy: a loop of bytes.find took a tenth of a cold read.
    return Spans(chunk, np.flatnonzero(
        np.frombuffer(chunk, dtype=np.uint8, count=complete) == _NEWLINE))


def starts_with_a_step(chunk: bytes) -> bool:
    """Whether the first line is marked as a step (a piece worth decode_block)."""
    head = chunk[:_MARK_WITHIN]
    return _MARK in head or _MARK_SPACED in head


def decode_piece(chunk: bytes, complete: int) -> tuple[DecodedSteps, int] | None:
    """The first `complete` bytes of `chunk` (complete lines: a probe file's piece) decoded
    whole, and how many lines they are; None unless they start with a step line and
    decode_block takes them."""
    if not starts_with_a_step(chunk):
        return None
    lines = chunk.count(b"\n", 0, complete)
    decoded = decode_block(memoryview(chunk)[:complete], lines)
    return None if decoded is None else (decoded, lines)


def decode_block(block: bytes | memoryview, lines: int) -> DecodedSteps | None:
    """A block of `lines` complete lines (a probe file's piece) that are all well-formed
    step records with every value in range, decoded in one call; None when it is not that,
    or fewer than MIN_BLOCK lines (line by line is as quick)."""
    if lines < MIN_BLOCK:
        return None
    try:
        records = _DECODER.decode_lines(block)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if len(records) != lines:  # a blank line: let the lines be counted one by one
        return None
    decoded, rejected = _columns(records, list(range(lines)))
    return None if rejected else decoded


def decode(lines: Sequence[bytes]) -> tuple[DecodedSteps, list[int], list[int]]:
    """The lines of a piece that are well-formed step records with every value in range; the
    indexes of step lines that are not (for the per-line path); and those of the other lines.
    """
    # The writers put the kind right after the time: looking no further than that spares
    # scanning kilobytes of telemetry (a line with its kind further on goes line by line).
    candidates = [i for i, raw in enumerate(lines)
                  if _MARK in (head := raw[:_MARK_WITHIN]) or _MARK_SPACED in head]
    chosen = set(candidates)
    others = [i for i in range(len(lines)) if i not in chosen]
    decoded, rejected = decode_steps(lines, candidates)
    return decoded, rejected, others


def decode_steps(lines: Sequence[bytes], which: list[int]) -> tuple[DecodedSteps, list[int]]:
    """Of the lines `which` (step lines, by their kind), those that are well-formed step
    records with every value in range, and the indexes of those that are not."""
    records: list[StepRecord] = []
    taken: list[int] = []
    rejected: list[int] = []
    _decode_into(_DECODER, lines, which, records, taken, rejected)
    decoded, out_of_range = _columns(records, taken)
    return decoded, sorted(rejected + out_of_range)


def _columns(records: list[StepRecord], taken: list[int]) -> tuple[DecodedSteps, list[int]]:
    """The records as columns, less those with a value out of range (whose line indexes
    come second)."""
    rejected: list[int] = []
    try:
        # Whole numbers as floats first: a 300-digit step must fail the range check, not
        # overflow an int64. Below 2**53 the floats are exact.
        t, step, rank, attempt, samples, loss, dt = _number_columns(records)
    except OverflowError:  # an integer beyond a float: let each line say so
        return empty(), list(taken)
    phases, phases_ok = _phase_column(records)
    with np.errstate(invalid="ignore"):
        ok = (_within(t, 0.0, MAX_TIME) & _within(step, 0, MAX_STEP)
              & _within(rank, 0, MAX_RANK) & _within(attempt, 0, MAX_RANK)
              & (np.isnan(samples) | _within(samples, 0.0, MAX_SAMPLES))
              & (np.isnan(dt) | _within(dt, 0.0, MAX_TIME)) & phases_ok)
    line = np.asarray(taken, dtype=np.int64)
    if not ok.all():
        rejected += line[~ok].tolist()
        keep = np.flatnonzero(ok)
        records = [records[i] for i in keep.tolist()]
        line, t, step, rank, attempt, samples, loss, dt = (
            a[keep] for a in (line, t, step, rank, attempt, samples, loss, dt))
        phases = Same(None, len(keep)) if isinstance(phases, Same) else \
            [phases[i] for i in keep.tolist()]
    return DecodedSteps(
        line=line, t=t, step=step.astype(np.int64), rank=rank.astype(np.int64),
        attempt=attempt.astype(np.int64), samples=samples, loss=loss, dt=dt,
        src=_objects(records, "src"), samples_from=_objects(records, "samples_from"),
        phases=phases, after_step=_after_steps(records)), rejected


def _phase_column(records: list[StepRecord]) -> tuple[ObjectColumn[dict[str, float] | None],
                                                       np.ndarray]:
    """Each record's phases (Same(None) where none has any), and which are an object of
    numbers or null: one decode for them all, and where one is not, each on its own (that
    line goes the per-line way, which says what is wrong with it)."""
    try:
        values = decode_phases(records)
    except msgspec.DecodeError:
        values, ok = [], np.ones(len(records), dtype=bool)
        for i, record in enumerate(records):
            try:
                values.append(phases_of(record))
            except msgspec.DecodeError:
                values.append(None)
                ok[i] = False
        return values, ok
    if values.count(None) == len(values):
        return Same(None, len(values)), np.ones(len(values), dtype=bool)
    return values, np.ones(len(values), dtype=bool)


def _after_steps(records: list[StepRecord]) -> np.ndarray:
    """Each record's after_step, -1 where it has none (or one no step can be)."""
    values = list(map(attrgetter("after_step"), records))
    if values.count(UNSET) == len(values):  # (all but placed log lines)
        return np.full(len(values), -1, dtype=np.int64)
    return np.array([value if value is not UNSET and 0 <= value < MAX_STEP else -1
                     for value in values], dtype=np.int64)


_NUMBERS = ("t", "step", "rank", "attempt", "samples", "loss", "dt")
_ALL_NUMBERS = attrgetter(*_NUMBERS)


def _number_columns(records: list[StepRecord]) -> list[np.ndarray]:
    """The numeric fields of every record (_NUMBERS), each as float64, None as NaN. One C
    loop over the records for all of them where none is None (most pieces), a sixth quicker
    than a loop per field; the columns are views of its table (strided)."""
    try:
        table = np.fromiter(itertools.chain.from_iterable(map(_ALL_NUMBERS, records)), float,
                            len(records) * len(_NUMBERS)).reshape(len(records), len(_NUMBERS))
    except TypeError:  # a None somewhere (a line without samples): field by field
        return [_numbers(records, name) for name in _NUMBERS[:4]] + \
            [_floats(records, name) for name in _NUMBERS[4:]]
    return list(table.T)


def _numbers(records: list[StepRecord], name: str) -> np.ndarray:
    """A field that is never None, of every record, as float64 (a C loop: no Python per row)."""
    return np.fromiter(map(attrgetter(name), records), float, len(records))


def _objects(records: list[StepRecord], name: str) -> ObjectColumn[Any]:
    """A field of every record as a list, or Same where every record holds one value (a
    string compared by value; a dict, such as phases, is the same only as None)."""
    values = list(map(attrgetter(name), records))
    first = values[0] if values else {}
    if (first is None or first is UNSET or first.__class__ is str) and \
            values.count(first) == len(values):
        return Same(None if first is UNSET else first, len(values))
    if UNSET in values:  # a field written only where set (samples_from): None where not
        return [None if value is UNSET else value for value in values]
    return values


def _floats(records: list[StepRecord], name: str) -> np.ndarray:
    """A field that may be None, of every record, as float64 with None as NaN."""
    try:  # most pieces have no None in a column: the quicker conversion first
        return _numbers(records, name)
    except TypeError:
        return np.array(list(map(attrgetter(name), records)), dtype=float)


class _OtherEvent(msgspec.Struct, tag_field="kind", gc=False):
    """A record of a kind other than step, as MixedDecoder reads it: its time only (a
    subclass a kind, tagged with it; the rest of the line is checked to be JSON, not built)."""

    t: float


class Mixed(NamedTuple):
    """A piece of lines of any known kinds, decoded in one call (MixedDecoder)."""

    steps: DecodedSteps
    rejected: list[int]
    """Step lines with a value out of range: for the per-line path, which says so."""
    others: list[tuple[int, str, float]]
    """Every other line, as (index, kind, time), in file order."""


class MixedDecoder:
    """A piece of a session's lines of every kind at once (events.jsonl: the log lines'
    step records among telemetry), in one decode: step lines into StepRecord records, the
    others into their kind and time. Decoding the kinds first (heads_of) and the step lines
    again took half as long again. Only for pieces whose every line is a well-formed
    record of the `kinds` given: anything else (an unknown kind, a step line the schema does
    not take, a blank line) returns None, and the caller goes the longer way."""

    def __init__(self, kinds: Iterable[str]) -> None:
        types: list[type] = [StepRecord]
        self._kind_of: dict[type, str] = {}
        for kind in sorted(set(kinds) - {"step"}):
            head = msgspec.defstruct(f"_{kind}_head", [], bases=(_OtherEvent,), tag=kind)
            types.append(head)
            self._kind_of[head] = kind
        self._decoder = msgspec.json.Decoder(functools.reduce(operator.or_, types))

    def decode(self, block: bytes | memoryview, lines: int) -> Mixed | None:
        """The `lines` complete lines of `block` decoded, or None (see the class)."""
        try:
            records = self._decoder.decode_lines(block)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if len(records) != lines:  # a blank line: let the lines be looked at one by one
            return None
        step_line, kind_of = StepRecord, self._kind_of
        taken = [i for i, r in enumerate(records) if r.__class__ is step_line]
        if len(taken) == lines:
            steps, rejected = _columns(records, taken)
            return Mixed(steps, rejected, [])
        others = [(i, kind_of[r.__class__], r.t) for i, r in enumerate(records)
                  if r.__class__ is not step_line]
        steps, rejected = _columns([records[i] for i in taken], taken)
        return Mixed(steps, rejected, others)


def heads_of(block: bytes | memoryview, lines: int) -> list[Head] | None:
    """The kind and time of every one of the `lines` lines of `block`, if each is a JSON
    object with both (the whole line checked to be JSON); None if one is not, or is blank."""
    try:
        heads = _HEAD_DECODER.decode_lines(block)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return heads if len(heads) == lines else None  # fewer: a blank line


def decode_heads(lines: Sequence[bytes], which: list[int],
                 block: bytes | memoryview | None = None
                 ) -> tuple[list[Head], list[int], list[int]]:
    """The kind and time of the lines `which` that are JSON objects with both (and the
    indexes they came from), and the indexes of those that are not. `block`: the bytes the
    lines were split from, if at hand (when `which` is every line, decoded as they lie)."""
    if block is not None and len(which) == len(lines) >= MIN_BATCH // 4 \
            and (heads := heads_of(block, len(lines))) is not None:
        return heads, which, []  # else line by line, as below
    records: list[Head] = []
    taken: list[int] = []
    rejected: list[int] = []
    _decode_into(_HEAD_DECODER, lines, which, records, taken, rejected)
    return records, taken, rejected


def _decode_into(decoder: msgspec.json.Decoder, lines: Sequence[bytes], which: list[int],
                 records: list[Any], taken: list[int], rejected: list[int]) -> None:
    """One decode call for the lot; where one line spoils it, halves until the line is found
    (a session with a few odd lines still goes at batch speed)."""
    if not which:
        return
    if len(which) < MIN_BATCH // 4:
        for i in which:
            try:
                records.append(decoder.decode(lines[i]))
                taken.append(i)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                rejected.append(i)
        return
    try:
        decoded = decoder.decode_lines(b"\n".join(lines[i] for i in which))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        half = len(which) // 2
        _decode_into(decoder, lines, which[:half], records, taken, rejected)
        _decode_into(decoder, lines, which[half:], records, taken, rejected)
        return
    if len(decoded) != len(which):  # cannot happen with one record a line: each on its own
        for i in which:
            _decode_into(decoder, lines, [i], records, taken, rejected)
        return
    records.extend(decoded)
    taken.extend(which)


def _within(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """low <= value < high, and finite (NaN and inf are out)."""
    return np.isfinite(values) & (values >= low) & (values < high)


def empty() -> DecodedSteps:
    """No step rows."""
    none = np.empty(0)
    return DecodedSteps(np.empty(0, dtype=np.int64), none, none.astype(np.int64),
                        none.astype(np.int64), none.astype(np.int64), none, none, none,
                        [], [], [], none.astype(np.int64))
