"""Log-parsed step times and samples/s against each script's own wall clock (its truth, written
to a side file), for unmodified scripts under the real `neurotui run`, with the automatic
probe off so that the log lines are the only source: at 0.05 s and at 0.5 s per step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from neurotui import metrics
from neurotui.session.reader import SessionReader
from tests.e2e.conftest import REPO, only_session, run_cli

pytestmark = pytest.mark.slow

SCRIPTS = REPO / "tests" / "scripts"


def truth_step_time(times: list[float], warmup: int = 10) -> float:
    """The median of the script's own step times, past the warm-up steps."""
    return float(np.median(np.diff(times)[warmup:]))


def steady(session: Path) -> metrics.SteadyState:
    steps = SessionReader(session).load().steps()
    assert set(steps["src"].astype(str)) == {"log"}
    state = metrics.steady_state(steps)
    assert state is not None
    return state


@pytest.mark.parametrize("step_s", [0.05, 0.5])
def test_torch_neuronx_lines_give_true_step_time_and_printed_throughput(
        sessions, tmp_path, step_s) -> None:
    truth = tmp_path / "truth"
    steps = 60 if step_s < 0.1 else 25
    result = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--interval", "5",
                     "--instance-type", "inf2.xlarge", "--",
                     sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                     str(SCRIPTS / "neuronx_lines.py"),
                     env={"STEP_S": str(step_s), "STEPS": str(steps), "TRUTH_FILE": str(truth)})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    state = steady(session)
    own = [truth_step_time(json.loads(Path(f"{truth}.{r}").read_text())) for r in (0, 1)]
    assert abs(state.step_time_median / float(np.mean(own)) - 1) < 0.05, (state, own)
    expected_rate = sum(16 / t for t in own)  # what the script printed: batch / its step time
    assert state.samples_per_s is not None
    assert abs(state.samples_per_s / expected_rate - 1) < 0.05, (state, expected_rate)
    assert "samples from printed throughput" in result.stdout.splitlines()[-2]
    assert "samples/$" in result.stdout.splitlines()[-2]


@pytest.mark.parametrize("step_s", [0.05, 0.5])
def test_a_tqdm_bar_on_stderr_counts_steps_across_epochs(sessions, tmp_path, step_s) -> None:
    truth = tmp_path / "truth.json"
    per_epoch = 40 if step_s < 0.1 else 14
    result = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--interval", "5",
                     "--samples-per-step", "32", "--",
                     sys.executable, str(SCRIPTS / "tqdm_loop.py"),
                     env={"STEP_S": str(step_s), "PER_EPOCH": str(per_epoch),
                          "TRUTH_FILE": str(truth)})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    steps = SessionReader(session).load().steps()
    # Two epochs of one bar each: the second continues the count.
    assert int(steps["step"].max()) == 2 * per_epoch
    assert steps["step"].is_monotonic_increasing
    state = steady(session)
    own = truth_step_time(json.loads(truth.read_text()))
    assert abs(state.step_time_median / own - 1) < 0.05, (state, own)
    assert state.samples_per_s is not None
    assert abs(state.samples_per_s / (32 / own) - 1) < 0.05


def test_plain_lines_from_polled_logs_give_true_step_time(sessions, tmp_path) -> None:
    """Where inotify is off, the logs are read at polls, and a read's lines share its stamp
    (about 10 of a rank's lines per read at 20 steps/s here): each line's step time is the
    read's time over its steps, not the whole gap over one step."""
    truth = tmp_path / "truth"
    result = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--interval", "5",
                     "--samples-per-step", "16", "--",
                     sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                     str(SCRIPTS / "ddp_plain_steps.py"),
                     env={"STEPS": "160", "STEP_SLEEP_S": "0.05", "TRUTH_FILE": str(truth),
                          "NEUROTUI_LOG_WATCH": "0"})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    assert json.loads((session / "meta.json").read_text())["log_timing"]["method"] == "poll"
    steps = SessionReader(session).load().steps()
    assert steps.duplicated(["rank", "t"]).mean() > 0.5  # most lines came several to a read
    state = steady(session)
    own = [truth_step_time(json.loads(Path(f"{truth}.{r}").read_text())["steps"])
           for r in (0, 1)]
    assert abs(state.step_time_median / float(np.mean(own)) - 1) < 0.05, (state, own)
    assert state.samples_per_s is not None
    # 16 samples a step for the whole job: 16 over its step time
    assert abs(state.samples_per_s / (16 / float(np.mean(own))) - 1) < 0.05, (state, own)


def test_busy_logs_are_looked_at_by_the_native_thread_and_stamped_when_written(
        sessions, tmp_path) -> None:
    """8 ranks x 20 lines a second: busy, so the logs are looked at on the batch's timer, by
    the native looker's thread (the supervisor's own wakes for its polls only). Every line
    is recorded and stamped with its log's write time: against the script's own clock."""
    truth = tmp_path / "truth"
    ranks, steps = 8, 100
    result = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--interval", "5",
                     "--", sys.executable, "-m", "torch.distributed.run",
                     f"--nproc_per_node={ranks}", str(SCRIPTS / "neuronx_lines.py"),
                     env={"STEP_S": "0.05", "STEPS": str(steps), "TRUTH_FILE": str(truth)})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    timing = json.loads((session / "meta.json").read_text())["log_timing"]
    assert timing["method"] == "inotify" and timing["batch_looks"] == "native thread", timing
    recorded = SessionReader(session).load().steps()
    late = []
    for rank in range(ranks):
        written = json.loads(Path(f"{truth}.{rank}").read_text())
        own = recorded[recorded["rank"] == rank].sort_values("step")
        assert list(own["step"]) == list(range(1, steps + 1))  # every line, once
        late.extend(own["t"].to_numpy() - np.array(written))
    # Written just after the script's clock was read; stamped by the kernel's coarse clock
    # (a few ms behind ours): within milliseconds either way, but for lines read two at once.
    assert np.median(np.abs(late)) < 0.005, np.percentile(late, [1, 50, 99])
    shared = timing["shared_stamp_lines"] / (ranks * steps)
    assert np.mean(np.abs(late) < 0.02) >= 0.95 - shared, (np.percentile(late, [1, 50, 99]),
                                                           shared)
