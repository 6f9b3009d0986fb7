"""Host telemetry with psutil: per-CPU use, memory, load, and the job's process tree."""

from __future__ import annotations

import contextlib
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


def process_role(proc: psutil.Process, leader_pid: int, parents: dict[int, int],
                 launcher_is_torchrun: bool) -> str:
    """launcher / rank / worker (DataLoader or other child of a rank) / compiler."""
    try:
        name = proc.name()
        cmdline = " ".join(proc.cmdline()[:4])
    except psutil.Error:
        return "other"
    if "neuronx-cc" in name or "neuronx-cc" in cmdline or "neuron-cc" in cmdline:
        return "compiler"
    if proc.pid == leader_pid:
        return "launcher" if launcher_is_torchrun else "rank"
    depth, pid = 0, proc.pid
    while pid != leader_pid and pid in parents and depth < 32:
        pid, depth = parents[pid], depth + 1
    rank_depth = 1 if launcher_is_torchrun else 0
    return "rank" if depth == rank_depth else "worker"


def process_rows(procs: list[psutil.Process], leader_pid: int) -> list[dict[str, Any]]:
    """Fields of a `procs` event; cpu is percent of one core since the previous sample."""
    parents: dict[int, int] = {}
    launcher_is_torchrun = False
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            parents[proc.pid] = proc.ppid()
            if proc.pid == leader_pid:
                leader_cmd = " ".join(proc.cmdline()[:4])
                launcher_is_torchrun = any(m in leader_cmd for m in _LAUNCHER_MARKERS)
    rows = []
    for proc in procs:
        try:
            with proc.oneshot():
                rows.append({
                    "pid": proc.pid,
                    "ppid": proc.ppid(),
                    "name": proc.name(),
                    "role": process_role(proc, leader_pid, parents, launcher_is_torchrun),
                    "cpu": proc.cpu_percent(),
                    "rss": proc.memory_info().rss,
                })
        except psutil.Error:
            continue
    return rows
