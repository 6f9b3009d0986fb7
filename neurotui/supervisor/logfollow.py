"""Following the job's log files and turning step and compiler lines into session events."""

from __future__ import annotations

import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from neurotui.session import layout
from neurotui.session.tailing import read_lines_backwards, read_new_lines
from neurotui.session.writer import EventWriter
from neurotui.sources.steplog import CompileLine, StepLine, StepLineParser, strip_rank_prefix

_MAX_READ = 4 << 20  # per file per poll: a flood of output cannot stall the supervisor
_TAIL_LINES = 20
LOG_MARK_S = 2.0
"""At most this often, how far each log had been written is recorded (`log_offsets`): what a
replay shows of the logs at its cursor. Log lines carry no time of their own."""
_RESUME_LOOKBACK_S = 60.0
_RESUME_SCAN_BYTES = 64 << 20


def resume_point(events: Path, attempt: int) -> tuple[dict[str, int] | None, dict[int, int]]:
    """Where a dead supervisor's log following stood, for `LogFollower.resume`: its last
    `log_offsets` mark (None: none), and per rank the last step of `attempt` it recorded from
    the logs, from shortly before that mark on. Read backwards from the end of events.jsonl:
    the last seconds of a long run, not all of it."""
    mark: dict[str, int] | None = None
    mark_t: float | None = None
    steps: dict[int, int] = {}
    with contextlib.suppress(OSError):  # no events file: nothing was recorded
        for raw in read_lines_backwards(events, _RESUME_SCAN_BYTES):
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # a line cut by the old supervisor's death, or garbage
            if not isinstance(record, dict):
                continue
            t = record.get("t")
            if mark_t is not None and isinstance(t, (int, float)) and \
                    t < mark_t - _RESUME_LOOKBACK_S:
                break
            files = record.get("files")
            if record.get("kind") == "log_offsets" and mark is None and isinstance(files, dict):
                mark = {str(k): v for k, v in files.items() if isinstance(v, int)}
                mark_t = float(t) if isinstance(t, (int, float)) else None
            elif record.get("kind") == "step" and record.get("src") == "log" and \
                    record.get("attempt") == attempt:
                rank, step = record.get("rank"), record.get("step")
                if isinstance(rank, int) and isinstance(step, int):
                    steps[rank] = max(steps.get(rank, step), step)
    return mark, steps


@dataclass
class _Followed:
    path: Path
    name: str  # relative to the session, as `log_offsets` names it
    rank: int | None  # None: the launcher's combined output, ranks from line prefixes
    offset: int = 0
    pending: bytes = b""


@dataclass
class LogFollower:
    session_dir: Path
    writer: EventWriter
    parser: StepLineParser
    parse_launcher: bool
    attempt: int = 0
    tails: dict[int | None, deque[str]] = field(default_factory=dict)
    _files: dict[Path, _Followed] = field(default_factory=dict)
    _step_counters: dict[int, int] = field(default_factory=dict)
    _samples_totals: dict[int, float] = field(default_factory=dict)
    _probed_ranks: set[int] = field(default_factory=set)
    _marked: dict[str, int] = field(default_factory=dict)
    _marked_at: float = -float("inf")
    _recorded_steps: dict[int, int] = field(default_factory=dict)  # of `_resumed_attempt`
    _resumed_attempt: int | None = None

    def resume(self, offsets: dict[str, int] | None, recorded_steps: dict[int, int]) -> None:
        """Go on where a dead supervisor left off: each log from its last mark (`offsets`; no
        mark at all: from the logs' current ends), and no step line of this attempt at or below
        a rank's step already recorded (`recorded_steps`: lines past the mark it had read)."""
        self._discover()
        for followed in self._files.values():
            if offsets is None:
                with contextlib.suppress(OSError):
                    followed.offset = followed.path.stat().st_size
            else:
                followed.offset = int(offsets.get(followed.name, 0))
        self._marked = dict(offsets or {})
        self._recorded_steps = dict(recorded_steps)
        self._step_counters.update(recorded_steps)  # lines without a step number count on
        self._resumed_attempt = self.attempt

    def poll(self, now: float, final: bool = False) -> None:
        """Read what the logs gained; `final` (the job has exited) records where they end."""
        # Ranks that report through the probe: their log step lines would be discarded by
        # the reader anyway, so they are not written twice.
        self._probed_ranks.update(layout.probe_files(self.session_dir))
        self._discover()
        for followed in self._files.values():
            self._read(followed, now)
        if final or now - self._marked_at >= LOG_MARK_S:
            self._mark(now)

    def _mark(self, now: float) -> None:
        """Record the end of each log's complete lines, if any log grew since the last mark."""
        offsets = {followed.name: followed.offset - len(followed.pending)
                   for followed in self._files.values()}
        if offsets != self._marked:
            self.writer.write("log_offsets", t=now, files=offsets)
            self._marked = offsets
        self._marked_at = now

    def _discover(self) -> None:
        launcher = self.session_dir / layout.LAUNCHER_LOG
        if launcher not in self._files and launcher.exists():
            self._files[launcher] = _Followed(launcher, layout.LAUNCHER_LOG, None)
        for rank, paths in layout.rank_log_files(self.session_dir).items():
            for path in paths:
                if path not in self._files:
                    self._files[path] = _Followed(
                        path, path.relative_to(self.session_dir).as_posix(), rank)

    def _read(self, followed: _Followed, now: float) -> None:
        try:
            lines, followed.offset, followed.pending = read_new_lines(
                followed.path, followed.offset, followed.pending, _MAX_READ)
        except OSError:
            return
        for raw in lines:
            self._take(raw.decode("utf-8", errors="replace").rstrip("\r"), followed, now)

    def _take(self, line: str, followed: _Followed, now: float) -> None:
        rank = followed.rank
        if rank is None and self.parse_launcher:
            rank, line = strip_rank_prefix(line)  # a plain command: ranks only by prefix
        self.tails.setdefault(rank, deque(maxlen=_TAIL_LINES)).append(line)
        if followed.rank is None and not self.parse_launcher:
            return  # torchrun's console repeats the rank files, which are parsed instead
        record = self.parser.parse(line)
        if isinstance(record, StepLine):
            rank = record.rank if record.rank is not None else (rank or 0)
            if rank in self._probed_ranks:
                return
            step = record.step
            if step is None:
                step = self._step_counters.get(rank, 0) + 1
            elif step == self._step_counters.get(rank):
                return  # a progress bar redrawn for the same step
            elif self.attempt == self._resumed_attempt and \
                    step <= self._recorded_steps.get(rank, -1):
                return  # recorded before this supervisor took over (resume)
            self._step_counters[rank] = step
            samples = record.samples
            if samples is None and record.samples_total is not None:
                # A running total (NxD, Megatron): this step's samples are the difference.
                previous = self._samples_totals.get(rank)
                self._samples_totals[rank] = record.samples_total
                if previous is not None and record.samples_total >= previous:
                    samples = record.samples_total - previous
            dt = record.dt
            if dt is None and record.throughput and samples:
                dt = samples / record.throughput
            self.writer.write("step", t=now, rank=rank, step=step, samples=samples,
                              loss=record.loss, dt=dt, phases=None, src="log",
                              attempt=self.attempt)
        elif isinstance(record, CompileLine):
            self.writer.write("compile", t=now, rank=rank, what=record.what, line=line[:2000])

    def tail_lines(self) -> dict[str, list[str]]:
        return {("launcher" if k is None else str(k)): list(v) for k, v in self.tails.items()}

