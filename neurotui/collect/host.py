"""Host telemetry with psutil: per-CPU use, memory, load, and the job's process tree."""

from __future__ import annotations

import os
from typing import Any

import psutil

_LAUNCHER_MARKERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def host_sample() -> dict[str, Any]:
    """Fields of a `host` event. cpu_percent(percpu) measures since the previous call."""
    mem = psutil.virtual_memory()
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "cpu": psutil.cpu_percent(percpu=True),
        "mem_used": mem.total - mem.available,
        "mem_total": mem.total,
        "load": load,
    }


def process_role(name: str, cmdline: str, pid: int, leader_pid: int, parents: dict[int, int],
                 launcher_is_torchrun: bool) -> str:
    """launcher / rank / worker (DataLoader or other child of a rank) / compiler."""
    if "neuronx-cc" in name or "neuronx-cc" in cmdline or "neuron-cc" in cmdline:
        return "compiler"
    if pid == leader_pid:
        return "launcher" if launcher_is_torchrun else "rank"
    depth = 0
    while pid != leader_pid and pid in parents and depth < 32:
        pid, depth = parents[pid], depth + 1
    rank_depth = 1 if launcher_is_torchrun else 0
    return "rank" if depth == rank_depth else "worker"


def _command(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()[:4])
    except psutil.Error:
        return ""


def _cpu_num(proc: psutil.Process) -> int | None:
    """The CPU the process last ran on (field 39 of /proc/PID/stat): the heat map marks the
    ranks' and workers' CPUs with it. Inside oneshot() it is the stat file already read, so it
    costs nothing; None where psutil has no such call (macOS)."""
    get = getattr(proc, "cpu_num", None)
    if get is None:
        return None
    try:
        value = get()
    except (psutil.Error, ValueError):
        return None
    return value if isinstance(value, int) and value >= 0 else None


class ProcessRows:
    """Rows of `procs` events, one per process of the job; cpu is percent of one core since
    the previous sample, cpu_num the CPU it last ran on. A process's role is worked out once
    (its command line read once), not at every sample: with 32 ranks and their workers that
    was most of a sample's cost."""

    def __init__(self) -> None:
        self._roles: dict[tuple[int, float, str], str] = {}
        self._torchrun: dict[tuple[int, float], bool] = {}

    def sample(self, procs: list[psutil.Process], leader_pid: int) -> list[dict[str, Any]]:
        seen = []
        for proc in procs:
            try:
                with proc.oneshot():  # one read of /proc/PID/stat for all of these
                    seen.append((proc, proc.ppid(), proc.name(), proc.cpu_percent(),
                                 proc.memory_info().rss, proc.create_time(), _cpu_num(proc)))
            except psutil.Error:
                continue
        parents = {proc.pid: ppid for proc, ppid, *_ in seen}
        launcher_is_torchrun = False
        for proc, _, _, _, _, created, _ in seen:
            if proc.pid == leader_pid:
                key = (proc.pid, created)
                if key not in self._torchrun:
                    leader_cmd = _command(proc)
                    self._torchrun[key] = any(m in leader_cmd for m in _LAUNCHER_MARKERS)
                launcher_is_torchrun = self._torchrun[key]
        rows = []
        roles: dict[tuple[int, float, str], str] = {}
        for proc, ppid, name, cpu, rss, created, cpu_num in seen:
            # A process that execs (a worker becoming neuronx-cc) keeps its pid and start
            # time but not its name: the role is asked again then.
            key = (proc.pid, created, name)
            role = self._roles.get(key)
            if role is None:
                role = process_role(name, _command(proc), proc.pid, leader_pid, parents,
                                    launcher_is_torchrun)
            roles[key] = role
            row = {"pid": proc.pid, "ppid": ppid, "name": name, "role": role, "cpu": cpu,
                   "rss": rss}
            if cpu_num is not None:
                row["cpu_num"] = cpu_num
            rows.append(row)
        self._roles = roles  # only the living are remembered
        return rows
