"""Training outlives the terminal, the dashboard and the supervisor; stop leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.status import session_status
from tests.e2e.conftest import (
    REPO,
    alive,
    job_processes,
    meta,
    neurotui_argv,
    only_session,
    probe_step_count,
    run_cli,
    torchrun_vit,
    wait_for,
)

pytestmark = pytest.mark.slow
STEPS = 60


def wait_first_steps(sessions) -> object:
    return wait_for(lambda: [p for p in sessions.iterdir() if (p / "probe").is_dir()
                             and probe_step_count(p) >= 4], 120, "the first steps")[0]


def wait_completed(session, timeout: float = 240) -> None:
    wait_for(lambda: meta(session).get("exit"), timeout, "the run to finish")
    assert meta(session)["exit"]["reason"] == "completed"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by .ci/run")
def test_training_survives_the_terminal_hanging_up(sessions, tmp_path) -> None:
    socket = str(tmp_path / "tmux.sock")
    cmd = " ".join(neurotui_argv(sessions, "run", "--headless", "--",
                                 *torchrun_vit("--steps", str(STEPS))))
    subprocess.run(["tmux", "-S", socket, "new-session", "-d", "-x", "120", "-y", "30",
                    f"cd {REPO} && {cmd}"], check=True)
    try:
        session = wait_first_steps(sessions)
    finally:
        # Closing the terminal sends SIGHUP to everything on it, as a dropped SSH link does.
        subprocess.run(["tmux", "-S", socket, "kill-server"], check=False)
    wait_completed(session)
    assert probe_step_count(session) == 2 * STEPS


def test_training_survives_the_dashboard_being_killed(sessions) -> None:
    follower = subprocess.Popen(neurotui_argv(sessions, "run", "--headless", "--",
                                              *torchrun_vit("--steps", str(STEPS))),
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    session = wait_first_steps(sessions)
    follower.kill()
    follower.wait()
    wait_completed(session)
    assert probe_step_count(session) == 2 * STEPS


def test_training_survives_the_supervisor_being_killed(sessions) -> None:
    # Long enough that the job is surely still running when its supervisor is killed: 60
    # steps of the micro ViT can end before the kill on a fast machine (seen as "lost").
    steps = 10 * STEPS
    assert run_cli(sessions, "run", "--detach", "--",
                   *torchrun_vit("--steps", str(steps))).returncode == 0
    session = wait_first_steps(sessions)
    supervisor = psutil.Process(meta(session)["supervisor_pid"])
    supervisor.kill()
    supervisor.wait(10)
    assert session_status(session).state == "unsupervised"
    job = psutil.Process(meta(session)["job_pid"])
    job.wait(240)
    recorded = SessionReader(session).load().steps()
    assert recorded.groupby("rank")["step"].max().to_dict() == {0: steps, 1: steps}
    assert session_status(session).state == "lost"
    # What the job printed unsupervised waits in memory (the spool) until a command finds
    # the session lost: then it is copied into the session's logs, and the memory freed.
    spool = Path(meta(session)["spool"])
    assert spool.is_dir()
    listed = run_cli(sessions, "ls")
    assert "bytes of output it left in memory were copied into logs/" in listed.stderr
    assert not spool.exists() and meta(session)["spool"] is None
    rank0 = layout.rank_log_files(session)[0]
    assert any("runner: done" in p.read_text() for p in rank0)


def test_sigterm_to_the_supervisor_leaves_training_running(sessions) -> None:
    assert run_cli(sessions, "run", "--detach", "--",
                   *torchrun_vit("--steps", str(STEPS))).returncode == 0
    session = wait_first_steps(sessions)
    os.kill(meta(session)["supervisor_pid"], signal.SIGTERM)
    psutil.Process(meta(session)["job_pid"]).wait(240)
    assert probe_step_count(session) == 2 * STEPS
    warnings = SessionReader(session).load().events["warning"]
    assert any("continues unsupervised" in w["message"] for w in warnings)


@pytest.mark.parametrize("supervised", [True, False], ids=["supervised", "supervisor-dead"])
def test_stop_is_graceful_and_leaves_no_process(sessions, supervised: bool) -> None:
    assert run_cli(sessions, "run", "--detach", "--stop-timeout", "5", "--",
                   *torchrun_vit("--steps", "100000", "--workers", "1")).returncode == 0
    session = wait_first_steps(sessions)
    procs = wait_for(lambda: len(job_processes(session)) >= 5 and job_processes(session), 60,
                     "launcher, 2 ranks and their DataLoader workers")
    if not supervised:
        psutil.Process(meta(session)["supervisor_pid"]).kill()
    started = time.time()
    result = run_cli(sessions, "stop", session.name[-8:], timeout=120)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: not alive(procs), 30, "every job process to be gone")
    assert time.time() - started < 60
    m = meta(only_session(sessions))
    assert m["exit"]["reason"] == "stopped"
    events = SessionReader(session).load().events
    assert events["stop_request"][0]["by"] == "cli"
    assert events["stop_escalate"][0]["signal"] == "SIGINT"


def test_restart_through_the_control_channel(sessions) -> None:
    assert run_cli(sessions, "run", "--detach", "--stop-timeout", "5", "--",
                   *torchrun_vit("--steps", "100000")).returncode == 0
    session = wait_first_steps(sessions)
    first_pid = meta(session)["job_pid"]
    assert run_cli(sessions, "stop", "--restart").returncode == 0
    wait_for(lambda: meta(session).get("attempt") == 1, 60, "the second attempt")
    assert meta(session)["job_pid"] != first_pid
    wait_for(lambda: 1 in set(SessionReader(session).load().steps()["attempt"]), 120,
             "steps of the second attempt")
    assert run_cli(sessions, "stop", timeout=120).returncode == 0
    m = meta(session)
    assert m["exit"]["reason"] == "stopped" and m["exit"]["attempts"] == 2
    events = SessionReader(session).load().events
    assert [e["attempt"] for e in events["proc_start"]] == [0, 1]
    assert events["stop_request"][0]["restart"] is True


def test_attach_adopts_a_job_whose_supervisor_died(sessions) -> None:
    """A new supervisor takes the job over: log steps read on from the last mark (none lost,
    none twice), telemetry again, and the end recorded, its exit code unknown."""
    steps = 100 * STEPS  # about 30 s here: still running when it is adopted
    assert run_cli(sessions, "run", "--detach", "--no-auto-probe", "--",
                   *torchrun_vit("--steps", str(steps)),
                   env={"NEUROTUI_PROBE": "0"}).returncode == 0  # steps from the log lines
    session = wait_for(lambda: [p for p in sessions.iterdir() if (p / "meta.json").exists()
                                and len(SessionReader(p).load().steps()) >= 8], 120,
                       "the first log steps")[0]
    supervisor = psutil.Process(meta(session)["supervisor_pid"])
    supervisor.kill()
    supervisor.wait(10)
    assert session_status(session).state == "unsupervised"
    time.sleep(2)  # steps go by that nobody records yet
    result = run_cli(sessions, "attach", "--headless", session.name, timeout=300)
    assert "a new one adopted the running job" in result.stderr
    # Not its child: the exit code cannot be known, and is not claimed to be 0.
    assert "ended (exit code unknown" in result.stdout
    assert result.returncode == 1, result.stdout + result.stderr
    m = meta(session)
    assert m["exit"]["reason"] == "ended" and m["exit"]["code"] is None
    assert session_status(session).state == "ended"
    reader = SessionReader(session).load()
    recorded = reader.steps()
    assert set(recorded["src"]) == {"log"}
    for rank in (0, 1):
        mine = recorded[recorded["rank"] == rank]["step"]
        assert sorted(mine) == list(range(1, steps + 1)), f"rank {rank}"  # none lost or twice
    assert any(e["t"] > m["adopted_at"] for e in reader.events["host"])
    assert any("adopted the running job" in w["message"] for w in reader.events["warning"])
    assert reader.events["proc_exit"][-1]["code"] is None


CHECKPOINT_ON_INTERRUPT = """
import signal, sys, time
from pathlib import Path
def interrupted(signum, frame):
    Path(sys.argv[1]).write_text("checkpoint written on SIGINT")
    sys.exit(0)
ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
Path(sys.argv[1] + ".hup").write_text("ignored" if ignored else "default")
signal.signal(signal.SIGINT, interrupted)
while True:
    time.sleep(0.1)
"""


def test_stop_delivers_sigint_to_a_plain_script_which_checkpoints(sessions, tmp_path) -> None:
    script, marker = tmp_path / "train.py", tmp_path / "checkpoint"
    script.write_text(CHECKPOINT_ON_INTERRUPT)
    assert run_cli(sessions, "run", "--detach", "--stop-timeout", "20", "--",
                   sys.executable, str(script), str(marker)).returncode == 0
    hup = Path(f"{marker}.hup")
    wait_for(hup.exists, 30, "the script to start")
    # A shell starts a job with SIGHUP (and SIGINT) at their defaults: so does neurotui.
    assert hup.read_text() == "default"
    started = time.time()
    result = run_cli(sessions, "stop", timeout=60)
    assert result.returncode == 0, result.stderr
    assert time.time() - started < 10, "SIGINT was heard, not waited out to SIGTERM"
    assert marker.read_text() == "checkpoint written on SIGINT"
    session = only_session(sessions)
    assert meta(session)["exit"]["reason"] == "stopped"
    assert [e["signal"] for e in SessionReader(session).load().events["stop_escalate"]] == \
        ["SIGINT"]
