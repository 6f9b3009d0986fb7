"""The supervisor's log and probe work a second, counted in instructions: a figure this VM's
noise cannot move.

bench_log_follow measures the whole supervisor by the scheduler's clock, where one run differs
from the next by 0.03 to 0.1% of a core: a cut of a tenth of the work does not show in it.
This bench runs the same classes the supervisor runs (LogFollower, StallWatch, EventWriter) on
real files in one process, on a job of `--ranks` torchrun ranks printing `--rate` step lines
a second, and counts what following it costs:

- `placed`: the default torch path. Each rank's automatic probe records its steps, with where
  its stdout and stderr stood (probe/auto-rank-R.jsonl); once a second the probe files are
  read and each log's lines placed after the steps (StallWatch.read_probes, LogFollower.poll).
- `logs`: the logs' path (no probe). Every tenth of a second the supervisor looks at what the
  kernel said changed (inotify) or, once the logs are busy, at every log on the batch's timer
  (on_change, on_batch); once a second the lines are read and taken (poll).

The job's output is made before it is timed and only written (os.write) while it is; what
that writing costs is measured alone (`--no-follow`) and taken off. With valgrind installed,
each case runs under callgrind twice, for WARM_S more seconds and for `--seconds` more, and the
instructions of the seconds between are the figure (the start-up, imports included, is the
same in both). The job's seconds are its own clock's: nothing sleeps, and what depends on
time (batches, marks, when a placed line is sure) comes at the same ticks in every run.
That every line was recorded is checked by this process, not the measured one: up to
1414133 the child read its records back itself, 1.5 M instructions a second of each figure.
Without valgrind, the process's CPU time over the counted seconds, which is noisy.

It leaves out what only the whole process shows: the wakeups themselves and the kernel's
side of a look (bench_log_follow measures those), and telemetry (bench_collectors).

With `--breakdown` (valgrind only), the logs' path again with each piece of the lines'
handling taken out in turn (PIECES: monkeypatched in the child), and what each piece costs: the
instructions it takes away. What remains once all of the lines' handling is out is the looks
(an os.fstat each: about 7,300 instructions of Python's own, the most of a look), the reads and
the second's loops.

    .venv/bin/python tests/bench/bench_poll_work.py [--cases placed,logs] [--ranks 32]
        [--rate 10] [--seconds 16] [--lines runner] [--python-records] [--breakdown]
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

WARM_S = 3
"""Seconds followed before any is counted: every log found, placed or timed by then."""
T0 = 1_750_000_000.0
"""The job's clock at its start: the same in every run (a float's digits are work too)."""
TICK_S = 0.1
"""How often the supervisor wakes for the logs' path's looks (a batch, at 10 lines a second)."""


PIECES = {
    "stall watch": "the stall watch told of each step (StallWatch.rank_steps)",
    "encoding": "the step records' encoding and writing (StepRecorder._write_steps)",
    "records": "the step records, encoding and stall watch included (StepRecorder.record)",
    "lines": "the lines' tails, parse and records (LineTaker.take_lines)",
    "takes": "all of the lines' handling after their read: stamps, split, tails, parse, "
             "records (LineTaker.take_looked_lines)",
}
"""Pieces of the logs' path `--breakdown` takes out, each with what it stands for; each one
named later holds those before it."""


def take_out(pieces: list[str]) -> None:
    """Replace `pieces` (of PIECES) with what does nothing, in this process (a child's)."""
    from neurotui.supervisor.logtakes import LineTaker
    from neurotui.supervisor.stallwatch import StallWatch
    from neurotui.supervisor.steprecorder import StepRecorder

    def pending_dropped(self: LineTaker, followed: object, *_: object) -> None:
        followed.pending = b""  # type: ignore[attr-defined]

    nothing = {
        "stall watch": (StallWatch, "rank_steps", lambda self, *args: None),
        "encoding": (StepRecorder, "_write_steps", lambda self, batch: batch.clear()),
        "records": (StepRecorder, "record", lambda self, figures, **_: figures.clear()),
        "lines": (LineTaker, "take_lines", lambda self, *args: None),
        "takes": (LineTaker, "take_looked_lines", pending_dropped),
    }
    for piece in pieces:
        owner, name, replacement = nothing[piece]
        setattr(owner, name, replacement)


def follow(case: str, ranks: int, rate: float, seconds: int, line: str,
           following: bool, python_records: bool = False) -> tuple[float, Path]:
    """The job followed for WARM_S + `seconds` seconds; returns the CPU seconds of the last
    `seconds` (this process's), and the session, which the parent checks (_check: reading
    every record back is not the supervisor's work) and removes."""
    from neurotui.session import layout
    from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
    from neurotui.sources.steplog import StepLineParser
    from neurotui.supervisor import logfollow
    from neurotui.supervisor.logfollow import LogFollower
    from neurotui.supervisor.stallwatch import StallWatch

    session = Path(tempfile.mkdtemp()) / "session"
    root = session / layout.TORCHRUN_LOG_DIR / "bench_0" / "attempt_0"
    (session / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    outs, errs = [], []
    stdout_name, stderr_name = layout.TORCHRUN_RANK_LOG_NAMES
    for rank in range(ranks):
        (root / str(rank)).mkdir(parents=True)
        outs.append(os.open(root / str(rank) / stdout_name, os.O_WRONLY | os.O_CREAT, 0o644))
        errs.append(os.open(root / str(rank) / stderr_name, os.O_WRONLY | os.O_CREAT, 0o644))
    probes = [os.open(session / layout.PROBE_DIR / f"auto-rank-{rank}.jsonl",
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
              for rank in range(ranks)] if case == "placed" else []
    ticks = round(1 / TICK_S)
    per_tick = rate * TICK_S
    total_ticks = (WARM_S + seconds) * ticks
    # Every folder settled, as a few seconds into a run: a folder changed in the last seconds
    # is listed again at each look (layout.SETTLED_DIR_S), by the wall's clock.
    settled = time.time() - 60
    for folder in (session, *session.rglob("*")):
        if folder.is_dir():
            os.utime(folder, (settled, settled))
    made = _made(case, ranks, per_tick, total_ticks, line, outs, errs)
    writer = EventWriter(session / layout.EVENTS)
    # Busy logs looked at from Python (where the C looker was not built): the native looker
    # looks by the wall's clock, not the job's; bench_log_follow measures it, in the real
    # supervisor.
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=False,
                           native_looks=False, native_records=not python_records)
    # Its reads of what the looks saw as in the supervisor: by _looker.c's read_looked where
    # it was built (which has no clock of its own).
    follower._read_looked = logfollow._read_looked
    changes = follower.fileno()
    if changes is None:
        raise SystemExit("no inotify here: the supervisor would poll the logs")
    stalls = follower.stalls = StallWatch(session)
    cpu0 = 0.0
    for tick in range(total_ticks):
        if tick == WARM_S * ticks:
            cpu0 = time.process_time()
        logs, records = made[tick]
        for rank in range(ranks):
            if records:
                os.write(probes[rank], records[rank])
            os.write(outs[rank], logs[rank])
        # The job's clock, not the wall's: nothing waits, and what depends on time (batches,
        # marks, when a placed line is sure) comes at the same ticks in every run.
        now = T0 + (tick + 1) * TICK_S
        if following:
            # As the supervisor's wait: the batch's timer while busy, else the kernel's word
            # (inotify) if it has one.
            if follower.pause_s > 0:
                follower.on_batch(now)
            elif select.select([changes], [], [], 0)[0]:
                follower.on_change(now)
            if tick % ticks == ticks - 1:
                if case == "placed":
                    stalls.read_probes()
                    stalls.read_at = now  # (read_probes' own time is the wall's)
                follower.poll(now)
                writer.flush()
    cpu = time.process_time() - cpu0
    timing = follower.timing
    if following and (case == "logs") != ("batches" in str(timing.get("note"))):
        raise SystemExit(f"{case}: not followed as the supervisor would ({timing})")
    if following and case == "placed" and timing.get("placed_logs") != 2 * ranks:
        raise SystemExit(f"placed: {timing.get('placed_logs')} of {2 * ranks} logs placed")
    follower.close()
    writer.close()
    return cpu, session


def _made(case: str, ranks: int, per_tick: float, total_ticks: int, line: str,
          outs: list[int], errs: list[int]) -> list[tuple[list[bytes], list[bytes]]]:
    """Each tick's output: every rank's log bytes and (placed) its probe's step records,
    each saying where the rank's stdout and stderr stood when its step was done."""
    out_ids = [os.fstat(fd)[1:3] for fd in outs]  # (inode, device)
    err_ids = [os.fstat(fd)[1:3] for fd in errs]
    sizes = [0] * ranks
    step = 0
    made = []
    for tick in range(total_ticks):
        logs: list[list[bytes]] = [[] for _ in range(ranks)]
        records: list[list[bytes]] = [[] for _ in range(ranks)]
        due = round((tick + 1) * per_tick) - round(tick * per_tick)
        for _ in range(due):
            step += 1
            for rank in range(ranks):
                t = T0 + (tick + 0.5) * TICK_S + rank * 1e-4
                if case == "placed":  # (as the probe writes them: neurotui_autoprobe)
                    (ino, dev), (err_ino, err_dev) = out_ids[rank], err_ids[rank]
                    records[rank].append(
                        f'{{"t":{t!r},"kind":"step","rank":{rank},"local_rank":{rank},'
                        f'"step":{step},"samples":16,"loss":null,"dt":0.1,'
                        f'"phases":{{"data":0.001,"step":0.099}},"src":"auto","attempt":0,'
                        f'"out":[{dev},{ino},{sizes[rank]}],"err":[{err_dev},{err_ino},0]}}\n'
                        .encode())
                text = (line.format(step=step, rank=rank) + "\n").encode()
                logs[rank].append(text)
                sizes[rank] += len(text)
        made.append(([b"".join(x) for x in logs],
                     [b"".join(x) for x in records] if case == "placed" else []))
    return made


def _check(session: Path, case: str, ranks: int, steps: int) -> None:
    """Every line was recorded (the last second's may wait for the next poll)."""
    recorded = sum(1 for raw in (session / "events.jsonl").read_bytes().splitlines()
                   if b'"kind":"step"' in raw.replace(b" ", b""))
    if recorded < ranks * (steps - 2 * round(1 / TICK_S)):
        raise SystemExit(f"{case}: only {recorded} of {ranks * steps} step lines recorded")


def instructions(command: list[str]) -> tuple[int, str]:
    """`command` run under callgrind: its instructions in all, and what it printed."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *command],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})  # (str hashes: the same)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from callgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1)), done.stdout


def checked(case: str, args: argparse.Namespace, seconds: int, follow: bool,
            printed: str) -> float:
    """The CPU seconds of a child run of `seconds` (after WARM_S), from what it printed; its
    session checked (a followed one: every line recorded) and removed."""
    fields = dict(line.split(" ", 1) for line in printed.splitlines() if " " in line)
    session = Path(fields["session"])
    try:
        if follow:
            _check(session, case, args.ranks, round(args.rate * (WARM_S + seconds)))
    finally:
        shutil.rmtree(session.parent, ignore_errors=True)
    return float(fields["cpu"])


def measured(case: str, args: argparse.Namespace, line: str) -> str:
    common = ["--ranks", str(args.ranks), "--rate", str(args.rate), "--line", line,
              *(["--python-records"] if args.python_records else [])]
    lines_s = args.ranks * args.rate
    if shutil.which("valgrind") is None:
        cpu = cpu_of(case, args, common, True) - cpu_of(case, args, common, False)
        return (f"{case}: {args.ranks} ranks x {args.rate:g} {args.lines} lines/s: "
                f"{cpu / args.seconds * 1e3:.2f} ms of CPU a second, "
                f"{cpu / args.seconds:.3%} of a core (no valgrind: CPU time, noisy)")
    counts = {}
    for follow in (True, False):
        for seconds in (WARM_S, WARM_S + args.seconds):
            counts[(follow, seconds)], printed = instructions(
                child(case, common, seconds, follow))
            checked(case, args, seconds, follow, printed)

    def per_s(follow: bool) -> float:
        extra = counts[(follow, WARM_S + args.seconds)] - counts[(follow, WARM_S)]
        return extra / args.seconds

    work = per_s(True) - per_s(False)
    return (f"{case}: {args.ranks} ranks x {args.rate:g} {args.lines} lines/s: "
            f"{work / 1e6:.2f} M instructions a second ({work / lines_s:,.0f} a line; "
            f"writing the job's output alone: {per_s(False) / 1e6:.2f} M)")


def child(case: str, common: list[str], seconds: int, follow: bool,
          without: str | None = None) -> list[str]:
    """The command of one measured run of this script (follow(), in a process of its own),
    with the pieces `without` names taken out (take_out)."""
    return [sys.executable, __file__, "--child", "--cases", case, *common, "--seconds",
            str(seconds), *([] if follow else ["--no-follow"]),
            *(["--without", without] if without else [])]


def breakdown(args: argparse.Namespace, line: str) -> None:
    """The logs' path's instructions a second, and each piece's (PIECES): the instructions
    it takes away when taken out."""
    common = ["--ranks", str(args.ranks), "--rate", str(args.rate), "--line", line]
    lines_s = args.ranks * args.rate

    def per_s(without: str | None, follow: bool = True) -> float:
        counts = [instructions(child("logs", common, seconds, follow, without))[0]
                  for seconds in (WARM_S, WARM_S + args.seconds)]
        return (counts[1] - counts[0]) / args.seconds

    whole = per_s(None)
    work = whole - per_s(None, follow=False)
    print(f"logs: {work / 1e6:.2f} M instructions a second ({work / lines_s:,.0f} a line), of "
          "which:", flush=True)
    for piece, what in PIECES.items():
        cost = whole - per_s(piece)
        print(f"  {piece}: {cost / 1e6:.2f} M a second ({cost / lines_s:,.0f} a line): {what}",
              flush=True)


def cpu_of(case: str, args: argparse.Namespace, common: list[str], follow: bool) -> float:
    """The CPU seconds a child run says it spent on its counted seconds."""
    out = subprocess.run(child(case, common, args.seconds, follow), capture_output=True,
                         text=True, check=True).stdout
    return checked(case, args, args.seconds, follow, out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="placed,logs")
    p.add_argument("--ranks", type=int, default=32)
    p.add_argument("--rate", type=float, default=10.0, help="lines a second a rank")
    p.add_argument("--seconds", type=int, default=16, help="seconds counted")
    p.add_argument("--lines", default="runner",
                   help="the step lines' shape, of bench_log_follow's (runner, plain, hf)")
    p.add_argument("--line", help=argparse.SUPPRESS)  # the child's: the line itself
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-follow", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--without", help=argparse.SUPPRESS)  # the child's: pieces taken out
    p.add_argument("--python-records", action="store_true",
                   help="step records made in Python only, without _steprecords.c")
    p.add_argument("--breakdown", action="store_true",
                   help="the logs' path with each piece of its lines' handling taken out")
    args = p.parse_args()
    if args.child:  # (no numpy here, as in the supervisor: its BLAS threads spin, counted)
        if args.without:
            take_out(args.without.split(","))
        cpu, session = follow(args.cases, args.ranks, args.rate, args.seconds, args.line,
                              not args.no_follow, args.python_records)
        print(f"session {session}\ncpu {cpu}")
        return
    from tests.bench.bench_log_follow import LINES

    for case in args.cases.split(","):
        print(measured(case, args, LINES[args.lines]), flush=True)
    if args.breakdown:
        if shutil.which("valgrind") is None:
            raise SystemExit("--breakdown counts instructions: it needs valgrind")
        breakdown(args, LINES[args.lines])


if __name__ == "__main__":
    main()
