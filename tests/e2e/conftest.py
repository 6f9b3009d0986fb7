"""Helpers for end-to-end tests: the real CLI, real torchrun, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
TRAIN_VIT = REPO / "runner" / "train_vit.py"


def torchrun_vit(*runner_args: str, nproc: int = 2) -> list[str]:
    """A small, fast ViT run: sized for 2 shared CPU cores."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            str(TRAIN_VIT), "--model", "vit-micro", "--image-size", "32", "--batch-size", "8",
            "--workers", "0", "--device", "cpu", *runner_args]


def neurotui_argv(sessions: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions), *args]


def run_cli(sessions: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(neurotui_argv(sessions, *args), capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=REPO)


def only_session(sessions: Path) -> Path:
    found = [p for p in sessions.iterdir() if (p / "meta.json").exists()]
    assert len(found) == 1, found
    return found[0]


def meta(session: Path) -> dict:
    return json.loads((session / "meta.json").read_text())


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def probe_step_count(session: Path) -> int:
    """Steps the ranks wrote through neurotui.probe (not the automatic probe's)."""
    return sum(len(p.read_text().splitlines()) for p in (session / "probe").glob("rank-*.jsonl"))


def job_processes(session: Path) -> list[psutil.Process]:
    """The launcher and every descendant (ranks, DataLoader workers) right now."""
    leader = psutil.Process(meta(session)["job_pid"])
    return [leader, *leader.children(recursive=True)]


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    live = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                live.append(p)
        except psutil.Error:
            pass
    return live


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    path = tmp_path / "sessions"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def no_leftovers(sessions: Path):
    """Whatever a test does, it leaves no training process behind on the machine."""
    yield
    for session in sessions.iterdir():
        m = json.loads((session / "meta.json").read_text()) if (session / "meta.json").exists() \
            else {}
        for key in ("job_pid", "supervisor_pid"):
            pid = m.get(key)
            try:
                proc = psutil.Process(pid) if pid else None
                if proc is not None:
                    for p in [*proc.children(recursive=True), proc]:
                        p.kill()
            except psutil.Error:
                pass
