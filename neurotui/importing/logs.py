"""A saved log's lines made timed step and compile lines, by the parser the supervisor uses.

One log is one `LogPart`: its lines, the rank they are of where they name none (a torchrun
folder's file is one rank's), its attempt, and the times its lines were written where the
export kept them (CloudWatch's). Its steps are timed as timing.py says; what comes out is the
lines the step recorder takes, each with its time, and how they were timed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from neurotui.importing import timing
from neurotui.sources.steplog import CompileLine, StepLineParser, StepValues

CLOUDWATCH_RESOLUTION_S = 0.001
"""CloudWatch keeps each event's time in whole milliseconds."""
PARSE_BATCH = 20_000
"""Lines parsed in one call (parse_values_many learns a shape once per batch)."""


class ImportProblem(Exception):
    """Input that cannot be imported: the message says what was read and what was tried."""


@dataclass
class LogPart:
    """One log to import: `lines` without their newlines; `times` each line's time where the
    export kept one (CloudWatch), else None."""

    source: Path
    kind: str
    lines: list[str]
    rank: int | None = None
    attempt: int = 0
    times: list[float] | None = None
    mtime: float | None = None


@dataclass
class TimedPart:
    """A log's step and compile lines, each with its time and the rank its file is of."""

    source: Path
    kind: str
    rank: int | None
    attempt: int
    times_from: str
    resolution_s: float | None
    span_steps: int | None
    steps: int
    entries: list[tuple[float, StepValues | CompileLine, str]] = field(repr=False)
    notes: list[str] = field(default_factory=list)
    stamped: list[float] | None = field(default=None, repr=False)
    """Where set (the short way: time_part's `whole`), `entries` is empty: every line of the
    log is recorded with its stamp here, in the step recorder's batches (`lines`)."""
    lines: list[str] | None = field(default=None, repr=False)
    bodies: list[str] | None = field(default=None, repr=False)
    """`lines` without their leading ISO stamps, where the parser reads the same steps of
    them (checked on the first lines): it reads a stamped line three times slower."""


def read_text_lines(path: Path) -> list[str]:
    """A log's lines as the parser takes them: undecodable bytes replaced, carriage-return
    redraws kept inside their line (the parser reads a bar's last draw)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportProblem(f"cannot read {path}: {exc.strerror or exc}") from exc
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def cloudwatch_part(path: Path, data: object) -> LogPart:
    """A CloudWatch Logs export: `aws logs get-log-events` / `filter-log-events` output (an
    object with `events`), or JSON lines, each an event with `timestamp` (ms since the epoch)
    and `message` (the log line). Events without both are skipped."""
    events = data.get("events") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ImportProblem(f"{path}: a JSON export without an `events` list")
    lines: list[str] = []
    times: list[float] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        stamp, message = event.get("timestamp"), event.get("message")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and \
                math.isfinite(stamp) and isinstance(message, str):
            for line in message.rstrip("\n").split("\n"):
                lines.append(line)
                times.append(stamp / 1000.0)
    if not lines:
        raise ImportProblem(f"{path}: a JSON export with no event holding both `timestamp` and "
                           "`message`")
    return LogPart(path, "cloudwatch", lines, times=times)


def read_json_events(path: Path) -> object | None:
    """The JSON a CloudWatch export holds (one object, or one a line), or None where the
    file is no such JSON (then it is read as a log)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
    except OSError as exc:
        raise ImportProblem(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not head.startswith((b"{", b"[")):
        return None
    text = path.read_bytes().decode("utf-8", "replace")
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, (dict, list)):
        events = whole.get("events") if isinstance(whole, dict) else whole
        return whole if isinstance(events, list) else None
    events = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            return None  # not JSON lines: a log whose lines begin with a brace
        if not isinstance(event, dict) or "timestamp" not in event or "message" not in event:
            return None
        events.append(event)
    return events or None


SAMPLE_LINES = 5_000
"""Lines parsed first, to know how the log is timed before the rest is read."""


def time_part(part: LogPart, parser: StepLineParser, started: float | None, *,
              whole: bool = False) -> TimedPart:
    """`part`'s step and compile lines with their times (timing.py's order), or
    ImportProblem where it holds none. `whole` (a log imported alone): where each line's
    stamp is its time as it stands (fine enough for the steps' times: no span needed), only
    the stamps are read here, and the lines are parsed as they are recorded (build.py), once
    and without the stamps where the parser reads them the same (TimedPart.bodies)."""
    if whole and (short := _stamped_whole(part, parser)) is not None:
        return short
    timed = _time_lines(part, parser, started)
    timed.lines = part.lines
    return timed


def _time_lines(part: LogPart, parser: StepLineParser, started: float | None) -> TimedPart:
    """time_part's long way: every line parsed here, its time found, then recorded."""
    records = []
    for at in range(0, len(part.lines), PARSE_BATCH):
        records.extend(parser.parse_values_many(part.lines[at:at + PARSE_BATCH]))
    found = [i for i, record in enumerate(records) if record is not None]
    steps_at = [i for i in found if records[i].__class__ is StepValues]
    if not steps_at:
        raise ImportProblem(f"{part.source}: no step line recognised in {len(part.lines):,} "
                           "lines")
    if part.times is not None:
        times = [part.times[i] for i in found]
        return _timed(part, records, found, times, timing.CLOUDWATCH_TIMESTAMP,
                      CLOUDWATCH_RESOLUTION_S, steps_at)
    stamp = timing.Stamps(datetime.fromtimestamp(started if started is not None else
                                                 part.mtime or 0.0).year)
    stamps = {i: stamp(part.lines[i]) for i in found}
    stamped = [stamps[i] for i in steps_at if stamps[i] is not None]
    if len(stamped) * 2 >= len(steps_at):
        times, last = [], None
        first = next(s for s in (stamps[i] for i in found) if s is not None)
        for i in found:  # a line without a stamp: the time of the stamp before it
            last = stamps[i] if stamps[i] is not None else (last if last is not None else first)
            times.append(last)
        return _timed(part, records, found, times, timing.PRINTED_DATE,
                      stamp.resolution(stamped), steps_at)
    return _by_step_times(part, records, found, steps_at, started)


def _stamped_whole(part: LogPart, parser: StepLineParser) -> TimedPart | None:
    """The short way, where a sample's step lines say the log is timed by stamps (printed,
    or the export's) fine enough for its steps; else None."""
    sample = part.lines[:SAMPLE_LINES]
    parsed = parser.parse_values_many(sample)
    steps_at = [i for i, record in enumerate(parsed) if record.__class__ is StepValues]
    if len(steps_at) < 2:
        return None
    year = datetime.fromtimestamp(part.mtime or 0.0).year
    stamp = timing.Stamps(year)
    bodies: list[str] | None = None
    if part.times is not None:
        stamps: list[float | None] = list(part.times)
        times_from = timing.CLOUDWATCH_TIMESTAMP
    else:
        stamps, bodies = [], []
        for line in part.lines:
            stamps.append(stamp(line))
            bodies.append(line[stamp.head_end:] if stamp.head_end else line)
        times_from = timing.PRINTED_DATE
    stamped_at = [i for i in steps_at if stamps[i] is not None]
    if len(stamped_at) * 2 < len(steps_at):
        return None  # few stamps: the long way says how else it is timed
    sampled: list[float] = [stamps[i] for i in stamped_at]  # type: ignore[misc]
    resolution = CLOUDWATCH_RESOLUTION_S if part.times is not None else \
        stamp.resolution(sampled)
    numbers = _step_numbers([parsed[i] for i in stamped_at])  # type: ignore[misc]
    if timing.span_steps(sampled, numbers, resolution) > 1:
        return None  # stamps coarse for these steps: spans, the long way
    first = next(s for s in stamps if s is not None)
    last = first
    filled: list[float] = []
    for value in stamps:  # a line without a stamp: the time of the stamp before it
        last = value if value is not None else last
        filled.append(last)
    if bodies is not None and not _same_steps(parsed, parser.parse_values_many(
            bodies[:SAMPLE_LINES])):
        bodies = None
    return TimedPart(part.source, part.kind, part.rank, part.attempt, times_from, resolution,
                     None, 0, [], [], stamped=filled, lines=part.lines, bodies=bodies)


def _same_steps(full: list, bare: list) -> bool:
    """Whether the parser read the same steps (and compile lines) of lines with and without
    their stamps."""
    return all(a.__class__ is b.__class__ and (a.__class__ is not StepValues or a == b)
               for a, b in zip(full, bare, strict=True))


def _timed(part: LogPart, records: list, found: list[int], times: list[float],
           times_from: str, resolution: float, steps_at: list[int]) -> TimedPart:
    """Lines timed by a stamp each (printed, or kept by the export): where the stamps are
    coarse for the steps, each step's `dt` is the time over a span long enough (timing.py)."""
    notes: list[str] = []
    span_used: int | None = None
    by_rank: dict[int, list[int]] = {}
    time_of = dict(zip(found, times, strict=True))
    for i in steps_at:
        if records[i].dt is None:
            by_rank.setdefault(_rank(records[i], part.rank), []).append(i)
    for lines in by_rank.values():
        steps = _step_numbers([records[i] for i in lines])
        line_times = [time_of[i] for i in lines]
        span = timing.span_steps(line_times, steps, resolution)
        if span <= 1:
            continue
        span_used = max(span_used or 0, span)
        for i, dt in zip(lines, timing.span_step_times(line_times, steps, span), strict=True):
            records[i].dt = dt
    if span_used:
        notes.append(f"stamps to {_seconds(resolution)}: each step's time is the time over "
                     f"spans of {span_used} steps")
    entries = [(time_of[i], records[i], part.lines[i]) for i in found]
    return TimedPart(part.source, part.kind, part.rank, part.attempt, times_from, resolution,
                     span_used, len(steps_at), entries, notes)


def _by_step_times(part: LogPart, records: list, found: list[int], steps_at: list[int],
                   started: float | None) -> TimedPart:
    """Lines without stamps: times added up from the step times the lines print (or their
    samples over their printed throughput), from `started` (else the file's time less the
    run's); with neither, every line at the start: counted, never timed."""
    step_time: dict[int, float] = {}
    by_throughput = 0
    for i in steps_at:
        record = records[i]
        if record.dt is not None and record.dt > 0 and math.isfinite(record.dt):
            step_time[i] = record.dt
        elif record.throughput and (samples := record.samples or record.global_batch):
            step_time[i] = samples / record.throughput
            by_throughput += 1
    if len(step_time) * 2 < len(steps_at):
        start = started if started is not None else (part.mtime or 0.0)
        entries = [(start, records[i], part.lines[i]) for i in found]
        return TimedPart(part.source, part.kind, part.rank, part.attempt, timing.NO_TIMES,
                         None, None, len(steps_at), entries,
                         ["no date-time or step time printed: steps counted, never timed"])
    # A line each N steps stands for N steps' time; each rank's steps go on from its own.
    last_step: dict[int, int] = {}
    offsets: dict[int, float] = {}
    clock: dict[int, float] = {}
    for i in found:
        record = records[i]
        if record.__class__ is not StepValues:
            continue
        rank = _rank(record, part.rank)
        steps = 1
        if record.step is not None and rank in last_step and record.step > last_step[rank]:
            steps = record.step - last_step[rank]
        if record.step is not None:
            last_step[rank] = record.step
        clock[rank] = clock.get(rank, 0.0) + step_time.get(i, 0.0) * steps
        offsets[i] = clock[rank]
    total = max(clock.values(), default=0.0)
    start = started if started is not None else (part.mtime or 0.0) - total
    entries, now = [], start
    for i in found:
        now = start + offsets[i] if i in offsets else now  # a compile line: the step before
        entries.append((now, records[i], part.lines[i]))
    how = timing.PRINTED_THROUGHPUT if by_throughput * 2 > len(step_time) else \
        timing.PRINTED_STEP_TIME
    notes = [f"times added up from each line's {how.removeprefix('printed ')}, from "
             + ("--started" if started is not None else "the file's time less the run's")]
    return TimedPart(part.source, part.kind, part.rank, part.attempt, how, None, None,
                     len(steps_at), entries, notes)


def _rank(record: StepValues, file_rank: int | None) -> int:
    return record.rank if record.rank is not None else (file_rank or 0)


def _step_numbers(records: list[StepValues]) -> list[int]:
    """The lines' step numbers where every one prints one; else their count (a bar's
    positions, lines without a number: one step a line)."""
    if all(record.step is not None for record in records):
        return [record.step for record in records]  # type: ignore[misc]
    return list(range(1, len(records) + 1))


def _seconds(resolution: float) -> str:
    return "the second" if resolution >= 1 else f"{resolution:g} s"

