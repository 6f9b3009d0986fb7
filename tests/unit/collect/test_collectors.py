"""Telemetry collectors, run for real against stand-in tools that replay real captures."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from neurotui.collect.accelerators import neuron_ls_snapshot
from neurotui.collect.telemetry import Telemetry
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from tests.standins import tool_captures as replay


@pytest.fixture
def session(tmp_path: Path) -> Path:
    d = tmp_path / "session"
    (d / "logs").mkdir(parents=True)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "exit": None})
    return d


def only_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *tools: str) -> None:
    """PATH holds the chosen stand-ins and the basic system tools, nothing else."""
    bin_dir = replay.install(tmp_path / "bin")
    for tool in replay.TOOLS:
        if tool not in tools:
            (bin_dir / tool).unlink()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")


def run_for(telemetry: Telemetry, seconds: float, pids: frozenset[int] = frozenset()) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        telemetry.poll(time.time(), pids)
        time.sleep(0.05)


def record_neuron_telemetry(session: Path) -> tuple[SessionReader, list[tuple[str, str]]]:
    """1.5 s of the Neuron tools' telemetry recorded into `session` (a rank of pid 123), read
    back; and the instance types the collectors found, with their sources."""
    writer = EventWriter(session / layout.EVENTS)
    found: list[tuple[str, str]] = []
    telemetry = Telemetry(session, writer, time.time(),
                          on_instance_type=lambda t, s: found.append((t, s)))
    run_for(telemetry, 1.5, frozenset({123}))
    telemetry.close()
    writer.close()
    return SessionReader(session).load(), found


def test_neuron_monitor_stream_is_recorded(session, tmp_path, monkeypatch) -> None:
    only_tools(monkeypatch, tmp_path, "neuron-monitor", "neuron-ls")
    reader, found = record_neuron_telemetry(session)
    neuron = reader.events["neuron"]
    assert len(neuron) >= 4
    # The real first record: no runtime attached yet, so no cores (not zeros).
    assert neuron[0]["cores"] == [] and neuron[0]["instance_type"] == "trn1.2xlarge"
    # The full report: core 0 at 1.36% utilisation, core 1 at 0.
    full = next(e for e in neuron if e["cores"])
    utils = {c["core"]: c["util"] for c in full["cores"]}
    assert utils[0] == pytest.approx(1.3631567613356375) and utils[1] == 0
    assert found[0] == ("trn1.2xlarge", "neuron-ls")
    devices = reader.events["neuron_devices"]
    assert devices[0]["devices"][0]["neuron_cores"] == 2
    # The trn1 JSON capture: CPU affinity "0-7", NUMA node "-1" (unknown); no LNC header.
    assert devices[0]["devices"][0]["affinity_cpus"] == list(range(8))
    assert devices[0]["devices"][0]["numa_node"] is None
    assert devices[0]["logical_neuroncore_config"] is None
    assert devices[0]["logical_cores"] == 2
    assert (session / "neuron-monitor.json").exists()


def test_a_dying_monitor_is_restarted_with_backoff(session, tmp_path, monkeypatch) -> None:
    only_tools(monkeypatch, tmp_path, "neuron-monitor")
    monkeypatch.setenv("STANDIN_EXIT_AFTER", "2")
    writer = EventWriter(session / layout.EVENTS)
    telemetry = Telemetry(session, writer, time.time())
    run_for(telemetry, 2.5)
    telemetry.close()
    writer.close()
    statuses = SessionReader(session).load().events["source_status"]
    messages = [s["message"] for s in statuses if s["source"] == "neuron-monitor"]
    assert any("exited with code 1; restarting in 1 s" in m for m in messages)
    assert sum(m.startswith("neuron-monitor running") for m in messages) >= 2
    assert telemetry.monitor is not None and telemetry.monitor.tool.restarts >= 1


def test_absent_tools_are_reported_not_invented(session, tmp_path, monkeypatch) -> None:
    only_tools(monkeypatch, tmp_path)
    writer = EventWriter(session / layout.EVENTS)
    telemetry = Telemetry(session, writer, time.time())
    run_for(telemetry, 0.3)
    telemetry.close()
    writer.close()
    reader = SessionReader(session).load()
    assert "neuron" not in reader.events and "gpu" not in reader.events
    (status,) = reader.events["source_status"]
    assert status["ok"] is False
    assert "neuron-monitor not found: install aws-neuronx-tools" in status["message"]
    assert "showing host metrics only" in status["message"]


def test_nvidia_smi_stream_is_recorded(session, tmp_path, monkeypatch) -> None:
    only_tools(monkeypatch, tmp_path, "nvidia-smi")
    writer = EventWriter(session / layout.EVENTS)
    telemetry = Telemetry(session, writer, time.time())
    run_for(telemetry, 1.0)
    telemetry.close()
    writer.close()
    gpu = SessionReader(session).load().events["gpu"]
    first = gpu[0]["gpus"][0]
    assert first["util"] == 95.0 and first["mem_used"] == 7650 * 1024 * 1024
    assert first["power_w"] == 81.25
    assert {e["gpus"][0]["util"] for e in gpu} == {95.0, 97.0}


def test_trn2_capture_records_logical_cores_affinity_and_monitor_detail(
        session, tmp_path, monkeypatch) -> None:
    """Through the real subprocess path, the trn2 stand-in: neuron-ls's 2.29 trn2n.48xlarge
    output and the neuron-monitor record made from the 2.30 guide's fragments."""
    only_tools(monkeypatch, tmp_path, "neuron-monitor", "neuron-ls")
    monkeypatch.setenv("STANDIN_CAPTURE", "trn2")
    reader, found = record_neuron_telemetry(session)

    (snapshot, *_) = reader.events["neuron_devices"]
    assert snapshot["forms"] == ["json", "table"]
    assert snapshot["instance_type"] == "trn2n.48xlarge" and found[0][0] == "trn2n.48xlarge"
    assert snapshot["logical_neuroncore_config"] == 2
    assert snapshot["logical_cores"] == 64
    assert snapshot["elided"] is False  # the table lists every device the JSON example elides
    devices = snapshot["devices"]
    assert [d["index"] for d in devices] == list(range(16))
    numa1 = {0, 1, 2, 3, 12, 13, 14, 15}
    for d in devices:
        on_node1 = d["index"] in numa1
        assert d["numa_node"] == (1 if on_node1 else 0)
        assert d["cpu_affinity"] == ("48-95,144-191" if on_node1 else "0-47,96-143")
        assert d["affinity_cpus"] == (
            [*range(48, 96), *range(144, 192)] if on_node1 else [*range(0, 48), *range(96, 144)])
        assert d["core_ids"] == list(range(4 * d["index"], 4 * d["index"] + 4))
        assert d["logical_core_count"] == 4
    # Processes come from the JSON form, which names the devices it does not elide.
    assert [p["pid"] for p in devices[15]["processes"]] == [113985]

    neuron = reader.events["neuron"]
    assert len(neuron) >= 4
    last = neuron[-1]
    assert last["neuroncore_version"] == "v3d" and last["logical_neuroncore_config"] == 2
    assert [(c["core"], c["flops"]) for c in last["cores"]] == [
        (0, 1234567891011), (1, 1234567891021)]
    assert [p["name"] for p in last["cores"][1]["physical"]] == ["nc_v3.2", "nc_v3.3"]
    assert last["cores"][0]["mem_by_kind"]["model_code"] == 176285056
    assert last["device_mem_by_kind"]["tensors"] == 2 * 20971520
    assert last["exec_errors_by_type"]["hardware"] == 0
    assert last["latency"]["total_latency"]["p99"] == 0.01100012
    assert last["ecc_devices"][0]["sram_uncorrected"] == 0
    assert last["errors"] == []


def test_neuron_ls_that_cannot_run_is_reported_once(session, tmp_path) -> None:
    writer = EventWriter(session / layout.EVENTS)
    assert neuron_ls_snapshot(str(tmp_path / "no-such-neuron-ls"), writer, time.time()) is None
    writer.close()
    reader = SessionReader(session).load()
    assert "neuron_devices" not in reader.events
    (status,) = reader.events["source_status"]
    assert status["source"] == "neuron-ls" and status["ok"] is False
    assert status["message"].startswith("neuron-ls failed:")
