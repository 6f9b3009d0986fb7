"""One training job across two nodes, on loopback: two `neurotui run --job J --node nA|nB`,
each launching torchrun with --nnodes=2 and a c10d rendezvous, one shared sessions folder. Each
node records its part of the job, its ranks as the job numbers them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neurotui.session.reader import SessionReader
from neurotui.supervisor.launch import _free_port
from tests.e2e.conftest import REPO, meta, neurotui_argv, run_cli

pytestmark = pytest.mark.slow
SCRIPT = REPO / "tests" / "scripts" / "ddp_plain_steps.py"
STEPS = 40


def test_two_nodes_record_one_job_with_the_jobs_global_ranks(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    port = _free_port()
    truth = tmp_path / "truth"
    nodes = []
    for node_rank, node in enumerate(("nA", "nB")):
        # The plain script prints `step N loss X` with no rank, and no probe runs: the ranks
        # can only come from torchrun's log layout (local) and the ranks' environment.
        nodes.append(subprocess.Popen(
            neurotui_argv(sessions, "run", "--headless", "--no-auto-probe", "--name", "ddp",
                          "--job", "J", "--node", node, "--",
                          sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                          f"--node_rank={node_rank}", "--nproc_per_node=2",
                          "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                          "--rdzv-id=J", str(SCRIPT)),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "TRUTH_FILE": str(truth), "STEPS": str(STEPS)}))
    for proc in nodes:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    parts = sorted(sessions.iterdir(), key=lambda p: meta(p)["job"]["node"])
    assert [meta(p)["job"]["node"] for p in parts] == ["nA", "nB"]
    assert {meta(p)["job"]["id"] for p in parts} == {"J"}
    assert all(meta(p)["job"]["id_from"] == "--job" for p in parts)
    assert all("node_rank" not in meta(p)["job"] for p in parts)  # c10d ordered them

    # The truth: each rank wrote its RANK, LOCAL_RANK and the clock after each step.
    truths = {t["rank"]: t for t in (json.loads(f.read_text())
                                     for f in tmp_path.glob("truth.*"))}
    assert sorted(truths) == [0, 1, 2, 3]
    seen: list[int] = []
    for part in parts:
        global_ranks = meta(part)["job"]["global_ranks"]
        seen += global_ranks
        steps = SessionReader(part, telemetry_history=None).load().steps()
        assert sorted(set(steps["rank"].tolist())) == global_ranks
        for rank in global_ranks:
            mine = steps[steps["rank"] == rank]
            assert mine["step"].tolist() == list(range(1, STEPS + 1))
            # Stamped when the rank printed (after its step): within 0.5 s of the truth.
            late = np.asarray(mine["t"]) - np.asarray(truths[rank]["steps"])
            assert np.all(late > -0.05) and np.median(late) < 0.5, late
    assert sorted(seen) == [0, 1, 2, 3]  # the job's ranks, each on one node

    listing = run_cli(sessions, "ls")
    assert listing.returncode == 0 and all(p.name in listing.stdout for p in parts)
