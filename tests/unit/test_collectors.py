"""Telemetry collectors, run for real against stand-in tools that replay real captures."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

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


def test_neuron_monitor_stream_is_recorded(session, tmp_path, monkeypatch) -> None:
    only_tools(monkeypatch, tmp_path, "neuron-monitor", "neuron-ls")
    writer = EventWriter(session / layout.EVENTS)
    found: list[tuple[str, str]] = []
    telemetry = Telemetry(session, writer, time.time(),
                          on_instance_type=lambda t, s: found.append((t, s)))
    run_for(telemetry, 1.5, frozenset({123}))
    telemetry.close()
    writer.close()
    reader = SessionReader(session).load()
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
