"""`neurotui profile`: its arguments, the wait (take.py) and the summary it prints: the top
operators by self time in each rank's trace, and the operators whose time differs most
between the ranks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from neurotui.profiling.channel import MAX_STEPS
from neurotui.profiling.take import CannotProfile, ProfileOptions, ProfileOutcome, take_profile
from neurotui.profiling.trace import RankProfile, TraceError, rank_differences, rank_profile
from neurotui.session.paths import find_session


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "profile", help="profile the next steps of a running job, inside every rank",
        description="Asks the automatic probe in each rank of a running job to wrap its next "
                    "N optimizer steps in torch.profiler.profile (CPU; CUDA on GPUs; Neuron "
                    "runtime and CPU use on Neuron), waits for each rank's trace "
                    "(profiles/<id>/rank-R.json.gz in the session), then prints the top "
                    "operators by self time per rank and how the ranks differ. Training goes "
                    "on throughout; a capture that fails is recorded, never raised.")
    p.add_argument("session", nargs="?", metavar="SESSION",
                   help="a running session (folder name or any unique part of it); default: "
                        "the one running")
    p.add_argument("--steps", type=_steps, default=5, metavar="N",
                   help="optimizer steps to profile in each rank (default 5)")
    p.add_argument("--ranks", type=_ranks, metavar="0,3",
                   help="only these global ranks (default: every rank the probe is in)")
    p.add_argument("--memory", action="store_true",
                   help="record tensor allocations too (torch's profile_memory)")
    p.add_argument("--device-trace", action="store_true",
                   help="on Neuron, the instruction-level device trace too (reserves about "
                        "5 GB of HBM on trn2: off unless asked)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long to wait for the ranks' traces (default 120)")
    p.add_argument("--top", type=int, default=10, metavar="K",
                   help="operators listed per rank (default 10)")
    return p


def _steps(text: str) -> int:
    try:
        steps = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 < steps <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_STEPS}")
    return steps


def _ranks(text: str) -> tuple[int, ...]:
    try:
        ranks = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of ranks: {text!r} (e.g. 0,3)") from None
    if not ranks or min(ranks) < 0:
        raise argparse.ArgumentTypeError(f"not a list of ranks: {text!r} (e.g. 0,3)")
    return ranks


def run(args: argparse.Namespace, root: Path) -> int:
    # A session named is found whatever its state, so that one not running is told so.
    session_dir = find_session(root, args.session, running_only=not args.session)
    options = ProfileOptions(steps=args.steps, ranks=args.ranks, memory=args.memory,
                             device_trace=args.device_trace, timeout_s=args.timeout)
    try:
        outcome = take_profile(session_dir, options, progress=lambda message: print(
            f"neurotui: {message}", flush=True))
    except CannotProfile as exc:
        print(f"neurotui: cannot profile {exc}", file=sys.stderr)
        return 1
    print_summary(outcome, top=args.top)
    if outcome.silent:
        print(f"neurotui: rank {', '.join(map(str, outcome.silent))} did not answer within "
              f"{args.timeout:g} s (training goes on; a rank takes a request at its next "
              "optimizer step)", file=sys.stderr)
    for rank, error in outcome.failed.items():
        print(f"neurotui: rank {rank}'s profile failed: {error} (training went on)",
              file=sys.stderr)
    return 0 if outcome.complete else 1


def print_summary(outcome: ProfileOutcome, *, top: int) -> None:
    profiles: list[RankProfile] = []
    for rank, path in outcome.written.items():
        try:
            profiles.append(rank_profile(rank, path))
        except TraceError as exc:
            print(f"neurotui: rank {rank}: {exc}", file=sys.stderr)
    if outcome.written:
        print(f"traces: {outcome.request.folder(outcome.session_dir)}")
    for profile in profiles:
        print(summary_lines(profile, outcome, top=top), end="")
    differences = differences_lines(profiles, top=min(top, 5))
    if differences:
        print(differences, end="")


def summary_lines(profile: RankProfile, outcome: ProfileOutcome, *, top: int) -> str:
    """A rank's top operators by self time (ms over the steps profiled, share of all
    operators' self time, calls)."""
    ended = outcome.answers[profile.rank].ended or {}
    steps = f"steps {ended.get('first_step')}-{ended.get('last_step')}"
    total = profile.self_us or 1.0
    lines = [f"\nrank {profile.rank} ({steps}): top operators by self time "
             f"(of {profile.self_us / 1000:.1f} ms in {len(profile.operators)} operators)",
             f"  {'SELF MS':>9} {'SHARE':>6} {'CALLS':>7}  OPERATOR"]
    lines += [f"  {op.self_us / 1000:9.2f} {op.self_us / total:6.1%} {op.calls:7d}  {op.name}"
              for op in profile.top(top)]
    return "\n".join(lines) + "\n"


def differences_lines(profiles: list[RankProfile], *, top: int) -> str:
    """The operators whose self time differs most between ranks, each rank's ms."""
    differences = rank_differences(profiles, top)
    if not differences:
        return ""
    ranks = [profile.rank for profile in profiles]
    header = "".join(f" {f'RANK {rank}':>9}" for rank in ranks)
    lines = ["\nranks differ most in (self ms):", f"  {'SPREAD':>9}{header}  OPERATOR"]
    for difference in differences:
        cells = "".join(f" {difference.self_us[rank] / 1000:9.2f}" for rank in ranks)
        lines.append(f"  {difference.spread_us / 1000:9.2f}{cells}  {difference.name} "
                     f"(slowest: rank {difference.slowest_rank})")
    return "\n".join(lines) + "\n"
