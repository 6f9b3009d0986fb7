"""The supervisor's watch on the training loss, whoever is looking: two alerts, recorded in the
session (alerting.AlertRecorder) like the stall watch's.

- `loss-nonfinite`: a rank's loss was NaN or infinite: the first step (and its value, its
  source, the last finite loss before it) of each rank where it happened. It stays raised
  until the job ends: a loss that came back proves nothing about the weights.
- `loss-spike`: a finite loss above defaults.DEFAULT_LOSS_SPIKE_FACTOR times the median of
  that rank's last DEFAULT_LOSS_SPIKE_WINDOW losses, and above all of them (of one source,
  past warm-up, once at least DEFAULT_LOSS_SPIKE_MIN_HISTORY are known; a median at or below
  zero has no "times" and is left alone). It ends once the rank went a window of steps
  without another.

It reads the losses as the session recorded them, whatever gave them: the `step` records of
events.jsonl (the log lines the supervisor parsed, however its step recorder made them) and of
the probe.step() files (the automatic probe's records carry no loss: not read). So one rule
judges every source, and what it says can be checked against the session on disk. A
non-finite loss is recorded as `"loss": null` with `"nonfinite": {"loss": "nan"}`
(session/FORMAT.md). Read on from where it stopped, once a second, as the stall watch reads
the probe files; light (no numpy): the supervisor runs beside training for days.
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from neurotui.defaults import (
    DEFAULT_LOSS_SPIKE_FACTOR,
    DEFAULT_LOSS_SPIKE_MIN_HISTORY,
    DEFAULT_LOSS_SPIKE_WINDOW,
    DEFAULT_WARMUP_STEPS,
)
from neurotui.session import layout
from neurotui.session.tailing import KeptFiles
from neurotui.supervisor.alerting import Raised

NONFINITE = "loss-nonfinite"
SPIKE = "loss-spike"
_MAX_READ = 4 << 20  # of one file in one call: a long backlog is read over several seconds
_SHOWN = 8  # ranks (non-finite) or spikes (the latest) named in an alert's evidence


class _LossRecord(msgspec.Struct):
    """What the watch reads of a `step` record; other keys are skipped unread."""

    kind: str
    t: float = 0.0
    rank: int | None = None
    step: int | None = None
    loss: float | None = None
    src: str | None = None
    attempt: int = 0
    nonfinite: dict[str, str] | None = None


_DECODE = msgspec.json.Decoder(_LossRecord)


@dataclass(frozen=True)
class NonFinite:
    rank: int
    step: int
    value: str  # "nan", "inf" or "-inf"
    src: str
    attempt: int
    last_finite: tuple[int, float] | None  # (step, loss) just before, from the same source


@dataclass(frozen=True)
class Spike:
    rank: int
    step: int
    loss: float
    median: float
    history: int  # losses the median was taken of
    src: str
    attempt: int


@dataclass(slots=True)
class _Track:
    """One rank's losses from one source in one attempt."""

    recent: deque[float]  # the last window's losses past warm-up, in order...
    ranked: list[float] = field(default_factory=list)  # ...and sorted: the median at once
    last: tuple[int, float] | None = None  # the latest finite (step, loss)
    last_step: int = -1
    last_spike_step: int | None = None
    spikes: list[Spike] = field(default_factory=list)


class LossWatch:
    def __init__(self, session_dir: Path, *, spike_factor: float | None = None,
                 window: int = DEFAULT_LOSS_SPIKE_WINDOW,
                 min_history: int = DEFAULT_LOSS_SPIKE_MIN_HISTORY) -> None:
        self.session_dir = session_dir
        self.spike_factor = float(spike_factor or DEFAULT_LOSS_SPIKE_FACTOR)
        self.window = window
        self.min_history = min(min_history, window)
        self._tracks: dict[tuple[int, str, int], _Track] = {}
        self.nonfinite: dict[tuple[int, int], NonFinite] = {}
        """(rank, attempt) -> its first non-finite loss."""
        self.spikes: list[Spike] = []  # every spike seen, in the order seen
        self._offsets: dict[Path, int] = {}
        self._files = KeptFiles()
        self._probe_folder = layout.ProbeFolder(session_dir)

    def new_attempt(self, attempt: int) -> None:
        """A restart: the steps count from the start again (a non-finite loss stays told)."""
        self._tracks = {key: track for key, track in self._tracks.items() if key[2] == attempt}

    # -- the rule --------------------------------------------------------------------------
    def add(self, rank: int, step: int, loss: float | None, src: str = "log", attempt: int = 0,
            nonfinite: str | None = None) -> None:
        """One recorded step's loss (`loss` None and `nonfinite` None: it printed none)."""
        key = (rank, src, attempt)
        track = self._tracks.get(key)
        if track is None:
            track = self._tracks[key] = _Track(deque(maxlen=self.window))
        if step > track.last_step:
            track.last_step = step
        if loss is not None and not math.isfinite(loss):  # (a caller's float, not a record's)
            nonfinite = "nan" if loss != loss else "inf" if loss > 0 else "-inf"
        if nonfinite is not None:
            if (rank, attempt) not in self.nonfinite or \
                    step < self.nonfinite[(rank, attempt)].step:
                self.nonfinite[(rank, attempt)] = NonFinite(rank, step, nonfinite, src, attempt,
                                                            track.last)
            return
        if loss is None:
            return
        track.last = (step, loss)
        if step <= DEFAULT_WARMUP_STEPS:
            return  # warm-up's losses fall fast: no median of them
        recent, ranked = track.recent, track.ranked
        count = len(ranked)
        if count >= self.min_history:
            half = count // 2
            median = ranked[half] if count % 2 else (ranked[half - 1] + ranked[half]) / 2
            # Above the window's highest too: a loss whose ups and downs often pass the
            # factor (one near zero) is told once, not at every such step.
            if median > 0 and loss > self.spike_factor * median and loss > ranked[-1]:
                spike = Spike(rank, step, loss, median, count, src, attempt)
                track.spikes.append(spike)
                track.last_spike_step = step
                self.spikes.append(spike)
        # (A sorted list kept by bisect, not statistics.median's sort at each step: 0.4
        # against 3 us a step, at hundreds of steps a second.)
        if count == self.window:
            del ranked[bisect.bisect_left(ranked, recent[0])]
        recent.append(loss)
        bisect.insort(ranked, loss)

    def alerts(self) -> tuple[Raised | None, Raised | None]:
        """(loss-nonfinite, loss-spike) as they stand."""
        return self._nonfinite_alert(), self._spike_alert()

    def _nonfinite_alert(self) -> Raised | None:
        if not self.nonfinite:
            return None
        found = sorted(self.nonfinite.values(), key=lambda n: (n.attempt, n.step, n.rank))
        first = found[0]
        ranks = sorted({n.rank for n in found})
        title = (f"loss turned {first.value} at step {first.step} on rank {first.rank}"
                 + (f" (ranks {', '.join(map(str, ranks))} in all)" if len(ranks) > 1 else ""))
        evidence = tuple(
            f"rank {n.rank}: loss {n.value} at step {n.step}"
            + (f" of attempt {n.attempt}" if n.attempt else "") + f" ({_source(n.src)})"
            + (f"; the last finite loss: {n.last_finite[1]:.6g} at step {n.last_finite[0]}"
               if n.last_finite else "; no finite loss before it")
            for n in found[:_SHOWN])
        return Raised("error", title, evidence,
                      "the weights may be ruined from that step on: lower the learning rate, "
                      "clip gradients, look for a bad batch or a division by zero; with mixed "
                      "precision, check the loss scaling; resume from a checkpoint before it")

    def _spike_alert(self) -> Raised | None:
        """Raised while a rank's latest spike is within a window of steps of its last step."""
        on = [track for track in self._tracks.values()
              if track.last_spike_step is not None
              and track.last_step - track.last_spike_step < self.window]
        if not on:
            return None
        recent = sorted((s for track in on for s in track.spikes[-_SHOWN:]),
                        key=lambda s: (s.attempt, s.step))[-_SHOWN:]
        ranks = sorted({s.rank for s in recent})
        # The ranks only: a title that changed at each spike would be a new start each time.
        title = (f"loss spike on rank{'s' if len(ranks) > 1 else ''} "
                 f"{', '.join(map(str, ranks))}: above {self.spike_factor:g}x the recent median")
        evidence = tuple(
            f"rank {s.rank}: loss {s.loss:.6g} at step {s.step} = {s.loss / s.median:.1f}x "
            f"the median {s.median:.6g} of its last {s.history} losses ({_source(s.src)})"
            for s in recent)
        return Raised("warning", title, evidence,
                      "a spike that passes is often a bad batch; spikes that grow come before "
                      "a divergence: lower the learning rate or clip gradients")

    # -- reading the session ---------------------------------------------------------------
    def read(self) -> None:
        """Take the steps recorded since the last call: events.jsonl's and the probe.step()
        files'."""
        probe, _auto = self._probe_folder.both()  # (the automatic probe records no loss)
        for path in [self.session_dir / layout.EVENTS, *probe.values()]:
            offset = self._offsets.get(path, 0)
            try:
                block, complete = self._files.read_new_block(path, offset, _MAX_READ)
            except OSError:
                continue
            self._offsets[path] = offset + complete
            if complete:
                self.take_block(block[:complete])

    def skip_history(self) -> None:
        """Read on from the files' current ends (an adopting supervisor: what came before it
        was judged by the one before)."""
        probe, _auto = self._probe_folder.both()
        for path in [self.session_dir / layout.EVENTS, *probe.values()]:
            with contextlib.suppress(OSError):
                self._offsets[path] = path.stat().st_size

    def take_block(self, block: bytes) -> None:
        """The step records with a loss among `block`'s whole lines."""
        if b'"loss"' not in block:
            return
        # The kind and the loss's value are looked at once decoded: one test a line here.
        lines = [raw for raw in block.split(b"\n") if b'"loss"' in raw]
        if not lines:
            return
        try:
            records = _DECODE.decode_lines(b"\n".join(lines))
        except msgspec.DecodeError:  # one bad line: the others one at a time
            records = []
            for raw in lines:
                with contextlib.suppress(msgspec.DecodeError):
                    records.append(_DECODE.decode(raw))
        for record in records:
            if record.kind != "step" or record.step is None:
                continue
            value = (record.nonfinite or {}).get("loss")
            if value is None and record.loss is None:
                continue
            self.add(record.rank or 0, record.step, record.loss, record.src or "log",
                     record.attempt, value if value in ("nan", "inf", "-inf") else None)

    def close(self) -> None:
        self._files.close()


def _source(src: str) -> str:
    return {"log": "a log line", "probe": "probe.step()"}.get(src, src)
