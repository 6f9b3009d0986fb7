"""Benchmark: a job of 64 nodes x 32 ranks over 24 hours, seen as one run (issue #13).

Generates a finished job in a sessions folder: one part per node, each a session as a node's
supervisor leaves it (meta.json with `job` {node, id, id_from, node_rank, nnodes,
nproc_per_node, rdzv_backend, rdzv_endpoint, global_ranks}, its summary, and the columnar
cache its keeper built: session/keeper.py), its ranks' probe files named and numbered by the
job's global ranks (node_rank * 32 .. + 31), and its events.jsonl with host, process-tree and
neuron-monitor telemetry. A step record for each of 2,048 ranks every second for a day would
be 177 M records (tens of GB): the step and telemetry intervals are arguments, 30 s each by
default (5.9 M step records, 0.55 M telemetry events, about 2.5 GB of JSON lines), which this
machine writes and caches in a few minutes. Then measures, as new processes (imports
included, as a user runs them; median of --repeats), with their peak RSS:

- `neurotui ls` on the folder;
- `neurotui compare JOB` (the table) and `neurotui compare JOB --format json`: target 2 s each;
- with --no-cache too: compare with every part's cache set aside (a reader parses every line;
  what a job recorded before the keeper existed costs once).

    .venv/bin/python tests/bench/bench_job_scale.py --dir /tmp/jobscale --keep   # ~5 min once
    .venv/bin/python tests/bench/bench_job_scale.py --dir /tmp/jobscale --keep   # reuses it
    .venv/bin/python tests/bench/bench_job_scale.py --nodes 4 --hours 2          # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import accumulate
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LS_TARGET_S = 2.0
COMPARE_TARGET_S = 2.0
T0 = 1_780_000_000.0
JOB = "bench-job-7781"
MARKER = "bench_job_scale.json"
"""What was generated in --dir (the arguments and totals): a later run with the same
arguments reuses it."""


@dataclass(frozen=True)
class Shape:
    """What to generate."""

    nodes: int = 64
    ranks_per_node: int = 32
    hours: float = 24.0
    step_s: float = 30.0
    """Seconds between one rank's step records."""
    telemetry_s: float = 30.0
    """Seconds between a node's host, procs and neuron samples."""
    cpus: int = 128
    workers_per_rank: int = 1


@dataclass
class Totals:
    parts: int = 0
    step_records: int = 0
    telemetry_records: int = 0
    other_records: int = 0
    json_bytes: int = 0
    cache_bytes: int = 0

    def add(self, other: Totals) -> None:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)


# -- generating --------------------------------------------------------------------------------

def part_name(node_rank: int) -> str:
    """As new_session_folder names a node's part: stamp, run name, node."""
    return f"20260720-000000-llama-trn1-{node_rank:03d}"


def generate(root: Path, shape: Shape, workers: int = 2) -> Totals:
    """Write the job's parts under `root`, each with its keeper's cache and its summary, as
    a finished run leaves them; returns what was written."""
    root.mkdir(parents=True, exist_ok=True)
    totals = Totals()
    with ProcessPoolExecutor(max(1, workers)) as pool:
        for done in pool.map(build_part, [(root, shape, k) for k in range(shape.nodes)]):
            totals.add(done)
    return totals


def build_part(args: tuple[Path, Shape, int]) -> Totals:
    """One node's part: written, then its cache built by the keeper as the supervisor starts
    it, then the summary the supervisor adds to meta.json at the run's end."""
    root, shape, node_rank = args
    part = root / part_name(node_rank)
    totals = write_part(part, shape, node_rank)
    keep_and_summarize(part)
    totals.cache_bytes = sum(f.stat().st_size for f in (part / ".cache").rglob("*")
                             if f.is_file())
    return totals


def write_part(part: Path, shape: Shape, node_rank: int) -> Totals:
    """A node's session files. Lines are formatted with f-strings and the telemetry payloads
    built once and cycled (json.dumps per record would take most of the time)."""
    n = shape.ranks_per_node
    seconds = int(shape.hours * 3600)
    start = T0 - 600.0 + node_rank * 0.05  # the nodes start within seconds of each other
    end = T0 + seconds + 5.0
    ranks = range(node_rank * n, node_rank * n + n)
    node = f"trn1-{node_rank:03d}"
    (part / "probe").mkdir(parents=True)
    (part / "logs").mkdir()
    torchrun = ["torchrun", f"--nnodes={shape.nodes}", f"--nproc_per_node={n}",
                f"--node_rank={node_rank}", "--rdzv-endpoint=trn1-000:29500"]
    command = [*torchrun, "train_llama.py", "--batch-size", "16", "--workers", "4"]
    job = {"node": node, "id": JOB, "id_from": "--job", "node_rank": node_rank,
           "nnodes": str(shape.nodes), "nproc_per_node": str(n),
           "rdzv_endpoint": "trn1-000:29500", "global_ranks": list(ranks)}
    meta = {"format": 1, "id": part.name, "name": "llama", "cwd": "/fsx/llama",
            "host": node, "user": "bench", "versions": {"neurotui": "bench"},
            "started_at": start, "ended_at": end, "records_alerts": True,
            "user_command": ["neurotui", "run", "--job", JOB, "--", *command],
            "command": command, "job": job,
            "exit": {"code": 0, "signal": None, "reason": "completed", "attempts": 1,
                     "lost_events": 0},
            "instance": {"type": "trn1.32xlarge", "source": "bench", "region": "us-east-1"},
            "price": {"usd_per_hour": 21.50, "source": "bench", "as_of": "2026-07-20",
                      "spot": False}}
    (part / "meta.json").write_text(json.dumps(meta, indent=2))
    totals = Totals(parts=1)

    per_rank = int(seconds // shape.step_s)
    base = shape.step_s / 1.02  # step times vary by 0..4 %, and t advances by exactly them
    for r in ranks:
        dts = [round(base * (1.0 + 0.01 * ((i + r) % 5)), 6) for i in range(1, per_rank + 1)]
        times = list(accumulate(dts, initial=T0 + r * 1e-4))[1:]
        with open(part / "probe" / f"rank-{r}.jsonl", "w") as f:
            f.writelines(
                f'{{"t":{t!r},"kind":"step","rank":{r},"step":{i},'
                f'"samples":16,"loss":{2.0 + 1.0 / i:.5f},"dt":{dt},"phases":null,'
                f'"src":"probe","attempt":0}}\n'
                for i, dt, t in zip(range(1, per_rank + 1), dts, times, strict=True))
    totals.step_records = per_rank * n

    cpu_lists = ["[" + ", ".join(f"{(k * 7 + i * 13) % 100 * 0.6:.1f}"
                                 for i in range(shape.cpus)) + "]" for k in range(16)]
    procs = [f'{{"pid": 1000, "ppid": 1, "name": "torchrun", "role": "launcher", '
             f'"cpu": 1.0, "rss": {200 << 20}, "cpu_num": 0}}']
    for local in range(n):
        procs.append(f'{{"pid": {2000 + local}, "ppid": 1000, "name": "python", '
                     f'"role": "rank", "cpu": 95.0, "rss": {3 << 30}, "cpu_num": {local}}}')
        procs.extend(f'{{"pid": {10000 + shape.workers_per_rank * local + w}, '
                     f'"ppid": {2000 + local}, "name": "pt_data_worker", "role": "worker", '
                     f'"cpu": 40.0, "rss": {500 << 20}, "cpu_num": {64 + local}}}'
                     for w in range(shape.workers_per_rank))
    procs_list = "[" + ", ".join(procs) + "]"
    cores = ["[" + ", ".join(f'{{"core": {c}, "pid": {2000 + c}, "util": {(k + c) % 100}.0, '
                             f'"flops": null, "mem_device": {8 << 30}}}' for c in range(n))
             + "]" for k in range(16)]
    samples = [start + 1.0 + k * shape.telemetry_s
               for k in range(int((end - start - 2.0) // shape.telemetry_s))]
    global_ranks = json.dumps({str(local): r for local, r in enumerate(ranks)})
    with open(part / "events.jsonl", "w") as f:
        f.write(f'{{"t": {start + 0.2}, "kind": "proc_start", "attempt": 0, "pid": 1000, '
                f'"pgid": 1000, "argv": {json.dumps(command)}}}\n'
                f'{{"t": {start + 2.0}, "kind": "ranks", "attempt": 0, '
                f'"global_ranks": {global_ranks}}}\n'
                f'{{"t": {start + 30.0}, "kind": "compile", "rank": null, "what": "compile", '
                f'"line": "Compiler status PASS"}}\n')
        for first in range(0, len(samples), 3600):  # bounded memory
            f.writelines(
                f'{{"t": {t!r}, "kind": "host", "cpu": {cpu_lists[k % 16]}, '
                f'"mem_used": {300 << 30}, "mem_total": {512 << 30}, '
                f'"load": [40.0, 38.0, 35.0]}}\n'
                f'{{"t": {t + 0.01!r}, "kind": "procs", "procs": {procs_list}}}\n'
                f'{{"t": {t + 0.02!r}, "kind": "neuron", "cores": {cores[k % 16]}}}\n'
                for k, t in enumerate(samples[first:first + 3600], start=first))
        f.write(f'{{"t": {end - 1.0}, "kind": "proc_exit", "attempt": 0, "pid": 1000, '
                f'"code": 0, "signal": null, "tail": {{}}}}\n')
    totals.telemetry_records = 3 * len(samples)
    totals.other_records = 4
    totals.json_bytes = sum(p.stat().st_size for p in part.rglob("*.jsonl"))
    return totals


def keep_and_summarize(part: Path) -> None:
    """The keeper's cache (as `python -m neurotui.session.keeper PART`, here in this worker
    process), then meta.json's summary as the supervisor writes it at the run's end."""
    from neurotui.session import keeper
    from neurotui.session.columns import Columns
    from neurotui.session.meta import load_meta
    from neurotui.session.reader import SessionReader
    from neurotui.session.writer import update_meta
    from neurotui.summary import summarize

    said = keeper.keep(part, min_bytes=0)  # (a full-size part is over its 8 MiB anyway)
    assert (part / ".cache").is_dir(), said
    reader = SessionReader(part, telemetry_history=1).load()
    assert reader.cache_state == "restored", reader.cache_state
    update_meta(part, summary=summarize(
        load_meta(part), reader.step_columns(),
        Columns.of_records(reader.events.get("compile", ()), ("t", "rank")),
        phases=reader.phase_columns(), probe_info=list(reader.events.get("probe_info", ())),
        samples_from=reader.samples_from))
    keep_neuron_tally(part)


def keep_neuron_tally(part: Path) -> None:
    """The sums of the part's neuron samples, as its supervisor keeps them while recording
    (session/neurontally.py, the same code)."""
    from neurotui.session import neurontally

    tally = neurontally.NeuronTally()
    with open(part / "events.jsonl") as f:
        for line in f:
            if '"kind": "neuron"' in line:
                tally.add(json.loads(line))
    neurontally.save(part, tally)


def prepared(root: Path, shape: Shape, workers: int) -> Totals:
    """The job under `root`: generated, or reused when an earlier run left the same shape."""
    marker = root / MARKER
    if marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("shape") == asdict(shape):
            print(f"reusing the job generated under {root}")
            # A job generated before the supervisor kept its neuron sums: kept now.
            from neurotui.session import layout
            for part in sorted(root.glob("*/")):
                if (part / "events.jsonl").exists() and \
                        not (part / layout.NEURON_TALLY).exists():
                    keep_neuron_tally(part)
            return Totals(**saved["totals"])
        raise SystemExit(f"{root} holds a job of another shape ({saved.get('shape')}): "
                         "name another --dir")
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"{root} is not empty and holds no {MARKER}: name another --dir")
    started = time.perf_counter()
    totals = generate(root, shape, workers)
    marker.write_text(json.dumps({"shape": asdict(shape), "totals": asdict(totals)}))
    print(f"generated in {time.perf_counter() - started:.0f} s")
    return totals


# -- measuring ---------------------------------------------------------------------------------

PEAK = """
import resource, runpy, sys
sys.argv = ["neurotui", *sys.argv[1:]]
try:
    runpy.run_module("neurotui", run_name="__main__")
finally:
    sys.stdout.flush()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write(f"\\nPEAK_RSS_KB {peak}\\n")
"""
"""`python -m neurotui ARGS`, then its own peak RSS on stderr (the child's own: not the
parent's at the fork, which wait4's ru_maxrss would count)."""


@dataclass
class Run:
    seconds: float
    peak_mb: float
    out: str


def neurotui(root: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """The CLI as a new process, timed from start to exit."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK, "--sessions-dir", str(root), *args],
                          cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"neurotui {' '.join(args)}: exit {done.returncode}\n"
                           f"{done.stderr[-3000:]}")
    peak = next(int(line.split()[1]) for line in done.stderr.splitlines()
                if line.startswith("PEAK_RSS_KB"))
    return Run(took, peak / 1024, done.stdout)


def measured(label: str, root: Path, args: list[str], repeats: int,
             target: float | None) -> tuple[bool, Run]:
    runs = [neurotui(root, *args) for _ in range(repeats)]
    took = statistics.median(r.seconds for r in runs)
    peak = max(r.peak_mb for r in runs)
    aim = f"; target {target:.0f} s" if target else ""
    print(f"{label:44}{took:8.2f} s  (best {min(r.seconds for r in runs):.2f}{aim}; "
          f"peak RSS {peak:.0f} MB)")
    return target is None or took < target, runs[-1]


def measure_ls(root: Path, repeats: int) -> tuple[bool, Run]:
    ok, run = measured("neurotui ls", root, ["ls"], repeats, LS_TARGET_S)
    assert f"job {JOB}:" in run.out, run.out[-2000:]
    return ok, run


def measure_compare(root: Path, repeats: int, fmt: str = "table") -> tuple[bool, Run]:
    args = ["compare", JOB] + (["--format", fmt] if fmt != "table" else [])
    return measured(f"neurotui compare JOB{' --format ' + fmt if fmt != 'table' else ''}",
                    root, args, repeats, COMPARE_TARGET_S)


@contextmanager
def caches_set_aside(root: Path) -> Iterator[None]:
    """Every part's .cache renamed away (and back, whatever a reader wrote meanwhile gone)."""
    moved = []
    try:
        for part in sorted(p for p in root.iterdir() if (p / ".cache").is_dir()):
            (part / ".cache").rename(part / ".cache-kept")
            moved.append(part)
        yield
    finally:
        for part in moved:
            shutil.rmtree(part / ".cache", ignore_errors=True)
            (part / ".cache-kept").rename(part / ".cache")


NO_CACHE_SAVE = """
import runpy, sys
from neurotui.session import cache
cache.save = lambda *a, **k: False  # the read alone: nothing written for the next run
sys.argv = ["neurotui", *sys.argv[1:]]
runpy.run_module("neurotui", run_name="__main__")
"""


def measure_compare_without_caches(root: Path) -> float:
    """compare with no part cached (once: a minute or more), the caches restored after."""
    with caches_set_aside(root):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", NO_CACHE_SAVE, "--sessions-dir", str(root),
                        "compare", JOB], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        took = time.perf_counter() - started
    print(f"{'neurotui compare JOB, no part cached (once)':44}{took:8.2f} s")
    return took


# -- the dashboard of the job: first frame, and following it live ------------------------------

FIRST_FRAME_TARGET_S = 1.0
LIVE_CPU_TARGET = 3.0
LIVE_RSS_TARGET_MB = 250.0


def live_copy(root: Path, live: Path, workers: int) -> list[Path]:
    """The job copied, as if still running: no end in meta.json, its training process this
    one (so each part reads as running without its supervisor). Each part's cache is built
    anew by the keeper, as a running node's supervisor keeps it (a copied file is another
    file: the original's cache does not stand for it)."""
    shutil.copytree(root, live, ignore=shutil.ignore_patterns(MARKER, ".cache"))
    me = psutil.Process()
    parts = sorted(p for p in live.iterdir() if (p / "meta.json").exists())
    for part in parts:
        meta = json.loads((part / "meta.json").read_text())
        for key in ("exit", "ended_at", "summary"):
            meta.pop(key, None)
        meta.update(job_pid=me.pid, job_create_time=me.create_time())
        (part / "meta.json").write_text(json.dumps(meta, indent=2))
    with ProcessPoolExecutor(max(1, workers)) as pool:
        list(pool.map(keep, parts))
    return parts


def keep(part: Path) -> None:
    from neurotui.session import keeper

    keeper.keep(part, min_bytes=0)


class LiveWriter(threading.Thread):
    """Goes on writing the job at its shape's rates: every rank a step record every step_s
    seconds (spread over the interval), every node its telemetry every telemetry_s."""

    def __init__(self, parts: list[Path], shape: Shape) -> None:
        super().__init__(daemon=True)
        self.parts, self.shape = parts, shape
        self.stopped = threading.Event()
        self.lines = 0

    def run(self) -> None:
        shape, n = self.shape, self.shape.ranks_per_node
        ranks = [(part, node_rank * n + local) for node_rank, part in enumerate(self.parts)
                 for local in range(n)]
        step = int(shape.hours * 3600 // shape.step_s)
        tick = shape.step_s / len(ranks)
        next_telemetry = time.time()
        i = 0
        while not self.stopped.is_set():
            part, rank = ranks[i % len(ranks)]
            if i % len(ranks) == 0:
                step += 1
            with open(part / "probe" / f"rank-{rank}.jsonl", "a") as f:
                f.write(f'{{"t":{time.time()!r},"kind":"step","rank":{rank},"step":{step},'
                        f'"samples":16,"loss":2.0,"dt":{shape.step_s / 1.02},'
                        f'"phases":null,"src":"probe","attempt":0}}\n')
            self.lines += 1
            if time.time() >= next_telemetry:
                next_telemetry += shape.telemetry_s
                now = time.time()
                for part in self.parts:
                    with open(part / "events.jsonl", "a") as f:
                        f.write(f'{{"t": {now!r}, "kind": "host", "cpu": {[30.0] * shape.cpus},'
                                f' "mem_used": {300 << 30}, "mem_total": {512 << 30}}}\n')
                    self.lines += 1
            i += 1
            self.stopped.wait(tick)


def measure_live_dashboard(root: Path, shape: Shape, window_s: float, workers: int) -> bool:
    """`neurotui attach JOB` in a terminal on a live copy of the job: seconds to its first
    frame and to the first frame with the job's figures, then its CPU share of one core and
    RSS following the job for `window_s` seconds."""
    from tests.bench.bench_dashboard import Terminal, cpu_seconds

    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        started = time.perf_counter()
        parts = live_copy(root, Path(tmp) / "sessions", workers)
        print(f"\nlive copy of the job made in {time.perf_counter() - started:.0f} s")
        writer = LiveWriter(parts, shape)
        writer.start()
        argv = [sys.executable, "-m", "neurotui", "--sessions-dir", str(parts[0].parent),
                "attach", JOB, "--no-adopt"]
        term = Terminal(parts[0], 140, 44, argv=argv)
        dash = psutil.Process(term.proc.pid)
        peak, figures_s = 0, None
        try:
            deadline = time.monotonic() + 120
            while figures_s is None and time.monotonic() < deadline:
                peak = max(peak, dash.memory_info().rss)
                with term._lock:
                    shown = f"{shape.nodes} nodes".encode() in term.recent and \
                        re.search(rb"step \d", term.recent)
                if shown:
                    figures_s = time.monotonic() - term.started
                time.sleep(0.02)
            time.sleep(10)  # settled: the first read's memory handed back
            cpu0, t0 = cpu_seconds(dash), time.monotonic()
            while time.monotonic() - t0 < window_s:
                peak = max(peak, dash.memory_info().rss)
                time.sleep(1.0)
            cpu = 100 * (cpu_seconds(dash) - cpu0) / (time.monotonic() - t0)
            rss = dash.memory_info().rss / 2**20
        finally:
            term.quit()
            writer.stopped.set()
            writer.join()
    first = term.first_frame_s
    print(f"attach {JOB} (the real app in a 140x44 terminal, a new process):")
    print(f"  first frame {first:.2f} s" if first is not None else "  no frame drawn")
    print("  first frame with the job's figures (its nodes, its step) "
          + (f"{figures_s:.2f} s" if figures_s is not None else "not within 120 s")
          + f" (target {FIRST_FRAME_TARGET_S:g} s); peak RSS {peak / 2**20:.0f} MB")
    print(f"  following it live for {window_s:.0f} s ({writer.lines:,} lines written, "
          f"{writer.lines / (window_s + 10):.0f}/s): {cpu:.2f}% of one core (target "
          f"{LIVE_CPU_TARGET:g}%), RSS {rss:.0f} MB (target {LIVE_RSS_TARGET_MB:g} MB)")
    return (figures_s is not None and figures_s <= FIRST_FRAME_TARGET_S
            and cpu <= LIVE_CPU_TARGET and rss <= LIVE_RSS_TARGET_MB)


def report_generated(totals: Totals, shape: Shape) -> None:
    records = totals.step_records + totals.telemetry_records + totals.other_records
    print(f"job {JOB}: {totals.parts} nodes x {shape.ranks_per_node} ranks, {shape.hours:g} h; "
          f"a step record per rank every {shape.step_s:g} s, telemetry every "
          f"{shape.telemetry_s:g} s")
    print(f"  {records:,} records ({totals.step_records:,} steps, "
          f"{totals.telemetry_records:,} telemetry), {totals.json_bytes / 2**30:.2f} GiB of "
          f"JSON lines; caches {totals.cache_bytes / 2**20:,.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=Shape.nodes)
    p.add_argument("--ranks-per-node", type=int, default=Shape.ranks_per_node)
    p.add_argument("--hours", type=float, default=Shape.hours)
    p.add_argument("--step-s", type=float, default=Shape.step_s,
                   help="seconds between one rank's step records")
    p.add_argument("--telemetry-s", type=float, default=Shape.telemetry_s,
                   help="seconds between a node's host, procs and neuron samples")
    p.add_argument("--workers", type=int, default=2, help="processes generating parts")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", help="the sessions folder to generate into (default: a temporary "
                                 "one); with --keep, reused by a later run of the same shape")
    p.add_argument("--keep", action="store_true", help="leave the generated job in --dir")
    p.add_argument("--no-cache", action="store_true",
                   help="also compare with every part's cache set aside (slow)")
    p.add_argument("--no-dashboard", action="store_true",
                   help="leave out the dashboard's first frame and live following")
    p.add_argument("--window", type=float, default=60.0,
                   help="seconds the live dashboard's CPU is measured over")
    args = p.parse_args()
    if args.keep and not args.dir:
        p.error("--keep needs --dir")
    shape = Shape(nodes=args.nodes, ranks_per_node=args.ranks_per_node, hours=args.hours,
                  step_s=args.step_s, telemetry_s=args.telemetry_s)
    if args.keep:
        root = Path(args.dir).resolve() / "sessions"
        run_all(root, shape, args)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        run_all(Path(tmp) / "sessions", shape, args)


def run_all(root: Path, shape: Shape, args: argparse.Namespace) -> None:
    totals = prepared(root, shape, args.workers)
    report_generated(totals, shape)
    ok, _ = measure_ls(root, args.repeats)
    table_ok, table = measure_compare(root, args.repeats)
    json_ok, as_json = measure_compare(root, args.repeats, "json")
    ok &= table_ok and json_ok
    row = json.loads(as_json.out)[0]
    assert row["nodes"] == shape.nodes and row["cores_used"] == \
        shape.nodes * shape.ranks_per_node, row
    if args.no_cache:
        measure_compare_without_caches(root)
    if not args.no_dashboard:
        ok &= measure_live_dashboard(root, shape, args.window, args.workers)
    print()
    print(table.out.split("\n\n")[0])
    print(f"\ntargets: ls and compare of the job under {COMPARE_TARGET_S:.0f} s; the "
          f"dashboard's first frame with figures under {FIRST_FRAME_TARGET_S:g} s, following "
          f"it live under {LIVE_CPU_TARGET:g}% of a core and {LIVE_RSS_TARGET_MB:g} MB")
    print("PASS" if ok else "FAIL: a target was missed")


if __name__ == "__main__":
    main()
