"""Supervision overhead on a real run.

1. The supervisor's own CPU use while it records a real torchrun training (host and process
   telemetry at 1 Hz, log following at 2 Hz), as a share of one core; beside it, the
   command's own (`run --headless` follows the session and prints its progress lines).
2. Training wall time under `neurotui run --headless` vs the same bare torchrun command, in
   alternating pairs; the median ratio is the slowdown (target: under 1%).
3. neurotui's own fixed cost around the run (issue #12: at most 0.5 s): from the command's
   start to the job's launch, and from the job's exit to the command's return (the exit is
   recorded, the run's summary written to meta.json, the command told), from the
   supervisor's proc_start and proc_exit records and the wall clock around the command.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def train_cmd(steps: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
            str(REPO / "runner" / "train_vit.py"), "--model", "vit-tiny", "--image-size", "32",
            "--batch-size", "16", "--workers", "1", "--device", "cpu", "--steps", str(steps)]


def bare(steps: int) -> float:
    start = time.perf_counter()
    subprocess.run(train_cmd(steps), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - start


# Steady cost: from STEADY_AFTER_S after the ranks' first steps (their probe files: until the
# supervisor sees them it reads the ranks' logs line by line, about a hundred wakeups in that
# second) until the job exits (what follows is the one-off end-of-run summary, reported within
# "in all"); never before STARTUP_S of the supervisor's life.
STARTUP_S = 3.0
STEADY_AFTER_S = 2.0


def job_times(session: Path) -> tuple[float, float]:
    """When the supervisor launched the job and saw it exit (proc_start, proc_exit)."""
    start = end = None
    for line in (session / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "proc_start" and start is None:
            start = event["t"]
        elif event["kind"] == "proc_exit":
            end = event["t"]
    assert start is not None and end is not None
    return start, end


def supervised(steps: int) -> tuple[float, float, float, float, float, float, float, float,
                                     float]:
    """Returns (wall s, job s, supervisor CPU s in all, steady CPU s, steady seconds,
    command start to job launch s, job exit to command return s, steady wakeups a second:
    the supervisor's voluntary context switches, each a sleep it woke from; the command's
    own steady CPU s: `run --headless` follows the session and prints its lines)."""
    from tests.bench.bench_log_follow import run_time_s

    with tempfile.TemporaryDirectory() as sessions:
        began = time.time()
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "neurotui", "--sessions-dir", sessions,
                                 "run", "--headless", "--interval", "5", "--", *train_cmd(steps)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        meta_path = None
        while meta_path is None:
            found = list(Path(sessions).glob("*/meta.json"))
            meta_path = found[0] if found else None
            time.sleep(0.05)
        sup = None
        while sup is None:
            pid = json.loads(meta_path.read_text()).get("supervisor_pid")
            sup = psutil.Process(pid) if pid else None
            time.sleep(0.05)
        job = None
        while job is None:
            pid = json.loads(meta_path.read_text()).get("job_pid")
            job = psutil.Process(pid) if pid else None
            time.sleep(0.05)
        cpu = 0.0
        born = sup.create_time()
        lifetime = 0.0
        steady_from: tuple[float, float, int, float] | None = None
        steady_to: tuple[float, float, int, float] | None = None
        wakeups = 0
        first_step_at: float | None = None
        running: tuple[float, float, int, float] | None = None
        # (run time, lifetime, wakeups, the command's run time) at the latest sample
        last = (0.0, 0.0, 0, 0.0)
        while True:
            try:
                times = sup.cpu_times()
                cpu = times.user + times.system
                lifetime = time.time() - born
                wakeups = sup.num_ctx_switches().voluntary
            except psutil.Error:
                break
            # The steady window's CPU by the scheduler's clock: psutil's times come in 10 ms
            # ticks, about the whole of a few seconds' steady cost (it read 0.00% or 0.15%).
            run, front = run_time_s(sup.pid), run_time_s(proc.pid)
            if run is None or front is None:
                break
            last = (run, lifetime, wakeups, front)
            if first_step_at is None and any(meta_path.parent.glob("probe/*.jsonl")):
                first_step_at = lifetime
            if steady_from is None and lifetime >= STARTUP_S and first_step_at is not None \
                    and lifetime >= first_step_at + STEADY_AFTER_S:
                steady_from = last
            if steady_to is None and steady_from is not None:
                if job.is_running():
                    running = last
                else:  # the last sample while it ran: after it, the end-of-run summary
                    steady_to = running
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        proc.wait()
        wall = time.perf_counter() - start
        returned = time.time()
        launched, exited = job_times(meta_path.parent)
        job = exited - launched
        steady_to = steady_to or last
        steady_cpu, steady_s, steady_wakeups, front_cpu = (
            steady_to[0] - steady_from[0], steady_to[1] - steady_from[1],
            steady_to[2] - steady_from[2], steady_to[3] - steady_from[3]) \
            if steady_from else (math.nan,) * 4
        return (wall, job, cpu, steady_cpu, steady_s, launched - began, returned - exited,
                steady_wakeups / steady_s, front_cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    bare(20)  # warm the page cache: torch imports dominate a cold first run
    ratios, job_ratios, cpu_shares, to_launch, to_return, wakeups = [], [], [], [], [], []
    front_shares = []
    for i in range(args.pairs):
        b = bare(args.steps)
        s, job, cpu, steady_cpu, steady_s, launch_s, return_s, woke, front_cpu = \
            supervised(args.steps)
        front_shares.append(front_cpu / steady_s)
        wakeups.append(woke)
        to_launch.append(launch_s)
        to_return.append(return_s)
        ratios.append(s / b)
        job_ratios.append(job / b)
        cpu_shares.append(steady_cpu / steady_s)
        print(f"pair {i + 1}: bare {b:6.2f} s | training under neurotui {job:6.2f} s "
              f"(ratio {job / b:.4f}) | whole command {s:6.2f} s (ratio {s / b:.4f}) | "
              f"supervisor {cpu:.2f} CPU-s in all, steady {100 * steady_cpu / steady_s:.2f}% "
              f"of a core, {woke:.1f} wakeups/s | the command {100 * front_cpu / steady_s:.2f}% "
              f"| start to launch {launch_s:.2f} s, exit to "
              f"return {return_s:.2f} s",
              flush=True)
    job_ratio, whole_ratio = statistics.median(job_ratios), statistics.median(ratios)
    print(f"median training-time ratio (under neurotui / bare): {job_ratio:.4f} "
          f"({100 * (job_ratio - 1):+.2f}%)")
    print(f"median whole-command ratio (incl. neurotui's own start and stop): "
          f"{whole_ratio:.4f} ({100 * (whole_ratio - 1):+.2f}%)")
    print(f"median supervisor CPU while the job runs: {100 * statistics.median(cpu_shares):.2f}% "
          f"of one core, {statistics.median(wakeups):.1f} wakeups a second; the command "
          f"itself (`run --headless`, printing a line every 5 s) "
          f"{100 * statistics.median(front_shares):.2f}%")
    print(f"neurotui's fixed cost (target at most 0.5 s each): command start to job launch "
          f"{statistics.median(to_launch):.2f} s, job exit to command return "
          f"{statistics.median(to_return):.2f} s (medians; range {min(to_launch):.2f}-"
          f"{max(to_launch):.2f} and {min(to_return):.2f}-{max(to_return):.2f} s)")


if __name__ == "__main__":
    main()
