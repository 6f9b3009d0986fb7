"""Recorded sessions for the dashboard tests, built with fixed timestamps (no wall clock).

`reference_session` is the case users asked about: two ranks on a trn1, a CPU-bound input
pipeline (three host cores pinned while the NeuronCores idle), rank 1 a straggler, and a log
line full of Rich markup and ANSI escapes that must be shown literally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.status import SessionStatus
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

T0 = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC
NASTY_LINE = ("[bold red]not markup[/] \x1b[31mred?\x1b[0m \x1b]0;title\x07 "
              "[link=http://x]click[/link] bell\x07 done")
RUNNING = SessionStatus("running", True)


def meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"format": FORMAT_VERSION, "id": name, "name": name.split("-", 2)[-1],
            "command": ["torchrun", "train.py"], "started_at": T0, "ended_at": None,
            "exit": None, "instance": None, "price": None, "config": {}, **extra}


class Recorder:
    """Writes events with explicit times, in the order given."""

    def __init__(self, root: Path, name: str, **meta_extra: Any) -> None:
        self.dir = root / name
        (self.dir / layout.PROBE_DIR).mkdir(parents=True)
        (self.dir / layout.LOGS_DIR).mkdir()
        self.meta = meta(name, **meta_extra)
        write_json_atomic(self.dir / layout.META, self.meta)
        self._events = open(self.dir / layout.EVENTS, "a", encoding="utf-8")  # noqa: SIM115

    def event(self, t: float, kind: str, **fields: Any) -> None:
        self._events.write(json.dumps({"t": t, "kind": kind, **fields}) + "\n")

    def step(self, t: float, rank: int, step: int, dt: float, samples: int = 16,
             loss: float | None = None, **extra: Any) -> None:
        with open(layout.probe_path(self.dir, rank), "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": t, "kind": "step", "rank": rank, "step": step,
                                "samples": samples, "loss": loss, "dt": dt, "src": "probe",
                                "attempt": 0, **extra}) + "\n")

    def rank_log(self, rank: int, lines: list[str], stream: str = "stdout") -> None:
        path = (self.dir / layout.TORCHRUN_LOG_DIR / "run_0" / "attempt_0" / str(rank)
                / f"{stream}.log")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)

    def launcher_log(self, lines: list[str]) -> None:
        with open(self.dir / layout.LAUNCHER_LOG, "a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)

    def update_meta(self, **changes: Any) -> None:
        self.meta.update(changes)
        write_json_atomic(self.dir / layout.META, self.meta)

    def close(self) -> Path:
        self._events.close()
        return self.dir


def procs(t_cpu: float = 1.0) -> list[dict[str, Any]]:
    gib = 2**30
    return [
        {"pid": 4100, "ppid": 4000, "name": "torchrun", "role": "launcher", "cpu": 0.5,
         "rss": int(0.3 * gib)},
        {"pid": 4101, "ppid": 4100, "name": "python", "role": "rank", "cpu": 99.0 * t_cpu,
         "rss": int(2.1 * gib)},
        {"pid": 4102, "ppid": 4100, "name": "python", "role": "rank", "cpu": 98.0 * t_cpu,
         "rss": int(2.0 * gib)},
        {"pid": 4103, "ppid": 4101, "name": "pt_data_worker", "role": "worker", "cpu": 100.0,
         "rss": int(0.5 * gib)},
        {"pid": 4104, "ppid": 4102, "name": "pt_data_worker", "role": "worker", "cpu": 100.0,
         "rss": int(0.5 * gib)},
    ]


def reference_session(root: Path, steps: int = 120, end: bool = False,
                      dataset_size: int | None = None) -> Path:
    """Two ranks, 120 steps each over 60 s; rank 1 is 40% slower after warm-up; step 1-10
    are slow (compile); 8 host CPUs, 3 pinned; 2 NeuronCores around 15% busy."""
    config = {"step_target": 500}
    if dataset_size is not None:
        config["dataset_size"] = dataset_size
    rec = Recorder(root, "20260101-120000-vit-b16", instance={
        "type": "trn1.2xlarge", "source": "imds", "region": "us-east-1"},
        price={"usd_per_hour": 1.34375, "source": "table", "as_of": "2025-06-01",
               "spot": False}, config=config)
    rec.event(T0 + 0.1, "proc_start", attempt=0, pid=4100, pgid=4100, argv=["torchrun"])
    rec.event(T0 + 0.5, "source_status", source="neuron-monitor", ok=True, message="running")
    for i in range(3):
        rec.event(T0 + 1 + i, "compile", rank=None, what="compile",
                  line=f"Compiling module graph_{i}.neff")
    t = {0: T0 + 4.0, 1: T0 + 4.0}
    for n in range(1, steps + 1):
        for rank in (0, 1):
            if n <= 10:
                dt = 0.6
            else:
                dt = 0.4 if rank == 0 else 0.56
                # The reference case's backward-pass swings: every 4th step is slow.
                if rank == 0 and n % 4 == 0:
                    dt = 0.9
            t[rank] += dt
            rec.step(round(t[rank], 3), rank, n, round(dt, 3), loss=round(7.0 - n * 0.02, 4))
    last = max(t.values())
    for s in range(int(last - T0) + 1):
        ts = T0 + s
        cpu = [100.0, 99.0, 100.0, 12.0, 8.0, 5.0, 4.0, 3.0]
        rec.event(ts, "host", cpu=cpu, mem_used=24 * 2**30, mem_total=32 * 2**30,
                  load=[3.1, 2.9, 2.5])
        rec.event(ts, "procs", procs=procs())
        rec.event(ts, "neuron", cores=[
            {"core": 0, "pid": 4101, "util": 14.0 + (s % 3), "flops": None,
             "mem_device": 3 * 2**30},
            {"core": 1, "pid": 4102, "util": 11.0, "flops": None, "mem_device": 3 * 2**30}])
    rec.rank_log(0, [f"neurotui-runner step={n} loss={7.0 - n * 0.02:.4f}" for n in
                     range(steps - 30, steps + 1)] + [NASTY_LINE])
    rec.rank_log(1, ["rank 1 says hello", "[bold]also literal[/bold]"])
    rec.rank_log(1, ["warning: slow disk"], stream="stderr")
    rec.launcher_log(["W torchrun: starting 2 workers", "I launcher ready"])
    if end:
        rec.event(last + 1, "proc_exit", attempt=0, pid=4100, code=1, signal=None,
                  tail={"1": ["Traceback (most recent call last):",
                              "RuntimeError: [red]boom[/red] \x1b[1m"]})
        rec.update_meta(ended_at=last + 1, exit={"code": 1, "signal": None,
                                                 "reason": "failed", "attempts": 1})
    return rec.close()


def cpu_only_session(root: Path) -> Path:
    """A CPU run with no accelerator source and no price: the panels say what is missing."""
    rec = Recorder(root, "20260101-130000-cpu")
    rec.event(T0 + 0.2, "source_status", source="accelerator", ok=False,
              message="no accelerator telemetry: neuron-monitor not found: install "
                      "aws-neuronx-tools, and nvidia-smi not found; showing host metrics only")
    for n in range(1, 6):
        rec.step(T0 + n * 0.5, 0, n, 0.5, samples=8)
    rec.event(T0 + 2.0, "host", cpu=[100.0, 97.0], mem_used=3 * 2**30, mem_total=8 * 2**30,
              load=[2.0, 1.5, 1.0])
    return rec.close()


def empty_session(root: Path) -> Path:
    return Recorder(root, "20260101-140000-empty").close()


RANK_CPUS = (5, 100)
WORKER_CPUS = (17, 101)
"""many_cpus_session(starved=True): each rank and its one DataLoader worker ran there last."""
WARM_UP_S = 30


def many_cpus_session(root: Path, starved: bool = True, seconds: int = 250,
                      cpus: int = 192) -> Path:
    """A trn2.48xlarge-sized host (192 vCPUs), one sample a second for `seconds`. For the
    first WARM_UP_S the ranks compile (their CPUs pinned, the workers idle). Then, starved:
    each rank has one DataLoader worker doing heavy augmentation, whose CPU is pinned while
    the rank's waits at about half busy and the rest idle. Healthy: each rank has 8 workers
    on CPUs of their own, each moderately busy, and no CPU is pinned. `procs` rows carry
    `cpu_num` (the CPU each process last ran on)."""
    name = "20260101-150000-starved" if starved else "20260101-150000-healthy"
    rec = Recorder(root, name, instance={"type": "trn2.48xlarge", "source": "imds",
                                         "region": "us-east-1"})
    gib = 2**30
    rank_load, worker_load = (55.0, 100.0) if starved else (80.0, 35.0)
    rows: list[dict[str, Any]] = [{"pid": 5000, "ppid": 4999, "name": "torchrun",
                                   "role": "launcher", "cpu": 1.0, "rss": gib, "cpu_num": 0}]
    warm = [2.0] * cpus
    load = [2.0] * cpus
    pid = 5001
    for rank, rank_cpu in enumerate(RANK_CPUS):
        rank_pid = pid
        rows.append({"pid": rank_pid, "ppid": 5000, "name": "python", "role": "rank",
                     "cpu": rank_load, "rss": 4 * gib, "cpu_num": rank_cpu})
        warm[rank_cpu], load[rank_cpu] = 100.0, rank_load
        pid += 1
        worker_cpus = [WORKER_CPUS[rank]] if starved else \
            [rank_cpu + 20 + i for i in range(8)]
        for cpu in worker_cpus:
            rows.append({"pid": pid, "ppid": rank_pid, "name": "pt_data_worker",
                         "role": "worker", "cpu": worker_load, "rss": gib // 2,
                         "cpu_num": cpu})
            load[cpu] = worker_load
            pid += 1
    for n in range(1, seconds):
        for rank in (0, 1):
            rec.step(T0 + n, rank, n, 1.0)
    for s in range(seconds):
        # A little deterministic wobble, as real samples have (pinned ones stay >= 90%).
        base = warm if s < WARM_UP_S else load
        cpu = [min(100.0, v + (c * 7 + s * 3) % 5 - (4 if v >= 99 else 0))
               for c, v in enumerate(base)]
        rec.event(T0 + s, "host", cpu=cpu, mem_used=200 * gib, mem_total=2048 * gib,
                  load=[6.0, 5.5, 5.0])
        rec.event(T0 + s, "procs", procs=rows)
    return rec.close()


# -- a job of many nodes -------------------------------------------------------------------

JOB_STEPS = 60


def node_part(root: Path, node: str, node_rank: int, dt: float, cpu: float, *,
              ended: bool) -> Path:
    """One node's part of job J: its two ranks numbered as the job numbers them, its host
    at `cpu` percent, its ranks' logs under their local rank."""
    ranks = {str(local): node_rank * 2 + local for local in (0, 1)}
    rec = Recorder(root, f"20260101-120000-ddp-{node}", job={
        "id": "J", "node": node, "id_from": "--job", "nnodes": 2, "nproc_per_node": 2,
        "global_ranks": sorted(ranks.values())},
        instance={"type": "trn1.32xlarge"},
        price={"usd_per_hour": 21.50, "source": "test", "as_of": "2026-01"})
    rec.event(T0 + 0.2, "ranks", attempt=0, global_ranks=ranks)
    for rank in ranks.values():
        for n in range(1, JOB_STEPS + 1):
            rec.step(T0 + 1 + n * dt, rank, n, dt, samples=16)
    for s in range(int(JOB_STEPS * dt) + 2):
        rec.event(T0 + s, "host", cpu=[cpu] * 4, mem_used=2**30, mem_total=2**32,
                  load=[1.0, 1.0, 1.0])
        rec.event(T0 + s, "procs", procs=procs())
    for local, rank in ranks.items():
        rec.rank_log(int(local), [f"{node} local {local} is global rank {rank}"])
    if ended:
        rec.update_meta(ended_at=T0 + 1 + JOB_STEPS * dt + 1,
                        exit={"reason": "completed", "code": 0})
    return rec.close()


def recorded_job(root: Path) -> Path:
    """Job J of two nodes, each recording its part under `root`: nA finished; nB (slower, its
    host busier) ended without an end record, so it reads as lost."""
    node_part(root, "nA", 0, 0.10, 20.0, ended=True)
    node_part(root, "nB", 1, 0.12, 80.0, ended=False)
    return root
