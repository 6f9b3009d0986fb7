"""The reference study's own script, unmodified (tests/scripts/study_vit_xla.py), under real
torchrun and torch-xla on the CPU: the automatic probe gives it live steps, throughput and
samples per dollar, checked against the figure the script prints itself."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from neurotui import compare, metrics
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from tests.e2e.conftest import REPO, only_session, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.xla,
              pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None,
                                 reason="torch-xla is installed by .ci/run")]

STUDY = REPO / "tests" / "scripts" / "study_vit_xla.py"
STEPS = 60
BATCH = 16  # per rank, as in the study
_PRINTED = re.compile(r"^average step time: ([0-9.e-]+)$", re.MULTILINE)


def _printed_figures(session: Path) -> dict[int, float]:
    """Each rank's own figure, from its own log (torchrun's console copy of it can miss a
    rank's last line: its tailer stops at end of file once the rank has exited, even when
    the line landed after its last read)."""
    return {rank: float(value) for rank, paths in layout.rank_log_files(session).items()
            for path in paths for value in _PRINTED.findall(path.read_text())}


def test_the_study_script_unmodified_shows_live_steps_within_5_percent_of_its_own_figure(
        sessions) -> None:
    result = run_cli(sessions, "run", "--headless", "--interval", "2",
                     "--instance-type", "inf2.xlarge", "--",
                     sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                     str(STUDY), env={"PJRT_DEVICE": "CPU", "STUDY_STEPS": str(STEPS)})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    printed = _printed_figures(session)
    assert sorted(printed) == [0, 1], "the script prints its own figure once per rank"

    # Live: progress lines showed steps while the job ran, not only at its end.
    lines = result.stdout.splitlines()
    running = [line for line in lines if line.startswith("[") and "finished" not in line]
    assert any(re.search(r"\| step \d+ \|", line) for line in running), result.stdout
    assert "steps from automatic probe (host-side, xla)" in lines[-2] + lines[-1]

    reader = SessionReader(session).load()
    steps = reader.steps()
    assert set(steps["src"].astype(str)) == {"auto"}
    assert steps.groupby("rank")["step"].max().to_dict() == {0: STEPS, 1: STEPS}
    assert (steps["samples"] == BATCH).all(), "16 samples per step from MpDeviceLoader's batch"

    # The study times each step's body, the loader's wait excluded: the probe's `step` phase
    # is that same span. Per rank, its mean over steps 11..60 against the printed mean.
    phases = reader.phases()
    for rank, figure in printed.items():
        mine = phases[phases["rank"] == rank].sort_values("t")
        body = mine["step"].to_numpy()[-(STEPS - 10):]  # steps 11..60 (step 1 has no phases)
        assert abs(float(body.mean()) / figure - 1) < 0.05, (rank, body.mean(), figure)

    # The figures on screen: wall-clock throughput (the loader's wait included: under XLA
    # the previous step's graph runs there) and the study's own timing beside it.
    row = compare.compare_rows([session])[0]
    assert row["step_source"] == "automatic probe (host-side, xla)"
    study_step = float(np.mean(list(printed.values())))
    assert abs(row["step_time_without_data_s"] / study_step - 1) < 0.05
    wall = 0.0
    for _, rank_steps in steps.groupby("rank"):
        t = rank_steps.sort_values("step")["t"].to_numpy()
        wall += BATCH * (STEPS - 10) / (t[-1] - t[9])  # steps 11..60 by the wall clock
    assert abs(row["samples_per_s"] / wall - 1) < 0.05, (row["samples_per_s"], wall)
    assert row["samples_per_s"] <= 2 * BATCH / study_step * 1.05
    assert row["samples_per_dollar_steady"] == pytest.approx(
        metrics.samples_per_dollar(row["samples_per_s"], row["usd_per_hour"]))
    assert row["samples_per_dollar_steady"] > 0


def test_no_auto_probe_leaves_the_study_script_without_steps(sessions) -> None:
    result = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--interval", "5", "--",
                     sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                     str(STUDY), env={"PJRT_DEVICE": "CPU", "STUDY_STEPS": "12"})
    assert result.returncode == 0, result.stderr + result.stdout
    session = only_session(sessions)
    assert not list((session / layout.PROBE_DIR).glob("auto-rank-*.jsonl"))
    assert not len(SessionReader(session).load().steps())
    assert "no step yet" in result.stdout.splitlines()[-2]
