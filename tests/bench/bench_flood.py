"""How fast an output the supervisor follows, and what a flood costs it.

For each rate, a real `neurotui run --detach` of tests/scripts/flood.py (100-byte lines at RATE
MB/s for --seconds, a step line every 0.1 s among them), sampled every 0.1 s until meta.json
says the run ended: the supervisor's CPU share of one core over the job's life (all its
threads), its peak RSS, the spool's peak RAM (its files' allocated blocks: read parts are
punched out), the bytes the session kept and those it dropped (skipped ahead of, over the
cap), step lines recorded against written and how late their stamps were, stall alerts, how
late the end was recorded, and the rate the job itself reached (on 2 cores it may not).

"Followed" is the highest rate read without skipping anything; above it the supervisor sheds
(floodgate.py) and the record must stay true all the same.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
FLOOD = REPO / "tests" / "scripts" / "flood.py"
STEP_S = 0.1


def _allocated(folder: Path) -> int:
    """The RAM the spool's files hold (0 once the supervisor removed it, at the end)."""
    held = 0
    with contextlib.suppress(OSError):
        for path in folder.rglob("*"):
            with contextlib.suppress(OSError):
                held += path.stat().st_blocks * 512
    return held


def _meta(session: Path) -> dict:
    with contextlib.suppress(OSError, ValueError):
        return json.loads((session / "meta.json").read_text())
    return {}


def run_once(rate: float, seconds: float, cap: str | None, root: Path) -> dict[str, object]:
    sessions = root / f"rate-{rate:g}"
    truth_file = root / f"truth-{rate:g}.json"
    env = {**os.environ, "FLOOD_MB_S": str(rate), "FLOOD_S": str(seconds),
           "STEP_S": str(STEP_S), "TRUTH_FILE": str(truth_file)}
    subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions), "run",
                    "--detach", *(["--log-cap", cap] if cap else []), "--", sys.executable,
                    str(FLOOD)], check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    [session] = [p for p in sessions.iterdir() if (p / "meta.json").exists()]
    meta = _meta(session)
    supervisor = psutil.Process(int(meta["supervisor_pid"]))
    spool = Path(meta["spool"]) if meta.get("spool") else None
    cpu_start, wall_start = sum(supervisor.cpu_times()[:2]), time.time()
    cpu_end, rss_peak, spool_peak, seen_end_at = cpu_start, 0, 0, None
    while True:
        with contextlib.suppress(psutil.Error):
            cpu_end = sum(supervisor.cpu_times()[:2])
            rss_peak = max(rss_peak, supervisor.memory_info().rss)
        if spool is not None:
            spool_peak = max(spool_peak, _allocated(spool))
        meta = _meta(session)
        if meta.get("exit") is not None:
            seen_end_at = time.time()
            break
        if time.time() - wall_start > seconds + 120:
            raise RuntimeError(f"rate {rate}: the run did not end")
        time.sleep(0.1)
    wall = seen_end_at - wall_start
    truth = json.loads(truth_file.read_text())
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    steps = {e["step"]: e["t"] for e in events if e["kind"] == "step"}
    late = [abs(t - truth["steps"][step - 1]) for step, t in steps.items()
            if 0 < step <= len(truth["steps"])]
    kept = sum(p.stat().st_size for p in (session / "logs").rglob("*") if p.is_file())
    dropped = meta.get("log_dropped") or {}
    return {
        "rate": rate, "job_mb_s": truth["filler_bytes"] / 1e6 / (truth["end"] - truth["steps"][0]),
        "cpu_pct": 100.0 * (cpu_end - cpu_start) / wall, "rss_mb": rss_peak / 1e6,
        "spool_peak_mb": spool_peak / 1e6, "kept_mb": kept / 1e6,
        "skipped_mb": dropped.get("skipped_bytes", 0) / 1e6,
        "over_cap_mb": dropped.get("over_cap_bytes", 0) / 1e6,
        "steps": f"{len(steps)}/{len(truth['steps'])}",
        "all_steps": len(steps) == len(truth["steps"]),
        "late_max_s": max(late, default=float("nan")),
        "late_median_s": statistics.median(late) if late else float("nan"),
        "stall_alerts": sum(1 for e in events if e["kind"] == "alert" and e.get("state") ==
                            "start" and e.get("key") == "stalled"),
        "end_late_s": float(meta["ended_at"]) - truth["end"],
        "end_said_after_s": seen_end_at - truth["end"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="5,10,20,35,50,80",
                        help="MB/s to try, comma-separated (default %(default)s)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--log-cap", default=None, help="`run --log-cap` (default: its own)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
        rows = [run_once(float(rate), args.seconds, args.log_cap, Path(tmp))
                for rate in args.rates.split(",")]
    print(f"{'MB/s':>5} {'job':>5} {'cpu%':>6} {'rss':>5} {'spool':>6} {'kept':>6} "
          f"{'skip':>6} {'cap':>5} {'steps':>8} {'late':>11} {'stall':>5} {'end':>5} {'said':>5}")
    for r in rows:
        print(f"{r['rate']:5g} {r['job_mb_s']:5.1f} {r['cpu_pct']:6.1f} {r['rss_mb']:5.0f} "
              f"{r['spool_peak_mb']:6.0f} {r['kept_mb']:6.0f} {r['skipped_mb']:6.0f} "
              f"{r['over_cap_mb']:5.0f} {r['steps']:>8} "
              f"{r['late_median_s']:5.2f}/{r['late_max_s']:5.2f} {r['stall_alerts']:5d} "
              f"{r['end_late_s']:5.2f} {r['end_said_after_s']:5.1f}")
    followed = [r["rate"] for r in rows if not r["skipped_mb"] and r["all_steps"]]
    print("columns: rate asked, rate the job reached (MB/s), supervisor CPU % of one core over "
          "the job's life, its peak RSS (MB), spool peak RAM (MB), session logs kept (MB), "
          "skipped and over the cap (MB), step lines recorded/written, stamp lateness "
          "median/max (s), stall alerts, end recorded after the job's (s), meta.json said it "
          "after (s)")
    print(f"followed without skipping: up to {max(followed, default=0):g} MB/s of those tried")


if __name__ == "__main__":
    main()
