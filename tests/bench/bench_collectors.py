"""All collectors together at 1 Hz: the supervisor's CPU use as a share of one core.

The supervisor records a job that only sleeps, with the Neuron stand-ins on PATH printing one
neuron-monitor report a second (as `period: 1s` does), so what is measured is collection:
host CPU/memory, the job's process tree, neuron-monitor parsing, neuron-ls, log following.
The stand-in tools' own CPU is not counted (the real tools' cost is not ours to cut).
Target: at most 1% of one core.
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

from tests.standins import tool_captures as replay  # noqa: E402


def measure(seconds: float, with_neuron: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, AWS_EC2_METADATA_DISABLED="true", STANDIN_PERIOD="1")
        if with_neuron:
            env["PATH"] = f"{replay.install(Path(tmp) / 'bin')}{os.pathsep}{env['PATH']}"
        sessions = Path(tmp) / "sessions"
        subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions), "run",
                        "--detach", "--", "sleep", str(seconds)], check=True, env=env,
                       cwd=REPO, stdout=subprocess.DEVNULL)
        meta_path = next(sessions.glob("*/meta.json"))
        sup = psutil.Process(json.loads(meta_path.read_text())["supervisor_pid"])
        time.sleep(2)  # past start-up (imports), which is not steady collection
        start_cpu = sum(sup.cpu_times()[:2])
        start = time.time()
        cpu = start_cpu
        while True:
            try:
                cpu = sum(sup.cpu_times()[:2])
            except psutil.Error:
                break
            time.sleep(0.5)
            if time.time() - start > seconds:
                break
        wall = time.time() - start
        return cpu - start_cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    for label, neuron in (("host only", False), ("host + neuron-monitor + neuron-ls", True)):
        cpu, wall = measure(args.seconds + 3, neuron)
        print(f"{label:36} {cpu:6.3f} CPU-s over {wall:5.1f} s = {100 * cpu / wall:5.2f}% "
              f"of one core", flush=True)


if __name__ == "__main__":
    main()
