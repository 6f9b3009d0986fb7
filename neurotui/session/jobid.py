"""Which job of many nodes a run belongs to, and which node it is: from the command line, the
launcher's flags and the scheduler's variables, never from a protocol of neurotui's own.

Every node of a multi-node job runs `neurotui run` itself (torchrun on each node, `srun
neurotui run ...` under Slurm); each records its part as a session, and the parts of one job
share its id. Where the id comes from, in order: `--job ID`; Slurm's SLURM_JOB_ID (the same on
every node of an allocation); torchrun's `--rdzv-id` (the same on every node by construction:
the rendezvous needs it). A single-node run has no job id.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# torchrun's flags that take no value: every other flag before the script takes one.
_TORCHRUN_SWITCHES = frozenset({
    "--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path",
    "--run_path", "--tee-all"})
_FLAG_NAMES = {
    "nnodes": ("--nnodes",),
    "node_rank": ("--node-rank", "--node_rank"),
    "nproc_per_node": ("--nproc-per-node", "--nproc_per_node"),
    "rdzv_id": ("--rdzv-id", "--rdzv_id"),
    "rdzv_backend": ("--rdzv-backend", "--rdzv_backend"),
    "rdzv_endpoint": ("--rdzv-endpoint", "--rdzv_endpoint"),
}
_FLAG_KEY = {flag: key for key, flags in _FLAG_NAMES.items() for flag in flags}
# torchrun reads each flag from PET_<NAME> too (torch.distributed.argparse_util.env).
_FLAG_ENV = {key: f"PET_{key.upper()}" for key in _FLAG_NAMES}


@dataclass(frozen=True)
class JobIdentity:
    """A run's place in a job: what meta.json's `job` holds (FORMAT.md)."""

    node: str
    """The node's name: `--node`, else the host name."""
    id: str | None = None
    """The job's id, shared by its nodes; None: a run of one node."""
    id_from: str | None = None  # "--job", "SLURM_JOB_ID" or "--rdzv-id"
    node_rank: int | None = None
    """This node's rank in the job, where the launcher or scheduler fixes it (torchrun's
    static `--node-rank`, Slurm's SLURM_NODEID); None with an elastic rendezvous (c10d
    orders the nodes as they join: their ranks then come from the ranks' own RANK)."""
    nnodes: str | None = None  # as given: "2", or "1:4" for an elastic job
    nproc_per_node: str | None = None
    rdzv_backend: str | None = None
    rdzv_endpoint: str | None = None

    @property
    def multi_node(self) -> bool:
        return self.id is not None

    def to_meta(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


def torchrun_flags(args: list[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of the flags neurotui needs among torchrun's own `args` (those before the
    training script), `--flag value` and `--flag=value` alike; a flag not given is taken
    from its PET_ variable in `env`, as torchrun does."""
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "--":
            break  # the training script: what follows is its own
        name, sep, value = arg.partition("=")
        if not sep and name not in _TORCHRUN_SWITCHES:
            value = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        key = _FLAG_KEY.get(name)
        if key is not None:
            found[key] = value
        i += 1
    for key, variable in _FLAG_ENV.items():
        if key not in found and env and env.get(variable):
            found[key] = env[variable]
    return found


def job_identity(torchrun_args: list[str] | None, env: Mapping[str, str], *,
                 job: str | None = None, node: str | None = None) -> JobIdentity:
    """This run's identity. `torchrun_args`: torchrun's flags in the command (None: the
    command is not torchrun); `env`: the environment `neurotui run` was started in."""
    flags = torchrun_flags(torchrun_args, env) if torchrun_args is not None else {}
    slurm_job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    rdzv_id = flags.get("rdzv_id")
    if rdzv_id == "none":  # torchrun's default: not an id anybody chose
        rdzv_id = None
    if job:
        job_id, source = job, "--job"
    elif slurm_job:
        job_id, source = slurm_job, "SLURM_JOB_ID"
    elif rdzv_id and _more_than_one(flags.get("nnodes")):
        job_id, source = rdzv_id, "--rdzv-id"
    else:
        job_id = source = None
    # torchrun uses --node-rank with its default (static) rendezvous only: c10d and etcd
    # order the nodes as they join.
    static = flags.get("rdzv_backend", "static") == "static"
    node_rank = _int(flags.get("node_rank")) if static else None
    if node_rank is None and slurm_job:
        node_rank = _int(env.get("SLURM_NODEID"))
    nnodes = flags.get("nnodes") or env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    return JobIdentity(
        node=node or env.get("SLURMD_NODENAME") or socket.gethostname(),
        id=job_id, id_from=source, node_rank=node_rank, nnodes=nnodes,
        nproc_per_node=flags.get("nproc_per_node"),
        rdzv_backend=flags.get("rdzv_backend"), rdzv_endpoint=flags.get("rdzv_endpoint"))


def _more_than_one(nnodes: str | None) -> bool:
    """torchrun's --nnodes ("2", or "MIN:MAX") asks for more than one node."""
    if not nnodes:
        return False
    return any((_int(part) or 0) > 1 for part in nnodes.split(":"))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
