"""The supervisor's watch on host memory creeping up in the ranks: the `memory-creep` alert,
recorded in the session (alerting.AlertRecorder) like the stall watch's.

Fed the rank processes' resident memory (`procs` rows, each second) and the host's memory
(the `host` record's `mem_used`, `mem_total`: psutil.virtual_memory()'s), it judges each rank
over the steady steps (its samples are kept from when the job's ranks stepped past warm-up,
defaults.DEFAULT_WARMUP_STEPS: imports, building the model and compiling grow memory that
levels off), over their last DEFAULT_CREEP_WINDOW_S seconds (`run --memory-creep-window`):
creeping when the Theil-Sen slope (the median of the slopes between pairs of samples: a
garbage collection's drop or a one-off allocation moves it little) is at least
DEFAULT_CREEP_MIN_MB_PER_MIN both over the window and over its last half (growth that levels
off stops counting within half a window), the growth over the window (the median of its last
5 samples less that of its first 5) is at least DEFAULT_CREEP_MIN_GROWTH_MB, and the growth is
steady (Kendall's tau of time and memory at least DEFAULT_CREEP_MIN_TAU). The alert gives the
rate and the time left before the host's free memory is used up at the creeping ranks' rates
together.

Device memory where the telemetry gives it, by the same rule: `device-memory-creep`, each
NeuronCore's memory (neuron-monitor's `neuron` records: `cores` [{`core`, `pid`,
`mem_device`}], the pid naming its rank) and each GPU's (nvidia-smi's `gpu` records: `gpus`
[{`index`, `mem_used`, `mem_total`}], with the time left before that GPU is full), read on
from events.jsonl as the collectors recorded them.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from neurotui.defaults import (
    DEFAULT_CREEP_MIN_GROWTH_MB,
    DEFAULT_CREEP_MIN_MB_PER_MIN,
    DEFAULT_CREEP_MIN_TAU,
    DEFAULT_CREEP_WINDOW_S,
)
from neurotui.session import layout
from neurotui.session.tailing import KeptFiles
from neurotui.supervisor.alerting import Raised

CREEP = "memory-creep"
DEVICE_CREEP = "device-memory-creep"
_MB = 1 << 20  # the figures are MiB, as the rest of the alerts' (alerting._mib)
_POINTS = 40
"""Samples a judgement looks at, evenly spread over the window (all pairs: 780 slopes)."""
JUDGE_S = 5.0
"""How often the ranks are judged again (their samples are kept each second)."""
_MAX_READ = 4 << 20  # of events.jsonl in one call (a backlog is read over several seconds)
_ENDS = 5  # samples at each end of the window whose medians give its growth
_COVERED = 0.9  # a rank is judged once its samples span this much of the window


@dataclass(frozen=True)
class Creep:
    pid: int
    rank: int | None
    rss: float  # bytes, the latest sample
    mb_per_min: float  # over the window
    recent_mb_per_min: float  # over its last half
    growth_mb: float
    tau: float
    window_s: float


def theil_sen(points: list[tuple[float, float]]) -> float:
    """The median of the slopes between every pair of points with different x."""
    slopes = sorted((y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points)
                    for x2, y2 in points[i + 1:] if x2 != x1)
    if not slopes:
        return 0.0
    middle = len(slopes) // 2
    return slopes[middle] if len(slopes) % 2 else (slopes[middle - 1] + slopes[middle]) / 2


def kendall_tau(points: list[tuple[float, float]]) -> float:
    """(concordant - discordant pairs) / all pairs: 1 for a series that only grows."""
    pairs = concordance = 0
    for i, (x1, y1) in enumerate(points):
        for x2, y2 in points[i + 1:]:
            pairs += 1
            product = (x2 - x1) * (y2 - y1)
            concordance += (product > 0) - (product < 0)
    return concordance / pairs if pairs else 0.0


def spread(samples: list[tuple[float, float]], count: int = _POINTS) -> list[tuple[float, float]]:
    """At most `count` of `samples`, evenly spread, the first and last kept."""
    if len(samples) <= count:
        return samples
    last = len(samples) - 1
    return [samples[round(i * last / (count - 1))] for i in range(count)]


def _median_of(samples: list[tuple[float, float]]) -> float:
    values = sorted(value for _, value in samples)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def judge(samples: list[tuple[float, float]], window_s: float,
          min_mb_per_min: float = DEFAULT_CREEP_MIN_MB_PER_MIN,
          min_growth_mb: float = DEFAULT_CREEP_MIN_GROWTH_MB,
          min_tau: float = DEFAULT_CREEP_MIN_TAU) -> tuple[float, float, float, float] | None:
    """(MiB/min over the window, over its last half, MiB grown, tau) where the (t, bytes)
    `samples` of the last `window_s` seconds creep, else None."""
    if len(samples) < 8 or samples[-1][0] - samples[0][0] < _COVERED * window_s:
        return None
    # The growth first (the median of the last samples less that of the first): a healthy
    # rank is let go without the slopes' sorts (32 ranks, every few seconds).
    growth = (_median_of(samples[-_ENDS:]) - _median_of(samples[:_ENDS])) / _MB
    if growth < min_growth_mb:
        return None
    points = spread(samples)
    rate = theil_sen(points) * 60 / _MB
    if rate < min_mb_per_min:
        return None
    half = samples[-1][0] - window_s / 2
    recent = theil_sen(spread([s for s in samples if s[0] >= half])) * 60 / _MB
    if recent < min_mb_per_min:
        return None
    tau = kendall_tau(points)
    return (rate, recent, growth, tau) if tau >= min_tau else None


class MemoryCreepWatch:
    def __init__(self, window_s: float | None = None, *,
                 min_mb_per_min: float = DEFAULT_CREEP_MIN_MB_PER_MIN,
                 min_growth_mb: float = DEFAULT_CREEP_MIN_GROWTH_MB,
                 min_tau: float = DEFAULT_CREEP_MIN_TAU) -> None:
        self.window_s = float(window_s or DEFAULT_CREEP_WINDOW_S)
        self.min_mb_per_min = min_mb_per_min
        self.min_growth_mb = min_growth_mb
        self.min_tau = min_tau
        self._samples: dict[int, deque[tuple[float, float]]] = {}
        self._ranks: dict[int, int | None] = {}  # pid -> RANK from its environment
        self._free: float | None = None  # the host's bytes not used, latest
        self._judged_at = float("-inf")
        self.creeping: dict[int, Creep] = {}
        # Device memory: "NeuronCore 3" / "GPU 0" -> its samples, its latest free bytes
        # (None: not known), the pid using it (a NeuronCore's runtime), as the rule's.
        self._device: dict[str, deque[tuple[float, float]]] = {}
        self._device_free: dict[str, float | None] = {}
        self._device_pid: dict[str, int | None] = {}
        self.device_creeping: dict[str, Creep] = {}
        self._events_read = 0  # bytes of events.jsonl read so far
        self._files = KeptFiles()

    def add(self, now: float, procs: Iterable[Mapping[str, Any]],
            host: Mapping[str, Any] | None = None, *, steady: bool = True) -> None:
        """One round of telemetry: the `procs` rows (the ranks' are kept) and the `host`
        record. A rank gone (exited, restarted) is forgotten. `steady`: the job's ranks
        have stepped past warm-up; until then (imports, the model built, graphs compiled:
        memory grows and levels off) no sample is kept."""
        seen = set()
        for row in procs if steady else ():
            pid, rss = row.get("pid"), row.get("rss")
            if row.get("role") != "rank" or not isinstance(pid, int) or \
                    not isinstance(rss, (int, float)):
                continue
            seen.add(pid)
            kept = self._samples.get(pid)
            if kept is None:
                kept = self._samples[pid] = deque()
                self._ranks[pid] = _rank_of(pid)
            kept.append((now, float(rss)))
            while kept and kept[0][0] < now - self.window_s:
                kept.popleft()
        for pid in [pid for pid in self._samples if pid not in seen]:
            del self._samples[pid]
            self._ranks.pop(pid, None)
            self.creeping.pop(pid, None)
        if host:
            used, total = host.get("mem_used"), host.get("mem_total")
            if isinstance(used, (int, float)) and isinstance(total, (int, float)):
                self._free = max(0.0, float(total) - float(used))

    def read_devices(self, session_dir: Path, *, steady: bool = True) -> None:
        """The `neuron` and `gpu` records events.jsonl got since the last call (kept only
        once `steady`, as `add`'s)."""
        path = session_dir / layout.EVENTS
        try:
            block, complete = self._files.read_new_block(path, self._events_read, _MAX_READ)
        except OSError:
            return
        self._events_read += complete
        if not steady:
            self._device.clear()
            return
        if b'"kind": "neuron"' not in block and b'"kind": "gpu"' not in block:
            return  # (no accelerator telemetry: most seconds of a CPU job's)
        for raw in block[:complete].split(b"\n"):
            if b'"kind": "neuron"' in raw or b'"kind": "gpu"' in raw:
                with contextlib.suppress(ValueError):
                    record = json.loads(raw)
                    if isinstance(record, dict) and isinstance(record.get("t"), (int, float)):
                        self._add_device_record(record)

    def skip_history(self, session_dir: Path) -> None:
        """Read events.jsonl on from its current end (an adopting supervisor)."""
        with contextlib.suppress(OSError):
            self._events_read = (session_dir / layout.EVENTS).stat().st_size

    def _add_device_record(self, record: dict[str, Any]) -> None:
        now = float(record["t"])
        if record.get("kind") == "neuron":
            for core in record.get("cores") or ():
                if isinstance(core, dict) and isinstance(core.get("core"), int):
                    pid = core.get("pid")
                    self._add_device(now, f"NeuronCore {core['core']}", core.get("mem_device"),
                                     None, pid if isinstance(pid, int) else None)
        elif record.get("kind") == "gpu":
            for gpu in record.get("gpus") or ():
                if isinstance(gpu, dict) and isinstance(gpu.get("index"), int):
                    used, total = gpu.get("mem_used"), gpu.get("mem_total")
                    free = (float(total) - float(used)
                            if isinstance(total, (int, float)) and isinstance(used, (int, float))
                            else None)
                    self._add_device(now, f"GPU {gpu['index']}", used, free, None)

    def _add_device(self, now: float, name: str, used: object, free: float | None,
                    pid: int | None) -> None:
        if not isinstance(used, (int, float)) or isinstance(used, bool):
            return  # (missing is missing: never a zero)
        if pid is not None and pid != self._device_pid.get(name):
            self._device.pop(name, None)  # another runtime on the core: a new series
            if pid not in self._ranks:
                self._ranks[pid] = _rank_of(pid)
        self._device_pid[name] = pid
        kept = self._device.setdefault(name, deque())
        kept.append((now, float(used)))
        while kept and kept[0][0] < now - self.window_s:
            kept.popleft()
        self._device_free[name] = free

    def device_alert(self, now: float) -> Raised | None:
        """`device-memory-creep` as it stands (judged with the host's, every JUDGE_S)."""
        self._judge_if_due(now)
        if not self.device_creeping:
            return None
        names = sorted(self.device_creeping, key=_device_order)
        title = f"device memory creeping up on {', '.join(names)}"
        evidence = []
        for name in names[:8]:
            creep = self.device_creeping[name]
            pid = self._device_pid.get(name)
            rank = self._ranks.get(pid) if pid is not None else None
            free = self._device_free.get(name)
            evidence.append(
                f"{name}" + (f" (rank {rank}, pid {pid})" if rank is not None else
                             f" (pid {pid})" if pid is not None else "")
                + f": {creep.rss / _MB:,.0f} MiB in use, growing {creep.mb_per_min:,.1f} "
                f"MiB/min over the last {_minutes(creep.window_s / 60)} "
                f"({creep.recent_mb_per_min:,.1f} in its last half; +{creep.growth_mb:,.0f} MiB; "
                f"steadiness tau {creep.tau:.2f})"
                + (f"; its {free / _MB:,.0f} MiB free would be used up in "
                   f"{_minutes(free / _MB / creep.mb_per_min)}" if free is not None else ""))
        return Raised("warning", title, tuple(evidence),
                      "tensors kept across steps on the device (a loss or output list that "
                      "grows), a cache that grows with each new shape; on Neuron, graphs "
                      "compiled anew (see the recompile alert)")

    def close(self) -> None:
        self._files.close()

    def _judge_if_due(self, now: float) -> None:
        if now - self._judged_at >= JUDGE_S:
            self._judged_at = now
            self._judge()

    def alert(self, now: float) -> Raised | None:
        self._judge_if_due(now)
        if not self.creeping:
            return None
        creeps = sorted(self.creeping.values(), key=lambda c: -c.mb_per_min)
        ranks = sorted(c.rank for c in creeps if c.rank is not None)
        who = [f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"] if ranks \
            else []
        who += [f"pid {c.pid}" for c in sorted(creeps, key=lambda c: c.pid) if c.rank is None]
        # The ranks only in the title: figures that moved would write a new start each time.
        title = f"host memory creeping up on {', '.join(who)}"
        evidence = [f"{_who(c)}: resident {c.rss / _MB:,.0f} MiB, growing "
                    f"{c.mb_per_min:,.1f} MiB/min over the last {_minutes(c.window_s / 60)} "
                    f"({c.recent_mb_per_min:,.1f} in its last half; +{c.growth_mb:,.0f} MiB; "
                    f"steadiness tau {c.tau:.2f})" for c in creeps[:8]]
        total_rate = sum(c.mb_per_min for c in creeps)
        if self._free is not None:
            minutes = self._free / _MB / total_rate
            evidence.append(f"the host's {self._free / _MB:,.0f} MiB free would be used up in "
                            f"{_minutes(minutes)} at {total_rate:,.1f} MiB/min")
        return Raised("warning", title, tuple(evidence),
                      "a leak in the training loop: tensors kept across steps (a loss summed "
                      "without .item() or .detach()), a growing list or cache, DataLoader "
                      "workers copying a Python list on access")

    def _judge(self) -> None:
        creeping = {}
        for pid, kept in self._samples.items():
            found = judge(list(kept), self.window_s, self.min_mb_per_min, self.min_growth_mb,
                          self.min_tau)
            if found is not None:
                rate, recent, growth, tau = found
                creeping[pid] = Creep(pid, self._ranks.get(pid), kept[-1][1], rate, recent,
                                      growth, tau, self.window_s)
        self.creeping = creeping
        device = {}
        for name, kept in self._device.items():
            found = judge(list(kept), self.window_s, self.min_mb_per_min, self.min_growth_mb,
                          self.min_tau)
            if found is not None:
                rate, recent, growth, tau = found
                pid = self._device_pid.get(name)
                device[name] = Creep(pid or 0, self._ranks.get(pid) if pid else None,
                                     kept[-1][1], rate, recent, growth, tau, self.window_s)
        self.device_creeping = device


def _rank_of(pid: int) -> int | None:
    """The rank torchrun gave the process (RANK in its environment); None where unreadable."""
    with contextlib.suppress(psutil.Error, ValueError, OSError):
        rank = psutil.Process(pid).environ().get("RANK")
        return int(rank) if rank is not None else None
    return None


def _device_order(name: str) -> tuple[str, int]:
    kind, _, number = name.rpartition(" ")
    return kind, int(number) if number.isdigit() else -1


def _who(creep: Creep) -> str:
    return (f"rank {creep.rank} (pid {creep.pid})" if creep.rank is not None
            else f"pid {creep.pid}")


def _minutes(minutes: float) -> str:
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 120:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.1f} h" if minutes < 48 * 60 else f"{minutes / 1440:.1f} days"
