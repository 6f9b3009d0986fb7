"""The Prometheus exporter's end is told by its real reason: its exit code or the signal that
ended it, and what it wrote since it started; never its start-up line ("serving ..."), nor
an earlier exporter's lines in the same log. Real exporter processes, and a real run whose
exporter is killed while training goes on."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path

from neurotui.session import layout
from neurotui.session.writer import EventWriter, read_meta, update_meta
from neurotui.supervisor.exporting import MetricsExporter
from tests.e2e.conftest import meta, only_session, run_cli, wait_for
from tests.unit.exporter.test_exporter import copy_of_sample, free_port, get

EARLIER = ("neurotui exporter: serving an-earlier-exporter on 127.0.0.1:1\n"
           "OldError: what an earlier exporter of this session died of\n")


def warnings_of(session: Path) -> list[dict[str, object]]:
    return [e for e in map(json.loads, (session / "events.jsonl").read_text().splitlines())
            if e.get("kind") == "warning" and e.get("source") == "exporter"]


def exporter_for(session: Path, port: int) -> tuple[MetricsExporter, EventWriter]:
    writer = EventWriter(session / "events.jsonl")
    return MetricsExporter(session, "127.0.0.1", port, writer,
                           lambda **changes: update_meta(session, **changes) or True), writer


def test_a_killed_exporter_is_told_by_its_signal(tmp_path: Path) -> None:
    session = copy_of_sample(tmp_path)
    (session / layout.EXPORTER_LOG).write_text(EARLIER)  # as an adopted run's log has
    port = free_port()
    exporter, writer = exporter_for(session, port)
    exporter.start()
    try:
        assert "neurotui_step" in get(f"http://127.0.0.1:{port}/metrics")
        assert exporter.child is not None
        exporter.child.send_signal(signal.SIGKILL)  # the OOM killer, a user's kill -9
        exporter.child.wait(30)
        exporter.check()
    finally:
        exporter.close()
        writer.close()
    reason = "was ended by SIGKILL: no error output"
    assert read_meta(session)["metrics"]["error"] == reason
    (warning,) = warnings_of(session)
    assert reason in str(warning["message"]) and "training goes on" in str(warning["message"])
    assert "serving" not in str(warning["message"]) and "OldError" not in str(warning["message"])


def test_an_exporter_that_cannot_serve_says_why_not_what_an_earlier_one_said(
        tmp_path: Path) -> None:
    session = copy_of_sample(tmp_path)
    (session / layout.EXPORTER_LOG).write_text(EARLIER)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exporter, writer = exporter_for(session, port)
        exporter.start()
        assert exporter.child is not None
        exporter.child.wait(60)
        exporter.check()
    writer.close()
    error = read_meta(session)["metrics"]["error"]
    assert error.startswith(f"exited with code 3: neurotui exporter: cannot serve on "
                            f"127.0.0.1:{port}: ")
    assert "OldError" not in error and "earlier" not in error


SLEEPER = [sys.executable, "-c", "import time; print('training', flush=True); time.sleep(120)"]


def test_a_runs_exporter_killed_is_recorded_with_its_signal_and_training_goes_on(
        sessions: Path) -> None:
    port = free_port()
    started = run_cli(sessions, "run", "--detach", "--metrics-port", str(port),
                      "--stop-timeout", "5", "--", *SLEEPER)
    assert started.returncode == 0, started.stderr
    session = only_session(sessions)
    try:
        get(f"http://127.0.0.1:{port}/metrics", timeout_s=60)
        pid = meta(session)["metrics"]["pid"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: meta(session)["metrics"].get("error"), 30, "the exporter's end noted")
        assert meta(session)["metrics"]["error"] == "was ended by SIGKILL: no error output"
        (warning,) = warnings_of(session)
        assert "serving" not in str(warning["message"])
        assert meta(session)["exit"] is None, "training goes on"
    finally:
        assert run_cli(sessions, "stop", timeout=60).returncode == 0
        wait_for(lambda: meta(session).get("exit"), 60, "the run's end")
    assert meta(session)["exit"]["reason"] == "stopped"
