"""Alert rules: pure functions from recorded data to alerts that carry their evidence.

No UI and no clock here (the caller passes `now`), so the rules are unit-tested on their own
and could serve `--headless` or a report too. An alert is only raised on data that shows the
problem; each states the numbers it was raised on, so a user can check it against the panels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neurotui import fmt, metrics
from neurotui import recorded as recorded_alerts
from neurotui.metrics.common import floats

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
        value = unit.get("util") if isinstance(unit, Mapping) else None
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


RecentSteps = Mapping[int, Mapping[str, np.ndarray]]
"""Per rank: its recent steady steps as arrays `t`, `step`, `step_time` (stepstate.py)."""


def step_spikes(recent: RecentSteps, since: float = -math.inf,
                factor: float = SPIKE_FACTOR) -> list[str]:
    """Steps after `since` that took `factor` x their rank's median step time or more,
    newest first."""
    found: list[tuple[float, str]] = []
    for rank, cols in recent.items():
        times = cols["step_time"]
        if len(times) < 5:
            continue
        median = float(np.median(times))
        if median <= 0:
            continue
        for i in np.flatnonzero((times >= factor * median) & (cols["t"] > since)):
            found.append((float(cols["t"][i]),
                          f"rank {rank} step {int(cols['step'][i])} took "
                          f"{fmt.seconds(times[i])} ({times[i] / median:.0f}x its median "
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
    for rank, cols in recent.items():
        times = cols["step_time"]
        hit = metrics.compile_hits(cols["t"], cols["t"] - times,
                                   np.full(len(times), rank), compiles)
        times = times[~hit] if not hit.all() else times
        if len(times) < min_steps:
            continue
        median = float(np.median(times))
        if median <= 0:
            continue
        p10, p90 = np.percentile(times, [10, 90])
        cv = float(times.std() / times.mean())
        if p90 / median >= VARIANCE_P90_RATIO or cv >= VARIANCE_CV:
            swinging.append((cv, int(rank), median, float(p10), float(p90), len(times)))
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
