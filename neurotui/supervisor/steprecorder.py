"""Recording a job's step and compile lines as session events: the rules that turn a parsed
line into a step record, whatever read it, and the per-rank state they keep.

LogFollower (logfollow.py) decides when to look at the logs and which files to follow; every
line it reads comes here. The records are made three ways, held to the same records by
tests/unit/supervisor/test_step_figures.py and test_native_records.py: a line parsed whole
(StepValues: _record_step), a batch of step lines of a shape the short way knows
(_record_parsed), and a run of lines of a learnt shape read by _steprecords.c
(_record_native), where it was built. That kernel is called from here alone; the fields of
the record it makes (session/steprecord.py) are checked against StepRecord's at import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neurotui.session.steprecord import (
    NO_PHASES,
    STEP_RECORD_FIELDS,
    StepRecord,
    encode_steps,
)
from neurotui.session.writer import EventWriter
from neurotui.sources.steplog import CompileLine, StepFigures, StepLineParser, StepValues
from neurotui.supervisor.stallwatch import StallWatch

if TYPE_CHECKING:
    from collections.abc import Callable

TAIL_LINE_CHARS = 2000
"""A tail line (kept in proc_exit) longer than this is cut, and says so: one 10 MB line of
output must not become one 10 MB record. Compile lines' records are cut the same way."""


def capped(line: str) -> str:
    """`line`, cut to TAIL_LINE_CHARS (saying so) where longer."""
    if len(line) <= TAIL_LINE_CHARS:
        return line
    return f"{line[:TAIL_LINE_CHARS]}... [cut: {len(line):,} characters in all]"


try:  # built from _steprecords.c at install, where a C compiler was there
    from neurotui.supervisor import _steprecords
    native_record_steps = _steprecords.record_steps
    _NEW_RANK, _PYTHON = _steprecords.NEW_RANK, _steprecords.PYTHON
except ImportError:  # not built: the records are made in Python (_record_parsed)
    native_record_steps = None
    _NEW_RANK, _PYTHON = 1, 2
if StepRecord.__struct_fields__[:len(STEP_RECORD_FIELDS)] != STEP_RECORD_FIELDS:
    # Fields in another order would make the kernel write wrong records: Python makes them
    # (test_native_records fails on it; a supervisor must not fail to start for it).
    native_record_steps = None


LogLines = tuple[list[str], list[float], int | None, bool, list[int | None] | None]
"""Lines of one log to be read the short way (parse_figures_many) where they are all step
lines of a shape it knows, with the other logs' of a take or poll: their text, stamps, the
log's rank (for lines that print none), whether the stall watch is told of them, and (a
placed log's) the automatic probe's step each line was printed after (None: not known)."""
ParsedLines = tuple[list[StepFigures], list[float], int | None, bool, list[int | None] | None]
"""LogLines read the short way: each line's figures in place of its text."""
_INT_MAX = 2**63  # msgspec writes integers of 64 bits; the writer's encoder, any


def _step_record(t: float, rank: int, step: int, samples: float | None,
                 loss: float | None, dt: float | None, attempt: int,
                 throughput: float | None, samples_total: float | None,
                 global_batch: float | None, samples_from: str | None,
                 after_step: int | None = None) -> StepRecord | None:
    """A log step's record, or None where msgspec would not write what the writer's
    encoder writes (NaN and infinity, which it writes as null; integers past 64 bits): the
    writer then encodes it."""
    isfinite = math.isfinite
    if not (isfinite(t) and (samples is None or isfinite(samples))
            and (loss is None or isfinite(loss)) and (dt is None or isfinite(dt))
            and -_INT_MAX < step < _INT_MAX and -_INT_MAX < rank < _INT_MAX
            and attempt < _INT_MAX):
        return None
    record = StepRecord(t, rank, step, samples, loss, dt, NO_PHASES, "log", attempt)
    if samples_from is not None:
        record.samples_from = samples_from
    if after_step is not None:
        record.after_step = after_step
    if throughput is not None or samples_total is not None or global_batch is not None:
        # Most lines print none of these: one test for the three, then each.
        for value in (throughput, samples_total, global_batch):
            if value is not None and not isfinite(value):
                return None
        if throughput is not None:
            record.throughput = throughput
        if samples_total is not None:
            record.samples_total = samples_total
        if global_batch is not None:
            record.global_batch = global_batch
    return record


@dataclass
class _Bar:
    """A rank's training progress bar: its counter restarts each epoch, the steps go on."""

    last_n: int = 0
    base: int = 0  # steps of the bar's earlier epochs


@dataclass
class StepRecorder:
    """The step and compile records of the lines LogFollower reads, and what each rank's
    records depend on: its last step, bar, running total, whether the probe times it, and
    up to which step it was recorded before a resume."""

    writer: EventWriter
    parser: StepLineParser
    attempt: int = 0
    stalls: StallWatch | None = None
    """Told of each step and compile line recorded (the supervisor's watch for stalls)."""
    native: bool = True
    """A busy log's step lines of a learnt shape are read and their records made outside
    Python (_steprecords.c, _record_native), where it was built: about twice as cheap as
    _record_parsed, which makes them otherwise (False: always)."""
    step_counters: dict[int, int] = field(default_factory=dict)
    """Each rank's last step recorded (lines without a step number count on from it)."""
    samples_totals: dict[int, float] = field(default_factory=dict)
    probed_ranks: set[int] = field(default_factory=set)
    """Ranks that report their steps through the probe: their log step lines are not
    recorded (the reader would discard them anyway)."""
    recorded_steps: dict[int, int] = field(default_factory=dict)  # of `resumed_attempt`
    resumed_attempt: int | None = None
    bars: dict[tuple[int, str], _Bar] = field(default_factory=dict)
    batch_ranks: set[int] = field(default_factory=set)  # ranks printing the job's batch
    last_stamp: dict[int, tuple[float, int]] = field(default_factory=dict)  # rank: (t, step)
    steps_written: int = 0
    _record_steps: Callable[..., tuple[int, int, int | None]] | None = None

    def __post_init__(self) -> None:
        self._record_steps = native_record_steps if self.native else None

    def resume(self, recorded_steps: dict[int, int]) -> None:
        """No step line of this attempt at or below a rank's step in `recorded_steps` (what
        a dead supervisor recorded) is recorded again; lines without a step number count on."""
        self.recorded_steps = dict(recorded_steps)
        self.step_counters.update(recorded_steps)
        self.resumed_attempt = self.attempt

    def record_line(self, record: StepValues | CompileLine | None, rank: int | None,
                    line: str, now: float, after_step: int | None = None) -> None:
        """One line parsed whole (parse_values), read at `now` from a log of `rank`
        (`after_step`: a placed line's probe step)."""
        if isinstance(record, StepValues):
            self._record_step(record, rank, now, after_step=after_step)
        elif isinstance(record, CompileLine):
            self._record_compile(record, rank, line, now)

    def _record_values(self, lines: list[str], stamps: list[float], rank: int | None,
                       watched: bool, after_steps: list[int | None] | None) -> None:
        """Lines of one log that are not all step lines of a shape the short way knows: each
        parsed whole (parse_values_many), and recorded as a step or compile line."""
        steps: list[StepRecord] = []
        for i, (record, stamp, line) in enumerate(zip(self.parser.parse_values_many(lines),
                                                      stamps, lines, strict=True)):
            if record is None:
                continue
            if record.__class__ is StepValues:
                self._record_step(record, rank, stamp, steps,  # type: ignore[arg-type]
                                  watched=watched,
                                  after_step=None if after_steps is None else after_steps[i])
            else:
                self._write_steps(steps)  # the steps before it first, in the order read
                self._record_compile(record, rank, line, stamp)  # type: ignore[arg-type]
        self._write_steps(steps)

    def _record_compile(self, record: CompileLine, rank: int | None, line: str,
                        now: float) -> None:
        self.writer.write("compile", t=now, rank=rank, what=record.what, line=capped(line))
        if self.stalls is not None:
            self.stalls.compiled(rank, now, record.what)

    def _record_step(self, record: StepValues, rank: int | None, now: float,
                     batch: list[StepRecord] | None = None, *, watched: bool = True,
                     after_step: int | None = None) -> None:
        """A step line's record (`rank`: its log's, when the line names none): written, or
        added to `batch` (_write_steps writes a batch's records in one go); the stall watch
        is told of it when `watched`. `after_step`: a placed line's probe step."""
        rank = record.rank if record.rank is not None else (rank or 0)
        if rank in self.probed_ranks:
            return
        step = record.step
        if step is None and record.bar_n is not None:
            step = self._bar_step(rank, record)
            if step is None:
                return  # the bar's first draw (0/N): no step done yet
        if step is None:
            step = self.step_counters.get(rank, 0) + 1
        elif step == self.step_counters.get(rank):
            return  # a progress bar redrawn for the same step
        elif self.attempt == self.resumed_attempt and \
                step <= self.recorded_steps.get(rank, -1):
            return  # recorded before this supervisor took over (resume)
        self.step_counters[rank] = step
        samples = record.samples
        if samples is None and record.samples_total is not None:
            # A running total (NxD, Megatron): this step's samples are the difference.
            previous = self.samples_totals.get(rank)
            self.samples_totals[rank] = record.samples_total
            if previous is not None and record.samples_total >= previous:
                samples = record.samples_total - previous
        dt = record.dt
        if dt is None and record.throughput and samples:
            dt = samples / record.throughput
        if samples is None and record.global_batch:
            # The job's batch (Megatron, nanotron), printed by one rank or by several.
            self.batch_ranks.add(rank)
            samples = record.global_batch / len(self.batch_ranks)
        samples_from = None if samples is None else "line"
        if samples is None and record.throughput:
            # The rate the script printed, over this step's time (printed, or between
            # this rank's step lines as stamped): samples/s is then what it printed.
            step_time = dt if dt is not None else self._stamped_step_time(rank, step, now)
            if step_time is not None:
                samples, samples_from = record.throughput * step_time, "throughput"
        self.last_stamp[rank] = (now, step)
        event = _step_record(now, rank, step, samples, record.loss, dt, self.attempt,
                             record.throughput, record.samples_total, record.global_batch,
                             samples_from, after_step)
        if event is not None:
            if batch is not None:
                batch.append(event)
            else:
                self._write_steps([event])
        else:
            if batch is not None:
                self._write_steps(batch)  # those before it first, in the order read
            self._write_by_encoder(now, rank, step, samples, record.loss, dt, record.throughput,
                                   record.samples_total, record.global_batch, samples_from,
                                   after_step)
        if watched and self.stalls is not None:
            self.stalls.step(rank, step, now, "log")
        self.steps_written += 1

    def record(self, figures: list[LogLines], *, native: bool = True) -> None:
        """The lines of `figures` (of one log or several, in the order read) recorded: all
        of them parsed in one go where every one is a step line that prints no figure but
        the step, rank, samples and loss (parse_figures_many: the lines of busy logs,
        hundreds a second; a call for each log's ten lines a second cost about twice as
        much a line), else each log's alone, and a log's that are not such lines the long
        way (_record_values). Where _steprecords.c was built (and `native`), every line of
        a learnt shape is read and recorded by it (_record_native). `figures` is emptied."""
        if not figures:
            return
        if native and self._record_steps is not None and self.attempt < _INT_MAX and \
                self._record_native(figures):
            figures.clear()
            return
        parse = self.parser.parse_figures_many
        read = parse(figures[0][0] if len(figures) == 1 else
                     [line for lines, *_ in figures for line in lines])
        if read is None:
            parsed: list[list[StepFigures] | None] = [read] if len(figures) == 1 else \
                [parse(lines) for lines, *_ in figures]
        else:
            parsed, at = [], 0
            for lines, *_ in figures:
                parsed.append(read[at:at + len(lines)])
                at += len(lines)
        run: list[ParsedLines] = []
        for (lines, stamps, rank, watched, after), figures_read in zip(figures, parsed,
                                                                       strict=True):
            if figures_read is not None:
                run.append((figures_read, stamps, rank, watched, after))
                continue
            self._record_parsed(run)  # those read before it first, in the order read
            run = []
            self._record_values(lines, stamps, rank, watched, after)
        self._record_parsed(run)
        figures.clear()

    def _record_parsed(self, figures: list[ParsedLines]) -> None:
        """The records _record_step makes of step lines read the short way, written in one
        go: without a StepValues a line, or the tests for what such a line never prints (a
        bar's count, a running total, the job's batch, a rate).
        tests/unit/supervisor/test_step_figures.py holds the two to the same records."""
        if not figures:
            return
        counters, probed = self.step_counters, self.probed_ranks
        recorded = self.recorded_steps if self.attempt == self.resumed_attempt else None
        attempt, steps, isfinite, stalls = self.attempt, [], math.isfinite, self.stalls
        attempt_ok, low, high = attempt < _INT_MAX, -_INT_MAX, _INT_MAX
        for read, stamps, log_rank, watched, after_steps in figures:
            # A log's lines are one rank's, mostly: what depends on the rank only (probed?
            # recorded before a resume? its last step) is looked up once per run of lines of
            # one rank, and its last step and stamp written back at the run's end. Hundreds
            # of lines a second; a lookup each was a fifth of their recording.
            told = watched and stalls is not None
            run_rank: int | None = None
            skip = rank_ok = False
            last: int | None = None
            floor: float = -math.inf
            last_t = 0.0
            run_steps: list[int] = []
            run_times: list[float] = []
            for i, ((step, rank, samples, loss), stamp) in enumerate(zip(read, stamps,
                                                                         strict=True)):
                if rank is None:
                    rank = log_rank or 0
                if rank != run_rank:
                    if run_steps:
                        self._end_run(run_rank, last, last_t, run_steps, run_times, told)
                        run_steps, run_times = [], []
                    run_rank, skip = rank, rank in probed
                    last = counters.get(rank)
                    floor = recorded.get(rank, -1) if recorded is not None else -math.inf
                    rank_ok = attempt_ok and low < rank < high
                if skip:
                    continue
                if step is None:
                    step = (last or 0) + 1
                elif step == last or step <= floor:
                    continue  # a line drawn again for its step; or recorded before a resume
                last, last_t = step, stamp
                samples_from = None if samples is None else "line"
                # _step_record's tests, inline: hundreds of lines a second, and a call each
                # was a tenth of their recording.
                if rank_ok and isfinite(stamp) and (samples is None or isfinite(samples)) and \
                        (loss is None or isfinite(loss)) and low < step < high:
                    record = StepRecord(stamp, rank, step, None, loss, None, NO_PHASES,
                                        "log", attempt) if samples is None else \
                        StepRecord(stamp, rank, step, samples, loss, None, NO_PHASES, "log",
                                   attempt, samples_from="line")
                    if after_steps is not None and (after := after_steps[i]) is not None:
                        record.after_step = after
                    steps.append(record)
                else:
                    self._write_steps(steps)  # those before it first, in the order read
                    self._write_by_encoder(stamp, rank, step, samples, loss, None, None, None,
                                           None, samples_from,
                                           None if after_steps is None else after_steps[i])
                run_steps.append(step)
                run_times.append(stamp)
            if run_steps:
                self._end_run(run_rank, last, last_t, run_steps, run_times, told)
        self._write_steps(steps)

    def _record_native(self, figures: list[LogLines]) -> bool:
        """record's lines recorded by _steprecords.c, a run of one learnt shape at a
        time (StepLineParser.figure_runs_many); where they are not all such runs, each log's
        alone. False, with nothing recorded, where one log's lines are not (the Python way
        records them)."""
        runs = self.parser.figure_runs_many(
            figures[0][0] if len(figures) == 1 else
            [line for lines, *_ in figures for line in lines])
        if runs is None:
            if len(figures) == 1:
                return False
            for log in figures:  # (a line that is no step in one log: the others natively)
                self.record([log])
            return True
        steps: list[StepRecord] = []
        run = iter(runs)
        _, run_end, places = next(run)
        at = 0  # where the log's lines start among all of them
        for lines, stamps, log_rank, watched, after_steps in figures:
            begin, count = 0, len(lines)
            while begin < count:
                if at + begin >= run_end:
                    _, run_end, places = next(run)
                end = min(count, run_end - at)
                self._record_run(lines, stamps, after_steps, begin, end, places, log_rank,
                                 watched and self.stalls is not None, steps)
                begin = end
            at += count
        self._write_steps(steps)
        return True

    def _record_run(self, lines: list[str], stamps: list[float],
                    after_steps: list[int | None] | None, begin: int, end: int,
                    places: tuple[int, ...], log_rank: int | None, told: bool,
                    steps: list[StepRecord]) -> None:
        """Lines `begin` to `end` of one log, all of one shape whose figures are at `places`,
        recorded by _steprecords.c as _record_parsed would: it stops at each line of another
        rank (looked up here, as _record_parsed does at each run of one rank's lines) and at
        one it leaves to Python, which records the rest of them (record's Python way,
        after the records made so far)."""
        assert self._record_steps is not None
        rank = (log_rank or 0) if places[2] < 0 else None  # (else the lines print it)
        skip, last, floor = self._rank_state(rank) if rank is not None else (False, None, None)
        run_steps: list[int] = []
        run_times: list[float] = []
        while begin < end:
            begin, why, printed = self._record_steps(
                lines, stamps, begin, end, places, rank, skip, last, floor, self.attempt,
                StepRecord, steps, run_steps, run_times, after_steps)
            if run_steps:
                self._end_run(rank, run_steps[-1], run_times[-1], run_steps, run_times, told)
                run_steps, run_times = [], []
            if why == _NEW_RANK:
                rank = printed
                skip, last, floor = self._rank_state(rank)  # type: ignore[arg-type]
            elif why == _PYTHON:
                self._write_steps(steps)  # those before it first, in the order read
                self.record([(lines[begin:end], stamps[begin:end], log_rank, told,
                              None if after_steps is None else after_steps[begin:end])],
                            native=False)
                return

    def _rank_state(self, rank: int) -> tuple[bool, int | None, int | None]:
        """Whether `rank`'s lines are skipped (the probe times it), its last step recorded
        and the step up to which it was recorded before a resume (None: none)."""
        recorded = self.recorded_steps if self.attempt == self.resumed_attempt else None
        return (rank in self.probed_ranks, self.step_counters.get(rank),
                None if recorded is None else recorded.get(rank, -1))

    def _end_run(self, rank: int | None, last: int | None, last_t: float, steps: list[int],
                 times: list[float], told: bool) -> None:
        """The end of record's run of one rank's recorded lines (`steps`, stamped
        `times`): its last step and stamp kept, and the stall watch told of them."""
        assert rank is not None and last is not None  # (a run has a rank and a line)
        self.step_counters[rank] = last
        self.last_stamp[rank] = (last_t, last)
        self.steps_written += len(steps)
        if told:
            assert self.stalls is not None
            self.stalls.rank_steps(rank, steps, times, "log")

    def _write_by_encoder(self, t: float, rank: int, step: int, samples: float | None,
                          loss: float | None, dt: float | None, throughput: float | None,
                          samples_total: float | None, global_batch: float | None,
                          samples_from: str | None, after_step: int | None = None) -> None:
        """A step record _step_record declined (NaN, infinity, a step past 64 bits), written
        by the writer's encoder, which writes those its own way; every figure the line
        carries is kept."""
        printed = {key: value for key, value in (
            ("throughput", throughput), ("samples_total", samples_total),
            ("global_batch", global_batch), ("samples_from", samples_from))
            if value is not None}
        if after_step is not None:
            printed["after_step"] = after_step
        self.writer.write("step", t=t, rank=rank, step=step, samples=samples, loss=loss, dt=dt,
                          phases=None, src="log", attempt=self.attempt, **printed)

    def _write_steps(self, batch: list[StepRecord]) -> None:
        """The records of a batch of step lines, encoded in one call; `batch` is emptied."""
        if batch:
            self.writer.write_encoded_lines("step", len(batch), encode_steps(batch))
            batch.clear()

    def _stamped_step_time(self, rank: int, step: int, now: float) -> float | None:
        """Seconds per step since this rank's previous step line, by the stamps."""
        last = self.last_stamp.get(rank)
        if last is None or step <= last[1] or now <= last[0]:
            return None
        return (now - last[0]) / (step - last[1])

    def _bar_step(self, rank: int, record: StepValues) -> int | None:
        """The step a bar position stands for: the bar's counter, plus the steps of the
        epochs it drew before (it starts again at 0 or 1 each epoch)."""
        n = int(record.bar_n or 0)
        bar = self.bars.setdefault((rank, record.bar_key or ""), _Bar())
        if n < bar.last_n:  # a new epoch: the counter started again
            bar.base += bar.last_n
        bar.last_n = n
        return bar.base + n if n > 0 else None
