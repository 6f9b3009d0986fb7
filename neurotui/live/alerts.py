"""Alert rules: pure functions from recorded data to alerts that carry their evidence.

No UI and no clock here (the caller passes `now`), so the rules are unit-tested on their own
and could serve `--headless` or a report too. An alert is only raised on data that shows the
problem; each states the numbers it was raised on, so a user can check it against the panels.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neurotui import fmt, metrics
from neurotui import recorded as recorded_alerts
from neurotui.metrics.breakdown import PhaseSplit
from neurotui.metrics.common import floats, stacked_by_length

SATURATED_CPU = 90.0
IDLE_ACCELERATOR = 40.0
WINDOW_S = 30.0
SPIKE_FACTOR = 5.0
VARIANCE_MIN_STEPS = 20
VARIANCE_P90_RATIO = 1.5
VARIANCE_CV = 0.3
_BUSY_PHASES = ("compiling", "starting")


@dataclass(frozen=True)
class Alert:
    key: str
    severity: str  # "error", "warning" or "info"
    title: str
    evidence: tuple[str, ...]
    advice: str | None = None


def _recent(events: Iterable[Mapping[str, Any]], now: float, window_s: float) -> list[Any]:
    return [e for e in events if now - window_s < float(e.get("t", -math.inf)) <= now]


def accelerator_utils(event: Mapping[str, Any]) -> list[float]:
    """Utilisation percentages of one `neuron` or `gpu` event (unknown ones left out)."""
    units = event.get("cores") if event.get("kind") == "neuron" else event.get("gpus")
    out = []
    for unit in units or ():
        # (dict first: the events are JSON's dicts, and an ABC's check costs ten times more)
        value = unit.get("util") if isinstance(unit, (dict, Mapping)) else None
        if isinstance(value, (int, float)) and math.isfinite(value):
            out.append(float(value))
    return out


def mean_util(event: Mapping[str, Any]) -> float:
    """Mean utilisation of one `neuron` or `gpu` event's cores or GPUs; NaN: none known."""
    utils = accelerator_utils(event)
    return float(np.mean(utils)) if utils else math.nan


def mean_cpu(event: Mapping[str, Any]) -> float:
    """Mean CPU use of one `host` event; NaN: none in it."""
    cpu = event.get("cpu")
    return float(np.mean(cpu)) if cpu else math.nan


def accelerator_kind(events: Mapping[str, Sequence[Mapping[str, Any]]]) -> str | None:
    """"neuron" or "gpu": the accelerator telemetry sampled last; None: none recorded."""
    latest = [(e[-1]["t"], kind) for kind in ("neuron", "gpu") if (e := events.get(kind))]
    return max(latest)[1] if latest else None


def cpu_bound_input(host: Sequence[Mapping[str, Any]], accelerator: Sequence[Mapping[str, Any]],
                    procs: Mapping[str, Any] | None, now: float, phase: str,
                    window_s: float = WINDOW_S) -> Alert | None:
    """Host CPUs saturated while the accelerator idles: the input pipeline starves it.

    Not judged without accelerator telemetry (a CPU-only run is meant to be CPU-bound), nor
    while compiling (the compiler pins CPUs and the accelerator waits, as it should).
    """
    if phase in _BUSY_PHASES or phase not in ("warm-up", "steady"):
        return None
    hosts = [h for h in _recent(host, now, window_s) if isinstance(h.get("cpu"), list)]
    accels = [u for e in _recent(accelerator, now, window_s) if (u := accelerator_utils(e))]
    if len(hosts) < 2 or len(accels) < 2:
        return None
    if procs and any(p.get("role") == "compiler" for p in procs.get("procs") or ()):
        return None
    width = min(len(h["cpu"]) for h in hosts)
    if not width:
        return None
    per_cpu = np.array([h["cpu"][:width] for h in hosts], dtype=float).mean(axis=0)
    accel_mean = float(np.mean([np.mean(u) for u in accels]))
    saturated = np.flatnonzero(per_cpu >= SATURATED_CPU)
    if not len(saturated) or accel_mean >= IDLE_ACCELERATOR:
        return None
    busiest = sorted(saturated, key=lambda i: -per_cpu[i])[:4]
    shown = ", ".join(f"cpu{i} {per_cpu[i]:.0f}%" for i in busiest)
    more = f", +{len(saturated) - len(busiest)} more" if len(saturated) > len(busiest) else ""
    what = "NeuronCore" if accelerator[-1].get("kind") == "neuron" else "GPU"
    evidence = [
        f"host: {len(saturated)} of {width} CPUs >= {SATURATED_CPU:.0f}% over the last "
        f"{fmt.short_duration(window_s)} ({shown}{more}); all CPUs average "
        f"{per_cpu.mean():.0f}%",
        f"{what} utilisation averages {accel_mean:.0f}% over the same window",
    ]
    workers = [p for p in (procs or {}).get("procs") or () if p.get("role") == "worker"]
    if workers:
        total = sum(float(p.get("cpu") or 0.0) for p in workers)
        evidence.append(f"{len(workers)} DataLoader worker process(es) use {total:.0f}% CPU")
    if len(saturated) >= 0.75 * width:
        advice = ("all cores are busy: try fewer DataLoader workers (num_workers), or lighter "
                  "decoding/augmentation")
    else:
        advice = ("only a few cores are busy: the input pipeline is serialised; try more "
                  "DataLoader workers (num_workers) or move preprocessing out of the main process")
    return Alert("cpu-bound-input", "warning", "CPU-bound input: accelerator waits for data",
                 tuple(evidence), advice)


WORKER_BUSY = 80.0
"""% of one CPU at which a DataLoader worker (or a rank loading its own batches) counts as
busy all the time: a worker that always has work computes all the time it is given, and a
host's other load keeps that a little short of 100%."""
DATA_WAIT_SHARE = 0.5
"""Share of each step the ranks wait for the DataLoader (the step breakdown's `data`) from
which they count as starved: they wait longer than they compute."""
ROOMY_CPU = 50.0
"""A host CPU under this (mean over the window) has room for another DataLoader worker."""
FAR_SHARE = 0.5
"""A process counts as on the far NUMA node when at least this share of its samples in the
window found it on a CPU outside its device's affinity."""
_RUNNING_PHASES = ("starting", "compiling", "warm-up", "steady")


@dataclass
class _ProcSeen:
    """One process over the window's `procs` samples."""

    pid: int
    ppid: int | None
    role: str
    cpu: list[float]
    cpu_nums: list[int]

    def median_cpu(self) -> float | None:
        # (statistics.median: np.median's value, without numpy's call overhead; each worker
        # of a job is judged every few seconds.)
        return float(statistics.median(self.cpu)) if self.cpu else None


def _procs_seen(procs: Sequence[Mapping[str, Any]], now: float,
                window_s: float) -> dict[int, _ProcSeen]:
    seen: dict[int, _ProcSeen] = {}
    for event in _recent(procs, now, window_s):
        for p in event.get("procs") or ():
            pid = p.get("pid")
            if not isinstance(pid, int):
                continue
            row = seen.get(pid)
            if row is None:  # (its first sample names its parent and role)
                ppid = p.get("ppid")
                row = seen[pid] = _ProcSeen(pid, ppid if isinstance(ppid, int) else None,
                                            str(p.get("role") or "?"), [], [])
            cpu = p.get("cpu")
            # (A JSON float is checked inline, finite when cpu - cpu is 0: a judge reads
            # each process of each sample in the window, thousands at 32 ranks.)
            if (type(cpu) is float and cpu - cpu == 0.0) or \
                    (cpu := metrics.finite_or_none(cpu)) is not None:
                row.cpu.append(cpu)
            cpu_num = p.get("cpu_num")
            if isinstance(cpu_num, int) and cpu_num >= 0:  # absent or -1: not known
                row.cpu_nums.append(cpu_num)
    return seen


def _rank_of(proc: _ProcSeen, seen: Mapping[int, _ProcSeen]) -> _ProcSeen | None:
    """The rank a process belongs to: itself, or the nearest rank among its ancestors."""
    hops = 0
    while proc is not None and hops < 16:
        if proc.role == "rank":
            return proc
        proc = seen.get(proc.ppid) if proc.ppid is not None else None  # type: ignore[assignment]
        hops += 1
    return None


def cpu_ranges(cpus: Iterable[int]) -> str:
    """CPU ids as a cpulist, the way neuron-ls and taskset write them: 48-95,144-191."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    start = prev = None
    for cpu in ids:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = cpu
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _host_room(host: Sequence[Mapping[str, Any]], now: float,
               window_s: float) -> tuple[int, int] | None:
    """(CPUs with room for another worker, CPUs) over the window's host samples."""
    hosts = [h["cpu"] for h in _recent(host, now, window_s) if isinstance(h.get("cpu"), list)]
    width = min((len(c) for c in hosts), default=0)
    if not width:
        return None
    per_cpu = np.array([c[:width] for c in hosts], dtype=float).mean(axis=0)
    return int((per_cpu < ROOMY_CPU).sum()), width


def input_starvation(procs: Sequence[Mapping[str, Any]], host: Sequence[Mapping[str, Any]],
                     accelerator: Sequence[Mapping[str, Any]], data_wait: PhaseSplit | None,
                     now: float, phase: str, window_s: float = WINDOW_S) -> Alert | None:
    """DataLoader workers busy all the time while the ranks (or their cores) wait for data.

    Loaders: the `procs` samples' DataLoader workers (role `worker`) at WORKER_BUSY % of a CPU
    or more (median over the window), at least half of them; with no worker process, the
    ranks themselves at that level (they load their own batches), which is only told apart
    from computing by the data wait. Waiting: the step breakdown's `data` share (the automatic
    probe's DataLoader wait, or the script's own data phase) at DATA_WAIT_SHARE or more; where
    no data phase is recorded, accelerator utilisation under IDLE_ACCELERATOR %. Never judged
    while a compiler runs or outside warm-up and steady state.
    """
    if phase not in ("warm-up", "steady"):
        return None
    seen = _procs_seen(procs, now, window_s)
    if any(p.role == "compiler" for p in seen.values()):
        return None
    sampled = [p for p in seen.values() if len(p.cpu) >= 2]
    workers = [p for p in sampled if p.role == "worker"]
    ranks = [p for p in sampled if p.role == "rank"]
    share = data_wait.share("data") if data_wait is not None else None
    utils = [u for e in _recent(accelerator, now, window_s) if (u := accelerator_utils(e))]
    accel_mean = float(np.mean([np.mean(u) for u in utils])) if len(utils) >= 2 else None
    if workers:
        loaders = [w for w in workers if (w.median_cpu() or 0.0) >= WORKER_BUSY]
        if 2 * len(loaders) < len(workers) or not loaders:
            return None
    else:
        loaders = [r for r in ranks if (r.median_cpu() or 0.0) >= WORKER_BUSY]
        if not loaders or share is None:
            return None
    if share is not None:
        if share < DATA_WAIT_SHARE:
            return None
    elif accel_mean is None or accel_mean >= IDLE_ACCELERATOR:
        return None
    what = "NeuronCore" if accelerator and accelerator[-1].get("kind") == "neuron" else "GPU"
    shown = ", ".join(f"pid {p.pid} {p.median_cpu():.0f}%"
                      + (f" on cpu{p.cpu_nums[-1]}" if p.cpu_nums else "")
                      for p in sorted(loaders, key=lambda p: -(p.median_cpu() or 0.0))[:4])
    more = f", +{len(loaders) - 4} more" if len(loaders) > 4 else ""
    span = fmt.short_duration(window_s)
    if workers:
        evidence = [f"DataLoader workers busy: {len(loaders)} of {len(workers)} at "
                    f">= {WORKER_BUSY:.0f}% of a CPU (median over the last {span}: "
                    f"{shown}{more})"]
    else:
        evidence = [f"no DataLoader worker process: the ranks load their own batches, "
                    f"{len(loaders)} of {len(ranks)} at >= {WORKER_BUSY:.0f}% of a CPU "
                    f"(median over the last {span}: {shown}{more})"]
    if share is not None and data_wait is not None:
        data_s = data_wait.median_s[data_wait.names.index("data")]
        evidence.append(f"the ranks wait for the DataLoader {share:.0%} of each step (data "
                        f"{fmt.seconds(data_s)} of a {fmt.seconds(data_wait.step_s)} step, "
                        f"medians of the last {data_wait.steps} steps past warm-up)")
    if accel_mean is not None:
        evidence.append(f"{what} utilisation averages {accel_mean:.0f}% over the last {span}")
    room = _host_room(host, now, window_s)
    if room is not None:
        evidence.append(f"host: {room[0]} of {room[1]} CPUs under {ROOMY_CPU:.0f}% over the "
                        f"last {span}")
    if not workers:
        advice = ("give the DataLoader worker processes (DataLoader(num_workers=N); now 0), "
                  "so batches are made beside the step instead of in it")
    elif room is not None and room[0] == 0:
        advice = ("every host CPU is busy, so more workers will not help: make each sample "
                  "cheaper (decode once and cache, lighter augmentation) or use more vCPUs")
    else:
        per_rank = _workers_per_rank(workers, seen)
        now_n = f"now {per_rank} per rank" if per_rank else "now as many as shown"
        spare = f"; {room[0]} of {room[1]} host CPUs have room" if room is not None else ""
        advice = (f"raise DataLoader(num_workers=N) ({now_n}{spare}), or make each sample "
                  "cheaper (decode once and cache, lighter augmentation)")
    return Alert("input-starved", "warning",
                 "input starvation: DataLoader workers saturated while the ranks wait",
                 tuple(evidence), advice)


def _workers_per_rank(workers: Sequence[_ProcSeen], seen: Mapping[int, _ProcSeen]) -> int | None:
    """Workers per rank when every rank has the same number; None otherwise."""
    counts: dict[int, int] = {}
    for w in workers:
        rank = _rank_of(w, seen)
        if rank is None:
            return None
        counts[rank.pid] = counts.get(rank.pid, 0) + 1
    values = set(counts.values())
    return values.pop() if len(values) == 1 else None


def numa_placement(procs: Sequence[Mapping[str, Any]], devices: Mapping[str, Any] | None,
                   now: float, phase: str, window_s: float = WINDOW_S) -> Alert | None:
    """Ranks or DataLoader workers running outside their Neuron device's CPU affinity (the far
    NUMA node): every batch then crosses the socket link, and memory is allocated far away.

    A rank's device is the device whose neuron-ls processes list the rank's pid; a worker's
    is its rank's. A process no device names is held against every device's CPUs together
    (with devices on both nodes, that is all of them: no alert). `cpu_num` is the CPU a
    process last ran on: it counts as far when at least FAR_SHARE of its samples (two at
    least) in the window were outside.
    """
    if phase not in _RUNNING_PHASES or not devices:
        return None
    known = [d for d in devices.get("devices") or ()
             if isinstance(d, Mapping) and d.get("affinity_cpus")]
    if not known:
        return None
    every = frozenset(c for d in known for c in d["affinity_cpus"])
    owned: dict[int, list[Mapping[str, Any]]] = {}
    for d in known:
        for p in d.get("processes") or ():
            if isinstance(p, Mapping) and isinstance(p.get("pid"), int):
                owned.setdefault(p["pid"], []).append(d)
    seen = _procs_seen(procs, now, window_s)
    evidence: list[str] = []
    nodes: set[int | None] = set()
    allowed_all: set[int] = set()
    for proc in sorted(seen.values(), key=lambda p: (p.role != "rank", p.pid)):
        if proc.role not in ("rank", "worker") or len(proc.cpu_nums) < 2:
            continue
        rank = _rank_of(proc, seen)
        mine = owned.get(rank.pid, []) if rank is not None else []
        allowed = frozenset(c for d in mine for c in d["affinity_cpus"]) if mine else every
        far = [c for c in proc.cpu_nums if c not in allowed]
        if len(far) < FAR_SHARE * len(proc.cpu_nums):
            continue
        if mine:
            where = "device" + ("s " if len(mine) > 1 else " ") + ", ".join(
                f"{d.get('index')}" for d in mine)
            node_set = {d.get("numa_node") for d in mine}
        else:
            where = "no device lists its pid, so all devices"
            node_set = {d.get("numa_node") for d in known}
        nodes |= node_set
        named = ", ".join(f"node {n}" for n in sorted(x for x in node_set if x is not None))
        whose = f"rank pid {proc.pid}" if proc.role == "rank" else (
            f"DataLoader worker pid {proc.pid} (of rank pid {rank.pid})" if rank is not None
            else f"DataLoader worker pid {proc.pid}")
        evidence.append(f"{whose} ran on CPU "
                         f"{cpu_ranges(far)} in {len(far)} of {len(proc.cpu_nums)} samples; "
                         f"{where}: NUMA {named or 'node not shown'}, CPUs "
                         f"{cpu_ranges(allowed)}")
        allowed_all |= allowed
    if not evidence:
        return None
    lines = evidence[:6]
    if len(evidence) > 6:
        lines.append(f"+{len(evidence) - 6} more process(es) alike")
    lines.append(f"from the last neuron-ls snapshot and the process samples of the last "
                 f"{fmt.short_duration(window_s)}")
    known_nodes = {n for n in nodes if n is not None}
    if len(nodes) == 1 and len(known_nodes) == 1:
        node = known_nodes.pop()
        advice = (f"bind the job to the devices' NUMA node: start it as `numactl "
                  f"--cpunodebind={node} --membind={node} torchrun ...` (ranks and their "
                  f"DataLoader workers inherit the binding)")
    elif len(nodes) == 1:
        advice = (f"bind the job to the devices' CPUs: start it as `taskset -c "
                  f"{cpu_ranges(allowed_all)} torchrun ...`")
    else:
        advice = ("bind each rank to its own device's CPUs: os.sched_setaffinity(0, cpus) "
                  "at the rank's start, before the DataLoader starts its workers (they "
                  "inherit it); the CPUs are in neuron-ls's CPU AFFINITY column")
    return Alert("numa", "warning", "ranks or DataLoader workers run on the far NUMA node",
                 tuple(lines), advice)


def execution_errors(neuron: Sequence[Mapping[str, Any]], now: float,
                     window_s: float = WINDOW_S) -> Alert | None:
    """Neuron executions that ended in error within the window, by type.

    The `neuron` event's `exec_errors_by_type` and `exec_errors` count the errors of its
    period (neuron-monitor's report period; a /metrics source records the counters' growth
    since the scrape before), so the window's count is their sum; a count of 0 or None (a
    first scrape) is no error."""
    by_type: dict[str, int] = {}
    untyped = 0
    runtimes: dict[str, int] = {}
    samples = 0
    for event in _recent(neuron, now, window_s):
        typed = event.get("exec_errors_by_type")
        typed_sum = 0
        if isinstance(typed, Mapping):
            for kind, n in typed.items():
                if isinstance(n, (int, float)) and n > 0:
                    by_type[str(kind)] = by_type.get(str(kind), 0) + int(n)
                    typed_sum += int(n)
        total = event.get("exec_errors")
        if isinstance(total, (int, float)) and total > typed_sum:
            untyped += int(total) - typed_sum  # a total beyond what the types account for
        for rt in event.get("exec_runtimes") or ():
            counts = rt.get("exec_errors_by_type") if isinstance(rt, Mapping) else None
            if isinstance(counts, Mapping):
                n = sum(int(v) for v in counts.values()
                        if isinstance(v, (int, float)) and v > 0)
                if n:
                    name = f"pid {rt.get('pid')}" if rt.get("pid") is not None \
                        else str(rt.get("tag") or "?")
                    runtimes[name] = runtimes.get(name, 0) + n
        samples += 1
    total = sum(by_type.values()) + untyped
    if not total:
        return None
    kinds = sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0]))
    named = ", ".join(f"{n} {kind}" for kind, n in kinds)
    if untyped:
        named = f"{named}, {untyped} of no type" if named else f"{untyped} of no type"
    span = fmt.short_duration(window_s)
    evidence = [f"{total} execution error(s) in the last {span} ({named}), over {samples} "
                f"Neuron telemetry sample(s)"]
    if runtimes:
        evidence.append("by runtime: " + ", ".join(
            f"{name} {n}" for name, n in sorted(runtimes.items(), key=lambda kv: -kv[1])[:4]))
    types = ", ".join(kind for kind, _ in kinds) or "untyped"
    advice_parts = []
    if "numerical" in by_type:
        advice_parts.append("numerical: NaN or Inf in the graph (lower the learning rate, "
                            "check the loss scale and the inputs)")
    if "hardware" in by_type:
        advice_parts.append("hardware: see the ECC counters; a device that keeps failing "
                            "needs the instance moved (stop and start it)")
    advice_parts.append("the rank logs hold the Neuron runtime's messages for each failed "
                        "execution")
    return Alert("exec-errors", "error", f"Neuron execution errors: {types}", tuple(evidence),
                 "; ".join(advice_parts))


_ECC_KINDS = (("mem", "device memory (HBM)"), ("sram", "on-chip SRAM"))


def ecc_errors(neuron: Sequence[Mapping[str, Any]], now: float,
               window_s: float = WINDOW_S) -> Alert | None:
    """ECC events within the window: uncorrected ones are an error (the data was wrong),
    corrected ones that keep coming a warning. Counts are per period, like the execution
    errors (see execution_errors), summed per device over the window; 0 or None: none."""
    per_device: dict[Any, dict[str, int]] = {}
    for event in _recent(neuron, now, window_s):
        devices = event.get("ecc_devices")
        if not isinstance(devices, list) or not devices:
            whole = event.get("ecc")  # a summary without the per-device split
            devices = [{"device": None, **whole}] if isinstance(whole, Mapping) else []
        for d in devices:
            if not isinstance(d, Mapping):
                continue
            sums = per_device.setdefault(d.get("device"), {})
            for prefix, _ in _ECC_KINDS:
                for state in ("corrected", "uncorrected"):
                    n = d.get(f"{prefix}_{state}")
                    if isinstance(n, (int, float)) and n > 0:
                        key = f"{prefix}_{state}"
                        sums[key] = sums.get(key, 0) + int(n)
    grown = {dev: sums for dev, sums in per_device.items() if sums}
    if not grown:
        return None
    uncorrected = sum(n for sums in grown.values() for k, n in sums.items()
                      if k.endswith("_uncorrected"))
    span = fmt.short_duration(window_s)
    evidence = []
    for dev in sorted(grown, key=lambda d: (d is None, d if d is not None else 0)):
        sums = grown[dev]
        counts = ", ".join(f"{sums[f'{prefix}_{state}']} {state} in {where}"
                           for state in ("uncorrected", "corrected")
                           for prefix, where in _ECC_KINDS if sums.get(f"{prefix}_{state}"))
        name = f"device {dev}" if dev is not None else "all devices"
        evidence.append(f"{name}: {counts} in the last {span}")
    if uncorrected:
        return Alert("ecc", "error", f"uncorrected ECC errors: {uncorrected} in the last {span}",
                     tuple(evidence),
                     "uncorrected memory errors corrupt results or stop the runtime: stop "
                     "the job, then stop and start the instance (it starts on other "
                     "hardware) or move the job to another instance")
    corrected = sum(n for sums in grown.values() for n in sums.values())
    return Alert("ecc", "warning", f"corrected ECC errors growing: {corrected} in the last "
                 f"{span}", tuple(evidence),
                 "the hardware corrected them; if the count keeps growing, plan to move the "
                 "job to another instance before they turn uncorrected")


RecentSteps = Mapping[int, Mapping[str, np.ndarray]]
"""Per rank: its recent steady steps as arrays `t`, `step`, `step_time` (stepstate.py)."""


def step_spikes(recent: RecentSteps, since: float = -math.inf,
                factor: float = SPIKE_FACTOR) -> list[str]:
    """Steps after `since` that took `factor` x their rank's median step time or more,
    newest first."""
    found: list[tuple[float, str]] = []
    judged = {rank: (cols["step_time"], cols["t"], cols["step"])
              for rank, cols in recent.items() if len(cols["step_time"]) >= 5}
    for ranks, (times, t, step) in stacked_by_length(judged):
        medians = np.median(times, axis=1)[:, None]
        spiking = (medians > 0) & (times >= factor * medians) & (t > since)
        for row, i in zip(*np.nonzero(spiking), strict=True):
            median, took = float(medians[row, 0]), times[row, i]
            found.append((float(t[row, i]),
                          f"rank {ranks[row]} step {int(step[row, i])} took "
                          f"{fmt.seconds(took)} ({took / median:.0f}x its median "
                          f"{fmt.seconds(median)})"))
    found.sort(reverse=True)
    return [text for _, text in found]


def recompilation(compiles: Sequence[Mapping[str, Any]], procs: Mapping[str, Any] | None,
                  recent: RecentSteps, steady_since: float | None,
                  now: float) -> Alert | None:
    """Compile activity after steady state: a new graph (a changing shape, a Python branch on
    a tensor value) costs a compile each time, which is both slow and easy to miss."""
    if steady_since is None:
        return None
    late = [c for c in compiles if steady_since < float(c.get("t", -math.inf)) <= now]
    if any(c.get("src") == "torch.compile" for c in late):
        # torch.compile's compiles are judged by the supervisor, which records the alert
        # (this key) with each recompile's rank, step, frame and reason: shown as recorded.
        return None
    compilers = [p for p in (procs or {}).get("procs") or () if p.get("role") == "compiler"]
    spikes = step_spikes(recent, steady_since)
    if not late and not compilers and not spikes:
        return None
    evidence = []
    if late:
        kinds: dict[str, int] = {}
        for c in late:
            kinds[str(c.get("what"))] = kinds.get(str(c.get("what")), 0) + 1
        counted = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        last = late[-1]
        evidence.append(f"{len(late)} compile event(s) since steady state ({counted}); last "
                        f"{fmt.short_duration(now - float(last['t']))} ago: "
                        f"{str(last.get('line') or '').strip()[:160]}")
    for p in compilers[:3]:
        evidence.append(f"compiler process running after steady state: pid {p.get('pid')} "
                        f"{p.get('name')} at {fmt.percent(p.get('cpu'))} CPU")
    if spikes:
        evidence.append(f"{len(spikes)} step-time spike(s): " + "; ".join(spikes[:2]))
    only_spikes = not late and not compilers
    title = ("recompilation suspected: step-time spikes after steady state" if only_spikes
             else "recompilation after steady state")
    advice = ("keep tensor shapes static (pad the last batch or drop_last=True) and avoid "
              "Python control flow on tensor values; on Neuron, check the compile cache")
    return Alert("recompile", "info" if only_spikes else "warning", title, tuple(evidence),
                 advice)


def stalled(silent: Mapping[int, float], medians: Mapping[int, float],
            last_steps: Mapping[int, int]) -> Alert | None:
    """Ranks with no step for many times their median step time (a hang, a dead worker, a
    collective waiting for a rank that is gone)."""
    if not silent:
        return None
    evidence = []
    for rank in sorted(silent, key=lambda r: -silent[r]):
        median = medians.get(rank)
        ratio = f" = {silent[rank] / median:.0f}x its median step {fmt.seconds(median)}" \
            if median else ""
        evidence.append(f"rank {rank}: no step for {fmt.short_duration(silent[rank])}{ratio}; "
                        f"last step {last_steps.get(rank, 'n/a')}")
    ranks = ", ".join(str(r) for r in sorted(silent))
    return Alert("stalled", "error", f"no progress on rank(s) {ranks}", tuple(evidence[:8]),
                 "look at the rank's log (keys [ and ]) and its process (CPU at 0% or 100%?)")


def step_variance(recent: RecentSteps, compiles: Any = None, phases: Any = None,
                  min_steps: int = VARIANCE_MIN_STEPS) -> Alert | None:
    """Step times swinging widely around their median (the reference case: backward-pass
    times swinging from step to step), which costs throughput even with no straggler.
    Steps that overlapped a compile are left out: the recompilation alert covers those.
    `compiles` as metrics.compile_hits takes them; `phases`: the last steps' phase timings
    (a table with columns t, rank and one per phase)."""
    swinging = []
    judged = {r: (x,) for r, x in _outside_compiles(recent, compiles).items()
              if len(x) >= min_steps}
    for ranks, (times,) in stacked_by_length(judged):
        medians = np.median(times, axis=1)
        p10, p90 = np.percentile(times, [10, 90], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):  # (rows of median 0: left out)
            cv = times.std(axis=1) / times.mean(axis=1)
            wide = (medians > 0) & ((p90 / medians >= VARIANCE_P90_RATIO) | (cv >= VARIANCE_CV))
        swinging += [(float(cv[row]), int(ranks[row]), float(medians[row]), float(p10[row]),
                      float(p90[row]), times.shape[1]) for row in np.flatnonzero(wide)]
    if not swinging:
        return None
    swinging.sort(reverse=True)
    evidence = [f"rank {rank}: median {fmt.seconds(med)}, p10 {fmt.seconds(p10)}, p90 "
                f"{fmt.seconds(p90)} over its last {n} steps (CV {cv:.2f})"
                for cv, rank, med, p10, p90, n in swinging[:3]]
    if len(swinging) > 3:
        evidence.append(f"+{len(swinging) - 3} more rank(s) alike")
    worst = _most_variable_phase(phases)
    if worst:
        evidence.append(worst)
    return Alert("step-variance", "warning", "step time varies widely", tuple(evidence),
                 "look for work that varies per step: variable-size inputs, host syncs "
                 "(.item(), prints), logging or checkpointing inside the loop")


def _outside_compiles(recent: RecentSteps, compiles: Any) -> dict[int, np.ndarray]:
    """Each rank's step times, less the steps that overlapped a compile (all of them kept
    where every one did). One metrics.compile_hits over the ranks' rows, one rank after
    another, as it searches them."""
    times = {rank: cols["step_time"] for rank, cols in recent.items()}
    if not times:
        return times
    ranks = list(times)
    end = np.concatenate([recent[r]["t"] for r in ranks])
    took = np.concatenate([times[r] for r in ranks])
    rank_of = np.concatenate([np.full(len(times[r]), r) for r in ranks])
    hit = metrics.compile_hits(end, end - took, rank_of, compiles)
    bounds = np.cumsum([len(times[r]) for r in ranks])[:-1]
    for rank, rank_hit in zip(ranks, np.split(hit, bounds), strict=True):
        if rank_hit.any() and not rank_hit.all():
            times[rank] = times[rank][~rank_hit]
    return times


def _most_variable_phase(phases: Any) -> str | None:
    if phases is None or len(phases) < VARIANCE_MIN_STEPS:
        return None
    spreads = {}
    for name in phases.columns:
        if name in ("t", "rank"):
            continue
        values = floats(phases[name])
        values = values[~np.isnan(values)]
        if len(values) >= VARIANCE_MIN_STEPS:
            p10, p90 = np.percentile(values, [10, 90])
            spreads[name] = (float(p90 - p10), float(p10), float(p90))
    if not spreads:
        return None
    name, (_, p10, p90) = max(spreads.items(), key=lambda kv: kv[1][0])
    return f"{name} varies most: {fmt.seconds(p10)} to {fmt.seconds(p90)} (p10 to p90)"


def exited(meta: Mapping[str, Any], proc_exits: Sequence[Mapping[str, Any]],
           phase: str) -> Alert | None:
    """The job crashed: its exit and the last log lines it left, as recorded."""
    if phase != "crashed":
        return None
    info = meta.get("exit") or {}
    signal = f", signal {info['signal']}" if info.get("signal") else ""
    evidence = [f"exit code {info.get('code', 'n/a')}{signal}: {info.get('reason', 'n/a')}; "
                f"{info.get('attempts', 'n/a')} attempt(s)"]
    if proc_exits:
        tail = proc_exits[-1].get("tail") or {}
        for rank, lines in sorted(tail.items(), key=lambda kv: str(kv[0]))[:2]:
            for line in (lines or [])[-3:]:
                evidence.append(f"rank {rank}: {line}")
    return Alert("exited", "error", "training crashed", tuple(evidence),
                 "the full logs are in the session's logs/ folder")


def restarts(events: Sequence[Mapping[str, Any]]) -> Alert | None:
    if not events:
        return None
    last = events[-1]
    return Alert("restarts", "info", f"job restarted {len(events)} time(s)",
                 (f"last restart: attempt {last.get('attempt')} after "
                  f"{fmt.short_duration(last.get('delay_s'))}: {last.get('reason')}",))


def probe_notes(notes: Sequence[Mapping[str, Any]]) -> Alert | None:
    """What the automatic probe could not count as it would: several optimizers stepping (a
    step is then each step of the first), steps with no DataLoader batch (samples unknown)."""
    said: dict[str, str] = {}
    for note in notes:
        what = str(note.get("what"))
        if what != "armed":
            said.setdefault(what, f"rank {note.get('rank')}: {note.get('message')}")
    if not said:
        return None
    advice = ("for samples/s, call neurotui.probe.step(samples=...) after each step"
              if "no_batches" in said else None)
    return Alert("probe_notes", "info", "how the automatic probe counts steps",
                 tuple(said.values()), advice)


def profiles_taken(records: Sequence[Mapping[str, Any]], now: float) -> Alert | None:
    """The profiles taken of this run (`neurotui profile`, `p`): the steps each profiled,
    whose times are not steady-state figures, and where the ranks' traces are."""
    taken: dict[str, dict[str, Any]] = {}
    for record in records:
        if float(record.get("t", math.inf)) > now:
            continue
        one = taken.setdefault(str(record.get("id")), {"steps": None, "done": {},
                                                       "failed": [], "started": []})
        one["steps"] = f"{record.get('first_step')}-{record.get('last_step')}"
        what = record.get("what")
        rank = record.get("rank")
        if what == "done":  # (each rank takes the request at its own next step)
            one["done"].setdefault(one["steps"], []).append(rank)
        elif what == "failed":
            one["failed"].append(f"rank {rank}: {record.get('error')}")
        elif what == "started":
            one["started"].append(rank)
    if not taken:
        return None
    lines = []
    for profile_id, one in taken.items():
        done = [rank for ranks in one["done"].values() for rank in ranks]
        if done:
            steps = ", ".join(f"{steps} of rank {', '.join(map(str, sorted(ranks)))}"
                              for steps, ranks in sorted(one["done"].items()))
            lines.append(f"steps {steps} profiled (not steady-state times): traces in "
                         f"profiles/{profile_id}/")
        busy = sorted(set(one["started"]) - set(done))
        busy = [rank for rank in busy if not any(f"rank {rank}:" in f for f in one["failed"])]
        if busy:
            lines.append(f"rank {', '.join(map(str, busy))} profiling steps {one['steps']}")
        lines += [f"profile {profile_id} failed in {failure} (training went on)"
                  for failure in one["failed"]]
    return Alert("profiles", "info", f"{len(taken)} profile{'s' * (len(taken) > 1)} taken",
                 tuple(lines[-6:]), "open a trace (.json.gz) in ui.perfetto.dev; "
                 "`neurotui profile` prints each rank's top operators as it takes one")


def recorded(alerts: Iterable[Mapping[str, Any]], now: float) -> list[Alert]:
    """The supervisor's alerts on at `now`, as it recorded them in the session (they hold
    whether or not anyone watched: a stall in the night is in the replay)."""
    out = []
    for key, start in recorded_alerts.active_alerts(alerts, now).items():
        since = f"recorded by the supervisor at {recorded_alerts.clock(float(start['t']))}"
        out.append(Alert(key, str(start.get("severity") or "warning"),
                         str(start.get("title") or key),
                         (*[str(e) for e in start.get("evidence") or ()], since),
                         start.get("advice")))
    return out


def lost_data(lost: Sequence[Mapping[str, Any]]) -> Alert | None:
    """Data the session could not record (a full disk), with what and when."""
    text = recorded_alerts.lost_text(lost)
    if text is None:
        return None
    return Alert("lost", "warning", "the session lost data", (text,),
                 "the sessions disk was full or failing: training went on; free space there")


def unreadable(problems: str) -> Alert:
    """Lines of the session's files that could not be read (the reader's summary, with file
    and line): an alert like any other, so it is seen where the session is shown."""
    return Alert("session-files", "warning", "unreadable lines in the session's files",
                 (problems,), "they were skipped; everything else in the session is shown")
