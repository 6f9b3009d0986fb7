"""The automatic probe in real Python processes (no torchrun): armed only through the job's
environment, silent in processes that never step an optimizer, never raising into training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neurotui import autoprobe
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

pytest.importorskip("torch")

LOOP = """
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(40, 4)),
                                   batch_size=8)
for step, (x,) in enumerate(data, start=1):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def run_job(tmp_path: Path, code: str, *, enabled: bool = True,
            extra_env: dict[str, str] | None = None) -> tuple[Path, subprocess.CompletedProcess]:
    session = tmp_path / "session"
    (session / layout.PROBE_DIR).mkdir(parents=True, exist_ok=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "id": "s",
                                              "exit": None, "started_at": 0.0})
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    env = autoprobe.job_env({**base, "NEUROTUI_SESSION": str(session), **(extra_env or {})},
                            enabled)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return session, done


def records(session: Path, rank: int = 0) -> list[dict]:
    path = session / layout.PROBE_DIR / f"auto-rank-{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_optimizer_step_is_recorded_with_its_batch(tmp_path: Path) -> None:
    session, done = run_job(tmp_path, LOOP)
    assert done.returncode == 0, done.stderr
    found = records(session)
    assert found[0]["what"] == "armed" and found[0]["optimizer"] == "SGD"
    steps = [r for r in found if r["kind"] == "step"]
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5]
    assert [r["samples"] for r in steps] == [8] * 5
    assert steps[0]["dt"] is None and all(r["dt"] > 0 for r in steps[1:])
    assert all(set(r["phases"]) == {"data", "step"} for r in steps[1:])


def test_a_process_that_imports_torch_but_never_steps_writes_nothing(tmp_path: Path) -> None:
    # The torchrun launcher and DataLoader workers import torch too.
    session, done = run_job(tmp_path, "import torch\nprint(torch.ones(2).sum())")
    assert done.returncode == 0, done.stderr
    assert not list((session / layout.PROBE_DIR).iterdir())


def test_off_when_disabled_and_without_torch(tmp_path: Path) -> None:
    session, done = run_job(tmp_path, LOOP, enabled=False)
    assert done.returncode == 0, done.stderr
    assert not list((session / layout.PROBE_DIR).iterdir())
    session, done = run_job(tmp_path, "import json\nprint(json.dumps([1]))")
    assert done.returncode == 0 and "torch" not in done.stderr
    assert not list((session / layout.PROBE_DIR).iterdir())


def test_training_goes_on_when_the_probe_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("the session folder cannot be made under a file")
    _, done = run_job(tmp_path, LOOP + "\nprint('trained', step)",
                      extra_env={"NEUROTUI_SESSION": str(blocker / "session")})
    assert done.returncode == 0, done.stderr
    assert "trained 5" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_scripts_own_probe_wins_over_the_automatic_one(tmp_path: Path) -> None:
    code = LOOP.replace("    opt.zero_grad()", "    opt.zero_grad()\n"
                        "    probe.step(samples=8, loss=0.5)")
    code = "from neurotui import probe\n" + code
    session, done = run_job(tmp_path, code)
    assert done.returncode == 0, done.stderr
    assert (session / layout.PROBE_DIR / "auto-rank-0.jsonl").exists()
    steps = SessionReader(session).load().steps()
    assert list(steps["src"].astype(str)) == ["probe"] * 5
    assert list(steps["loss"]) == [0.5] * 5


def test_job_env_prepends_the_site_folder_once() -> None:
    env = autoprobe.job_env({"PYTHONPATH": "/mine"}, True)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(autoprobe.SITE_DIR), "/mine"]
    assert autoprobe.job_env(env, True)["PYTHONPATH"] == env["PYTHONPATH"]
    off = autoprobe.job_env({"PYTHONPATH": "/mine"}, False)
    assert off["PYTHONPATH"] == "/mine" and off[autoprobe.ENABLE_ENV] == "0"


def test_the_last_steps_before_a_long_pause_are_written_during_it(tmp_path: Path) -> None:
    # Steps faster than the probe's write interval wait a little; a long evaluation or
    # checkpoint after them must not keep them off the disk.
    code = LOOP + """
import json, os, time
path = os.path.join(os.environ["NEUROTUI_SESSION"], "probe", "auto-rank-0.jsonl")
time.sleep(0.5)  # the pause: the writer thread writes what waited
seen = [json.loads(x)["step"] for x in open(path) if '"kind":"step"' in x]
print("seen during the pause", seen[-1])
os._exit(0)  # no exit handler: what is on disk was written during the pause
"""
    session, done = run_job(tmp_path, code)
    assert done.returncode == 0, done.stderr
    assert "seen during the pause 5" in done.stdout
    assert [r["step"] for r in records(session) if r["kind"] == "step"] == [1, 2, 3, 4, 5]


def test_a_new_optimizer_for_a_new_phase_is_counted(tmp_path: Path) -> None:
    code = """
import torch
model = torch.nn.Linear(4, 1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(40, 4)),
                                     batch_size=8)
for lr in (0.1, 0.01):  # warm-up, then fine-tuning: a new optimizer each
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for (x,) in loader:
        opt.zero_grad(); model(x).sum().backward(); opt.step()
"""
    session, done = run_job(tmp_path, code)
    assert done.returncode == 0, done.stderr
    steps = [r for r in records(session) if r["kind"] == "step"]
    assert [r["step"] for r in steps] == list(range(1, 11))
    assert [r["samples"] for r in steps] == [8] * 10
    assert not [r for r in records(session) if r.get("what") == "optimizers"]


def test_evaluation_batches_under_no_grad_are_not_training_samples(tmp_path: Path) -> None:
    code = LOOP.replace("for step, (x,) in enumerate(data, start=1):", """
val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(30, 4)),
                                  batch_size=10)
for step, (x,) in enumerate(data, start=1):
    if step == 3:
        with torch.no_grad():
            for (v,) in val:
                model(v)""")
    session, done = run_job(tmp_path, code)
    assert done.returncode == 0, done.stderr
    assert [r["samples"] for r in records(session) if r["kind"] == "step"] == [8] * 5


def test_a_loader_reading_one_batch_ahead_keeps_totals_and_rates_right(tmp_path: Path) -> None:
    # As accelerate's DataLoaderShard does: the next batch is read before this one is used,
    # so the first step is credited two batches and the last none (0, not unknown).
    code = LOOP.replace("for step, (x,) in enumerate(data, start=1):", """
def ahead(loader):
    it = iter(loader)
    current = next(it)
    for following in it:
        yield current
        current = following
    yield current
for step, (x,) in enumerate(ahead(data), start=1):""")
    session, done = run_job(tmp_path, code)
    assert done.returncode == 0, done.stderr
    assert [r["samples"] for r in records(session) if r["kind"] == "step"] == [16, 8, 8, 8, 0]
    assert not [r for r in records(session) if r.get("what") == "no_batches"]


def test_each_step_says_where_its_log_file_stood(tmp_path: Path) -> None:
    """stdout a file (as torchrun's and neurotui's logs are): each step's `out` is that file's
    device, inode and the offset a line printed after the step begins at. stderr a pipe: no
    `err` (a pipe has no offset)."""
    code = LOOP.replace("    opt.step()\n", "    opt.step()\n    print(f'after {step}')\n")
    session = tmp_path / "session"
    (session / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "id": "s",
                                              "exit": None, "started_at": 0.0})
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    env = autoprobe.job_env({**base, "NEUROTUI_SESSION": str(session),
                             "PYTHONUNBUFFERED": "1"}, True)
    log = tmp_path / "stdout.log"
    with open(log, "w") as out:
        out.write("before training\n")
        out.flush()
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                              stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = log.read_bytes()
    status = log.stat()
    steps = [r for r in records(session) if r["kind"] == "step"]
    assert [r["out"][:2] for r in steps] == [[status.st_dev, status.st_ino]] * 5
    assert [r["out"][2] for r in steps] == [text.index(f"after {k}\n".encode())
                                            for k in range(1, 6)]
    assert not any("err" in r for r in steps)
