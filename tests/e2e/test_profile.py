"""Issue #62's "done when" for `neurotui profile`, on real training: while an unmodified 2-rank
torchrun job runs on the CPU, `neurotui profile NAME --steps 5` exits 0 having written a trace
per rank into the session, prints the top aten:: operators, and the job goes on to complete.
A job that cannot be profiled (not PyTorch, no automatic probe, ended) is told why."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel
from neurotui.profiling.trace import load_trace
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus, session_status
from tests.e2e.conftest import (
    REPO,
    meta,
    neurotui_argv,
    run_cli,
    torchrun_vit,
    wait_for,
)

pytestmark = pytest.mark.slow


def start_run(sessions: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(neurotui_argv(sessions, "run", "--headless", "--interval", "5",
                                          *argv), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=REPO)


def profile_records(session: Path) -> list[dict]:
    found = []
    for path in sorted((session / "probe").glob("auto-rank-*.jsonl")):
        for line in path.read_text().splitlines():
            if '"profile"' in line:
                found.append(json.loads(line))
    return found


def test_a_running_two_rank_job_is_profiled_and_completes(sessions: Path) -> None:
    run = start_run(sessions, "--name", "vit", "--", *torchrun_vit("--steps", "2000"))
    try:
        session = wait_for(lambda: [p for p in sessions.iterdir()], 60, "the session")[0]
        wait_for(lambda: len(list((session / "probe").glob("auto-rank-*.jsonl"))) == 2, 120,
                 "both ranks' first steps")
        profiled = run_cli(sessions, "profile", session.name, "--steps", "5",
                           "--timeout", "120", timeout=200)
        assert profiled.returncode == 0, profiled.stdout + profiled.stderr
        out, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out
    print(profiled.stdout)

    done = [r for r in profile_records(session) if r["what"] == "done"]
    assert sorted(r["rank"] for r in done) == [0, 1]
    for record in done:
        assert record["last_step"] - record["first_step"] == 4
        trace = load_trace(session / record["file"])  # gzipped trace JSON
        operators = {e["name"] for e in trace["traceEvents"]
                     if isinstance(e, dict) and str(e.get("name", "")).startswith("aten::")}
        assert len(operators) >= 10, operators
    # Each rank's summary lists its top operators, aten:: among them.
    for rank in (0, 1):
        section = profiled.stdout.split(f"\nrank {rank} (")[1].split("\n\n")[0]
        assert len(set(re.findall(r"  (aten::\w+)", section))) >= 3, section
    assert "ranks differ most in" in profiled.stdout

    # The job went on to its last step in both ranks, and the session read back whole.
    assert meta(session)["exit"]["reason"] == "completed"
    reader = SessionReader(session).load()
    assert reader.steps().groupby("rank")["step"].max().to_dict() == {0: 2000, 1: 2000}
    assert not reader.problems.unknown_kinds
    assert {r["what"] for r in reader.events["profile"]} == {"started", "done"}
    # The dashboard (and replay) marks the steps profiled and says where the traces are.
    model = DashboardModel(SessionReader(session), FixedClock(float(meta(session)["ended_at"])),
                           throttle=False,
                           status=lambda: SessionStatus("completed", False, "exit code 0"))
    alerts = {a.key: a for a in model.refresh().alerts}
    mark = alerts["profiles"].evidence[0]
    assert mark.endswith(f"profiled (not steady-state times): traces in "
                         f"{Path(done[0]['file']).parent}/"), mark
    assert all(f"{r['first_step']}-{r['last_step']} of rank" in mark for r in done), mark


def test_a_job_that_cannot_be_profiled_is_told_why(sessions: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    plain = start_run(sessions, "--name", "sleeper", "--", *sleeper)
    unprobed = start_run(sessions, "--name", "unprobed", "--no-auto-probe", "--", *sleeper)
    try:
        wait_for(lambda: sum(session_status(p).state == "running"
                             for p in sessions.iterdir()) == 2, 60, "both jobs")
        told = run_cli(sessions, "profile", "sleeper", timeout=60)
        assert told.returncode == 1
        assert "no rank has stepped a PyTorch optimizer" in told.stderr, told.stderr
        told = run_cli(sessions, "profile", "unprobed", timeout=60)
        assert told.returncode == 1
        assert "without the automatic probe" in told.stderr, told.stderr
        told = run_cli(sessions, "profile", timeout=60)  # two running: name one
        assert told.returncode == 2 and "name one of" in told.stderr, told.stderr

        stopped = run_cli(sessions, "stop", "sleeper", timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        plain.communicate(timeout=120)
        told = run_cli(sessions, "profile", "sleeper", timeout=60)
        assert told.returncode == 1 and "is not running (stopped)" in told.stderr, told.stderr
        assert not any((p / "profiles").exists() for p in sessions.iterdir())
    finally:
        for run in (plain, unprobed):
            if run.poll() is None:
                run.kill()
