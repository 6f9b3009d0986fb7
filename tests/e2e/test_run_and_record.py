"""`neurotui run` launches real torchrun training, supervises it and records it."""

from __future__ import annotations

import math
import subprocess

import pytest

from neurotui import metrics
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from tests.e2e.conftest import REPO, meta, neurotui_argv, only_session, run_cli, torchrun_vit

pytestmark = pytest.mark.slow


def test_headless_cpu_run_records_both_ranks(sessions) -> None:
    result = run_cli(sessions, "run", "--headless", "--interval", "1", "--name", "cpu",
                     "--dataset-size", "6400", "--", *torchrun_vit("--steps", "40"))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "samples/s" in result.stdout and "completed (exit code 0)" in result.stdout
    session = only_session(sessions)
    reader = SessionReader(session).load()
    steps = reader.steps()
    assert sorted(steps["rank"].unique()) == [0, 1]
    assert steps.groupby("rank")["step"].max().to_dict() == {0: 40, 1: 40}
    assert set(steps["src"]) == {"probe"}
    steady = metrics.steady_state(steps)
    assert steady is not None
    rate = steady.samples_per_s
    # 2 ranks x 8 samples per step on 2 CPU cores: tens to thousands of samples/s.
    assert rate is not None and 10 < rate < 50_000
    m = meta(session)
    assert m["exit"]["code"] == 0 and m["exit"]["reason"] == "completed"
    assert m["versions"]["torch"] and m["ended_at"] > m["started_at"]
    summary = m["summary"]
    assert summary["steady_samples_per_s"] == pytest.approx(rate)
    assert summary["total_samples"] == 2 * 40 * 8 and summary["ranks"] == 2
    assert summary["time_to_first_step_s"] > 0
    # --dataset-size: an epoch's time at the steady rate (no instance, so no price).
    assert m["config"]["dataset_size"] == 6400
    assert summary["epoch_s"] == pytest.approx(6400 / rate) and summary["usd_per_epoch"] is None
    assert "| epoch " in result.stdout
    exits = reader.events["proc_exit"]
    assert len(exits) == 1 and exits[0]["code"] == 0
    assert any("runner: done" in line for line in exits[0]["tail"]["0"])
    # Each rank's lines are in its own log only: torchrun is not asked to copy them to its
    # console (--tee polls every rank log from a thread of its own, launch.py).
    assert any("runner: done" in log.read_text() for log in layout.rank_log_files(session)[0])
    assert "runner: done" not in (session / layout.LAUNCHER_LOG).read_text()
    roles = {p["role"] for e in reader.events["procs"] for p in e["procs"]}
    assert {"launcher", "rank"} <= roles
    assert reader.events["host"][0]["mem_total"] > 0
    assert reader.problems.summary() is None
    # The last log mark (the job's exit forces one) is where each log ends: a replay's end
    # shows the logs whole.
    marks = reader.events["log_offsets"]
    logs = [p for paths in layout.rank_log_files(session).values() for p in paths]
    assert logs and {rel: size for rel, size in marks[-1]["files"].items()
                     if rel != layout.LAUNCHER_LOG} == {
        p.relative_to(session).as_posix(): p.stat().st_size for p in logs}


def test_unmodified_script_steps_come_from_its_log_lines(sessions) -> None:
    result = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--",
                     *torchrun_vit("--steps", "15"), env={"NEUROTUI_PROBE": "0"})
    assert result.returncode == 0, result.stderr
    steps = SessionReader(only_session(sessions)).load().steps()
    assert set(steps["src"]) == {"log"}
    assert steps.groupby("rank")["step"].max().to_dict() == {0: 15, 1: 15}
    assert steps["samples"].eq(8).all() and not math.isnan(steps["loss"].iloc[-1])


def test_a_crashing_rank_is_recorded_and_restarted(sessions) -> None:
    result = run_cli(sessions, "run", "--headless", "--max-restarts", "1",
                     "--restart-backoff", "0.2", "--",
                     *torchrun_vit("--steps", "30", "--fail-at-step", "5", "--fail-rank", "1"))
    assert result.returncode != 0
    session = only_session(sessions)
    reader = SessionReader(session).load()
    exits = reader.events["proc_exit"]
    assert [e["attempt"] for e in exits] == [0, 1]
    assert all(e["code"] not in (0, None) for e in exits)
    assert any("failing on purpose at step 5 on rank 1" in line
               for line in exits[0]["tail"]["1"])
    assert reader.events["restart"][0]["attempt"] == 1
    m = meta(session)
    assert m["exit"]["reason"] == "failed" and m["exit"]["attempts"] == 2
    assert sorted(reader.steps()["attempt"].unique()) == [0, 1]


def test_two_runs_at_once_each_get_their_own_rendezvous_port(tmp_path) -> None:
    """torchrun's default port is the same for every job: side-by-side runs (1 vs 2 workers,
    say) would collide on it. Each supervised run gets a free one."""
    runs = [subprocess.Popen(neurotui_argv(tmp_path / name, "run", "--headless", "--",
                                           *torchrun_vit("--steps", "30")),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             cwd=REPO) for name in ("a", "b")]
    outputs = [p.communicate(timeout=300)[0] for p in runs]
    for name, proc, out in zip(("a", "b"), runs, outputs, strict=True):
        assert proc.returncode == 0, out
        session = only_session(tmp_path / name)
        steps = SessionReader(session).load().steps()
        assert steps.groupby("rank")["step"].max().to_dict() == {0: 30, 1: 30}
    ports = [meta(only_session(tmp_path / n))["command"] for n in ("a", "b")]
    chosen = [cmd[cmd.index("--master-port") + 1] for cmd in ports]
    assert chosen[0] != chosen[1]
