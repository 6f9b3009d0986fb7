"""The supervisor's loss watch and memory creep watch, their cost a step and a second.

A session written as the supervisor writes it (the real EventWriter, events.jsonl on disk):
RANKS ranks x RATE step records a second, each with its loss (a log line's `step N loss X`), or
with none (`--no-loss`: the automatic probe's steps only, `"loss": null`), and each second the
host and process telemetry records of the ranks. After each second's records are flushed, the
loss watch reads them on and gives its alerts (as the supervisor does once a second), and the
creep watch takes that second's process rows, reads events.jsonl on for device memory records
(none here: a CPU job's) and gives its alerts (judging every 5 s over a 600 s window). CPU
time of the watches only (time.process_time), the writing left out; the median second over
`--seconds` seconds, and a step's share.

    .venv/bin/python tests/bench/bench_loss_memory_watch.py [--ranks 32] [--rate 10]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

from neurotui.session import layout
from neurotui.session.writer import EventWriter
from neurotui.supervisor.losswatch import LossWatch
from neurotui.supervisor.memwatch import MemoryCreepWatch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--rate", type=int, default=10, help="steps a second per rank")
    parser.add_argument("--seconds", type=int, default=900,
                        help="seconds of the job (the creep window is 600 s: full past it)")
    parser.add_argument("--no-loss", action="store_true", help="steps without a loss")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        session = Path(folder)
        writer = EventWriter(session / layout.EVENTS)
        losses = LossWatch(session)
        creep = MemoryCreepWatch()
        loss_s: list[float] = []
        creep_s: list[float] = []
        step = 0
        t0 = time.time()
        for second in range(args.seconds):
            now = t0 + second
            for _ in range(args.rate):
                step += 1
                for rank in range(args.ranks):
                    loss = None if args.no_loss else 2.0 + 0.1 * math.sin(step + rank)
                    writer.write("step", t=now, rank=rank, step=step, samples=8, loss=loss,
                                 dt=None, phases=None, src="auto" if args.no_loss else "log",
                                 attempt=0)
            rows = [{"pid": 10_000 + rank, "ppid": 1, "name": "python", "role": "rank",
                     "cpu": 99.0, "rss": (900 << 20) + (second % 7) * (1 << 20)}
                    for rank in range(args.ranks)]
            host = {"cpu": [50.0] * 8, "mem_used": 40 << 30, "mem_total": 64 << 30,
                    "load": [1.0, 1.0, 1.0]}
            writer.write_plain("host", t=now, **host)
            writer.write_plain("procs", t=now, procs=rows)
            writer.flush()
            started = time.process_time()
            losses.read()
            assert losses.alerts() == (None, None)
            loss_s.append(time.process_time() - started)
            started = time.process_time()
            creep.add(now, rows, host)
            assert creep.alert(now) is None
            creep.read_devices(session)  # (no accelerator records: the CPU job's case)
            assert creep.device_alert(now) is None
            creep_s.append(time.process_time() - started)
        writer.close()
        losses.close()
        creep.close()
    steps = args.ranks * args.rate
    # Past the first window (the creep watch's samples fill up over it).
    steady_loss, steady_creep = loss_s[600:] or loss_s, creep_s[600:] or creep_s
    loss_median = statistics.median(steady_loss)
    creep_mean = statistics.fmean(steady_creep)  # judged every 5th second: the mean is fair
    print(f"{args.ranks} ranks x {args.rate} steps/s"
          + (" (no loss in the records)" if args.no_loss else "") + f", {args.seconds} s:")
    print(f"  loss watch: {loss_median * 1e3:.3f} ms a second (median), "
          f"{loss_median / steps * 1e6:.2f} us a step, {loss_median * 100:.3f}% of a core")
    print(f"  creep watch: {creep_mean * 1e3:.3f} ms a second (mean; judged every 5 s: "
          f"{max(steady_creep) * 1e3:.2f} ms at most), {creep_mean * 100:.3f}% of a core")


if __name__ == "__main__":
    main()
