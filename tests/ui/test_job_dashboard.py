"""A job of many nodes in the dashboard, as one run: the job's throughput (the sum of its
nodes'), a row per node with the slowest marked and a lost node shown lost, the machine panels
and the log following the node of the rank picked with [ and ]."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui.live.clock import FixedClock
from neurotui.ui.app import DashboardApp
from neurotui.ui.replay import ReplayApp
from neurotui.ui.widgets.logs import LogPanel
from neurotui.ui.widgets.nodes import NodesPanel
from tests.ui.conftest import screen_text, settle
from tests.ui.sessions import JOB_STEPS as STEPS
from tests.ui.sessions import T0, recorded_job


def job_app(root: Path) -> DashboardApp:
    app = DashboardApp(None, interval_s=3600.0, ascii_mode=False)
    app.bind_job(root, "J", clock=FixedClock(T0 + 1 + STEPS * 0.10), throttle=False)
    return app


@pytest.fixture
def job(tmp_path: Path) -> Path:
    return recorded_job(tmp_path)


async def test_the_job_is_one_run_with_a_row_per_node(job: Path) -> None:
    app = job_app(job)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot)
        state = app.last_state
        assert state is not None and state.nodes is not None
        text = screen_text(app)
        rows = app.query_one(NodesPanel).render().plain
    nodes = {r.name: r for r in state.nodes.rows}
    assert list(nodes) == ["nA", "nB"]
    assert nodes["nA"].ranks == (0, 1) and nodes["nB"].ranks == (2, 3)
    # The job's throughput is its nodes' together; the job is its four ranks.
    assert state.ranks == (0, 1, 2, 3)
    assert state.throughput.now_sps == pytest.approx(
        nodes["nA"].samples_per_s + nodes["nB"].samples_per_s)
    assert nodes["nA"].samples_per_s == pytest.approx(2 * 16 / 0.10, rel=0.05)
    assert nodes["nB"].median_step_s == pytest.approx(0.12) and nodes["nB"].slowest
    assert not nodes["nA"].slowest
    assert nodes["nA"].host_cpu == pytest.approx(20.0)
    assert nodes["nB"].host_cpu == pytest.approx(80.0)
    assert (nodes["nA"].state, nodes["nB"].state) == ("completed", "lost")
    # Cost: both nodes' prices, as the header says.
    assert state.header.price_per_hour == pytest.approx(43.0)
    assert "job J, 2 nodes" in text and "2 x trn1.32xlarge" in text
    assert "Nodes of job J: 2, 1 lost" in text
    lost_line = next(line for line in rows.splitlines() if line[2:].startswith("nB "))
    assert "ago" in lost_line and "slowest" in lost_line


async def test_picking_a_rank_drills_into_its_node(job: Path) -> None:
    app = job_app(job)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot)
        assert app.follower.choice is not None and app.follower.choice.rank == 0
        assert "nA local 0 is global rank 0" in _log(app)
        assert app.last_state is not None and app.last_state.nodes is not None
        assert app.last_state.nodes.focus == "nA"
        for _ in range(3):  # launcher -> 0 -> ... : to global rank 3, node nB's local 1
            await pilot.press("right_square_bracket")
            await settle(pilot)
        assert app.log_choice is not None and app.log_choice.rank == 3
        await settle(pilot)  # the next frame is of the node in focus
        assert "nB local 1 is global rank 3" in _log(app)
        state = app.last_state
        assert state is not None and state.nodes is not None and state.nodes.focus == "nB"
        assert state.host.cpu == (80.0,) * 4  # the host panel is nB's
        assert "node nB" in screen_text(app)
        assert "▸ nB" in app.query_one(NodesPanel).render().plain


def _log(app: DashboardApp) -> str:
    return "\n".join(strip.text for strip in app.query_one(LogPanel).lines)


async def test_replaying_the_job_moves_every_node_on_one_cursor(job: Path) -> None:
    app = ReplayApp(None, paused=True, interval_s=3600.0, ascii_mode=False)
    app.bind_job(job, "J", replay=True)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot)
        state = app.last_state
        assert state is not None and state.nodes is not None and state.header.step is None
        assert [r.state for r in state.nodes.rows] == ["running", "running"]
        await pilot.press("end")
        await settle(pilot)
        state = app.last_state
        assert state is not None and state.nodes is not None
        assert state.header.step == STEPS and state.ranks == (0, 1, 2, 3)
        nodes = {r.name: r for r in state.nodes.rows}
        assert (nodes["nA"].state, nodes["nB"].state) == ("completed", "lost")
        assert nodes["nB"].slowest and "Nodes of job J: 2, 1 lost" in screen_text(app)
        # The job's end is its last node's: nB's last step, after nA had ended.
        assert app.timeline is not None
        assert app.timeline.end == pytest.approx(T0 + 1 + STEPS * 0.12)
