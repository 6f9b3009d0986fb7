"""Cost of `neurotui profile` to training: nothing while no profile is asked, and what a
capture costs the steps around it.

Workers are fresh interpreters started as neurotui starts a job (`autoprobe.job_env`: the
automatic probe armed by its sitecustomize), one at a time:

1. idle: no profile asked. The step hook's only addition is one float compare a step
   (`now >= profile_due`); every LOOK_EVERY_S (0.5 s) it calls `_Profiles.tick`, one os.stat of
   profiles/request.json. Measured: `tick` itself (no request file; an unchanged one), the
   compare, and `opt.step()` (SGD on a Linear(8, 1)) in chunks taken in turn with the look live
   and with it held off (profile_due set to infinity): the difference is the look's cost a
   step, expected within noise. The figure judged: (tick's cost / steps per 0.5 s) + the
   compare, at the measured step rate.
2. capture: a small MLP trains (1 thread, a few ms a step); at step 150 the worker asks for a
   profile of --steps steps (neurotui.profiling.channel.post_request, as the command does) and
   trains on to step 400. From the step records the probe wrote: the median step time before,
   the profiled steps' median (the profiler's own overhead), the step after the last profiled
   (it carries the profiler's stop, the trace's export and gzip), and the median after.

    .venv/bin/python tests/bench/bench_profile_cost.py            # ~1 minute on 2 cores
    .venv/bin/python tests/bench/bench_profile_cost.py --memory   # captures with profile_memory
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


# -- workers ---------------------------------------------------------------------------------
def idle_worker(rounds: int, chunk: int) -> None:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    F.mse_loss(model(torch.randn(16, 8)), torch.randn(16, 1)).backward()
    opt.step()  # the first step: the probe opens its file here, outside any timing
    state = sys.modules["neurotui_autoprobe"]._state
    assert state is not None and state.on and state.step == 1
    perf_counter = time.perf_counter

    def steps() -> float:
        step = opt.step
        start = perf_counter()
        for _ in range(chunk):
            step()
        return (perf_counter() - start) / chunk * 1e6

    live: list[float] = []
    held: list[float] = []
    for round_ in range(3 + rounds):
        state.profile_due = 0.0  # live: looks at the next step, then every 0.5 s
        a = steps()
        state.profile_due = float("inf")  # held off: the compare alone
        b = steps()
        if round_ >= 3:
            live.append(a)
            held.append(b)
    profiles = state.profiles
    n = 20000
    start = perf_counter()
    for _ in range(n):
        profiles.tick(state.step, 0.0)  # no request file: one failed os.stat
    tick_missing = (perf_counter() - start) / n * 1e6
    request = Path(profiles.request_path)
    request.parent.mkdir(exist_ok=True)
    request.write_text(json.dumps({"id": "old", "steps": 1, "expires": 0}))
    profiles.tick(state.step, 0.0)  # read once (expired: not taken)
    start = perf_counter()
    for _ in range(n):
        profiles.tick(state.step, 0.0)  # unchanged: os.stat and a tuple compare
    tick_unchanged = (perf_counter() - start) / n * 1e6
    due, now = 1.0, 0.5
    start = perf_counter()
    for _ in range(n):
        if now >= due:
            pass
    compare = (perf_counter() - start) / n * 1e6
    start = perf_counter()
    for _ in range(n):
        pass
    compare -= (perf_counter() - start) / n * 1e6
    print(json.dumps({"live_us": min(live), "held_us": min(held),
                      "live_median_us": statistics.median(live),
                      "held_median_us": statistics.median(held),
                      "tick_missing_us": tick_missing, "tick_unchanged_us": tick_unchanged,
                      "compare_us": max(compare, 0.0), "on": state.on,
                      "profiles_taken": sorted(profiles.taken)}), flush=True)


def capture_worker(session: str, profile_steps: int, memory: bool) -> None:
    sys.path.insert(0, str(REPO))
    import torch
    import torch.nn.functional as F

    from neurotui.profiling.channel import post_request

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    for step in range(1, 401):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if step == 150:
            post_request(Path(session), steps=profile_steps, ranks=None, memory=memory,
                         device_trace=False, timeout_s=60)


# -- the parent ------------------------------------------------------------------------------
def run_worker(session: Path, *argv: str) -> str:
    sys.path.insert(0, str(REPO))
    from neurotui.autoprobe import job_env

    env = job_env(os.environ, True)
    env["NEUROTUI_SESSION"] = str(session)
    for var in ("RANK", "LOCAL_RANK", "NEUROTUI_ATTEMPT"):
        env.pop(var, None)
    (session / "probe").mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode:
        sys.exit(f"worker failed: {done.stderr[-2000:]}")
    return done.stdout


def capture_figures(session: Path) -> dict:
    records = [json.loads(line) for line in
               (session / "probe" / "auto-rank-0.jsonl").read_text().splitlines()]
    ended = [r for r in records if r["kind"] == "profile" and r["what"] in ("done", "failed")]
    if len(ended) != 1 or ended[0]["what"] != "done":
        sys.exit(f"capture worker: no trace written: {ended}")
    done = ended[0]
    dt = {r["step"]: r["dt"] * 1000 for r in records if r["kind"] == "step" and r["dt"]}
    first, last = done["first_step"], done["last_step"]
    return {"before_ms": statistics.median(dt[s] for s in range(50, first)),
            "profiled_ms": statistics.median(dt[s] for s in range(first, last + 1)),
            "first_profiled_ms": dt[first],
            "after_last_ms": dt[last + 1],
            "after_ms": statistics.median(dt[s] for s in range(last + 2, max(dt) + 1)),
            "export_ms": done["export_s"] * 1000, "trace_kb": done["bytes"] / 1024,
            "steps": f"{first}-{last}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--chunk", type=int, default=2000, help="optimizer steps a chunk")
    parser.add_argument("--captures", type=int, default=3, help="capture workers")
    parser.add_argument("--steps", type=int, default=5, help="steps a capture profiles")
    parser.add_argument("--memory", action="store_true", help="captures with profile_memory")
    parser.add_argument("--worker", choices=("idle", "capture"), help=argparse.SUPPRESS)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "idle":
        return idle_worker(args.rounds, args.chunk)
    if args.worker == "capture":
        return capture_worker(args.session, args.steps, args.memory)

    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        idle = json.loads(run_worker(Path(tmp) / "idle", "--worker", "idle", "--rounds",
                                     str(args.rounds), "--chunk", str(args.chunk))
                          .strip().splitlines()[-1])
        if not idle["on"] or idle["profiles_taken"]:
            sys.exit(f"idle worker: probe on={idle['on']}, taken={idle['profiles_taken']}")
        steps_per_look = 0.5e6 / idle["held_us"]
        per_step = idle["tick_unchanged_us"] / steps_per_look + idle["compare_us"]
        print(f"idle, no profile asked: opt.step() {idle['held_us']:.2f} us with the look held "
              f"off, {idle['live_us']:.2f} us live (best chunks; medians "
              f"{idle['held_median_us']:.2f} / {idle['live_median_us']:.2f} us)")
        print(f"  a look (tick): {idle['tick_missing_us']:.2f} us with no request file, "
              f"{idle['tick_unchanged_us']:.2f} us with an unchanged one; the compare "
              f"{idle['compare_us'] * 1000:.0f} ns a step")
        print(f"  per step at {steps_per_look:,.0f} steps per 0.5 s: {per_step * 1000:.1f} ns "
              f"(one look every 0.5 s + the compare)")
        captures = []
        for n in range(args.captures):
            session = Path(tmp) / f"capture-{n}"
            run_worker(session, "--worker", "capture", "--session", str(session), "--steps",
                       str(args.steps), *(["--memory"] if args.memory else []))
            captures.append(capture_figures(session))
        print(f"capture of {args.steps} steps{' with profile_memory' if args.memory else ''}, "
              f"MLP 256-1024-1024-10, batch 64, 1 thread ({args.captures} runs):")
        for figures in captures:
            print(f"  steps {figures['steps']}: before {figures['before_ms']:.2f} ms, "
                  f"profiled {figures['profiled_ms']:.2f} ms (first "
                  f"{figures['first_profiled_ms']:.2f}), the step after the last "
                  f"{figures['after_last_ms']:.2f} ms (export+gzip {figures['export_ms']:.1f}"
                  f" ms, {figures['trace_kb']:.0f} KB), after {figures['after_ms']:.2f} ms")
        def median(key: str) -> float:
            return statistics.median(c[key] for c in captures)
        print(f"  median: profiled steps +{median('profiled_ms') - median('before_ms'):.2f} ms "
              f"each ({median('profiled_ms') / median('before_ms') - 1:+.0%}), the step after "
              f"+{median('after_last_ms') - median('before_ms'):.1f} ms, after "
              f"{median('after_ms') / median('before_ms') - 1:+.1%}")


if __name__ == "__main__":
    main()
