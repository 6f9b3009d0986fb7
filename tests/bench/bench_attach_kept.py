"""Benchmark: attach, replay and compare of a running 3-million-event session whose cache the
supervisor's keeper kept (issue #12: "no cold parse of a long session in the user's way").

Generates the 24-hour, 32-rank session of bench_replay_load.py, then plays a recording one:
a running session holding the first (events - extra) events' worth of each file's bytes, on
which the keeper runs (`python -m neurotui.session.keeper DIR`, a new niced process that runs
once, as the supervisor's keeper starts: here it builds the cache); then the rest of the bytes
are appended (--extra events, 44k by default: the 8 MiB of new JSON lines after which the
supervisor asks its keeper for a run again, KEEP_BEHIND_BYTES) and measured:

- attach before the keeper ran again: the cache 44k events behind, the most a user meets;
- the keeper's second run: an append of those events (CPU seconds, peak RSS, wall);
- attach after it: the cache current;
- replay and compare after it (compare's load on its own, and the whole command: its
  figures over 3 M steps are bench_replay_load's "full compare", target 3 s).

Each open is a new process, imports included, as a user starts it: attach as the dashboard
opens (SessionReader + DashboardModel's first refresh, every figure computed), replay as
`neurotui replay` (Timeline + the first frame), compare as `neurotui compare NAME` loads a
session (compare.load_session). Target: under 1 s each.

    .venv/bin/python tests/bench/bench_attach_kept.py                  # 3M events, ~3 minutes
    .venv/bin/python tests/bench/bench_attach_kept.py --events 300000 --extra 10000  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_replay_load import generate  # noqa: E402

TARGET_S = 1.0

ATTACH = """
import json, sys, time
started = time.perf_counter()
from pathlib import Path
from neurotui.live.clock import WallClock
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
from neurotui.session.reader import SessionReader
imported = time.perf_counter()
reader = SessionReader(Path(sys.argv[1]), telemetry_history=TELEMETRY_HISTORY)
model = DashboardModel(reader, WallClock(), throttle=False)
state = model.refresh()
done = time.perf_counter()
print(json.dumps({"imports": imported - started, "first_refresh": done - imported,
                  "cache": reader.cache_state, "steps": len(model.steps.ranks),
                  "step": state.header.step}))
"""

COMPARE_LOAD = """
import sys
from pathlib import Path
from neurotui.compare import load_session
load_session(Path(sys.argv[1]))
"""

REPLAY = """
import sys
sys.path.insert(0, ".")
from pathlib import Path
from tests.bench.bench_replay_frame import first_frame
first_frame(Path(sys.argv[1]), False)
"""


def split_copy(full: Path, session: Path, keep_fraction: float) -> dict[Path, int]:
    """`session`: `full` as it stood earlier, running: the first `keep_fraction` of each
    JSON-lines file's bytes (cut after a newline). Returns where each file was cut."""
    (session / "probe").mkdir(parents=True)
    (session / "logs").mkdir()
    meta = json.loads((full / "meta.json").read_text())
    meta.update(ended_at=None, exit=None)
    (session / "meta.json").write_text(json.dumps(meta))
    cuts = {}
    for path in [full / "events.jsonl", *sorted((full / "probe").glob("*.jsonl"))]:
        data = path.read_bytes()
        cut = data.rfind(b"\n", 0, int(len(data) * keep_fraction)) + 1
        target = session / path.relative_to(full)
        target.write_bytes(data[:cut])
        cuts[target] = cut
    return cuts


def append_rest(full: Path, session: Path, cuts: dict[Path, int]) -> None:
    for target, cut in cuts.items():
        with open(full / target.relative_to(session), "rb") as f:
            f.seek(cut)
            rest = f.read()
        with open(target, "ab") as out:
            out.write(rest)


KEEPER = """
import sys
from neurotui.session import keeper
code = keeper.main(sys.argv[1:])
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(int(peak[0].split()[1]) if peak else 0)
sys.exit(code)
"""
"""keeper.main, as `python -m neurotui.session.keeper` runs it, then its own peak RSS (a
child's ru_maxrss would count the parent's at the fork: this one's is hundreds of MB)."""


def run_keeper(session: Path) -> tuple[float, float, float, str]:
    """One run of the keeper in a new process, its start included (the supervisor's keeper
    stays, and pays that once): (wall s, CPU s, peak RSS MB, what it said)."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", KEEPER, str(session)],
                             cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    assert child.stdout is not None and child.stderr is not None
    out, err = child.stdout.read(), child.stderr.read()  # a line each at most
    child.stdout.close()
    child.stderr.close()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    said = err.decode().strip()
    assert child.returncode == 0, said
    return wall, usage.ru_utime + usage.ru_stime, int(out or 0) / 1024, said


def timed_process(argv: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(argv, cwd=REPO, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - started, out


def attach(session: Path, repeats: int) -> tuple[float, dict[str, object]]:
    runs = [timed_process([sys.executable, "-c", ATTACH, str(session)])
            for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), json.loads(runs[-1][1])


def report_attach(label: str, session: Path, repeats: int) -> float:
    took, inside = attach(session, repeats)
    print(f"{label:58}{took:8.2f} s  (imports {inside['imports']:.2f} s, first refresh "
          f"{inside['first_refresh']:.2f} s; cache {inside['cache']}, step "
          f"{inside['step']:,})")
    return took


def report_keeper(label: str, session: Path) -> None:
    wall, cpu, rss, said = run_keeper(session)
    print(f"{label:58}{wall:8.2f} s  (CPU {cpu:.2f} s, peak RSS {rss:.0f} MB)"
          + (f"\n    {said}" if said else ""))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=3_000_000)
    p.add_argument("--extra", type=int, default=44_000,
                   help="events appended after the keeper's first run")
    p.add_argument("--ranks", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", help="generate under this folder (default: a temporary one)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        full = root / "whole" / "20260720-000000-whole"
        session = root / "sessions" / "20260720-000000-kept"
        hours = 24.0 * args.events / 3_000_000
        started = time.perf_counter()
        events = generate(full, args.events, args.ranks, hours)
        size = sum(f.stat().st_size for f in full.rglob("*.jsonl"))
        print(f"generated {events:,} events ({size / 2**20:,.0f} MiB of JSON lines, "
              f"{args.ranks} ranks, {hours:g} h) in {time.perf_counter() - started:.1f} s")
        cuts = split_copy(full, session, 1.0 - args.extra / events)
        print(f"recording: the first {events - args.extra:,} events' worth, running")

        report_keeper("keeper, 1st run (no cache yet: builds it)", session)
        append_rest(full, session, cuts)
        print(f"+ {args.extra:,} events appended")
        report_attach(f"attach, cache {args.extra // 1000}k events behind", session,
                      args.repeats)
        report_keeper(f"keeper, 2nd run (appends {args.extra // 1000}k events)", session)
        report_keeper("keeper, 3rd run (nothing new)", session)
        took = report_attach("attach, cache current (new process, imports included)",
                             session, args.repeats)
        replay = statistics.median(timed_process([sys.executable, "-c", REPLAY, str(session)])[0]
                                   for _ in range(args.repeats))
        print(f"{'replay: open + first frame (new process)':58}{replay:8.2f} s")
        opened = statistics.median(timed_process(
            [sys.executable, "-c", COMPARE_LOAD, str(session)])[0] for _ in range(args.repeats))
        print(f"{'compare: a session loaded (new process, pandas included)':58}{opened:8.2f} s")
        compare = statistics.median(timed_process(
            [sys.executable, "-m", "neurotui", "--sessions-dir", str(session.parent),
             "compare", session.name])[0] for _ in range(args.repeats))
        print(f"{'compare, full figures (new process)':58}{compare:8.2f} s")
        ok = took < TARGET_S and replay < TARGET_S and opened < TARGET_S
        print(f"\ntarget: attach, replay and compare's load under {TARGET_S:.0f} s with the "
              "cache kept")
        print("PASS" if ok else "FAIL: a target was missed")


if __name__ == "__main__":
    main()
