"""All collectors together at 1 Hz: the supervisor's CPU use as a share of one core.

The supervisor records a job that only sleeps, with the Neuron stand-ins on PATH printing one
neuron-monitor report a second (as `period: 1s` does), so what is measured is collection:
host CPU/memory, the job's process tree, neuron-monitor parsing, neuron-ls, log following.
The stand-in tools' own CPU is not counted (the real tools' cost is not ours to cut).
Target: at most 1% of one core.

`--processes N` runs a job of N sleeping processes besides its leader (ranks and their
DataLoader workers: 32 ranks with 8 workers each are 288), to show what each process of the
job costs the supervisor's process telemetry (one row a second each).

    .venv/bin/python tests/bench/bench_collectors.py [--seconds 30] [--processes 288]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_log_follow import run_time_s  # noqa: E402
from tests.standins import tool_captures as replay  # noqa: E402

JOB = """
import subprocess, sys, time
children = [subprocess.Popen(["sleep", "%r"]) for _ in range(%d)]
time.sleep(%r)
for child in children:
    child.kill()
"""


def measure(seconds: float, with_neuron: bool, processes: int = 0) -> tuple[float, float]:
    """The supervisor's CPU seconds over a window of `seconds` while the job runs, and the
    window's length. The job outlives the window: its end (the supervisor's summary, its
    leaving) is not collection."""
    settle_s = 2 + processes * 0.005  # imports, and the job's processes starting
    lasts = settle_s + seconds + 5
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, AWS_EC2_METADATA_DISABLED="true", STANDIN_PERIOD="1")
        if with_neuron:
            env["PATH"] = f"{replay.install(Path(tmp) / 'bin')}{os.pathsep}{env['PATH']}"
        sessions = Path(tmp) / "sessions"
        job = ["sleep", str(lasts)] if not processes else \
            [sys.executable, "-c", JOB % (lasts + 5, processes, lasts)]
        subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions), "run",
                        "--detach", "--", *job], check=True, env=env,
                       cwd=REPO, stdout=subprocess.DEVNULL)
        meta_path = next(sessions.glob("*/meta.json"))
        sup = psutil.Process(json.loads(meta_path.read_text())["supervisor_pid"])
        time.sleep(settle_s)
        # The scheduler's clock (ns), not psutil's clock ticks: 10 ms, half of this window's
        # figure for the host alone.
        start_cpu, start = run_time_s(sup.pid) or 0.0, time.time()
        time.sleep(seconds)
        cpu, wall = (run_time_s(sup.pid) or 0.0) - start_cpu, time.time() - start
        sup.wait(timeout=lasts + 60)  # the session is complete before its folder goes
        return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--processes", type=int, default=0,
                        help="the job's processes besides its leader (default: none)")
    args = parser.parse_args()
    cases = [("host only", False), ("host + neuron-monitor + neuron-ls", True)]
    if args.processes:
        cases = [(f"host, a job of {args.processes + 1} processes", False)]
    for label, neuron in cases:
        cpu, wall = measure(args.seconds, neuron, args.processes)
        print(f"{label:36} {cpu:7.4f} CPU-s over {wall:5.1f} s = {100 * cpu / wall:5.2f}% "
              f"of one core", flush=True)


if __name__ == "__main__":
    main()
