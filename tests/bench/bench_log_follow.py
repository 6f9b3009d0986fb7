"""Log-parsed step times at many ranks: the supervisor's cost, and how true the stamps are.

A job of 32 ranks writes step lines, 10 a second each, and notes when it wrote each line (its
own clock, the truth). The ranks are started by a real torchrun, which writes each one's
stdout and stderr to logs of their own and repeats them on its console, as in the jobs users
run; and, to compare, by a plain parent process writing into torchrun's log layout itself
(stdout logs only). The lines are our runner's and a plain `step N loss X` (an unmodified
script's). Under the real `neurotui run --headless` (host and process telemetry each second),
measured:

1. the supervisor's CPU while the job writes, as a share of one core (issue #12's target: at
   most 0.5% at 32 ranks x 10 lines/s);
2. how late each step line was stamped (its event's `t` minus its write time), and the median
   step time the figures derive from the stamps (metrics.rank_step_times, the ranks' median)
   against the written one (target: within 5%, at 20 steps/s too).

    .venv/bin/python tests/bench/bench_log_follow.py [--ranks 32] [--rate 10] [--seconds 40]
        [--lines runner,plain] [--no-auto-probe]

Beside them, reported and not judged against the CPU target (which is the logs' path): the
case neurotui meets by default in a PyTorch training loop, under torchrun. Each rank steps a
torch optimizer before its line and neurotui's automatic probe (on, as by default) records the
steps from inside the rank, with where the rank's logs stood at each step. The supervisor reads
the probe's files each second, and the ranks' logs at polls: each line is placed after the
probe's step it was printed after (by offset), not stamped as it comes, and its loss goes onto
that step's row (reported: the share of the probe's rows that carry their line's loss).

Beside the supervisor, reported: the job's launcher's CPU (all its threads: torchrun, or the
plain parent), which neurotui's choice of torchrun flags decides (with --tee, a thread per
rank log polling it ten times a second); and its cache keeper's share
(supervisor/cachekeeping.py), a child process that stays while the job writes and is asked
for a run after every
KEEP_BEHIND_BYTES of JSON lines the session gains, to keep attach, replay and compare under a
second. The case is too short to ask for one, so it is worked out from measurements: the
session's JSON lines a second while the job wrote, and served keepers on the session at the
end: a build (its CPU per byte stands for an append's); a start with a run that has nothing
to do; the same with ten more such runs asked (the fixed part of a run). A run's fixed part
and KEEP_BEHIND_BYTES read, over the seconds the job takes to write that much, is the keeper's
share of a core (with a start in each run where runs come further apart than LINGER_S: the
keeper is let go between them); its start (an interpreter, numpy and the reader, paid once)
and the memory it holds between runs are reported beside.

The supervisor's CPU is all its threads': busy logs are looked at on the batch's timer by the
native looker's thread (supervisor/_looker.c; an fstat a log a look, ten looks a second), and
its main thread wakes for its polls (each line read, parsed and recorded once a second) and
telemetry. Each thread's share is given.

Anchors, measured in the same run: a Python process that only sleeps and wakes as often as the
supervisor's main thread did (on this VM each wakeup alone costs about 0.1 ms of CPU); and, at
the end, the supervisor of the same ranks printing nothing (its telemetry and its second's
loop, which every case pays). With --python-looks (the default), each launcher's runner case
again with the looks made from Python, as where the C looker was not built.

With --floor (the default), each launcher's runner case again with the supervisor's handling
of the lines taken out (TAKE_OUT: in that process only, whatever a read gained is dropped
unparsed): its wakeups, looks, reads and copies, telemetry and second's loop, and nothing of
the lines' stamps, parse, records or writes. What no handling of the lines can go under.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil

from neurotui import metrics
from neurotui.childenv import numpy_helper_env
from neurotui.session import layout
from neurotui.session.cache import cache_dir
from neurotui.session.reader import SessionReader
from neurotui.supervisor.cachekeeping import KEEP_BEHIND_BYTES, KEEPER_MODULE, LINGER_S

REPO = Path(__file__).resolve().parents[2]
CPU_LIMIT = 0.005
RSS_LIMIT_MB = 40
BUILDS = 3
"""Keeper builds (each with a start beside it) whose median cost a byte stands for an append's."""

LINES = {
    # What the ranks print each step: our runner's line (the cheapest to parse), and the
    # shapes of unmodified scripts (a plain `step N loss X`, Hugging Face Trainer's dict).
    "runner": "neurotui-runner step={step} rank={rank} samples=16 loss=1.0",
    "plain": "step {step} loss 2.3456 lr 0.001",
    "hf": "{{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': {step}.0}}",
}

# Each rank is a process of its own, as torchrun's are: the supervisor samples each one's CPU
# and memory every second, as it would a real job's. Under torchrun a rank prints (torchrun
# sends its stdout to its log); otherwise it writes into torchrun's layout itself.
RANK = textwrap.dedent("""
    import json, os, sys, time
    rate, seconds, start, line, truth = sys.argv[1:6]
    rate, seconds, start = float(rate), float(seconds), float(start)
    if len(sys.argv) > 6:  # the plain parent's: rank, and torchrun's log folder
        rank, root = int(sys.argv[6]), sys.argv[7]
        os.makedirs(os.path.join(root, str(rank)), exist_ok=True)
        f = open(os.path.join(root, str(rank), "stdout.log"), "a", buffering=1)
        ranks = int(os.environ["BENCH_RANKS"])
    else:
        rank, ranks, f = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), sys.stdout
    optimizer = None
    if os.environ.get("BENCH_OPTIMIZER"):  # a training loop's step, for the automatic probe
        import torch
        torch.set_num_threads(1)
        weight = torch.zeros(4, requires_grad=True)
        optimizer = torch.optim.SGD([weight], lr=0.1)
    written = []
    for i in range(int(seconds * rate)):
        due = start + i / rate + rank / (rate * ranks)  # ranks staggered, as they drift
        time.sleep(max(0.0, due - time.time()))
        if optimizer is not None:
            optimizer.step()
        f.write(line.format(step=i + 1, rank=rank) + "\\n")
        f.flush()
        written.append((rank, i + 1, time.time()))
    time.sleep(max(0.0, start + seconds - time.time()))  # (a quiet rank's whole run)
    json.dump(written, open(f"{truth}.{rank}", "w"))
""")

JOB = textwrap.dedent("""
    import os, subprocess, sys
    ranks, rank_script, *rank_args = sys.argv[1:]
    # Where torchrun's --log-dir points: the spool in memory (or the session's logs/).
    logs = os.environ.get("NEUROTUI_SPOOL") or os.path.join(os.environ["NEUROTUI_SESSION"], "logs")
    root = os.path.join(logs, "torchrun", "bench", "attempt_0")
    env = {**os.environ, "BENCH_RANKS": ranks}
    procs = [subprocess.Popen([sys.executable, rank_script, *rank_args, str(r), root], env=env)
             for r in range(int(ranks))]
    for p in procs:
        p.wait()
""")
LEAD_S = {"processes": 3.0, "torchrun": 15.0}
"""From the command to the ranks' first line: every rank started (torchrun imports torch, on a
2-core machine beside 32 starting ranks)."""
PROBE_LEAD_S = 120.0
"""More, where every rank imports torch too (the automatic probe's case): 32 imports on 2 cores."""


IDLE_LOOP = textwrap.dedent("""
    import os, shutil, sys, tempfile, time
    rate, seconds, looks = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    folder = tempfile.mkdtemp()
    fds = [os.open(os.path.join(folder, str(i)), os.O_RDWR | os.O_CREAT) for i in range(looks)]
    time.sleep(0.5)  # past start-up
    cpu0, t0 = time.process_time(), time.monotonic()
    while time.monotonic() - t0 < seconds:
        time.sleep(1 / rate)
        for fd in fds:
            os.fstat(fd)
    # Its own clock (the scheduler's, in ns): the kernel's per-process times tick in 10 ms.
    print((time.process_time() - cpu0) / (time.monotonic() - t0))
    shutil.rmtree(folder)
""")


AFTER_IMPORT = textwrap.dedent("""
    # In the supervisor (the one process that imports the log follower), once it has:
    # {why}
    import importlib.machinery, sys

    class _After:
        def find_spec(self, name, path, target=None):
            if name != "neurotui.supervisor.logfollow":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            run_module = spec.loader.exec_module

            def exec_module(module):
                run_module(module)
                {what}

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _After())
""")
TAKE_OUT = AFTER_IMPORT.format(
    why="the bench's --floor: the lines a read gained are dropped, unparsed and "
        "unrecorded:\n# bench_poll_work's \"takes\" piece taken out, as its --breakdown "
        "takes it out in its own process.",
    what="from bench_poll_work import take_out  # (tests/bench is on PYTHONPATH)\n"
         "            take_out([\"takes\"])")
PYTHON_LOOKS = AFTER_IMPORT.format(
    why="the bench's --python-looks: busy logs are looked at from Python, as where the C "
        "looker\n# (supervisor/_looker.c) was not built.",
    what="module._NativeLooker = module._read_looked = None")


def idle_loop_share(wakeups_per_s: float, seconds: float = 10.0, looks: int = 0) -> float:
    """The anchor: the CPU share of a Python process that only sleeps and wakes as often as
    the supervisor did, and at each wakeup fstats `looks` files (the supervisor stamps each
    line of a busy log with its modification time: one fstat a log a wakeup). On this VM a
    wakeup alone costs about 0.1 ms of CPU (a few us on bare metal): a floor no work done
    at a wakeup can go under."""
    out = subprocess.run([sys.executable, "-c", IDLE_LOOP, str(max(wakeups_per_s, 0.1)),
                          str(seconds), str(looks)], capture_output=True, text=True,
                         check=True).stdout
    return float(out)


def run_time_s(pid: int) -> float | None:
    """The process's time on a CPU by the scheduler's own clock (/proc/PID/schedstat, in ns),
    None where there is none. psutil's user and system times come in clock ticks (10 ms: a
    tick is 0.03% of a 37 s window), too coarse for the differences measured here."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def threads_run_time_s(pid: int) -> float:
    """As run_time_s, summed over all the process's threads (torchrun's tail threads; each
    thread's id is a /proc entry of its own). A thread that ended counts nothing."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    return sum(run_time_s(int(tid)) or 0.0 for tid in threads)


def threads_said(figures: dict[str, float]) -> str:
    """Its main thread's share, and the rest's: the native looker's thread, where it looks."""
    rest = figures["cpu_share"] - figures["main_share"]
    return f"its main thread {figures['main_share']:.2%}" + (
        f", the native looker's thread {rest:.2%}" if rest >= 0.00005 else "")


def voluntary_switches(process: psutil.Process) -> int:
    """The process's wakeups so far, all its threads' (psutil's count is its first
    thread's)."""
    total = 0
    for thread in process.threads():
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(thread.id).num_ctx_switches().voluntary
    return total


def served_keeper(session: Path, asks: int = 0, gap_s: float = 1.0) -> dict[str, float]:
    """A keeper served as the supervisor serves it (`--serve`): started, its first run, then
    `asks` more runs asked `gap_s` apart (long enough that none is folded into another),
    then let go. Its CPU seconds with its workers' (the kernel's account of reaped children,
    to the microsecond), and its memory while it waited for words."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    keeper = subprocess.Popen([sys.executable, "-m", KEEPER_MODULE, "--serve", "--min-bytes",
                               "0", str(session)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=numpy_helper_env())
    assert keeper.stdin is not None
    memory = {"rss_mb": 0.0, "uss_mb": 0.0}
    if asks:
        process = psutil.Process(keeper.pid)
        time.sleep(gap_s * 3)  # its first run done
        for _ in range(asks):
            keeper.stdin.write(b"k")
            keeper.stdin.flush()
            time.sleep(gap_s)
        full = process.memory_full_info()
        memory = {"rss_mb": full.rss / 1e6, "uss_mb": full.uss / 1e6}
    keeper.stdin.close()
    keeper.wait(timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            **memory}


def keeper_share(session: Path, json_bytes_per_s: float, asks: int = 10) -> dict[str, float]:
    """The cache keeper's share of a core at the session's rate of JSON lines (see the
    module's docstring): the CPU of a run asked of the keeper that stays (a worker forked,
    a run's fixed part, and KEEP_BEHIND_BYTES read), every KEEP_BEHIND_BYTES. Its start,
    paid once while runs come at least every LINGER_S, is reported beside.

    A build's CPU per byte stands for an append's: the case's session is smaller than
    KEEP_BEHIND_BYTES, and appends of a part of it are too short to tell their bytes' cost
    from their own. On a 66 MB session of the default path's shape this gave 0.081 CPU-s a
    run, where 8 MiB appended cost a forked worker 0.085-0.092 CPU-s; on the 5 MB session of
    this bench's case of that shape it gives more, 0.11-0.13 (a build's own cost is spread
    over fewer bytes)."""
    built_bytes = layout.json_lines_bytes(session)
    # A build less a start, the median of BUILDS pairs: one pair's difference, a tenth of a
    # CPU-second on a session this small, moved by 0.05 CPU-s from one start to the next
    # (a share of 0.07 to 0.26% for the same case).
    builds, starts = [], []
    for _ in range(BUILDS):
        shutil.rmtree(cache_dir(session), ignore_errors=True)
        builds.append(served_keeper(session)["cpu_s"])  # no cache yet: a start and a build
        starts.append(served_keeper(session)["cpu_s"])  # cache current: a start, nothing
    start = {"cpu_s": statistics.median(starts)}
    asked = served_keeper(session, asks)  # a start, a run with nothing, `asks` more such
    run_fixed_s = max(0.0, asked["cpu_s"] - start["cpu_s"]) / asks
    per_byte = statistics.median(max(0.0, b - s) for b, s in zip(builds, starts,
                                                                    strict=True)) / built_bytes
    run_s = run_fixed_s + per_byte * KEEP_BEHIND_BYTES
    every_s = KEEP_BEHIND_BYTES / json_bytes_per_s if json_bytes_per_s > 0 else float("inf")
    if every_s > LINGER_S:  # let go between runs: each one starts a keeper
        run_s += start["cpu_s"]
    return {"keeper_share": run_s / every_s, "keeper_run_s": run_s, "keeper_every_s": every_s,
            "keeper_run_fixed_s": run_fixed_s, "keeper_start_s": start["cpu_s"],
            "keeper_rss_mb": asked["rss_mb"], "keeper_uss_mb": asked["uss_mb"],
            "json_kb_per_s": json_bytes_per_s / 1e3}


def run(ranks: int, rate: float, seconds: float, *, watch: bool = True,
        lines: str = "runner", launcher: str = "torchrun",
        auto_probe: bool = False, take_out: bool = False,
        python_looks: bool = False) -> dict[str, float]:
    """`auto_probe`: each rank steps a torch optimizer before its line, and neurotui's
    automatic probe (on, as by default) records the steps; the log lines are stamped too.
    `rate` 0: the ranks print nothing for `seconds`; `take_out`: the supervisor drops what it
    reads of the logs (TAKE_OUT). In either, only the supervisor's CPU, wakeups and memory are
    returned. `python_looks`: busy logs are looked at from Python (PYTHON_LOOKS)."""
    with tempfile.TemporaryDirectory() as tmp:
        extra_env = {}
        if take_out or python_looks:
            (Path(tmp) / "site").mkdir()
            (Path(tmp) / "site" / "sitecustomize.py").write_text(
                TAKE_OUT if take_out else PYTHON_LOOKS)
            extra_env["PYTHONPATH"] = os.pathsep.join(
                [str(Path(tmp) / "site"), str(Path(__file__).resolve().parent),
                 *filter(None, [os.environ.get("PYTHONPATH")])])
        job = Path(tmp) / "job.py"
        job.write_text(JOB)
        rank_script = Path(tmp) / "rank.py"
        rank_script.write_text(RANK)
        truth = Path(tmp) / "truth.json"
        sessions = Path(tmp) / "sessions"
        start = time.time() + LEAD_S[launcher] + (PROBE_LEAD_S if auto_probe else 0.0)
        rank_args = [str(rate), str(seconds), str(start), LINES[lines], str(truth)]
        command = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node",
                   str(ranks), str(rank_script), *rank_args] if launcher == "torchrun" else \
            [sys.executable, str(job), str(ranks), str(rank_script), *rank_args]
        proc = subprocess.Popen(
            [sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions), "run",
             "--headless", "--interval", "60", *([] if auto_probe else ["--no-auto-probe"]),
             "--", *command],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "NEUROTUI_LOG_WATCH": "1" if watch else "0",
                 **({"BENCH_OPTIMIZER": "1"} if auto_probe else {}), **extra_env})
        deadline = time.time() + 30
        session = None
        while time.time() < deadline and session is None:
            found = [p for p in sessions.glob("*/meta.json")] if sessions.exists() else []
            meta = json.loads(found[0].read_text()) if found else {}
            if meta.get("supervisor_pid") and meta.get("job_pid"):
                session = found[0].parent
            time.sleep(0.1)
        assert session is not None, "the supervisor did not start"
        supervisor = psutil.Process(meta["supervisor_pid"])
        time.sleep(max(0.0, start + 2.0 - time.time()))  # the ranks' steady output
        cpu0, t0 = supervisor.cpu_times(), time.time()
        json0 = layout.json_lines_bytes(session)
        # All its threads: the native looker's too. Its first thread's alone beside them.
        run0 = threads_run_time_s(supervisor.pid)
        main0 = run_time_s(supervisor.pid) or 0.0
        main_switches0 = supervisor.num_ctx_switches().voluntary
        launcher0 = threads_run_time_s(meta["job_pid"])  # torchrun, or the plain parent
        switches0 = voluntary_switches(supervisor)
        time.sleep(max(1.0, seconds - 3.0))
        cpu1, t1 = supervisor.cpu_times(), time.time()
        json1 = layout.json_lines_bytes(session)
        run1 = threads_run_time_s(supervisor.pid)
        main1 = run_time_s(supervisor.pid) or 0.0
        launcher1 = threads_run_time_s(meta["job_pid"])
        wakeups = (voluntary_switches(supervisor) - switches0) / (t1 - t0)
        main_wakeups = (supervisor.num_ctx_switches().voluntary - main_switches0) / (t1 - t0)
        threads = {"main_share": (main1 - main0) / (t1 - t0),
                   "main_wakeups_per_s": main_wakeups}
        rss = supervisor.memory_info().rss
        proc.wait(timeout=seconds + 120)
        tick_share = ((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)) / (t1 - t0)
        share = (run1 - run0) / (t1 - t0) if run0 else tick_share
        if take_out and b'"kind":"step"' in \
                (session / "events.jsonl").read_bytes().replace(b" ", b""):
            raise SystemExit("--floor: the supervisor recorded steps: its lines' handling "
                             "was not taken out")
        if rate == 0 or take_out:  # the quiet job, or no line taken: none to check
            return {"cpu_share": share, "wakeups_per_s": wakeups, "rss_mb": rss / 1e6,
                    **threads}
        written = {(r, s): t for rank in range(ranks)
                   for r, s, t in json.loads(Path(f"{truth}.{rank}").read_text())}
        stamped = {}
        records = [session / "events.jsonl"]
        if auto_probe:  # the probe's steps: what the reader keeps of a rank it times
            records = sorted((session / "probe").glob("auto-rank-*.jsonl"))
        for path in records:
            for line in path.read_text().splitlines():
                e = json.loads(line)
                if e["kind"] == "step":
                    stamped[(e["rank"], e["step"])] = e["t"]
        late = np.array([stamped[k] - written[k] for k in written if k in stamped])
        timing = json.loads((session / "meta.json").read_text()).get("log_timing", {})
        # The step time the product shows: each rank's median as the figures derive it from
        # the stamps (rows read together share one, and get their read's time over its steps).
        steps = SessionReader(session).load().steps()
        medians = metrics.rank_step_times(steps)
        auto = steps[steps["src"].astype(str) == "auto"]
        with_loss = float(auto["loss"].notna().mean()) if len(auto) else float("nan")
        keeper = keeper_share(session, (json1 - json0) / (t1 - t0))
    return {**keeper, **threads, "cpu_share": share, "tick_share": tick_share,
            "wakeups_per_s": wakeups,
            "rss_mb": rss / 1e6, "launcher_share": (launcher1 - launcher0) / (t1 - t0),
            "system_share": (cpu1.system - cpu0.system) / (t1 - t0),
            "found": len(late) / len(written),
            "late_median_ms": float(np.median(late) * 1000),
            "late_p99_ms": float(np.percentile(late, 99) * 1000),
            "late_max_ms": float(late.max() * 1000),
            "step_median_s": float(statistics.median(medians["median_step_s"])),
            "method": timing.get("method", "?"), "with_loss": with_loss}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=32)
    p.add_argument("--rate", type=float, default=10.0, help="lines per second per rank")
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--lines", default="runner,plain",
                   help=f"the step lines' shapes, of {', '.join(LINES)}")
    p.add_argument("--launchers", default="torchrun,processes",
                   help="what starts the ranks: a real torchrun (each rank's stdout and stderr "
                   "logs, its console), and/or a plain parent writing stdout logs")
    p.add_argument("--auto-probe", action=argparse.BooleanOptionalAction, default=True,
                   help="also the case neurotui meets by default in a torch training loop: "
                   "each rank steps an optimizer, and the automatic probe records the steps "
                   "(reported beside the target, which is the logs' path; torchrun only)")
    p.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                   help="also each launcher's runner case with the supervisor's handling of "
                   "the lines taken out: what no handling of them can go under")
    p.add_argument("--python-looks", action=argparse.BooleanOptionalAction, default=True,
                   help="also each launcher's runner case with busy logs looked at from "
                   "Python, as where the C looker (supervisor/_looker.c) was not built")
    args = p.parse_args()
    ok = True
    launchers = args.launchers.split(",")
    cases = [(args.ranks, args.rate, True, shape, launcher, False) for launcher in launchers
             for shape in args.lines.split(",")]
    cases += [(args.ranks, args.rate, False, "runner", launchers[0], False),
              (2, 20.0, True, "runner", launchers[0], False),
              (2, 20.0, False, "runner", launchers[0], False)]
    if args.auto_probe and "torchrun" in launchers:  # (the probe names ranks by RANK)
        cases.append((args.ranks, args.rate, True, "runner", "torchrun", True))
    for ranks, rate, watch, shape, launcher, auto_probe in cases:
        figures = run(ranks, rate, args.seconds, watch=watch, lines=shape, launcher=launcher,
                      auto_probe=auto_probe)
        # As often as its main thread woke (the looker's thread, where it looks, is C).
        anchor = idle_loop_share(figures["main_wakeups_per_s"])
        truth = 1.0 / rate
        error = abs(figures["step_median_s"] / truth - 1)
        source = " + the automatic probe's steps" if auto_probe else ""
        print(f"{launcher}: {ranks} ranks x {rate:g} {shape} lines/s{source} "
              f"({figures['method']}): "
              f"supervisor "
              f"{figures['cpu_share']:.2%} of one core (by clock ticks "
              f"{figures['tick_share']:.2%}, {figures['system_share']:.2%} in the kernel; "
              + threads_said(figures) +
              f"), {figures['wakeups_per_s']:.1f} wakeups/s, "
              f"{figures['main_wakeups_per_s']:.1f} of its main thread (an idle Python loop "
              f"waking as often: {anchor:.2%}), "
              f"{figures['rss_mb']:.0f} MB; the job's launcher {figures['launcher_share']:.2%}; "
              f"{figures['found']:.1%} of "
              f"lines recorded; stamped {figures['late_median_ms']:.2f} ms late (median), "
              f"{figures['late_p99_ms']:.1f} ms (p99), {figures['late_max_ms']:.1f} ms (max); "
              f"median step {figures['step_median_s'] * 1000:.1f} ms vs {truth * 1000:.1f} ms "
              f"written ({error:.1%} off)"
              + (f"; {figures['with_loss']:.1%} of the probe's rows carry their line's loss"
                 if auto_probe else "")
              + f"; its cache keeper {figures['keeper_share']:.2%} of a core (a run of "
              f"{figures['keeper_run_s']:.3f} CPU-s, {figures['keeper_run_fixed_s']:.3f} of "
              f"it fixed, every {figures['keeper_every_s']:.0f} s at "
              f"{figures['json_kb_per_s']:.0f} kB/s of JSON lines; its start "
              f"{figures['keeper_start_s']:.2f} CPU-s, "
              + ("once" if figures["keeper_every_s"] <= LINGER_S else "in each run")
              + f"; {figures['keeper_rss_mb']:.0f} MB "
              f"resident, {figures['keeper_uss_mb']:.0f} MB its own, between runs)",
              flush=True)
        if watch:  # the default; polling is the fallback, reported beside it
            ok &= error <= 0.05 and figures["found"] == 1.0
            if auto_probe:  # each step's line printed after it: each row has its loss
                ok &= figures["with_loss"] == 1.0
            if ranks == args.ranks and not auto_probe:  # (the target is the logs' path)
                ok &= figures["cpu_share"] <= CPU_LIMIT and figures["rss_mb"] <= RSS_LIMIT_MB
    for launcher in launchers if args.python_looks else ():
        python_case = run(args.ranks, args.rate, args.seconds, lines="runner",
                          launcher=launcher, python_looks=True)
        print(f"{launcher}: {args.ranks} ranks x {args.rate:g} runner lines/s, busy logs "
              "looked at from Python (where the C looker was not built): supervisor "
              f"{python_case['cpu_share']:.2%} of one core, "
              f"{python_case['wakeups_per_s']:.1f} wakeups/s, "
              f"{python_case['found']:.1%} of lines recorded, median step "
              f"{python_case['step_median_s'] * 1000:.1f} ms", flush=True)
    for launcher in launchers if args.floor else ():
        floor_case = run(args.ranks, args.rate, args.seconds, lines="runner", launcher=launcher,
                         take_out=True)
        print(f"{launcher}: {args.ranks} ranks x {args.rate:g} runner lines/s, the lines' "
              f"handling taken out (read, then dropped): supervisor "
              f"{floor_case['cpu_share']:.2%} of one core ({threads_said(floor_case)}), "
              f"{floor_case['wakeups_per_s']:.1f} wakeups/s, {floor_case['rss_mb']:.0f} MB "
              "(its wakeups, looks, reads, copies and telemetry: what no handling of the "
              "lines can go under)", flush=True)
    for launcher in launchers:
        # What every case above pays before its first line: the second's loop and telemetry.
        quiet = run(args.ranks, 0.0, args.seconds, lines="runner", launcher=launcher)
        print(f"{launcher}: {args.ranks} ranks printing nothing: supervisor "
              f"{quiet['cpu_share']:.2%} of one core ({threads_said(quiet)}), "
              f"{quiet['wakeups_per_s']:.1f} wakeups/s, "
              f"{quiet['rss_mb']:.0f} MB (its telemetry and its second's loop: the part of "
              "each case above that is not its lines')", flush=True)
    print("PASS" if ok else f"FAIL (targets: supervisor <= {CPU_LIMIT:.1%} of a core at "
          f"{args.ranks} ranks x {args.rate:g}/s, {RSS_LIMIT_MB} MB; median step within 5%; every "
          "line recorded)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
