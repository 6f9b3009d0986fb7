"""Issue #16's "done when" for the step breakdown, on real training: a run whose DataLoader is
starved on purpose (1 worker, heavy augmentation) shows data loading as the largest share of
the step, as the dashboard shows it over the recorded session; a healthy run does not.

Two short runs of the tiny ViT (the vit-tiny-cpu preset's model: 32 px, dim 64, depth 2,
batch 16 per rank, 2 CPU ranks with gloo), 40 steps each: about 10-15 s apiece here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neurotui.live.clock import FixedClock
from neurotui.live.model import BreakdownState, DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.ui.widgets.breakdown import breakdown_line
from tests.e2e.conftest import TRAIN_VIT, meta, only_session, run_cli

pytestmark = pytest.mark.slow


def tiny_vit(*extra: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
            str(TRAIN_VIT), "--model", "vit-tiny", "--image-size", "32", "--batch-size", "16",
            "--device", "cpu", "--steps", "40", *extra]


def recorded_breakdown(sessions: Path, *runner_args: str) -> BreakdownState:
    result = run_cli(sessions, "run", "--headless", "--interval", "5", "--",
                     *tiny_vit(*runner_args))
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    ended = float(meta(session)["ended_at"])
    # What the dashboard shows at the run's end (attach or replay): the live model's state.
    model = DashboardModel(SessionReader(session), FixedClock(ended), throttle=False,
                           status=lambda: SessionStatus("completed", False, "exit code 0"))
    state = model.refresh().breakdown
    assert state is not None and state.job is not None, state
    shares = dict(zip(state.job.names, state.job.shares, strict=True))
    print(f"{' '.join(runner_args) or 'healthy'}: "
          + ", ".join(f"{name} {share:.1%}" for name, share in shares.items())
          + f" over {state.job.steps} steps; "
          + breakdown_line(state, 100, ascii_mode=True).plain)
    return state


def test_a_starved_loader_shows_as_the_largest_share_and_a_healthy_one_does_not(
        tmp_path: Path) -> None:
    starved = recorded_breakdown(tmp_path / "starved", "--workers", "1", "--augment", "heavy")
    assert starved.job is not None
    assert starved.job.names[:4] == ("data", "forward", "backward", "optimizer")
    assert starved.job.largest() == "data"
    assert all(rank.largest() == "data" for rank in starved.ranks), starved.ranks
    assert [rank.rank for rank in starved.ranks] == [0, 1]

    healthy = recorded_breakdown(tmp_path / "healthy")  # default workers, no augmentation
    assert healthy.job is not None and healthy.job.largest() != "data"
    # Starved, the data wait is several times the healthy one's.
    starved_data = starved.job.median_s[starved.job.names.index("data")]
    healthy_data = healthy.job.median_s[healthy.job.names.index("data")]
    assert starved_data > 5 * healthy_data
