"""Alert rules: raised only on data that shows the problem, always with the numbers."""

from __future__ import annotations

import numpy as np

from neurotui.live import alerts


def host(t: float, cpu: list[float]) -> dict:
    return {"t": t, "kind": "host", "cpu": cpu}


def neuron(t: float, utils: list[float | None]) -> dict:
    return {"t": t, "kind": "neuron", "cores": [{"core": i, "util": u}
                                                 for i, u in enumerate(utils)]}


PINNED = [100.0, 98.0, 5.0, 3.0]


def test_cpu_bound_input_needs_both_sides_and_a_steady_phase() -> None:
    hosts = [host(t, PINNED) for t in (1, 2, 3)]
    idle = [neuron(t, [10.0, 14.0]) for t in (1, 2, 3)]
    alert = alerts.cpu_bound_input(hosts, idle, None, now=3.5, phase="steady")
    assert alert is not None
    assert alert.evidence[0].startswith("host: 2 of 4 CPUs >= 90% over the last 30s "
                                        "(cpu0 100%, cpu1 98%)")
    assert alert.evidence[1] == "NeuronCore utilisation averages 12% over the same window"
    assert "more DataLoader workers" in (alert.advice or "")
    busy = [neuron(t, [95.0, 90.0]) for t in (1, 2, 3)]
    assert alerts.cpu_bound_input(hosts, busy, None, 3.5, "steady") is None
    assert alerts.cpu_bound_input(hosts, [], None, 3.5, "steady") is None  # no telemetry
    assert alerts.cpu_bound_input(hosts, idle, None, 3.5, "compiling") is None
    compiler = {"procs": [{"pid": 7, "role": "compiler", "cpu": 100.0}]}
    assert alerts.cpu_bound_input(hosts, idle, compiler, 3.5, "steady") is None
    old = alerts.cpu_bound_input(hosts, idle, None, now=100.0, phase="steady")
    assert old is None  # samples older than the window do not count


def test_all_cores_busy_suggests_fewer_workers() -> None:
    hosts = [host(t, [99.0] * 4) for t in (1, 2)]
    gpu = [{"t": t, "kind": "gpu", "gpus": [{"index": 0, "util": 5.0}]} for t in (1, 2)]
    alert = alerts.cpu_bound_input(hosts, gpu, None, 2.5, "steady")
    assert alert is not None and "GPU utilisation averages 5%" in alert.evidence[1]
    assert "fewer DataLoader workers" in (alert.advice or "")


def recent(times: list[float], rank: int = 0) -> dict[int, dict[str, np.ndarray]]:
    n = len(times)
    return {rank: {"t": np.arange(n, dtype=float), "step": np.arange(1, n + 1, dtype=float),
                   "step_time": np.array(times)}}


def test_step_variance_like_the_backward_swings() -> None:
    swings = [0.4, 0.4, 0.4, 0.9] * 10
    alert = alerts.step_variance(recent(swings))
    assert alert is not None
    assert alert.evidence[0] == ("rank 0: median 400ms, p10 400ms, p90 900ms over its last "
                                 "40 steps (CV 0.41)")
    assert alerts.step_variance(recent([0.4, 0.41, 0.39, 0.4] * 10)) is None
    assert alerts.step_variance(recent(swings[:8])) is None  # too few steps to judge


def test_recompilation_after_steady_state() -> None:
    compiles = [{"t": 5.0, "what": "compile", "line": "warm-up compile"},
                {"t": 50.0, "what": "cache_miss", "line": "cache miss graph_2"}]
    alert = alerts.recompilation(compiles, None, recent([0.1] * 30), steady_since=10.0,
                                 now=60.0)
    assert alert is not None and alert.severity == "warning"
    assert alert.evidence[0] == ("1 compile event(s) since steady state (1 cache_miss); last "
                                 "10s ago: cache miss graph_2")
    assert alerts.recompilation(compiles[:1], None, recent([0.1] * 30), 10.0, 60.0) is None
    spiky = alerts.recompilation([], None, recent([0.1] * 20 + [2.0] + [0.1] * 5), 0.0, 60.0)
    assert spiky is not None and spiky.severity == "info"
    assert "rank 0 step 21 took 2.00s (20x its median 100ms)" in spiky.evidence[0]
    procs = {"procs": [{"pid": 9, "name": "neuronx-cc", "role": "compiler", "cpu": 99.0}]}
    running = alerts.recompilation([], procs, {}, 0.0, 60.0)
    assert running is not None and "pid 9 neuronx-cc at 99% CPU" in running.evidence[0]


def test_stalled_and_exit_evidence() -> None:
    alert = alerts.stalled({3: 45.0}, {3: 1.5}, {3: 812})
    assert alert is not None
    assert alert.evidence == ("rank 3: no step for 45s = 30x its median step 1.50s; "
                              "last step 812",)
    assert alerts.stalled({}, {}, {}) is None
    meta = {"exit": {"code": 1, "signal": None, "reason": "failed", "attempts": 2}}
    exits = [{"tail": {"1": ["a", "b", "RuntimeError: boom"]}}]
    crashed = alerts.exited(meta, exits, "crashed")
    assert crashed is not None
    assert crashed.evidence == ("exit code 1: failed; 2 attempt(s)", "rank 1: a", "rank 1: b",
                                "rank 1: RuntimeError: boom")
    assert alerts.exited(meta, exits, "finished") is None


def test_the_automatic_probes_notes_are_said_once_each() -> None:
    notes = [{"what": "armed", "rank": 0, "message": "steps timed"},
             {"what": "optimizers", "rank": 0, "message": "2 optimizers step in this rank"},
             {"what": "optimizers", "rank": 1, "message": "2 optimizers step in this rank"},
             {"what": "no_batches", "rank": 1, "message": "samples per step are unknown"}]
    alert = alerts.probe_notes(notes)
    assert alert is not None
    assert alert.evidence == ("rank 0: 2 optimizers step in this rank",
                              "rank 1: samples per step are unknown")
    assert alert.advice is not None and "probe.step" in alert.advice
    assert alerts.probe_notes(notes[:1]) is None
