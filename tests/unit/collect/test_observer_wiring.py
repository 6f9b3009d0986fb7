"""`run --neuron-metrics-url`: the /metrics source wired into the supervisor's telemetry.

The real command line and supervisor run a real (sleeping) job while a loopback HTTP server
serves the real neuron-monitor-prometheus capture (tests/fixtures/telemetry/SOURCES.md); the
session must hold `neuron` events from it, and a password in the URL must reach the scrape and
nowhere else (meta.json, events, the supervisor's argv and log, the job's environment).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from neurotui.collect.metricsurl import METRICS_URL_ENV, metrics_url
from neurotui.collect.observer import SOURCE
from neurotui.collect.telemetry import Telemetry
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from tests.e2e.conftest import meta, only_session, run_cli
from tests.standins import tool_captures as replay
from tests.standins.metrics_page import MetricsPage

CAPTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "telemetry"
           / "neuron-monitor-prometheus_inf1.xlarge_real-capture_datadog-fixture.txt")
JOB_S = 6.5
"""The job runs past one scrape period (5 s), so that counts per scrape are recorded too."""


@pytest.fixture
def served() -> Iterator[MetricsPage]:
    """A loopback /metrics server answering with the capture; keeps each request's auth."""
    page = MetricsPage(CAPTURE.read_bytes())
    yield page
    page.close()


def no_neuron_monitor_env() -> dict[str, str]:
    """PATH without any neuron-monitor (a stand-in left on it would be read instead)."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "neuron-monitor").exists()]
    return {"PATH": os.pathsep.join(dirs)}


def job_argv(env_file: Path) -> list[str]:
    """A job that writes its environment's names to a file, then sleeps past a scrape."""
    code = (f"import json, os, time; json.dump(sorted(os.environ), open({str(env_file)!r}, 'w'))"
            f"; time.sleep({JOB_S})")
    return [sys.executable, "-c", code]


def test_run_records_neuron_events_scraped_from_the_url(tmp_path: Path,
                                                        served: MetricsPage) -> None:
    url = served.url
    result = run_cli(tmp_path / "sessions", "run", "--headless", "--neuron-metrics-url", url,
                     "--", *job_argv(tmp_path / "env.json"), env=no_neuron_monitor_env())
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(tmp_path / "sessions")
    assert meta(session)["config"]["neuron_metrics_url"] == url
    events = SessionReader(session).load().events
    neuron = events.get("neuron", [])
    assert len(neuron) >= 2, events.get("source_status")
    assert {e["source"] for e in neuron} == {f"neuron /metrics {url}"}
    first = neuron[0]
    assert first["instance_type"] == "inf1.xlarge"
    assert first["device_mem_used"] == 377802024  # the capture's runtime device bytes
    assert first["exec_errors"] is None  # first scrape: growth not known yet
    assert neuron[1]["exec_errors"] == 0  # the same page again: the counters did not grow
    statuses = events.get("source_status", [])
    assert [s["ok"] for s in statuses if s["source"] == SOURCE] == [True]
    # Neuron metrics came from the URL: neuron-monitor's absence is not reported as missing.
    assert not any("neuron-monitor not found" in str(s.get("message")) for s in statuses)
    instance = (meta(session).get("instance") or {})
    if instance.get("source") == "neuron /metrics" or events.get("instance"):
        # Unless another source (IMDS, a price override) named the instance first.
        assert instance["type"] == "inf1.xlarge"
        assert events["instance"][0]["source"] == "neuron /metrics"


def test_credentials_travel_by_environment_only(tmp_path: Path, served: MetricsPage) -> None:
    url = f"http://scraper:s3cret@127.0.0.1:{served.port}/metrics"
    env_file = tmp_path / "env.json"
    sessions = tmp_path / "sessions"
    result = run_cli(sessions, "run", "--detach", "--neuron-metrics-url", url, "--",
                     *job_argv(env_file), env=no_neuron_monitor_env())
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    supervisor = psutil.Process(meta(session)["supervisor_pid"])
    # Any user can read a process's argv (/proc/PID/cmdline); its environment, only its
    # owner: the password goes there.
    assert not any("s3cret" in part for part in supervisor.cmdline())
    assert "s3cret" in supervisor.environ().get(METRICS_URL_ENV, "")
    deadline = time.time() + 60
    while meta(session).get("exit") is None and time.time() < deadline:
        time.sleep(0.2)
    assert meta(session).get("exit") is not None
    # The scrape authenticated (base64 of scraper:s3cret): the password reached the supervisor.
    assert served.auth and set(served.auth) == {"Basic c2NyYXBlcjpzM2NyZXQ="}
    assert meta(session)["config"]["neuron_metrics_url"] == \
        f"http://127.0.0.1:{served.port}/metrics"
    assert SessionReader(session).load().events.get("neuron")
    for path in session.rglob("*"):
        if path.is_file():
            assert b"s3cret" not in path.read_bytes(), path
    assert "s3cret" not in result.stdout + result.stderr
    # The job did not inherit the variable that carried the URL.
    assert METRICS_URL_ENV not in json.loads(env_file.read_text())


def test_metrics_url_takes_the_credentials_out_of_the_environment() -> None:
    recorded = {"neuron_metrics_url": "http://host:8000/metrics"}
    environ = {METRICS_URL_ENV: "http://u:p@host:8000/metrics", "HOME": "/root"}
    assert metrics_url(recorded, environ) == "http://u:p@host:8000/metrics"
    assert environ == {"HOME": "/root"}
    # A variable for another URL is not taken for this one; without a URL there is none.
    other = {METRICS_URL_ENV: "http://u:p@elsewhere:8000/metrics"}
    assert metrics_url(recorded, other) == "http://host:8000/metrics" and not other
    leftover = {METRICS_URL_ENV: "http://u:p@host:8000/metrics"}
    assert metrics_url({}, leftover) is None and not leftover


@pytest.fixture
def session(tmp_path: Path) -> Path:
    d = tmp_path / "session"
    (d / "logs").mkdir(parents=True)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "exit": None})
    return d


def test_neuron_monitor_wins_over_the_url(tmp_path: Path, session: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          served: MetricsPage) -> None:
    bin_dir = replay.install(tmp_path / "bin")
    for tool in replay.TOOLS:
        if tool != "neuron-monitor":
            (bin_dir / tool).unlink()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    writer = EventWriter(session / layout.EVENTS)
    url = f"http://127.0.0.1:{served.port}/metrics"
    telemetry = Telemetry(session, writer, time.time(), metrics_url=url)
    assert telemetry.monitor is not None and telemetry.observer is None
    deadline = time.time() + 1.0
    while time.time() < deadline:
        telemetry.poll(time.time(), frozenset())
        time.sleep(0.05)
    telemetry.close()
    writer.close()
    events = SessionReader(session).load().events
    (warning,) = events["warning"]
    assert warning["source"] == SOURCE and warning["message"] == (
        f"{url} not scraped: neuron-monitor runs here and is read instead")
    assert not served.auth  # never fetched
    assert all(e.get("source") != f"neuron /metrics {url}" for e in events.get("neuron", []))
