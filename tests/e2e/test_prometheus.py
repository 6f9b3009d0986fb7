"""A real Prometheus server (Debian's `prometheus`) scrapes `neurotui run --metrics-port` on
loopback while a real torchrun training runs (on a stand-in Neuron machine: neuron-ls and
neuron-monitor replay real captures, so the run is priced and has NeuronCores), and what it
stored matches the figures the session recorded."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import REPO, meta, neurotui_argv, only_session, torchrun_vit, wait_for
from tests.standins import tool_captures as replay

pytestmark = pytest.mark.slow
PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def query(server: str, promql: str) -> list[dict]:
    url = f"{server}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            body = json.load(answer)
    except OSError:
        return []  # not up yet
    assert body["status"] == "success", body
    return body["data"]["result"]


def start_prometheus(tmp_path: Path, target_port: int) -> tuple[subprocess.Popen[bytes], str]:
    assert PROMETHEUS is not None
    port = free_port()
    config = tmp_path / "prometheus.yml"
    # honor_labels: our `job` label (the training job) wins over the scrape job's name.
    config.write_text(f"""\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: neurotui
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
""")
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc, f"http://127.0.0.1:{port}"


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def value(results: list[dict]) -> float:
    (result,) = results
    return float(result["value"][1])


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary (.ci/run installs "
                                               "Debian's prometheus package)")
def test_a_real_prometheus_scrapes_a_real_run(sessions: Path, tmp_path: Path) -> None:
    bin_dir = replay.install(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "AWS_EC2_METADATA_DISABLED": "true",
           # Its records alternate between one without a runtime (no cores) and one with:
           # a period that does not divide the supervisor's second lets both be the last.
           "STANDIN_PERIOD": "0.15"}
    port = free_port()
    run = subprocess.Popen(
        neurotui_argv(sessions, "run", "--headless", "--interval", "2", "--metrics-port",
                      str(port), "--", *torchrun_vit("--steps", "2500")),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    prometheus, server = start_prometheus(tmp_path, port)
    try:
        # Stored by Prometheus while training runs: the job's samples/s, labelled.
        found = wait_for(lambda: query(server, "neurotui_samples_per_second"), 180,
                         "Prometheus to store neurotui_samples_per_second")
        assert isinstance(found, list)
        session = only_session(sessions)
        (sample,) = found
        labels = sample["metric"]
        assert labels["job"] == session.name
        assert labels["node"] == socket.gethostname()
        assert labels["instance_type"] == "trn1.2xlarge"
        assert float(sample["value"][1]) > 0
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err.decode()
        m = meta(session)
        assert m["metrics"]["url"] == f"http://127.0.0.1:{port}/metrics"
        assert "error" not in m["metrics"]
        # The exporter ends with the run (its supervisor ends it just after the summary).
        wait_for(lambda: gone(m["metrics"]["pid"]), 10, "the exporter's end")
        summary = m["summary"]
        time.sleep(2)  # the last scrapes are stored
        # The last values Prometheus stored against the run's recorded figures.
        last = {name: value(query(server, f"last_over_time({name}[10m])")) for name in (
            "neurotui_steady_samples_per_second", "neurotui_samples_total",
            "neurotui_cost_usd", "neurotui_price_usd_per_hour")}
        assert last["neurotui_price_usd_per_hour"] == summary["usd_per_hour"]
        ranks = query(server, "last_over_time(neurotui_step_seconds[10m])")
        assert {r["metric"]["rank"] for r in ranks} == {"0", "1"}
        cores = query(server, "last_over_time(neurotui_accelerator_utilization_percent[10m])")
        assert {(c["metric"]["device"], c["metric"]["kind"]) for c in cores} == {
            ("nc0", "neuron"), ("nc1", "neuron")}
        # Scraped up to a second before the end (or after it): within a few percent.
        assert last["neurotui_steady_samples_per_second"] == pytest.approx(
            summary["steady_samples_per_s"], rel=0.05)
        assert 0.9 * summary["total_samples"] <= last["neurotui_samples_total"] \
            <= summary["total_samples"]
        assert last["neurotui_cost_usd"] == pytest.approx(
            summary["cost_usd"], abs=3 * summary["usd_per_hour"] / 3600)
    finally:
        prometheus.kill()
        prometheus.wait()
        if run.poll() is None:
            run.kill()
            run.wait()
