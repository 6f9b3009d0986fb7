"""Issue #14's "done when" for input starvation, on real training: the alert fires on a CPU run
whose DataLoader is starved on purpose and not on a healthy one.

Two runs of tests/scripts/loader_starved.py under `neurotui run --headless` (torchrun, one CPU
rank, one DataLoader worker, the automatic probe timing the DataLoader wait). Starved: each
sample costs the worker about 25 ms of matrix products, a batch of 8 about 200 ms against a
step of about 50 ms. Healthy: the samples are slices of a ready tensor. Each recording is then
replayed, as `neurotui replay` does, at its last step (the run still in steady state), and the
live model's alerts are read there.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from neurotui.live.alerts import WINDOW_S, WORKER_BUSY
from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel, DashboardState
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.session.timeline import Timeline
from tests.e2e.conftest import only_session, run_cli

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "loader_starved.py"
REPLAYING = SessionStatus("running", True, "replay")
STARVED_TRIES = 3


def replayed_at_last_step(sessions: Path, env: dict[str, str]) -> tuple[DashboardState, dict]:
    result = run_cli(sessions, "run", "--headless", "--interval", "5", "--",
                     sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1",
                     str(SCRIPT), env={"WORKERS": "1", **env})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    events = SessionReader(session).load().events
    steps = SessionReader(session).load().steps()
    last_step_t = float(steps["t"].max())
    view = Timeline(session).view()
    view.seek(last_step_t)
    model = DashboardModel(view, FixedClock(last_step_t), status=lambda: REPLAYING,
                           throttle=False)
    state = model.refresh()
    assert state.header.phase == "steady", state.header
    return state, events


def workers_sampled(events: dict, until: float) -> list[float]:
    """The DataLoader worker's CPU % in the procs samples of the alert's window before
    `until` (WINDOW_S)."""
    return [p["cpu"] for e in events["procs"] if until - WINDOW_S < e["t"] <= until
            for p in e["procs"] if p.get("role") == "worker"]


def starved_run(sessions: Path) -> tuple[DashboardState, dict]:
    """The starved run, replayed at its last step; run again (up to STARVED_TRIES in all) where
    this machine did not give its DataLoader worker the core the test needs: the alert is for
    a worker saturated *while* the ranks wait, so a worker held under WORKER_BUSY by other
    load is not a starved loader, and no alert there is right. (Twice on the 2-core dev VM,
    minutes after `.ci/run`'s install, the alert did not come; alone it always did. What it
    lacked was not recorded then: the figures it looks at are in the failure's message now.)"""
    medians = []
    for attempt in range(STARVED_TRIES):
        state, events = replayed_at_last_step(sessions / f"try-{attempt}",
                                              {"COST": "1000", "STEPS": "50"})
        worker_cpu = workers_sampled(events, state.now)
        medians.append(statistics.median(worker_cpu) if worker_cpu else None)
        if medians[-1] is not None and medians[-1] >= WORKER_BUSY:
            return state, events
    raise AssertionError(f"the starved worker never had its core: its median CPU % over the "
                         f"last {WINDOW_S:.0f} s of each try {medians} (the alert needs "
                         f"{WORKER_BUSY})")


def test_starvation_alert_fires_on_a_starved_loader_and_not_on_a_healthy_one(
        tmp_path: Path) -> None:
    starved, events = starved_run(tmp_path / "starved")
    by_key = {a.key: a for a in starved.alerts}
    job = starved.breakdown.job if starved.breakdown is not None else None
    assert "input-starved" in by_key, (  # what the alert looked at, where it did not come
        [(a.key, a.evidence) for a in starved.alerts],
        f"worker CPU %: {workers_sampled(events, starved.now)}",
        f"data share: {job.share('data') if job is not None else None}")
    alert = by_key["input-starved"]
    print("starved:", alert.title, *alert.evidence, alert.advice, sep="\n  ")
    assert alert.evidence[0].startswith("DataLoader workers busy: 1 of 1 at >= 80% of a CPU")
    assert alert.evidence[1].startswith("the ranks wait for the DataLoader")
    # The fix named follows the host: more workers while some CPU has room, else cheaper
    # samples (a loaded test machine can have every CPU busy).
    host = next((e for e in alert.evidence if e.startswith("host: ")), None)
    if host is not None and host.startswith("host: 0 of "):
        assert "every host CPU is busy, so more workers will not help" in (alert.advice or "")
    else:
        assert "raise DataLoader(num_workers=N)" in (alert.advice or "")
    assert starved.breakdown is not None and starved.breakdown.job is not None
    assert (starved.breakdown.job.share("data") or 0.0) >= 0.5

    healthy, events = replayed_at_last_step(tmp_path / "healthy",
                                            {"COST": "0", "STEPS": "120"})
    assert "input-starved" not in {a.key for a in healthy.alerts}, healthy.alerts
    # Not for want of data: the worker was sampled, and the data wait was measured (small).
    job = healthy.breakdown.job if healthy.breakdown is not None else None
    assert job is not None and job.share("data") is not None
    print(f"healthy: data {job.share('data'):.0%} of the step over {job.steps} steps")
    assert (job.share("data") or 1.0) < 0.5
    assert len(workers_sampled(events, healthy.now)) >= 2
