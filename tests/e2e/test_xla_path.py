"""The XLA code path (the one Neuron uses) runs for real on the CPU with torch-xla."""

from __future__ import annotations

import importlib.util

import pytest

from neurotui import metrics
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from tests.e2e.conftest import only_session, run_cli, torchrun_vit

pytestmark = [pytest.mark.slow, pytest.mark.xla,
              pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None,
                                 reason="torch-xla is installed by .ci/run")]


def test_xla_on_cpu_shows_compile_then_steady_steps(sessions) -> None:
    steps_per_rank = 30
    argv = [a if a != "cpu" else "xla" for a in torchrun_vit("--steps", str(steps_per_rank))]
    result = run_cli(sessions, "run", "--headless", "--interval", "2", "--", *argv,
                     env={"PJRT_DEVICE": "CPU"})
    assert result.returncode == 0, result.stderr + result.stdout
    # Rank 0's own log (torchrun's console, launcher.log, holds torchrun's messages only).
    rank0 = layout.rank_log_files(only_session(sessions))[0]
    assert any("device=xla" in log.read_text() for log in rank0)
    steps = SessionReader(only_session(sessions)).load().steps()
    assert steps.groupby("rank")["step"].max().to_dict() == {0: steps_per_rank,
                                                             1: steps_per_rank}
    steady = metrics.steady_state(steps)
    assert steady is not None and steady.samples_per_s and steady.samples_per_s > 0
    for _, rank_steps in steps.groupby("rank"):
        first = rank_steps.sort_values("step")["dt"].iloc[:3].max()
        # The first steps hold graph compilation: far longer than the steady steps.
        assert first > 5 * steady.step_time_median, (first, steady.step_time_median)
