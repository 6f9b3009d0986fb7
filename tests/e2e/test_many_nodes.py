"""One training job across two nodes, on loopback: two `neurotui run --job J --node nA|nB`,
each launching torchrun with --nnodes=2 and a c10d rendezvous, one shared sessions folder. Each
node records its part of the job, its ranks as the job numbers them; `compare` and `ls` show
the job as one run; a node killed with its training shows as lost."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from neurotui.session.reader import SessionReader
from neurotui.supervisor.launch import _free_port
from tests.e2e.conftest import REPO, meta, neurotui_argv, run_cli, wait_for

pytestmark = pytest.mark.slow
SCRIPT = REPO / "tests" / "scripts" / "ddp_plain_steps.py"
STEPS = 40
GLOBAL_BATCH = 64  # 16 a rank, 4 ranks


def start_job(tmp_path: Path, job: str, steps: int) -> list[subprocess.Popen[str]]:
    """The two nodes' `neurotui run`, started together (the rendezvous waits for both)."""
    port = _free_port()
    nodes = []
    for node_rank, node in enumerate(("nA", "nB")):
        # The plain script prints `step N loss X` with no rank, and no probe runs: the ranks
        # can only come from torchrun's log layout (local) and the ranks' environment.
        nodes.append(subprocess.Popen(
            neurotui_argv(tmp_path / "sessions", "run", "--headless", "--no-auto-probe",
                          "--name", "ddp", "--job", job, "--node", node, "--samples-per-step",
                          str(GLOBAL_BATCH), "--",
                          sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                          f"--node_rank={node_rank}", "--nproc_per_node=2",
                          "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                          f"--rdzv-id={job}", str(SCRIPT)),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "TRUTH_FILE": str(tmp_path / "truth"), "STEPS": str(steps)}))
    return nodes


def wait_or_tell(nodes: list[subprocess.Popen[str]], predicate: Callable[[], Any],
                 timeout: float, what: str) -> Any:
    """wait_for, and on a timeout the nodes' own output in the failure (they are ended)."""
    try:
        return wait_for(predicate, timeout, what)
    except AssertionError as exc:
        outputs = []
        for proc in nodes:
            proc.kill()
            outputs.append(proc.communicate()[0][-3000:])
        raise AssertionError(f"{exc}; the nodes said:\n" + "\n---\n".join(outputs)) from None


def parts_of(sessions: Path, job: str) -> list[Path]:
    parts = [p for p in sessions.iterdir() if (p / "meta.json").exists()  # (being made)
             and (meta(p).get("job") or {}).get("id") == job]
    return sorted(parts, key=lambda p: meta(p)["job"]["node"])


def compare_json(sessions: Path, *names: str) -> list[dict]:
    done = run_cli(sessions, "compare", *names, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_nodes_record_one_job_with_the_jobs_global_ranks(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    for proc in start_job(tmp_path, "J", STEPS):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    parts = parts_of(sessions, "J")
    assert [meta(p)["job"]["node"] for p in parts] == ["nA", "nB"]
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
            # A node's share of the job's batch: 16 a rank, not the whole batch per node.
            assert set(mine["samples"]) == {GLOBAL_BATCH / 4}
    assert sorted(seen) == [0, 1, 2, 3]  # the job's ranks, each on one node

    # The job as one run: its throughput is its nodes' together, its ranks all of them.
    job, node_a, node_b = compare_json(sessions, "J", parts[0].name, parts[1].name)
    assert (job["session"], job["job"], job["nodes"], job["cores_used"]) == ("job J", "J", 2, 4)
    assert job["node_states"] == "nA completed, nB completed"
    assert node_a["nodes"] == node_b["nodes"] == 1 and node_a["cores_used"] == 2
    together = node_a["samples_per_s"] + node_b["samples_per_s"]
    assert job["samples_per_s"] == pytest.approx(together, rel=0.05)
    # Against the ranks' own clocks: 16 samples per step per rank over their median step.
    truth_rate = sum(16 / np.median(np.diff(t["steps"][10:])) for t in truths.values())
    assert job["samples_per_s"] == pytest.approx(truth_rate, rel=0.15)

    # One table for the job: every node's steps, each row with its node.
    exported = run_cli(sessions, "export", "J", "--out", "-")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(rows) == 4 * STEPS
    for node, part in zip(("nA", "nB"), parts, strict=True):
        ranks = {int(r["rank"]) for r in rows if r["node"] == node}
        assert sorted(ranks) == meta(part)["job"]["global_ranks"]

    # Followed as one run (what the dashboard shows, as text): the job's samples/s is its
    # nodes' together, a line for each node.
    attached = run_cli(sessions, "attach", "J", "--headless")
    assert attached.returncode == 0, attached.stdout + attached.stderr
    progress, nodes_line = [line for line in attached.stdout.splitlines()
                            if "samples/s" in line][-2:]
    assert "4 ranks" in progress and f"step {STEPS}" in progress
    job_rate = float(re.search(r"\| ([\d.,]+) samples/s", progress)[1].replace(",", ""))
    node_rates = [float(x.replace(",", "")) for x in
                  re.findall(r"n[AB] completed 2 ranks ([\d.,]+) samples/s", nodes_line)]
    assert len(node_rates) == 2 and job_rate == pytest.approx(sum(node_rates), rel=0.01)
    assert "neurotui: job J: completed" in attached.stdout

    listing = run_cli(sessions, "ls")
    assert listing.returncode == 0
    assert "job J: 2 nodes" in listing.stdout
    for node, part in zip(("nA", "nB"), parts, strict=True):
        assert any(line.split()[:3] == [node, part.name, "completed"]
                   for line in listing.stdout.splitlines())


@contextmanager
def running_job(tmp_path: Path, job: str, steps: int) -> Iterator[list[subprocess.Popen[str]]]:
    """start_job, and whatever a test leaves running killed at its end."""
    nodes = start_job(tmp_path, job, steps)
    try:
        yield nodes
    finally:
        for proc in nodes:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def both_stepping(nodes: list[subprocess.Popen[str]], sessions: Path, job: str,
                  steps: int) -> list[Path]:
    """The job's two parts, once each has recorded `steps` steps."""
    def ready() -> list[Path] | None:
        parts = parts_of(sessions, job) if sessions.exists() else []
        if len(parts) == 2 and all(
                len(SessionReader(p, telemetry_history=None).load().steps()) >= steps
                for p in parts):
            return parts
        return None

    return wait_or_tell(nodes, ready, 120, "both nodes to record steps")


def test_a_node_killed_with_its_training_shows_as_lost(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with running_job(tmp_path, "K", 100_000) as nodes:  # runs until a node is lost
        node_a, node_b = both_stepping(nodes, sessions, "K", 10)
        # Node B's host goes: its supervisor and its whole training, at once.
        doomed = meta(node_b)
        training = psutil.Process(doomed["job_pid"])
        victims = [psutil.Process(doomed["supervisor_pid"]), training,
                   *training.children(recursive=True)]
        for proc in victims:
            proc.send_signal(signal.SIGKILL)
        psutil.wait_procs(victims, timeout=10)
        # Node A goes on on its own: its ranks lose their peers, its supervisor records it.
        nodes[0].communicate(timeout=180)
        listing = run_cli(sessions, "ls").stdout
        lost_line = next(line for line in listing.splitlines() if line.strip().startswith("nB"))
        assert node_b.name in lost_line and "lost, last heard from" in lost_line, listing
        job = compare_json(sessions, "K")[0]
        assert job["nodes"] == 2
        assert "nB lost" in job["node_states"], job
        assert meta(node_a)["exit"] is not None  # node A recorded its own end
        # Followed as one run, the lost node is shown lost, with its last record's age.
        attached = run_cli(sessions, "attach", "K", "--headless")
        assert re.search(r"nB lost 2 ranks .*last heard from [\d.]+m?s ago", attached.stdout), \
            attached.stdout
        assert re.search(r"neurotui: job K: \w+/lost .*nB lost", attached.stdout), \
            attached.stdout


def test_stopping_the_job_from_any_node_stops_every_nodes_part(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with running_job(tmp_path, "S", 100_000) as nodes:
        both_stepping(nodes, sessions, "S", 5)
        # Followed live as one run from a third terminal, until the job ends.
        out = tmp_path / "followed.txt"
        follower = subprocess.Popen(
            neurotui_argv(sessions, "attach", "S", "--headless", "--interval", "0.5"),
            cwd=REPO, stdout=out.open("w"), stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: "nB running" in out.read_text(), 60, "the job's nodes followed")
            # Each node's supervisor takes the request from its own session folder.
            done = run_cli(sessions, "stop", "S", "--wait", "60")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "asked nA, nB to stop (job S)" in done.stdout
            for proc in nodes:
                proc.communicate(timeout=60)
            follower.wait(timeout=60)
        finally:
            if follower.poll() is None:
                follower.kill()
        followed = out.read_text()
        assert re.search(r"nA running 2 ranks [\d.,]+ samples/s .* \| nB running 2 ranks",
                         followed), followed
        assert "neurotui: job S: stopped" in followed, followed
        for part in parts_of(sessions, "S"):
            assert meta(part)["exit"]["reason"] == "stopped", meta(part)["exit"]
            requests = [e for e in map(json.loads, (part / "events.jsonl").read_text()
                                       .splitlines()) if e["kind"] == "stop_request"]
            assert len(requests) == 1 and requests[0]["by"].startswith("cli from ")
            assert not (part / "control-request.json").exists()  # taken


def test_restarting_the_job_restarts_every_node_and_the_ranks_meet_again(
        tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    steps = 120
    with running_job(tmp_path, "R", steps) as nodes:
        both_stepping(nodes, sessions, "R", 5)
        done = run_cli(sessions, "stop", "R", "--restart")
        assert done.returncode == 0, done.stdout + done.stderr
        for proc in nodes:  # the second attempt runs to its end
            out, _ = proc.communicate(timeout=240)
            assert proc.returncode == 0, out
        for part in parts_of(sessions, "R"):
            assert meta(part)["exit"]["reason"] == "completed"
            events = [json.loads(line) for line in
                      (part / "events.jsonl").read_text().splitlines()]
            ranks = [e for e in events if e["kind"] == "ranks"]
            # A new rendezvous: the ranks' global ranks are read again for attempt 1.
            assert [e["attempt"] for e in ranks] == [0, 1]
            mine = sorted(ranks[1]["global_ranks"].values())
            again = [e for e in events if e["kind"] == "step" and e["attempt"] == 1]
            assert sorted({e["rank"] for e in again}) == mine
            assert len(again) == steps * len(mine)  # every step of the second attempt
