"""The loss and memory alerts on real jobs on the CPU, through the real `neurotui run
--headless`: on 2-rank torchrun jobs, a bad batch's loss spike and a NaN that spreads to every
rank (tests/scripts/loss_and_memory.py), and a rank that keeps a few MiB more at each step; a
NaN recorded through probe.step(loss=). Each told as it happens, recorded in the session, and
counted by `neurotui compare`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.timeline import Timeline
from tests.e2e.conftest import REPO, only_session, run_cli

pytestmark = pytest.mark.slow

SCRIPT = REPO / "tests" / "scripts" / "loss_and_memory.py"


def _run(sessions: Path, env: dict[str, str]) -> tuple[str, Path]:
    result = run_cli(sessions, "run", "--headless", "--interval", "5",
                     "--memory-creep-window", "10", "--",
                     sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                     str(SCRIPT), env=env, timeout=240)
    # The job goes on to its last step and exits 0 whatever its loss did.
    assert result.returncode == 0, result.stderr + result.stdout
    assert "completed (exit code 0)" in result.stdout
    return result.stdout, only_session(sessions)


def _compared(sessions: Path, session: Path) -> dict:
    compared = run_cli(sessions, "compare", session.name, "--format", "json", timeout=120)
    assert compared.returncode == 0, compared.stderr
    return json.loads(compared.stdout)[0]


def _started(session: Path) -> dict[str, list[dict]]:
    """Alert key -> its recorded starts."""
    starts: dict[str, list[dict]] = {}
    for record in SessionReader(session).load().events.get("alert", ()):
        if record.get("state") == "start":
            starts.setdefault(str(record["key"]), []).append(record)
    return starts


def test_a_spike_and_a_nan_loss_raise_their_alerts_and_memory_stays_quiet(sessions) -> None:
    out, session = _run(sessions, {"STEPS": "120", "SPIKE_AT": "60", "NAN_AT": "100"})
    lines = out.splitlines()
    # Told as they happened: the spike at its step, the NaN at its first step and rank.
    spike = [line for line in lines if line.startswith("neurotui: alert (warning): loss spike")]
    assert len(spike) == 1, out
    assert spike[0].startswith("neurotui: alert (warning): loss spike on rank 0: above 3x the "
                               "recent median: rank 0: loss ")
    assert " at step 60 = " in spike[0] and "(a log line)" in spike[0]
    nan = [line for line in lines if line.startswith("neurotui: alert (error): loss turned nan")]
    assert nan and nan[0].startswith(
        "neurotui: alert (error): loss turned nan at step 100 on rank 0"), out
    starts = _started(session)
    assert set(starts) == {"loss-spike", "loss-nonfinite"}, starts
    evidence = starts["loss-nonfinite"][-1]["evidence"]
    assert evidence[0].startswith("rank 0: loss nan at step 100 (a log line); the last finite "
                                  "loss: ")
    assert evidence[1].startswith("rank 1: loss nan at step 101")  # DDP carried it over
    # Replayed: on at the NaN's moment, with the evidence recorded then.
    at = float(starts["loss-nonfinite"][0]["t"]) + 0.5
    timeline = Timeline(session)
    try:
        view = timeline.view()
        view.seek(at)
        shown = {a.key: a for a in DashboardModel(view, FixedClock(at), throttle=False)
                 .refresh().alerts}
    finally:
        timeline.close()
    assert shown["loss-nonfinite"].title.startswith("loss turned nan at step 100 on rank 0")
    row = _compared(sessions, session)
    assert row["alerts_by_key"] == "loss-nonfinite x1, loss-spike x1"
    assert row["alerts"] == 2


def test_a_nan_loss_through_probe_step_is_told(sessions) -> None:
    result = run_cli(sessions, "run", "--headless", "--interval", "5", "--",
                     sys.executable, str(REPO / "tests" / "scripts" / "probe_loss.py"),
                     env={"STEPS": "60", "NAN_AT": "40"}, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    assert ("neurotui: alert (error): loss turned nan at step 40 on rank 0: rank 0: loss nan "
            "at step 40 (probe.step()); the last finite loss: ") in result.stdout
    session = only_session(sessions)
    assert _compared(sessions, session)["alerts_by_key"] == "loss-nonfinite x1"


def test_a_rank_that_leaks_memory_raises_the_creep_alert_and_the_healthy_one_does_not(
        sessions) -> None:
    out, session = _run(sessions, {"STEPS": "200", "LEAK_RANK": "1", "LEAK_MB": "2"})
    creep = [line for line in out.splitlines()
             if line.startswith("neurotui: alert (warning): host memory creeping up")]
    assert len(creep) == 1, out
    assert creep[0].startswith("neurotui: alert (warning): host memory creeping up on rank 1: "
                               "rank 1 (pid ")
    assert "the host's " in creep[0] and " free would be used up in " in creep[0]
    starts = _started(session)
    assert set(starts) == {"memory-creep"}, starts
    [told] = starts["memory-creep"]
    assert len(told["evidence"]) == 2  # rank 1 alone, then the host's time left
    # 2 MiB a step at about 9 steps a second: some 1,100 MiB/min.
    rate = float(told["evidence"][0].split(" growing ")[1].split(" MiB/min")[0]
                 .replace(",", ""))
    assert 500 < rate < 1500, told["evidence"]
    assert _compared(sessions, session)["alerts_by_key"] == "memory-creep x1"
