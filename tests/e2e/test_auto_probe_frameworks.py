"""The automatic probe on real, unmodified training scripts under the real `neurotui run
--headless`: a plain torchrun loop with gradient accumulation, a Hugging Face Trainer, a
PyTorch Lightning Trainer, a GAN with two optimizers, a loop without a DataLoader, the probe
switched off, and a user's own sitecustomize. Each script (tests/scripts/) knows nothing
about neurotui and writes its own truth (optimizer steps, samples, wall clock) to
"$TRUTH_FILE.<rank>"; the probe's records and neurotui's figures are checked against it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neurotui import metrics
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from tests.e2e.conftest import REPO, meta, only_session, run_cli

pytestmark = pytest.mark.slow

SCRIPTS = REPO / "tests" / "scripts"
TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2")
needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or
    importlib.util.find_spec("accelerate") is None,
    reason="transformers and accelerate come with the `test` extra")
needs_lightning = pytest.mark.skipif(importlib.util.find_spec("lightning") is None,
                                     reason="lightning comes with the `test` extra")


# -- helpers -------------------------------------------------------------------------------

def records(session: Path, rank: int) -> list[dict]:
    """The automatic probe's raw records of one rank, in file order."""
    path = session / layout.PROBE_DIR / f"auto-rank-{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def auto_steps(session: Path, rank: int) -> list[dict]:
    return [r for r in records(session, rank) if r["kind"] == "step"]


def infos(session: Path, rank: int, what: str) -> list[dict]:
    return [r for r in records(session, rank) if r["kind"] == "probe_info" and r["what"] == what]


def truth(path: Path, rank: int) -> Any:
    return json.loads(Path(f"{path}.{rank}").read_text())


def run(sessions: Path, *command: str, env: dict[str, str], options: tuple[str, ...] = ()
        ) -> Path:
    """`neurotui run --headless [options] -- command`; the session it recorded."""
    result = run_cli(sessions, "run", "--headless", "--interval", "5", *options, "--",
                     *command, env=env, timeout=240)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "completed (exit code 0)" in result.stdout, result.stdout
    return only_session(sessions)


def chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


# -- 1. a plain loop under torchrun, gradient accumulation ------------------------------------

ACCUM_ENV = {"BATCH": "8", "ACCUM": "4", "FULL_STEPS": "12", "EPOCHS": "2", "WIDTH": "512"}


def test_plain_torchrun_loop_with_gradient_accumulation(sessions, tmp_path) -> None:
    truth_file = tmp_path / "truth"
    session = run(sessions, *TORCHRUN, str(SCRIPTS / "accum_loop.py"),
                  env={**ACCUM_ENV, "TRUTH_FILE": str(truth_file)})
    # Per epoch and rank: 12 steps of 4 x 8 samples, then 8 + 8 + 5 in one last step.
    own_rate = 0.0
    for rank in (0, 1):
        own = truth(truth_file, rank)
        assert [s["samples"] for s in own] == 2 * ([32] * 12 + [21])  # the script's own count
        mine = auto_steps(session, rank)
        assert [r["step"] for r in mine] == list(range(1, len(own) + 1))
        assert [r["samples"] for r in mine] == [s["samples"] for s in own], "first steps too"
        assert {(r["rank"], r["local_rank"], r["src"], r["attempt"]) for r in mine} == {
            (rank, rank, "auto", 0)}
        # Each record is stamped inside optimizer.step(), just before the script's clock.
        lag = np.array([s["t"] for s in own]) - np.array([r["t"] for r in mine])
        assert (lag >= 0).all() and (lag < 0.05).all(), lag
        assert all(r["phases"]["data"] >= 0 for r in mine[1:])
        armed = infos(session, rank, "armed")
        assert len(armed) == 1 and armed[0]["optimizer"] == "SGD"
        assert armed[0]["device"] == "cpu"
        assert not infos(session, rank, "no_batches") and not infos(session, rank, "optimizers")
        # The script's own steady rate: steps 11..N by its wall clock, as the study counts.
        t = [s["t"] for s in own]
        own_rate += sum(s["samples"] for s in own[10:]) / (t[-1] - t[9])

    steps = SessionReader(session).load().steps()
    assert set(steps["src"].astype(str)) == {"auto"}
    assert steps.groupby("rank")["step"].max().to_dict() == {0: 26, 1: 26}
    steady = metrics.steady_state(steps)
    assert steady is not None and steady.ranks == 2 and steady.samples_per_s is not None
    assert abs(steady.samples_per_s / own_rate - 1) < 0.05, (steady, own_rate)
    summary = meta(session)["summary"]
    assert summary["total_samples"] == 2 * 2 * (12 * 32 + 21)
    assert summary["steady_samples_per_s"] == pytest.approx(steady.samples_per_s)


def test_a_loss_printed_right_after_the_step_goes_with_that_step(sessions, tmp_path) -> None:
    """The script prints each loss microseconds after optimizer.step(). The log's modification
    time (the kernel's coarse clock) is then often before the probe's time of that step, and
    by time the loss went with the step before (92 of 160 rows, measured): the probe's record
    of where the log stood at each step places it."""
    truth_file = tmp_path / "truth"
    session = run(sessions, *TORCHRUN, str(SCRIPTS / "loss_after_step.py"),
                  env={"TRUTH_FILE": str(truth_file), "STEPS": "60"})
    steps = SessionReader(session).load().steps()
    assert set(steps["src"].astype(str)) == {"auto"}
    for rank in (0, 1):
        printed = [float(loss) for loss in truth(truth_file, rank)["losses"]]
        mine = steps[steps["rank"] == rank].sort_values("step")
        assert list(mine["step"]) == list(range(1, 61))
        assert list(mine["loss"]) == printed
        where = [r["out"] for r in auto_steps(session, rank)]
        assert all(len(w) == 3 for w in where) and len({tuple(w[:2]) for w in where}) == 1
    # Each loss line's record names the step it was placed after: its own (the reader puts
    # the loss there by that step, not by time).
    logged = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    named = {(r["rank"], r["after_step"]): r["loss"] for r in logged
             if r.get("kind") == "step" and r.get("src") == "log" and r.get("loss") is not None}
    for rank in (0, 1):
        printed = [float(loss) for loss in truth(truth_file, rank)["losses"]]
        assert [named.get((rank, step)) for step in range(1, 61)] == printed
    timing = meta(session)["log_timing"]
    assert timing["placed_logs"] == 4, timing  # each rank's stdout.log and stderr.log


# -- 2. Hugging Face Trainer -------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_run(tmp_path_factory) -> tuple[Path, Path]:
    """One Trainer run under torchrun (2 ranks, gloo), shared by the tests below."""
    tmp = tmp_path_factory.mktemp("hf")
    sessions = tmp / "sessions"
    sessions.mkdir()
    truth_file = tmp / "truth"
    env = {"TRUTH_FILE": str(truth_file), "OUTPUT_DIR": str(tmp / "out"), "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp / "hf-home"), "BATCH": "4", "ACCUM": "2", "EPOCHS": "2",
           "ROWS": "96"}
    return run(sessions, *TORCHRUN, str(SCRIPTS / "hf_trainer_tiny.py"), env=env), truth_file


@needs_transformers
def test_hf_trainer_steps_and_samples(hf_run) -> None:
    session, truth_file = hf_run
    for rank in (0, 1):
        own = truth(truth_file, rank)
        batch, accum, epochs = own["batch"], own["accum"], own["epochs"]
        assert own["world"] == 2 and own["global_step"] == 12
        mine = auto_steps(session, rank)
        assert [r["step"] for r in mine] == list(range(1, own["global_step"] + 1))
        assert len(own["step_times"]) == len(mine)  # the Trainer's on_step_end, once per step
        # Each probe record comes from inside optimizer.step(), before the Trainer's callback.
        lag = np.array(own["step_times"]) - np.array([r["t"] for r in mine])
        assert (lag >= 0).all() and (lag < 0.5).all(), lag
        samples = [r["samples"] for r in mine]
        assert sum(samples) == own["samples_per_epoch"] * epochs
        assert sum(samples) == batch * accum * own["global_step"]
        per_epoch = own["global_step"] // epochs
        for epoch in chunks(samples, per_epoch):
            assert sum(epoch) == own["samples_per_epoch"], samples
            # Steps inside an epoch: exactly their accumulation window.
            assert epoch[1:-1] == [batch * accum] * (per_epoch - 2), samples
        assert infos(session, rank, "armed")[0]["optimizer"] == "AdamW"
        assert not infos(session, rank, "no_batches") and not infos(session, rank, "optimizers")
    steps = SessionReader(session).load().steps()
    assert set(steps["src"].astype(str)) == {"auto"}
    assert steps.groupby("rank")["step"].max().to_dict() == {0: 12, 1: 12}
    assert meta(session)["summary"]["total_samples"] == 2 * 96


@needs_transformers
def test_hf_trainer_logged_losses_go_with_their_steps(hf_run) -> None:
    """The Trainer prints its logged loss (rank 0) just after the step it logs: in the
    figures, that step carries it, and no other step carries one."""
    session, truth_file = hf_run
    logged = truth(truth_file, 0)["logged_losses"]
    assert logged, "the Trainer logged no loss"
    steps = SessionReader(session).load().steps()
    mine = steps[steps["rank"] == 0]
    carried = mine[mine["loss"].notna()]
    # (as printed: rounded)
    assert dict(zip(carried["step"].astype(int).astype(str), carried["loss"],
                    strict=True)) == pytest.approx(logged, abs=1e-3)


@needs_transformers
@pytest.mark.xfail(strict=True, reason=(
    "a known limit, kept in view: accelerate's DataLoaderShard reads one batch ahead of the one "
    "it yields, so the first optimizer step of each epoch is credited with one batch more than "
    "it trained on and the last with one fewer (12, 8, 8, 8, 8, 4 for 2 x 4 samples per step); "
    "totals and rates are right"))
def test_hf_trainer_each_step_gets_its_own_accumulation_window(hf_run) -> None:
    session, truth_file = hf_run
    for rank in (0, 1):
        own = truth(truth_file, rank)
        samples = [r["samples"] for r in auto_steps(session, rank)]
        assert samples == [own["batch"] * own["accum"]] * own["global_step"]


@pytest.fixture(scope="module")
def hf_run_no_accumulation(tmp_path_factory) -> tuple[Path, Path]:
    """The Trainer's defaults: no gradient accumulation; one process (plain python), 3 epochs."""
    tmp = tmp_path_factory.mktemp("hf1")
    sessions = tmp / "sessions"
    sessions.mkdir()
    truth_file = tmp / "truth"
    env = {"TRUTH_FILE": str(truth_file), "OUTPUT_DIR": str(tmp / "out"), "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp / "hf-home"), "BATCH": "4", "ACCUM": "1", "EPOCHS": "3",
           "ROWS": "64"}
    return run(sessions, sys.executable, str(SCRIPTS / "hf_trainer_tiny.py"), env=env), truth_file


@needs_transformers
def test_hf_trainer_without_accumulation_steps_and_total(hf_run_no_accumulation) -> None:
    session, truth_file = hf_run_no_accumulation
    own = truth(truth_file, 0)
    assert own["world"] == 1 and own["global_step"] == 3 * 64 // 4
    mine = auto_steps(session, 0)
    assert [r["step"] for r in mine] == list(range(1, own["global_step"] + 1))
    assert sum(r["samples"] or 0 for r in mine) == 3 * own["samples_per_epoch"] == 192
    assert meta(session)["summary"]["total_samples"] == 192


@needs_transformers
def test_hf_trainer_without_accumulation_has_a_steady_rate(hf_run_no_accumulation) -> None:
    # accelerate reads one batch ahead: the last step of an epoch took no batch of its own,
    # and says 0 (not unknown), so the steady rate stands.
    session, truth_file = hf_run_no_accumulation
    mine = auto_steps(session, 0)
    assert all(r["samples"] is not None for r in mine)
    assert not infos(session, 0, "no_batches")
    own = truth(truth_file, 0)
    assert sum(r["samples"] for r in mine) == own["global_step"] * own["batch"]
    assert meta(session)["summary"]["steady_samples_per_s"] is not None


# -- 3. PyTorch Lightning ------------------------------------------------------------------------

@needs_lightning
def test_lightning_trainer_steps_and_samples(sessions, tmp_path) -> None:
    truth_file = tmp_path / "truth"
    session = run(sessions, sys.executable, str(SCRIPTS / "lightning_tiny.py"),
                  env={"TRUTH_FILE": str(truth_file), "BATCH": "8", "ACCUM": "2",
                       "EPOCHS": "2", "ROWS": "100"})
    own = truth(truth_file, 0)
    # Lightning steps after every 2 batches and on the last (partial) window of an epoch.
    expected = [sum(window) for epoch in own["seen"] for window in chunks(epoch, own["accum"])]
    assert own["seen"] == 2 * [[8] * 12 + [4]]
    assert own["global_step"] == len(expected) == 14
    mine = auto_steps(session, 0)
    assert [r["step"] for r in mine] == list(range(1, own["global_step"] + 1))
    assert [r["samples"] for r in mine] == expected == 2 * ([16] * 6 + [4])
    lag = np.array(own["step_times"]) - np.array([r["t"] for r in mine])
    assert (lag >= 0).all() and (lag < 0.5).all(), lag
    assert infos(session, 0, "armed")[0]["optimizer"] == "Adam"
    assert not infos(session, 0, "no_batches") and not infos(session, 0, "optimizers")
    assert meta(session)["summary"]["total_samples"] == 200


# -- 4. two optimizers ---------------------------------------------------------------------------

def test_gan_two_optimizers_count_one_step_per_iteration(sessions, tmp_path) -> None:
    truth_file = tmp_path / "truth"
    session = run(sessions, sys.executable, str(SCRIPTS / "gan_loop.py"),
                  env={"TRUTH_FILE": str(truth_file)})
    own = truth(truth_file, 0)
    assert len(own) == 20
    mine = auto_steps(session, 0)
    assert [r["step"] for r in mine] == list(range(1, 21))
    assert [r["samples"] for r in mine] == [s["samples"] for s in own] == 2 * ([16] * 9 + [8])
    lag = np.array([s["t"] for s in own]) - np.array([r["t"] for r in mine])
    assert (lag >= 0).all() and (lag < 0.05).all(), lag
    armed = infos(session, 0, "armed")
    assert len(armed) == 1 and armed[0]["optimizer"] == "Adam"  # the first one to step
    told = infos(session, 0, "optimizers")
    assert len(told) == 1 and told[0]["count"] == 2 and "RMSprop" in told[0]["message"]
    summary = meta(session)["summary"]
    assert summary["steps"] == 20 and summary["total_samples"] == 2 * 152


# -- 5. no DataLoader ----------------------------------------------------------------------------

def test_a_loop_without_a_dataloader_has_steps_without_samples(sessions, tmp_path) -> None:
    truth_file = tmp_path / "truth"
    session = run(sessions, sys.executable, str(SCRIPTS / "no_loader_loop.py"),
                  env={"TRUTH_FILE": str(truth_file), "STEPS": "15"})
    assert len(truth(truth_file, 0)) == 15
    mine = auto_steps(session, 0)
    assert [r["step"] for r in mine] == list(range(1, 16))
    assert all(r["samples"] is None for r in mine)
    assert len(infos(session, 0, "no_batches")) == 1
    steps = SessionReader(session).load().steps()
    assert len(steps) == 15 and steps["samples"].isna().all()
    steady = metrics.steady_state(steps)
    assert steady is not None and steady.samples_per_s is None  # unknown, not 0
    assert meta(session)["summary"]["steady_samples_per_s"] is None


# -- 6. --no-auto-probe --------------------------------------------------------------------------

def test_no_auto_probe_writes_no_auto_probe_file(sessions, tmp_path) -> None:
    truth_file = tmp_path / "truth"
    session = run(sessions, *TORCHRUN, str(SCRIPTS / "accum_loop.py"),
                  options=("--no-auto-probe",),
                  env={**ACCUM_ENV, "FULL_STEPS": "3", "EPOCHS": "1",
                       "TRUTH_FILE": str(truth_file)})
    assert [len(truth(truth_file, rank)) for rank in (0, 1)] == [4, 4]  # the job did train
    assert not list(session.rglob("auto-rank-*.jsonl"))
    assert "auto" not in set(SessionReader(session).load().steps()["src"].astype(str))


# -- 7. the user's own sitecustomize -------------------------------------------------------------

USER_SITECUSTOMIZE = '''\
import os

with open(os.environ["SITE_MARKER"], "a") as f:
    f.write(f"{os.getpid()} {os.environ.get('RANK', '-')}\\n")
'''


def test_the_users_own_sitecustomize_still_runs(sessions, tmp_path) -> None:
    site = tmp_path / "user-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(USER_SITECUSTOMIZE)
    marker = tmp_path / "marker"
    truth_file = tmp_path / "truth"
    session = run(sessions, *TORCHRUN, str(SCRIPTS / "accum_loop.py"),
                  env={**ACCUM_ENV, "FULL_STEPS": "3", "EPOCHS": "1",
                       "TRUTH_FILE": str(truth_file), "SITE_MARKER": str(marker),
                       "PYTHONPATH": str(site)})
    ran = {}  # rank -> pids of the processes that ran the user's sitecustomize as that rank
    for line in marker.read_text().splitlines():
        pid, rank = line.split()
        ran.setdefault(rank, set()).add(int(pid))
    for rank in (0, 1):
        armed = infos(session, rank, "armed")
        assert len(armed) == 1 and armed[0]["pid"] in ran[str(rank)], (armed, ran)
        mine = auto_steps(session, rank)
        own = truth(truth_file, rank)
        assert [r["samples"] for r in mine] == [s["samples"] for s in own] == [32] * 3 + [21]
    assert "-" in ran, "the launcher (and neurotui itself) ran it too"


LIGHTNING_WITH_VALIDATION = """
import lightning as L, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
class M(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = nn.Linear(4, 1)
    def training_step(self, b, i): return self.net(b[0]).sum()
    def validation_step(self, b, i): self.log("v", self.net(b[0]).sum())
    def configure_optimizers(self): return torch.optim.SGD(self.parameters(), lr=0.01)
train = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=8)  # 5 steps of 8 an epoch
val = DataLoader(TensorDataset(torch.randn(30, 4)), batch_size=10)  # 3 batches of 10
t = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False)
t.fit(M(), train, val)
"""


@needs_lightning
def test_lightning_validation_batches_are_not_training_samples(sessions, tmp_path) -> None:
    script = tmp_path / "pl_val.py"
    script.write_text(LIGHTNING_WITH_VALIDATION)
    session = run(sessions, sys.executable, str(script), env={})
    # The sanity check and each epoch's validation run under no_grad: not counted.
    assert [r["samples"] for r in auto_steps(session, 0)] == [8] * 10
