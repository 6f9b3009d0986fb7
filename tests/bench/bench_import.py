"""`neurotui import` of a million steps: TensorBoard scalars, and log lines (target < 10 s each).

Makes the inputs once (TensorBoard's through torch's own SummaryWriter, one `train/loss`
scalar a step with its wall time; the log a step line a line, as Python's logging prints them
with a millisecond date), then runs the real program on each as a new process, `--repeats`
times, and prints the wall time of each (median and range), with the time TensorBoard's own
EventAccumulator takes to read the same folder beside it (the reader `import` does not use).
The log is imported with and without --samples-per-step: with it, the session's reader (the
summary the import leaves in meta.json) reads the records one by one, to share the batch out
among the ranks.

    .venv/bin/python tests/bench/bench_import.py [--steps 1000000] [--repeats 3] [--dir D]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def make_tensorboard(folder: Path, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder), max_queue=10_000, flush_secs=600)
    for step in range(1, steps + 1):
        writer.add_scalar("train/loss", 4.0 / step, step, walltime=1.7e9 + step * 0.25)
    writer.close()


def make_log(path: Path, steps: int) -> None:
    start = 1.7e9
    with open(path, "w") as f:
        for step in range(1, steps + 1):
            t = start + step * 0.25
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
            f.write(f"{stamp},{int(t * 1000) % 1000:03d} - INFO - step {step} "
                    f"loss {4.0 / step:.5f}\n")


def timed_import(path: Path, sessions: Path, *options: str) -> float:
    shutil.rmtree(sessions, ignore_errors=True)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions),
                           "import", str(path), *options],
                          capture_output=True, text=True, cwd=REPO)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return took


def accumulator_read(folder: Path) -> float:
    from tensorboard.backend.event_processing import event_accumulator

    began = time.perf_counter()
    accumulator = event_accumulator.EventAccumulator(
        str(folder), size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    accumulator.Scalars("train/loss")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="keep the inputs here (made once)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-import-"))
    work.mkdir(parents=True, exist_ok=True)
    tensorboard, log = work / f"tb-{args.steps}", work / f"steps-{args.steps}.log"
    if not tensorboard.exists():
        began = time.perf_counter()
        make_tensorboard(tensorboard, args.steps)
        print(f"made {tensorboard} in {time.perf_counter() - began:.1f} s")
    if not log.exists():
        make_log(log, args.steps)
    per_step = ("--samples-per-step", "64")
    for what, path, options in (("tensorboard --samples-per-step 64", tensorboard, per_step),
                                ("log", log, ()),
                                ("log --samples-per-step 64", log, per_step)):
        times = [timed_import(path, work / "sessions", *options) for _ in range(args.repeats)]
        print(f"import {what}, {args.steps:,} steps: median {statistics.median(times):.2f} s "
              f"(range {min(times):.2f}-{max(times):.2f}) over {args.repeats}")
    print(f"TensorBoard's EventAccumulator reading the same folder: "
          f"{accumulator_read(tensorboard):.2f} s")
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
