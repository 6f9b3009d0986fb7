"""The Prometheus exporter's collector, scraped over HTTP and parsed with prometheus_client's
own parser: its figures against the batch metrics over the same session (the summary's
formulas and the per-rank table, computed from the reader without the live model)."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from neurotui import metrics
from neurotui.exporter.collector import SessionCollector, labels_of
from neurotui.exporter.options import add_options, metrics_config
from neurotui.headless import model_for
from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel
from neurotui.live.stepstate import RECENT
from neurotui.session.reader import SessionReader
from neurotui.session.writer import EventWriter, read_meta, update_meta
from neurotui.summary import summarize
from neurotui.supervisor.exporting import MetricsExporter
from tests.ui.sessions import RUNNING, T0, cpu_only_session, reference_session
from tests.unit.test_layers import loaded_by

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "sessions" / "sample-cpu-gloo"


def scrape(model: DashboardModel) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] of every sample in the exposition text."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(model))
    return parse(generate_latest(registry).decode())


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def one(found: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
    (_, value), = found[name]
    return value


def truth(session: Path) -> dict:
    """The run's figures in batch form, as the supervisor's summary computes them."""
    reader = SessionReader(session, use_cache=False).load()
    return summarize(reader.meta, reader.steps(), reader.frame("compile"),
                     phases=reader.phases(), samples_from=reader.samples_from)


def copy_of_sample(tmp_path: Path, **meta_changes: object) -> Path:
    session = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, session, ignore=shutil.ignore_patterns(".cache"))
    meta = json.loads((session / "meta.json").read_text())
    meta.update(meta_changes)
    (session / "meta.json").write_text(json.dumps(meta))
    return session


def test_a_recorded_run_without_a_price_exposes_its_speed_and_no_money(tmp_path: Path) -> None:
    session = copy_of_sample(tmp_path)
    found = scrape(model_for(session))  # the exporter's own model (the run is over)
    expected = truth(session)
    assert one(found, "neurotui_steady_samples_per_second") == pytest.approx(
        expected["steady_samples_per_s"], rel=1e-9)
    assert one(found, "neurotui_steady_step_seconds") == pytest.approx(
        expected["step_time_median_s"], rel=1e-6)
    assert one(found, "neurotui_samples_total") == expected["total_samples"]
    assert one(found, "neurotui_step") == expected["steps"]
    assert one(found, "neurotui_running") == 0
    # The rate of the last 30 s, over the steps the dashboard keeps of each rank.
    reader = SessionReader(session, use_cache=False).load()
    kept = reader.steps().groupby("rank").tail(RECENT)
    assert one(found, "neurotui_samples_per_second") == pytest.approx(
        metrics.current_throughput(kept, reader.meta["ended_at"]), rel=1e-9)
    assert {labels["rank"] for labels, _ in found["neurotui_step_seconds"]} == {"0", "1"}
    # No price known: no cost, no samples per dollar, not zeros.
    for absent in ("neurotui_cost_usd", "neurotui_samples_per_dollar",
                   "neurotui_steady_samples_per_dollar", "neurotui_price_usd_per_hour",
                   "neurotui_accelerator_utilization_percent"):
        assert absent not in found
    cpus = found["neurotui_host_cpu_percent"]
    last_host = reader.events["host"][-1]
    assert [v for _, v in cpus] == last_host["cpu"]
    for labels, _ in [s for samples in found.values() for s in samples]:
        assert {labels["job"], labels["node"], labels["instance_type"]} == {
            "sample-cpu-gloo", "vm", ""}


def test_with_a_price_the_money_matches_the_summary(tmp_path: Path) -> None:
    price = {"usd_per_hour": 1.34375, "source": "test", "as_of": None, "spot": False}
    session = copy_of_sample(tmp_path, price=price,
                             instance={"type": "trn1.2xlarge", "source": "test"})
    found = scrape(model_for(session))
    expected = truth(session)
    assert one(found, "neurotui_cost_usd") == pytest.approx(expected["cost_usd"], rel=1e-9)
    assert one(found, "neurotui_steady_samples_per_dollar") == pytest.approx(
        expected["samples_per_dollar_steady"], rel=1e-9)
    assert one(found, "neurotui_price_usd_per_hour") == 1.34375
    sps = one(found, "neurotui_samples_per_second")
    assert one(found, "neurotui_samples_per_dollar") == pytest.approx(sps * 3600 / 1.34375)
    labels, _ = found["neurotui_cost_usd"][0]
    assert labels["instance_type"] == "trn1.2xlarge"


def test_per_rank_step_times_and_neuron_cores_of_a_running_job(tmp_path: Path) -> None:
    session = reference_session(tmp_path)  # 120 steps a rank: within the model's recent
    reader = SessionReader(session, telemetry_history=40)
    model = DashboardModel(reader, FixedClock(T0 + 60), status=lambda: RUNNING)
    found = scrape(model)
    batch = SessionReader(session, use_cache=False).load()
    per_rank = metrics.rank_step_times(batch.steps())
    assert {int(labels["rank"]): v for labels, v in found["neurotui_step_seconds"]} == \
        pytest.approx(per_rank["median_step_s"].to_dict())
    assert one(found, "neurotui_running") == 1
    assert one(found, "neurotui_cost_usd") == pytest.approx(60 / 3600 * 1.34375)
    last = batch.events["neuron"][-1]
    util = {labels["device"]: v for labels, v in found["neurotui_accelerator_utilization_percent"]}
    assert util == {f"nc{c['core']}": c["util"] for c in last["cores"]}
    kinds = {labels["kind"] for labels, _ in found["neurotui_accelerator_memory_used_bytes"]}
    assert kinds == {"neuron"}
    # The clock moves past the telemetry: samples older than STALE_S are left out.
    model.clock = FixedClock(T0 + 200)
    later = scrape(model)
    assert "neurotui_accelerator_utilization_percent" not in later
    assert "neurotui_host_cpu_percent" not in later


def test_a_run_with_no_step_yet_exposes_no_rate(tmp_path: Path) -> None:
    session = cpu_only_session(tmp_path)
    (session / "probe").rename(session / "probe-not-yet")
    (session / "probe").mkdir()
    model = DashboardModel(SessionReader(session), FixedClock(T0 + 3), status=lambda: RUNNING)
    found = scrape(model)
    for absent in ("neurotui_step", "neurotui_step_seconds", "neurotui_samples_per_second",
                   "neurotui_steady_samples_per_second", "neurotui_samples_total"):
        assert absent not in found
    assert one(found, "neurotui_running") == 1


def test_labels_come_from_the_job_of_many_nodes_when_recorded() -> None:
    base = {"id": "20260101-120000-vit", "host": "ip-10-0-0-1",
            "instance": {"type": "trn1.32xlarge"}}
    assert labels_of(base) == {"job": "20260101-120000-vit", "node": "ip-10-0-0-1",
                               "instance_type": "trn1.32xlarge"}
    assert labels_of({**base, "job": {"id": "slurm-42", "node": "node-3"}}) == {
        "job": "slurm-42", "node": "node-3", "instance_type": "trn1.32xlarge"}
    # A node of no job of many nodes: the session's name, the node's recorded name.
    assert labels_of({**base, "job": {"node": "node-3"}})["job"] == "20260101-120000-vit"
    assert labels_of({"id": "x", "instance": None})["node"] == socket.gethostname()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    session = copy_of_sample(tmp_path)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "neurotui.exporter", str(session),
                             "--port", str(port)], cwd=REPO, stderr=subprocess.PIPE)
    try:
        yield proc, f"http://127.0.0.1:{port}/metrics", session
    finally:
        proc.kill()
        proc.wait()


def get(url: str, timeout_s: float = 20.0) -> str:
    deadline = time.time() + timeout_s
    while True:
        try:
            return urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def test_the_exporter_process_serves_the_session_and_a_taken_port_is_its_error(
        exporter: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    _, url, session = exporter
    found = parse(get(url))
    assert one(found, "neurotui_steady_samples_per_second") == pytest.approx(
        truth(session)["steady_samples_per_s"], rel=1e-9)
    port = url.split(":")[2].split("/")[0]
    second = subprocess.run([sys.executable, "-m", "neurotui.exporter", str(session),
                             "--port", port], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert second.returncode == 3
    assert f"cannot serve on 127.0.0.1:{port}" in second.stderr


def test_the_exporter_ends_with_the_process_it_serves_for(tmp_path: Path) -> None:
    session = copy_of_sample(tmp_path)
    port = free_port()
    # A stand-in supervisor: its child is the exporter, told to end with it.
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, os, time; subprocess.Popen([sys.executable, '-m', "
        f"'neurotui.exporter', {str(session)!r}, '--port', '{port}', '--until-pid', "
        "str(os.getpid())]); time.sleep(600)")], cwd=REPO)
    url = f"http://127.0.0.1:{port}/metrics"
    child = None
    try:
        assert "neurotui_step" in get(url)
        child, = psutil.Process(parent.pid).children()
        parent.kill()  # killed, as a supervisor may be: the exporter still ends
        parent.wait()
        child.wait(20)
        with pytest.raises(OSError):
            urllib.request.urlopen(url, timeout=2)
    finally:
        parent.kill()
        parent.wait()
        if child is not None and child.is_running():
            child.kill()


def test_a_supervisor_records_an_exporter_that_cannot_serve_and_goes_on(
        tmp_path: Path) -> None:
    session = reference_session(tmp_path)
    writer = EventWriter(session / "events.jsonl")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exporter = MetricsExporter(session, "127.0.0.1", port, writer,
                                   lambda **changes: update_meta(session, **changes) or True)
        exporter.start()
        assert read_meta(session)["metrics"]["url"] == f"http://127.0.0.1:{port}/metrics"
        assert exporter.child is not None
        exporter.child.wait(60)
        exporter.check()
    writer.close()
    metrics_meta = read_meta(session)["metrics"]
    assert metrics_meta["error"].startswith("exited with code 3: neurotui exporter: cannot "
                                            f"serve on 127.0.0.1:{port}")
    warnings = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()
                if '"warning"' in line]
    (warning,) = warnings
    assert warning["source"] == "exporter" and "training goes on" in warning["message"]
    exporter.check()  # told once
    exporter.close()


def test_the_options_warn_when_others_can_scrape() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser)
    err = io.StringIO()
    assert metrics_config(parser.parse_args([]), err) is None
    assert metrics_config(parser.parse_args(["--metrics-port", "9400"]), err) == {
        "host": "127.0.0.1", "port": 9400}
    assert err.getvalue() == ""
    wide = parser.parse_args(["--metrics-port", "9400", "--metrics-host", "0.0.0.0"])
    assert metrics_config(wide, err) == {"host": "0.0.0.0", "port": 9400}
    assert "WARNING" in err.getvalue()
    with pytest.raises(SystemExit):
        parser.parse_args(["--metrics-port", "70000"])


def test_the_command_line_and_the_supervisor_do_not_load_the_exporter() -> None:
    """prometheus_client and the live model live in the exporter's own process."""
    for module in ("neurotui.cli", "neurotui.supervisor.core"):
        assert loaded_by(module, {"prometheus_client", "numpy"}) == [], module
    assert loaded_by("neurotui.exporter.server", {"textual", "pandas"}) == []
