"""The supervisor's watch for ranks that stopped making progress, whoever is looking.

It sees every step the session records: the step lines it parses itself, and the probe files
the ranks write (read on from where it stopped, once a second). A rank is stalled when its
best source (probe, then automatic probe, then log lines; as the reader keeps them) has had no
step for longer than defaults.stall_limit_s of its median step time, the rule of
metrics.stalled_ranks and the dashboard; a compile line restarts the clock. Light on purpose (no
pandas): the supervisor runs beside training for days.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from neurotui.defaults import DEFAULT_MIN_STALL_S, DEFAULT_WARMUP_STEPS, stall_limit_s
from neurotui.session import layout
from neurotui.session.stepprecedence import PRECEDENCE_OF_NAME
from neurotui.session.steprecord import StepRecord, decode_step, decode_steps
from neurotui.session.tailing import KeptFiles
from neurotui.supervisor.alerting import Raised
from neurotui.supervisor.compiles import CompileWatch
from neurotui.supervisor.stepoffsets import StepOffsets

_ORDER = PRECEDENCE_OF_NAME  # lower: the better source (the reader's table)
_KEPT = 256  # step times per rank and source: the median of the recent past
_MAX_READ = 1 << 20
HISTORY_BYTES = 1 << 20
"""Of each probe file, an adopting supervisor reads this much of its end for where the logs
stood (about 4,000 steps: minutes of a fast job's output since the old supervisor's mark)."""


def _decoded_steps(block: bytes, word: bytes) -> list[StepRecord]:
    """The step records among the lines of `block` (whole lines) that hold `word`: the block
    decoded in one call where each line may be one (the usual read: step records only, not
    split and joined), else those lines in one call, or a line at a time where one of them is
    not one (garbage, a value out of range, a record of another kind)."""
    return _decoded(block, word)[0]


def _decoded(block: bytes, word: bytes) -> tuple[list[StepRecord], bool]:
    """_decoded_steps, and whether every line was a step record (decoded in one call): where
    not, other records may be among them (a compile)."""
    if block.count(word) >= block.count(b"\n"):
        try:  # (not contextlib.suppress: its calls were 0.15 M instructions a second here)
            return decode_steps(block), True
        except msgspec.DecodeError:
            pass
    lines = [raw for raw in block.split(b"\n") if word in raw]
    try:
        return decode_steps(b"\n".join(lines)), False
    except msgspec.DecodeError:
        records: list[StepRecord] = []
        for raw in lines:
            with contextlib.suppress(msgspec.DecodeError):
                records.append(decode_step(raw))
        return records, False


@dataclass(slots=True)
class _Track:
    last_t: float
    last_step: int
    times: deque[float] = field(default_factory=lambda: deque(maxlen=_KEPT))
    """Step times past warm-up (or, until there are some, of warm-up)."""
    past_warmup: bool = False

    def add_many(self, steps: list[int], times: list[float]) -> None:
        """Each of `steps`, done at its time in `times`, in order: its time since the step
        before goes into `times`. Hundreds of steps a second, a run of one rank's at a time:
        comparisons, not max(), in one loop."""
        last_t, last_step, append = self.last_t, self.last_step, self.times.append
        warming = not self.past_warmup  # (asked once: past warm-up, most runs are)
        for step, t in zip(steps, times, strict=True):
            if step > last_step and t > last_t:
                if warming and step > DEFAULT_WARMUP_STEPS:
                    self.past_warmup, warming = True, False
                    self.times.clear()  # warm-up's times were only a stand-in
                append((t - last_t) / (step - last_step))
            if t > last_t:
                last_t = t
            if step > last_step:
                last_step = step
        self.last_t, self.last_step = last_t, last_step


class StallWatch:
    def __init__(self, session_dir: Path, attempt: int = 0) -> None:
        self.session_dir = session_dir
        self.attempt = attempt
        self._tracks: dict[tuple[int, str], _Track] = {}
        self._offsets: dict[Path, int] = {}  # each probe file's complete lines read so far
        self._files = KeptFiles()  # read every second: kept open
        self._compiled_at: dict[int | None, float] = {}
        self._probe_folder = layout.ProbeFolder(session_dir)
        self.offsets = StepOffsets()
        """The automatic probe's steps by where the ranks' logs stood (the log follower
        places their lines by them)."""
        self.read_at = float("-inf")
        """When read_probes last began: a step done well before it is in `offsets`."""
        self.compiles = CompileWatch(session_dir, self._last_step)
        """torch.compile's compiles (probe files) and neuronx-cc's (log lines)."""

    def new_attempt(self, attempt: int) -> None:
        """A restart: the steps count from the start again."""
        self.attempt = attempt
        self._tracks.clear()
        self._compiled_at.clear()
        self.offsets.clear()

    def skip_history(self) -> None:
        """Read the probe files on from their current ends (an adopting supervisor: the
        steps before it came are history, and a long run's files are large). Only where
        their last steps say the logs stood is taken (their last HISTORY_BYTES): the log
        lines printed since the old supervisor's last mark are placed by them."""
        for path in self._probe_files():
            with contextlib.suppress(OSError):
                size = path.stat().st_size
                self._offsets[path] = size
                start = max(0, size - HISTORY_BYTES)
                block, complete = self._files.read_new_block(path, start, size - start)
                first = block.find(b"\n") + 1 if start else 0  # (a line cut at the start)
                self._note_offsets(self._steps_of_attempt(block[first:complete], b'"out"'))

    def _steps_of_attempt(self, block: bytes, word: bytes) -> list[StepRecord]:
        """The step records of this attempt among the lines of `block` (whole lines of a
        probe file) that hold `word`."""
        return [record for record in _decoded_steps(block, word)
                if record.attempt == self.attempt]

    def _note_offsets(self, records: list[StepRecord]) -> None:
        """Where these steps say the ranks' logs stood (the follower places lines by them)."""
        if records:
            times = [record.t for record in records]
            steps = [record.step for record in records]
            self.offsets.add_many([record.out for record in records], times, steps)
            self.offsets.add_many([record.err for record in records], times, steps)

    def step(self, rank: int, step: int, t: float, src: str) -> None:
        self.rank_steps(rank, [step], [t], src)

    def rank_steps(self, rank: int, steps: list[int], times: list[float], src: str) -> None:
        """`step` for each of one rank's `steps`, stamped `times`, in order (a run of a
        log's lines, StepRecorder.record's; of a probe file's): its track looked up
        once, its steps added in one call."""
        track = self._tracks.get((rank, src))
        if track is None:
            self.compiles.first_step(rank, self.attempt, times[0])
            self._tracks[(rank, src)] = track = _Track(times[0], steps[0])
            steps, times = steps[1:], times[1:]
        track.add_many(steps, times)

    def _last_step(self, rank: int) -> int | None:
        """The rank's latest step of this attempt, from whichever source saw it last."""
        seen = [(track.last_t, track.last_step) for (r, _), track in self._tracks.items()
                if r == rank]
        return max(seen)[1] if seen else None

    def past_warmup(self) -> bool:
        """Whether a rank of this attempt has stepped past warm-up (the memory watch keeps
        samples from then on: memwatch.py's steady steps)."""
        return any(track.past_warmup for track in self._tracks.values())

    def compiled(self, rank: int | None, t: float, what: str | None = None) -> None:
        self._compiled_at[rank] = max(t, self._compiled_at.get(rank, t))
        if what is not None:
            self.compiles.log_compile(rank, what, t)

    def read_probes(self) -> None:
        """Take the steps the ranks wrote into their probe files since the last call."""
        # Each second, at 32 ranks x 10 steps/s (the automatic probe's files of a torch job):
        # a read sized by the file (not a buffered file object's 1 MiB), and a read's steps
        # decoded in one call, not a line at a time.
        self.read_at = time.time()
        for path in self._probe_files():
            offset = self._offsets.get(path, 0)
            try:
                block, complete = self._files.read_new_block(path, offset, _MAX_READ)
            except OSError:
                continue
            self._offsets[path] = offset + complete  # a line being written: read again
            if complete:
                self._take_probe_lines(block[:complete])

    def close(self) -> None:
        self._files.close()

    def _take_probe_lines(self, block: bytes) -> None:
        """The step records of `block` (whole lines) of a probe file."""
        decoded, only_steps = _decoded(block, b'"step"')
        records = [record for record in decoded
                   if record.attempt == self.attempt]
        # torch.compile's compile records, from the automatic probe: looked for only in a
        # block that holds other lines than steps (a search, or a count of its lines, of every
        # block was 0.3 M instructions a second at 32 ranks x 10 steps/s).
        if not only_steps and b'"compile"' in block:
            for record in self.compiles.take_probe_lines(block, records):
                self.compiled(record.get("rank"), float(record["t"]))  # not stalling
        # A file's steps are one rank's, of one source: told a run at a time (rank_steps),
        # its track looked up once, not at each of hundreds of steps a second.
        rank, src = -1, ""
        run_steps: list[int] = []
        run_times: list[float] = []
        for record in records:
            if record.rank != rank or record.src != src:
                if run_steps:
                    self.rank_steps(rank or 0, run_steps, run_times, src or "probe")
                    run_steps, run_times = [], []
                rank, src = record.rank, record.src
            run_steps.append(record.step)
            run_times.append(record.t)
        if run_steps:
            self.rank_steps(rank or 0, run_steps, run_times, src or "probe")
        self._note_offsets(records)

    def _probe_files(self) -> list[Path]:
        probe, auto = self._probe_folder.both()
        return [*probe.values(), *auto.values()]

    def stalled(self, now: float) -> dict[int, tuple[float, float, int]]:
        """Stalled ranks -> (seconds without a step, median step time, last step)."""
        # Each second, for every rank of the node: one walk of the tracks, and
        # comparisons rather than max() calls: half the cost at 32 ranks (15 against 7 us).
        best: dict[int, tuple[int, _Track]] = {}
        order_of = _ORDER.get
        for (rank, source), track in self._tracks.items():
            order = order_of(source)
            if order is not None and (rank not in best or order < best[rank][0]):
                best[rank] = (order, track)
        compiled = self._compiled_at
        any_rank = compiled.get(None, -math.inf)
        compiling = self.compiles.compiling
        out = {}
        for rank, (_, track) in best.items():
            if not track.times or compiling.get(rank):
                continue  # (a rank inside a torch.compile compile is compiling, not stalled)
            seen = track.last_t  # the last sign of life: a step, or a compile
            compiled_at = compiled.get(rank, seen)
            if compiled_at > seen:
                seen = compiled_at
            if any_rank > seen:
                seen = any_rank
            silence = now - seen
            if silence <= DEFAULT_MIN_STALL_S:
                continue  # never stalled this soon: no median needed (32 ranks, each second)
            median = statistics.median(track.times)
            if silence > stall_limit_s(median):
                out[rank] = (silence, median, track.last_step)
        return out

    def alert(self, now: float) -> Raised | None:
        silent = self.stalled(now)
        if not silent:
            return None
        evidence = tuple(
            f"rank {rank}: no step for {silence:.0f} s = {silence / median:.0f}x its median "
            f"step {_seconds(median)}; last step {last}"
            for rank, (silence, median, last) in sorted(silent.items(),
                                                         key=lambda kv: -kv[1][0])[:8])
        ranks = ", ".join(str(r) for r in sorted(silent))
        return Raised("error", f"no progress on rank(s) {ranks}", evidence,
                      "look at the rank's log and its process (CPU at 0% or 100%? stopped?)")


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
