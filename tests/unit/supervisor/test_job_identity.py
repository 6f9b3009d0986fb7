"""A run's place in a job of many nodes (session/jobid.py), and a node's log lines recorded
under the job's global ranks (LogFollower.set_global_ranks)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from neurotui.session import layout
from neurotui.session.jobid import job_identity, torchrun_flags
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor.logfollow import LogFollower
from neurotui.supervisor.logtakes import GLOBAL_RANKS_WAIT_S

TWO_NODES_C10D = ["--nnodes=2", "--nproc_per_node", "2", "--rdzv-backend=c10d",
                  "--rdzv-endpoint", "10.0.0.1:29400", "--rdzv-id", "llama-7", "--node_rank",
                  "1", "train.py", "--nnodes", "9"]


def test_torchrun_flags_both_spellings_and_the_script_args_are_not_torchruns() -> None:
    flags = torchrun_flags(TWO_NODES_C10D)
    assert flags == {"nnodes": "2", "nproc_per_node": "2", "rdzv_backend": "c10d",
                     "rdzv_endpoint": "10.0.0.1:29400", "rdzv_id": "llama-7",
                     "node_rank": "1"}  # the script's own --nnodes 9 is the script's


def test_switches_take_no_value_and_pet_variables_stand_in_for_flags() -> None:
    flags = torchrun_flags(["--standalone", "--nproc-per-node=4", "-m", "pkg.train"],
                           {"PET_NNODES": "1:4", "PET_RDZV_ID": "from-env"})
    assert flags == {"nproc_per_node": "4", "nnodes": "1:4", "rdzv_id": "from-env"}


def test_the_job_id_comes_from_the_flag_then_slurm_then_the_rendezvous_id() -> None:
    env = {"SLURM_JOB_ID": "4242", "SLURM_NODEID": "3", "SLURMD_NODENAME": "trn1-st-3"}
    assert job_identity(TWO_NODES_C10D, env, job="mine").id == "mine"
    slurm = job_identity(TWO_NODES_C10D, env)
    assert (slurm.id, slurm.id_from, slurm.node, slurm.node_rank) == \
        ("4242", "SLURM_JOB_ID", "trn1-st-3", 3)
    torchrun = job_identity(TWO_NODES_C10D, {})
    assert (torchrun.id, torchrun.id_from, torchrun.nnodes) == ("llama-7", "--rdzv-id", "2")
    # c10d orders the nodes as they join: --node_rank says nothing there.
    assert torchrun.node_rank is None
    assert torchrun.node == socket.gethostname()
    assert job_identity(TWO_NODES_C10D, {}, node="nA").node == "nA"


def test_static_rendezvous_keeps_the_node_rank() -> None:
    static = job_identity(["--nnodes", "4", "--node-rank", "2", "--master-addr", "h0",
                           "--rdzv-id", "j", "t.py"], {})
    assert (static.id, static.node_rank, static.rdzv_backend) == ("j", 2, None)


@pytest.mark.parametrize("args", [
    ["--nproc_per_node=2", "train.py"],  # one node
    ["--nnodes=1", "--rdzv-id=x", "train.py"],  # one node, an id nobody shares
    ["--nnodes=2", "train.py"],  # torchrun's default id, "none"
    ["--nnodes=2", "--rdzv_id=none", "train.py"],
])
def test_no_job_id_without_one_that_all_nodes_share(args: list[str]) -> None:
    identity = job_identity(args, {})
    assert identity.id is None and not identity.multi_node
    assert "id" not in identity.to_meta()


def test_a_command_that_is_not_torchrun_has_a_node_and_maybe_slurms_job() -> None:
    assert job_identity(None, {}).to_meta() == {"node": socket.gethostname()}
    assert job_identity(None, {"SLURM_JOB_ID": "7", "SLURM_NODEID": "0"}).to_meta() == {
        "node": socket.gethostname(), "id": "7", "id_from": "SLURM_JOB_ID", "node_rank": 0}


def _node_follower(tmp_path: Path) -> tuple[Path, EventWriter, LogFollower, Path]:
    session = tmp_path / "s"
    (session / "logs").mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    writer = EventWriter(session / layout.EVENTS)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=False,
                           watch=False)
    follower.global_ranks = {}  # a node of many: its ranks' lines held until known
    log = session / "logs" / "torchrun" / "J_x" / "attempt_0" / "0" / "stdout.log"
    log.parent.mkdir(parents=True)
    return session, writer, follower, log


def _events(session: Path, writer: EventWriter, kind: str) -> list[dict]:
    writer.close()
    return [e for e in map(json.loads, (session / layout.EVENTS).read_text().splitlines())
            if e["kind"] == kind]


def test_lines_wait_for_their_global_rank_and_keep_the_time_they_were_read(
        tmp_path: Path) -> None:
    session, writer, follower, log = _node_follower(tmp_path)
    follower.poll(100.0)
    for t, step in ((101.0, 1), (102.0, 2)):
        with open(log, "a") as f:
            f.write(f"step {step} loss 0.5\n")
        follower.poll(t)
    writer.flush()
    assert not _events_so_far(session, "step")  # held: rank 0 of which node?
    follower.set_global_ranks({0: 6})
    with open(log, "a") as f:
        f.write("step 3 loss 0.5\n")
    follower.poll(103.0, final=True)
    steps = _events(session, writer, "step")
    assert [(e["rank"], e["step"], e["t"]) for e in steps] == \
        [(6, 1, 101.0), (6, 2, 102.0), (6, 3, 103.0)]
    assert follower.tail_lines()["6"][-1] == "step 3 loss 0.5"


def test_without_a_global_rank_the_lines_go_in_under_the_local_rank_and_say_so(
        tmp_path: Path) -> None:
    session, writer, follower, log = _node_follower(tmp_path)
    follower.poll(100.0)
    with open(log, "a") as f:
        f.write("step 1 loss 0.5\n")
    follower.poll(101.0)
    follower.poll(101.0 + GLOBAL_RANKS_WAIT_S + 1)
    steps = _events(session, writer, "step")
    assert [(e["rank"], e["step"], e["t"]) for e in steps] == [(0, 1, 101.0)]
    warnings = _events_so_far(session, "warning")
    assert len(warnings) == 1 and "local ranks" in warnings[0]["message"]


def _events_so_far(session: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (session / layout.EVENTS).read_text().splitlines())
            if e["kind"] == kind]


def test_a_slurm_launch_records_the_allocations_job_and_node(tmp_path: Path) -> None:
    """`srun neurotui run ...` on each node: srun's variables name the job and the node."""
    import sys

    from tests.e2e.conftest import meta, only_session, run_cli

    sessions = tmp_path / "sessions"
    done = run_cli(sessions, "run", "--headless", "--", sys.executable, "-c", "pass", env={
        "SLURM_JOB_ID": "981", "SLURM_NODEID": "1", "SLURMD_NODENAME": "queue1-st-trn1-2",
        "SLURM_JOB_NUM_NODES": "4", "SLURM_PROCID": "1"})
    assert done.returncode == 0, done.stderr
    assert meta(only_session(sessions))["job"] == {
        "node": "queue1-st-trn1-2", "id": "981", "id_from": "SLURM_JOB_ID", "node_rank": 1,
        "nnodes": "4"}


def test_runs_starting_together_each_claim_a_folder_of_their_own(tmp_path: Path) -> None:
    """The nodes of a job start in the same second, with the same name, in one shared
    folder: each gets a folder (mkdir claims it), none fails."""
    from concurrent.futures import ThreadPoolExecutor

    from neurotui.session.create import new_session_folder

    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: new_session_folder(tmp_path, "ddp", 1.8e9), range(40)))
    assert len(set(made)) == 40 and all((p / "logs").is_dir() for p in made)


def test_a_jobs_parts_are_named_by_their_node(tmp_path: Path) -> None:
    import sys

    from tests.e2e.conftest import meta, only_session, run_cli

    sessions = tmp_path / "sessions"
    done = run_cli(sessions, "run", "--headless", "--name", "ddp", "--job", "J", "--node",
                   "trn1-a", "--", sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    part = only_session(sessions)
    assert part.name.endswith("-ddp-trn1-a") and meta(part)["job"]["node"] == "trn1-a"
