"""Alert rules: raised only on data that shows the problem, always with the numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurotui.live import alerts
from neurotui.metrics.breakdown import PhaseSplit
from tests.captures import TELEMETRY_CAPTURES

TESTS = Path(__file__).resolve().parents[1]
CAPTURE = (TESTS / "fixtures" / "telemetry"
           / "neuron-monitor-prometheus_inf1.xlarge_real-capture_datadog-fixture.txt")
SHARED_TELEMETRY = TELEMETRY_CAPTURES
"""The real captures shared by the project (neuron-ls of a trn2n.48xlarge among them)."""


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


# -- execution errors and ECC --------------------------------------------------------------------

def errs(t: float, **by_type: int) -> dict:
    """A `neuron` event whose period saw these execution errors (counts per period)."""
    return {"t": t, "kind": "neuron", "cores": [], "exec_errors": sum(by_type.values()),
            "exec_errors_by_type": {"generic": 0, "numerical": 0, "transient": 0, "model": 0,
                                    "runtime": 0, "hardware": 0, **by_type}}


def test_execution_errors_are_counted_in_the_window_and_named_by_type() -> None:
    events = [errs(1.0, numerical=9),  # before the window: not counted
              errs(40.0, numerical=2), errs(45.0), errs(50.0, numerical=1, transient=3)]
    alert = alerts.execution_errors(events, now=55.0)
    assert alert is not None and alert.severity == "error" and alert.key == "exec-errors"
    assert alert.title == "Neuron execution errors: numerical, transient"
    assert alert.evidence[0] == ("6 execution error(s) in the last 30s (3 numerical, "
                                 "3 transient), over 3 Neuron telemetry sample(s)")
    assert alert.advice is not None and "numerical: NaN or Inf" in alert.advice
    # Periods with no error, a first /metrics scrape (None: no growth known yet), or errors
    # only before the window: nothing to say.
    assert alerts.execution_errors([errs(40.0), errs(45.0)], 55.0) is None
    first = {"t": 50.0, "kind": "neuron", "exec_errors": None, "exec_errors_by_type": None}
    assert alerts.execution_errors([first], 55.0) is None
    assert alerts.execution_errors(events[:1], 55.0) is None


def test_execution_errors_name_the_runtime_and_a_total_without_types() -> None:
    event = {**errs(50.0, hardware=2), "exec_runtimes": [
        {"pid": 4242, "tag": "4242", "exec_errors_by_type": {"hardware": 2, "model": 0}}]}
    alert = alerts.execution_errors([event], 55.0)
    assert alert is not None and alert.title == "Neuron execution errors: hardware"
    assert alert.evidence[1] == "by runtime: pid 4242 2"
    assert "ECC" in (alert.advice or "")
    untyped = {"t": 50.0, "kind": "neuron", "exec_errors": 4, "exec_errors_by_type": None}
    alert = alerts.execution_errors([untyped], 55.0)
    assert alert is not None and "(4 of no type)" in alert.evidence[0]


def ecc(t: float, *devices: dict) -> dict:
    return {"t": t, "kind": "neuron", "cores": [], "ecc_devices": [
        {"mem_corrected": 0, "mem_uncorrected": 0, "sram_corrected": 0,
         "sram_uncorrected": 0, **d} for d in devices]}


def test_uncorrected_ecc_is_an_error_and_corrected_growth_a_warning() -> None:
    events = [ecc(40.0, {"device": 0}, {"device": 3, "sram_corrected": 2}),
              ecc(50.0, {"device": 0}, {"device": 3, "mem_uncorrected": 1, "sram_corrected": 1})]
    alert = alerts.ecc_errors(events, now=55.0)
    assert alert is not None and alert.severity == "error" and alert.key == "ecc"
    assert alert.title == "uncorrected ECC errors: 1 in the last 30s"
    assert alert.evidence == ("device 3: 1 uncorrected in device memory (HBM), 3 corrected "
                              "in on-chip SRAM in the last 30s",)
    corrected = alerts.ecc_errors([ecc(50.0, {"device": 1, "mem_corrected": 4})], 55.0)
    assert corrected is not None and corrected.severity == "warning"
    assert corrected.title == "corrected ECC errors growing: 4 in the last 30s"
    assert alerts.ecc_errors([ecc(50.0, {"device": 0}, {"device": 1})], 55.0) is None
    assert alerts.ecc_errors([ecc(1.0, {"device": 0, "mem_uncorrected": 5})], 55.0) is None


def test_counters_from_a_metrics_page_alert_only_when_they_grew() -> None:
    """Through the real /metrics path: the exporter's counters are totals since it started;
    the recorded event holds their growth, and only growth raises an alert."""
    from neurotui.sources.neuron_observer import observer_summary, parse_metrics

    text = CAPTURE.read_text()

    def with_counts(numerical: int, sram_uncorrected: int) -> str:
        out = []
        for line in text.splitlines():
            if line.startswith("execution_errors_total{") and \
                    'error_type="numerical"' in line and 'runtime_tag="31961"' in line:
                line = f"{line.rsplit(' ', 1)[0]} {numerical}.0"
            if line.startswith("hardware_ecc_events_total{") and \
                    'event_type="sram_ecc_uncorrected"' in line:
                line = f"{line.rsplit(' ', 1)[0]} {sram_uncorrected}.0"
            out.append(line)
        return "\n".join(out) + "\n"

    pages = [parse_metrics(with_counts(n, e)) for n, e in ((7, 2), (7, 2), (10, 3))]
    events = [{"t": 40.0 + 5 * i, "kind": "neuron",
               **observer_summary(page, pages[i - 1] if i else None, 5.0)}
              for i, page in enumerate(pages)]
    # Totals of 7 errors and 2 ECC events, unchanged between two scrapes: no alert.
    assert events[1]["exec_errors_by_type"]["numerical"] == 0
    assert alerts.execution_errors(events[:2], 46.0) is None
    assert alerts.ecc_errors(events[:2], 46.0) is None
    grown = alerts.execution_errors(events, 51.0)
    assert grown is not None and grown.evidence == (
        "3 execution error(s) in the last 30s (3 numerical), over 3 Neuron telemetry "
        "sample(s)", "by runtime: pid 31961 3")
    ecc_alert = alerts.ecc_errors(events, 51.0)
    assert ecc_alert is not None and ecc_alert.evidence == (
        "device 0: 1 uncorrected in on-chip SRAM in the last 30s",)


# -- input starvation ----------------------------------------------------------------------------

def procs(t: float, *rows: tuple[int, int, str, float, int | None]) -> dict:
    """A `procs` sample: rows of (pid, ppid, role, cpu %, cpu_num)."""
    return {"t": t, "kind": "procs", "procs": [
        {"pid": pid, "ppid": ppid, "name": "python", "role": role, "cpu": cpu, "rss": 1,
         **({"cpu_num": num} if num is not None else {})}
        for pid, ppid, role, cpu, num in rows]}


def waiting(share: float, step_s: float = 0.2, steps: int = 40) -> PhaseSplit:
    """The job's step breakdown with `data` taking `share` of each step."""
    return PhaseSplit(None, ("data", "step"), (share * step_s, (1 - share) * step_s),
                      (share, 1 - share), steps, step_s)


def starved_procs(worker_cpu: float, rank_cpu: float = 30.0) -> list[dict]:
    return [procs(t, (100, 1, "launcher", 0.0, 0), (200, 100, "rank", rank_cpu, 1),
                  (300, 200, "worker", worker_cpu, 0)) for t in (10.0, 11.0, 12.0)]


def test_starved_workers_while_the_ranks_wait_on_a_cpu_run() -> None:
    hosts = [host(t, [100.0, 35.0, 2.0, 1.0]) for t in (10.0, 11.0, 12.0)]
    alert = alerts.input_starvation(starved_procs(99.0), hosts, [], waiting(0.7), 12.5, "steady")
    assert alert is not None and alert.key == "input-starved" and alert.severity == "warning"
    assert alert.evidence == (
        "DataLoader workers busy: 1 of 1 at >= 80% of a CPU (median over the last 30s: "
        "pid 300 99% on cpu0)",
        "the ranks wait for the DataLoader 70% of each step (data 140ms of a 200ms step, "
        "medians of the last 40 steps past warm-up)",
        "host: 3 of 4 CPUs under 50% over the last 30s")
    assert alert.advice is not None and alert.advice.startswith(
        "raise DataLoader(num_workers=N) (now 1 per rank; 3 of 4 host CPUs have room)")
    # Healthy: the worker keeps up (mostly idle), or the ranks hardly wait.
    assert alerts.input_starvation(starved_procs(4.0), hosts, [], waiting(0.7), 12.5,
                                   "steady") is None
    assert alerts.input_starvation(starved_procs(99.0), hosts, [], waiting(0.05), 12.5,
                                   "steady") is None
    # Not judged: while compiling, without two samples, with a compiler running.
    assert alerts.input_starvation(starved_procs(99.0), hosts, [], waiting(0.7), 12.5,
                                   "compiling") is None
    assert alerts.input_starvation(starved_procs(99.0)[-1:], hosts, [], waiting(0.7), 12.5,
                                   "steady") is None
    compiling = [procs(t, (300, 200, "worker", 99.0, 0), (400, 200, "compiler", 99.0, 1))
                 for t in (10.0, 11.0)]
    assert alerts.input_starvation(compiling, hosts, [], waiting(0.7), 12.5, "steady") is None


def test_starvation_with_every_cpu_busy_says_more_workers_will_not_help() -> None:
    hosts = [host(t, [99.0, 97.0]) for t in (10.0, 11.0)]
    alert = alerts.input_starvation(starved_procs(95.0), hosts, [], waiting(0.6), 12.5,
                                    "steady")
    assert alert is not None and "more workers will not help" in (alert.advice or "")


def test_ranks_loading_their_own_batches_are_told_to_use_workers() -> None:
    rows = [procs(t, (200, 100, "rank", 100.0, 1)) for t in (10.0, 11.0)]
    alert = alerts.input_starvation(rows, [], [], waiting(0.8), 12.5, "warm-up")
    assert alert is not None
    assert alert.evidence[0].startswith("no DataLoader worker process: the ranks load their "
                                        "own batches, 1 of 1 at >= 80% of a CPU")
    assert "num_workers=N); now 0" in (alert.advice or "")
    # A rank busy computing, with no data phase recorded, is not starved: no alert.
    assert alerts.input_starvation(rows, [], [], None, 12.5, "steady") is None


def test_without_a_data_phase_idle_cores_are_the_wait() -> None:
    idle = [neuron(t, [12.0, 8.0]) for t in (10.0, 11.0, 12.0)]
    alert = alerts.input_starvation(starved_procs(99.0), [], idle, None, 12.5, "steady")
    assert alert is not None
    assert alert.evidence[1] == "NeuronCore utilisation averages 10% over the last 30s"
    busy = [neuron(t, [92.0, 88.0]) for t in (10.0, 11.0, 12.0)]
    assert alerts.input_starvation(starved_procs(99.0), [], busy, None, 12.5, "steady") is None
    assert alerts.input_starvation(starved_procs(99.0), [], [], None, 12.5, "steady") is None


# -- NUMA placement, on the real trn2 neuron-ls capture's affinity -------------------------------

def trn2_devices(owners: dict[int, int], only: range | None = None) -> dict:
    """The neuron_devices event of the real trn2n.48xlarge neuron-ls 2.29 capture (devices 0-3
    and 12-15 on NUMA node 1, CPUs 48-95,144-191; the rest on node 0, CPUs 0-47,96-143), with
    `owners` (device -> pid) as the processes the JSON form would list."""
    from neurotui.collect.accelerators import neuron_devices_event
    from neurotui.sources.neuron_ls import parse_neuron_ls

    report = parse_neuron_ls((SHARED_TELEMETRY / "neuron-ls_trn2n.48xlarge_default_docs-2.29.txt")
                             .read_text(encoding="utf-8"))
    event = {"t": 0.0, "kind": "neuron_devices", **neuron_devices_event(report)}
    devices = [d for d in event["devices"] if only is None or d["index"] in only]
    for d in devices:
        d["processes"] = [{"pid": owners[d["index"]], "command": "python"}] \
            if d["index"] in owners else []
    return {**event, "devices": devices}


def placed(rank_cpus: list[int], worker_cpus: list[int]) -> list[dict]:
    return [procs(10.0 + i, (100, 1, "launcher", 0.0, 0), (200, 100, "rank", 90.0, rc),
                  (300, 200, "worker", 60.0, wc))
            for i, (rc, wc) in enumerate(zip(rank_cpus, worker_cpus, strict=True))]


def test_a_rank_and_its_worker_on_the_far_numa_node() -> None:
    devices = trn2_devices({0: 200})
    assert devices["devices"][0]["cpu_affinity"] == "48-95,144-191"  # as the capture prints
    alert = alerts.numa_placement(placed([3, 3, 5], [7, 50, 9]), devices, 12.5, "steady")
    assert alert is not None and alert.key == "numa" and alert.severity == "warning"
    assert alert.evidence[:2] == (
        "rank pid 200 ran on CPU 3,5 in 3 of 3 samples; device 0: NUMA node 1, CPUs "
        "48-95,144-191",
        "DataLoader worker pid 300 (of rank pid 200) ran on CPU 7,9 in 2 of 3 samples; "
        "device 0: NUMA node 1, CPUs 48-95,144-191")
    assert alert.advice is not None and \
        "numactl --cpunodebind=1 --membind=1 torchrun" in alert.advice
    # On the device's own node (CPUs 48-95 and 144-191): nothing to say.
    assert alerts.numa_placement(placed([50, 60, 150], [51, 144, 191]), devices, 12.5,
                                 "steady") is None
    # Mostly near, once far: a process that moved once is not placed far.
    assert alerts.numa_placement(placed([50, 3, 60], [51, 52, 53]), devices, 12.5,
                                 "steady") is None
    # Without cpu_num (sessions recorded before it), or without affinity: not judged.
    unknown = [procs(t, (200, 100, "rank", 90.0, None)) for t in (10.0, 11.0)]
    assert alerts.numa_placement(unknown, devices, 12.5, "steady") is None
    no_affinity = {"devices": [{**d, "affinity_cpus": None} for d in devices["devices"]]}
    assert alerts.numa_placement(placed([3, 3, 5], [7, 8, 9]), no_affinity, 12.5,
                                 "steady") is None


def test_ranks_no_device_names_are_held_against_every_devices_cpus() -> None:
    # Devices on both nodes: every CPU is some device's, so no placement is far.
    both = trn2_devices({})
    assert alerts.numa_placement(placed([3, 3, 5], [7, 8, 9]), both, 12.5, "steady") is None
    # Only node-1 devices (0-3) in the snapshot: CPUs 3..9 are far from all of them.
    node1 = trn2_devices({}, only=range(0, 4))
    alert = alerts.numa_placement(placed([3, 3, 5], [7, 8, 9]), node1, 12.5, "steady")
    assert alert is not None
    assert "no device lists its pid, so all devices: NUMA node 1" in alert.evidence[0]
    assert "--cpunodebind=1" in (alert.advice or "")


def test_ranks_on_devices_of_both_nodes_are_told_to_bind_each_rank() -> None:
    devices = trn2_devices({0: 200, 4: 201})  # device 0 on node 1, device 4 on node 0
    rows = [procs(10.0 + i, (200, 100, "rank", 90.0, 3), (201, 100, "rank", 90.0, 50))
            for i in range(3)]
    alert = alerts.numa_placement(rows, devices, 12.5, "steady")
    assert alert is not None and len(alert.evidence) == 3  # each rank, and where it's from
    assert "device 4: NUMA node 0, CPUs 0-47,96-143" in alert.evidence[1]
    assert "os.sched_setaffinity" in (alert.advice or "")


def test_cpu_ranges_as_neuron_ls_writes_them() -> None:
    assert alerts.cpu_ranges([*range(48, 96), *range(144, 192)]) == "48-95,144-191"
    assert alerts.cpu_ranges([3, 5, 7, 6]) == "3,5-7"
    assert alerts.cpu_ranges([]) == ""
