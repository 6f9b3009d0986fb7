"""Benchmark: the dashboard following a big live session, in a real pseudo-terminal.

A generator writes a 32-rank session: each rank 10 steps/s into its probe file, plus 1 Hz
telemetry (per-CPU host sample of 128 CPUs, the process tree of launcher + ranks + 2 DataLoader
workers each, 32 NeuronCores). First it fast-forwards (`--speedup` x real time) until the
session holds `--events` events, the dashboard following all along; then it writes at the real
rate for `--measure` seconds while the dashboard's CPU time and RSS are measured.

    .venv/bin/python tests/bench/bench_dashboard.py                # 1M events, 60 s window
    .venv/bin/python tests/bench/bench_dashboard.py --events 50000 --measure 10   # quick
    .venv/bin/python tests/bench/bench_dashboard.py --headless     # `attach --headless`

Pass (issue #12): following costs at most 1.5% of one core and RSS stays at most 100 MB after
1M events, and the dashboard has not loaded pandas (its memory maps are read). RSS is also
sampled while fast-forwarding: its peak is printed (the catch-up is not the steady state, so
it is reported, not judged).

The anchor: during the same window, glances (the lightest Python monitor users know; issue
#12) runs in its own pseudo-terminal of the same size at the same 2 s refresh, and its CPU and
RSS are printed beside the dashboard's (`--anchor PATH` names its executable; without glances
on the PATH the anchor is left out, and the output says so).

Then two late attaches (`--no-attach` skips them): a second dashboard opens on the session,
now over a million events, while it goes on being written, as a user attaching to a day-old
run. The first reads the JSON lines (and leaves the session's cache), the second reads the
cache. Each reports how long until its first frame (judged: at most 0.5 s from the command,
a new process, imports included) and until it shows the current step, its peak RSS while
catching up (reported) and its RSS 10 s later (judged: at most 100 MB, as above).

The session is deleted at the end unless `--dir` is given.
The dashboard runs as `python -m neurotui.ui.app` at 160x48 with TERM=xterm-256color and no
COLORTERM (as over SSH), so terminal output and rendering are part of the cost.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
CPU_LIMIT_PCT = 1.5
RSS_LIMIT_MB = 100.0
FIRST_FRAME_LIMIT_S = 0.5
ANCHOR_REFRESH_S = 2


class SessionGenerator:
    """Writes the session files the supervisor and the probe would write."""

    def __init__(self, session: Path, ranks: int, rate: float, cpus: int = 128) -> None:
        self.session = session
        self.ranks = ranks
        self.rate = rate
        self.cpus = cpus
        (session / "probe").mkdir(parents=True)
        (session / "logs").mkdir()
        self.events = 0
        self.step = 0
        self._probe = [open(session / "probe" / f"rank-{r}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
                       for r in range(ranks)]
        self._main = open(session / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._next_telemetry = 0.0
        self._sim = 0.0

    def write_meta(self, started_at: float) -> None:
        me = psutil.Process()
        meta = {"format": 1, "id": self.session.name, "name": "bench", "started_at": started_at,
                "ended_at": None, "exit": None, "command": ["torchrun", "bench"],
                "instance": {"type": "trn1.32xlarge", "source": "bench", "region": None},
                "price": {"usd_per_hour": 21.50, "source": "bench", "as_of": "2026-01-01"},
                "config": {"step_target": 10_000_000},
                # The generator stands in for the job: the dashboard sees a live session.
                "job_pid": me.pid, "job_create_time": me.create_time()}
        tmp = self.session / ".meta.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, self.session / "meta.json")

    def start(self, sim_t: float) -> None:
        self._sim = sim_t
        self._next_telemetry = sim_t

    def advance(self, until: float) -> None:
        """Write everything that happens in simulated time up to `until`."""
        period = 1.0 / self.rate
        while self._sim + period <= until:
            self._sim += period
            self.step += 1
            t = self._sim
            for r, f in enumerate(self._probe):
                dt = period * (1.0 + 0.02 * ((self.step + r) % 5))
                f.write(f'{{"t": {t + r * 1e-4:.4f}, "kind": "step", "rank": {r}, "step": '
                        f'{self.step}, "samples": 16, "loss": {2.0 + 1.0 / self.step:.5f}, '
                        f'"dt": {dt:.5f}, "phases": null, "src": "probe", "attempt": 0}}\n')
            self.events += self.ranks
            while self._next_telemetry <= t:
                self._telemetry(self._next_telemetry)
                self._next_telemetry += 1.0
        for f in (*self._probe, self._main):
            f.flush()

    def _telemetry(self, t: float) -> None:
        k = int(t)
        cpu = [round((k * 7 + i * 13) % 100 * 0.6, 1) for i in range(self.cpus)]
        host = {"t": t, "kind": "host", "cpu": cpu, "mem_used": 300 * 2**30,
                "mem_total": 512 * 2**30, "load": [40.0, 38.0, 35.0]}
        procs = [{"pid": 1000, "ppid": 1, "name": "torchrun", "role": "launcher", "cpu": 1.0,
                  "rss": 200 * 2**20}]
        for r in range(self.ranks):
            procs.append({"pid": 2000 + r, "ppid": 1000, "name": "python", "role": "rank",
                          "cpu": 95.0, "rss": 3 * 2**30})
            for w in range(2):
                procs.append({"pid": 3000 + 2 * r + w, "ppid": 2000 + r, "name": "pt_worker",
                              "role": "worker", "cpu": 40.0, "rss": 500 * 2**20})
        neuron = {"t": t, "kind": "neuron", "cores": [
            {"core": c, "pid": 2000 + c, "util": float((k + c) % 100), "flops": None,
             "mem_device": 8 * 2**30} for c in range(32)]}
        for record in (host, {"t": t, "kind": "procs", "procs": procs}, neuron):
            self._main.write(json.dumps(record) + "\n")
        self.events += 3

    def close(self) -> None:
        for f in (*self._probe, self._main):
            f.close()


class Terminal:
    """The dashboard in a pseudo-terminal; its output is read and kept for a while."""

    def __init__(self, session: Path, cols: int, rows: int, profile: Path | None = None,
                 interval: float | None = None, headless: bool = False,
                 argv: list[str] | None = None) -> None:
        """`argv`: run this program instead of the dashboard (the anchor)."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {k: v for k, v in os.environ.items() if k != "COLORTERM"}
        env.update(TERM="xterm-256color", LANG="C.UTF-8", PYTHONPATH=str(REPO))
        prof = ["-m", "cProfile", "-o", str(profile)] if profile else []
        entry = ["-m", "neurotui.ui.app"]
        target = [str(session)]
        if headless:  # `neurotui attach --headless`, as under nohup or Slurm
            entry = ["-m", "neurotui", "--sessions-dir", str(session.parent), "attach",
                     "--headless", "--no-adopt"]
            target = [session.name]
        command = argv or [sys.executable, *prof, *entry, *target,
                           *([f"--interval={interval}"] if interval else [])]
        self.started = time.monotonic()
        self.first_frame_s: float | None = None
        """Seconds from the command to its first frame (the footer's `Quit` key drawn)."""
        self.proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=REPO, start_new_session=True)
        os.close(slave)
        self.headless = headless
        self.master = master
        self.recent = b""
        self.total_bytes = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.total_bytes += len(data)
                self.recent = (self.recent + data)[-200_000:]
                if self.first_frame_s is None and b"Quit" in self.recent:
                    self.first_frame_s = time.monotonic() - self.started

    def shown_steps(self) -> int | None:
        with self._lock:
            # The dashboard's header says "step N/target", headless lines "step N |".
            found = re.findall(rb"step ([\d,]+)(?:/| \|)", self.recent)
        return max(int(x.replace(b",", b"")) for x in found) if found else None

    def quit(self) -> int | None:
        with contextlib.suppress(OSError):
            if self.headless or self.proc.args[0] != sys.executable:  # Ctrl-C
                self.proc.send_signal(signal.SIGINT)
            else:
                os.write(self.master, b"q")
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def main_thread_seconds(proc: psutil.Process) -> float:
    """CPU of the UI thread (the process's first thread); the rest is worker threads."""
    return sum(t.user_time + t.system_time for t in proc.threads() if t.id == proc.pid)


def loaded_pandas(proc: psutil.Process) -> bool:
    """Whether the process mapped pandas' compiled modules (it imported pandas)."""
    with contextlib.suppress(psutil.Error):
        return any("pandas" in m.path for m in proc.memory_maps(grouped=True))
    return False


def late_attach(what: str, session: Path, gen: SessionGenerator, cols: int, rows: int,
                args: argparse.Namespace) -> bool:
    """A new dashboard on the session, the generator writing on at the real rate: seconds
    until its first frame and until it shows the current step, peak RSS meanwhile, RSS 10 s
    after."""
    term = Terminal(session, cols, rows, interval=args.interval)
    dash = psutil.Process(term.proc.pid)
    start, base_sim = time.time(), gen._sim
    caught_up: float | None = None
    peak = 0
    settle_until = start + 120.0  # give up on catching up after two minutes
    while time.time() < settle_until:
        gen.advance(base_sim + time.time() - start)
        with contextlib.suppress(psutil.Error):
            peak = max(peak, dash.memory_info().rss)
        shown = term.shown_steps()
        if caught_up is None and shown is not None and gen.step - shown <= args.rate * 2:
            caught_up = time.time() - start
            settle_until = time.time() + 10.0
        time.sleep(0.05)
    rss_mb = dash.memory_info().rss / 2**20
    pandas = loaded_pandas(dash)
    term.quit()
    frame = term.first_frame_s
    ok = caught_up is not None and rss_mb <= RSS_LIMIT_MB and frame is not None \
        and frame <= FIRST_FRAME_LIMIT_S and not pandas
    shown_at = f"{caught_up:.1f} s" if caught_up is not None else "never (2 min)"
    frame_at = f"{frame:.2f} s" if frame is not None else "never"
    print(f"{what}: first frame after {frame_at} (limit {FIRST_FRAME_LIMIT_S:g} s), current "
          f"step shown after {shown_at}; RSS {peak / 2**20:.0f} MB peak catching up, "
          f"{rss_mb:.0f} MB 10 s later (limit {RSS_LIMIT_MB:g} MB); pandas loaded: "
          f"{'yes' if pandas else 'no'}; session {gen.events:,} events", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--rate", type=float, default=10.0, help="steps/s per rank")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--speedup", type=float, default=25.0)
    parser.add_argument("--measure", type=float, default=60.0, help="seconds at real rate")
    parser.add_argument("--size", default="160x48")
    parser.add_argument("--dir", type=Path, help="where to write the session (kept)")
    parser.add_argument("--profile", type=Path, help="cProfile the dashboard's main thread")
    parser.add_argument("--interval", type=float, help="dashboard refresh (default: its own)")
    parser.add_argument("--anchor", default=shutil.which("glances"),
                        help="glances executable measured beside the dashboard (default: "
                        "glances on the PATH)")
    parser.add_argument("--no-attach", action="store_true", help="skip the late attaches")
    parser.add_argument("--headless", action="store_true",
                        help="measure `neurotui attach --headless` instead (no late attaches)")
    args = parser.parse_args(argv)
    args.no_attach |= args.headless
    cols, rows = (int(x) for x in args.size.split("x"))

    root = args.dir or Path(tempfile.mkdtemp(prefix="neurotui-bench-"))
    session = root / "20260101-000000-bench"
    gen = SessionGenerator(session, args.ranks, args.rate)
    per_sim_s = args.ranks * args.rate + 3
    backlog_s = args.events / per_sim_s
    wall0 = time.time()
    # Simulated time runs `speedup` times faster and meets the wall clock when the backlog
    # is written, so every event is in the past for the dashboard, as in a real run.
    sim0 = wall0 + backlog_s / args.speedup - backlog_s
    gen.write_meta(started_at=sim0)
    gen.start(sim0)
    term = Terminal(session, cols, rows, args.profile, args.interval, args.headless)
    dash = psutil.Process(term.proc.pid)
    print(f"session {session}; dashboard pid {term.proc.pid}; fast-forward "
          f"{backlog_s:,.0f} s of run at {args.speedup:g}x", flush=True)

    catch_up_peak = 0
    while gen.events < args.events:
        gen.advance(sim0 + (time.time() - wall0) * args.speedup)
        if term.proc.poll() is not None:
            print("dashboard exited early", file=sys.stderr)
            return 2
        with contextlib.suppress(psutil.Error):
            catch_up_peak = max(catch_up_peak, dash.memory_info().rss)
        time.sleep(0.05)
    catch_up_cpu = cpu_seconds(dash)
    print(f"{gen.events:,} events written in {time.time() - wall0:.0f} s; dashboard used "
          f"{catch_up_cpu:.1f} CPU-s so far, RSS {dash.memory_info().rss / 2**20:.0f} MB "
          f"({catch_up_peak / 2**20:.0f} MB peak while fast-forwarding)", flush=True)
    time.sleep(3)  # let it take in the last fast-forward batch before measuring

    anchor = None
    if args.anchor:  # started before the window: its own start-up is not measured
        anchor = Terminal(session, cols, rows,
                          argv=[args.anchor, "-t", str(ANCHOR_REFRESH_S)])
        time.sleep(5)
    anchor_proc = psutil.Process(anchor.proc.pid) if anchor else None

    # Real rate from here: the measurement window.
    base_sim = gen._sim
    start_wall = time.time()
    start_cpu = cpu_seconds(dash)
    start_ui = main_thread_seconds(dash)
    start_anchor = cpu_seconds(anchor_proc) if anchor_proc else 0.0
    start_bytes = term.total_bytes
    peak_rss = 0
    while (elapsed := time.time() - start_wall) < args.measure:
        gen.advance(base_sim + elapsed)
        peak_rss = max(peak_rss, dash.memory_info().rss)
        time.sleep(0.1)
    window = time.time() - start_wall
    cpu_pct = (cpu_seconds(dash) - start_cpu) / window * 100
    ui_pct = (main_thread_seconds(dash) - start_ui) / window * 100
    rss_mb = dash.memory_info().rss / 2**20
    pandas = loaded_pandas(dash)
    if anchor_proc is not None and anchor is not None:
        anchor_pct = (cpu_seconds(anchor_proc) - start_anchor) / window * 100
        anchor_mb = anchor_proc.memory_info().rss / 2**20
        anchor.quit()
        print(f"anchor, {Path(args.anchor).name} -t {ANCHOR_REFRESH_S} in the same window and "
              f"terminal size: {anchor_pct:.2f}% of one core, RSS {anchor_mb:.0f} MB")
    else:
        print("anchor: not measured (no glances on the PATH; --anchor names one)")
    shown = term.shown_steps()
    print(f"window {window:.0f} s at {args.ranks} ranks x {args.rate:g} steps/s + 1 Hz "
          f"telemetry; session now {gen.events:,} events", flush=True)
    print(f"dashboard CPU: {cpu_pct:.2f}% of one core (limit {CPU_LIMIT_PCT:g}%): UI thread "
          f"{ui_pct:.2f}%, workers {cpu_pct - ui_pct:.2f}%")
    print(f"dashboard RSS: {rss_mb:.0f} MB at the end, {peak_rss / 2**20:.0f} MB peak in the "
          f"window (limit {RSS_LIMIT_MB:g} MB); pandas loaded: {'yes' if pandas else 'no'}")
    print(f"terminal output: {(term.total_bytes - start_bytes) / window / 1024:.1f} KiB/s; header "
          f"shows step {shown} (generator at step {gen.step})")
    following_ok = cpu_pct <= CPU_LIMIT_PCT and rss_mb <= RSS_LIMIT_MB and shown is not None \
        and gen.step - shown <= args.rate * 10 and not pandas
    late_ok = True
    if not args.no_attach:
        for what in ("late attach, JSON lines", "late attach, cache"):
            late_ok &= late_attach(what, session, gen, cols, rows, args)
    code = term.quit()
    gen.close()
    if args.dir is None:  # a million events are a few hundred MB of /tmp
        shutil.rmtree(root, ignore_errors=True)
    print(f"dashboard exit code {code}")
    ok = following_ok and late_ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
