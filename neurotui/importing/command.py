"""`neurotui import PATH...`: its arguments, and its run. Loads nothing heavy until it runs
(the command line must start without numpy: tests/unit/test_layers.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from neurotui.argtypes import positive_number


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "import", help="make a session of a finished run neurotui did not launch (a saved log, "
                       "a torchrun log folder, TensorBoard events, a CloudWatch export)",
        description="Read a finished run's saved log, torchrun log folder (attempt_N/RANK/"
                    "stdout.log), TensorBoard event folder or file, or CloudWatch / SageMaker "
                    "log export (JSON with a timestamp and message per event), and record it "
                    "as a session that replay, compare, export and ls read like any other. "
                    "Each step's time is what the run recorded: a printed date-time, a printed "
                    "step time or throughput, a TensorBoard wall time; else none (steps "
                    "counted, never timed).")
    p.add_argument("paths", nargs="+", metavar="PATH", type=Path,
                   help="what to import; several logs are the ranks of one run")
    p.add_argument("--name", help="the session's short name (default: the first PATH's)")
    price = p.add_argument_group("price (as `run` prices a run; nothing is detected)")
    price.add_argument("--instance-type", help="the instance the run ran on, e.g. trn1.2xlarge")
    price.add_argument("--price-per-hour", help="USD per hour, overriding the table")
    price.add_argument("--region", help="AWS region of the instance")
    p.add_argument("--samples-per-step", type=positive_number, metavar="N",
                   help="samples in each step, all ranks together (as `run --samples-per-step`)")
    p.add_argument("--started", metavar="ISO-TIME",
                   help="when the run started, for a log that prints step times but no dates "
                        "(default: the file's time less the run's)")
    p.add_argument("--force", action="store_true",
                   help="import the same PATHs again, as another session")
    return p


def run(args: argparse.Namespace, root: Path) -> int:
    """0: imported; 2: nothing imported (the reason on stderr, no session left behind)."""
    from neurotui.importing.build import ImportOptions, import_run, parse_started
    from neurotui.importing.logs import ImportProblem

    argv = [str(p) for p in args.paths]
    try:
        options = ImportOptions(
            name=args.name, instance_type=args.instance_type,
            price_per_hour=args.price_per_hour, region=args.region,
            samples_per_step=args.samples_per_step,
            started=None if args.started is None else parse_started(args.started),
            force=args.force)
        done = import_run(root, list(args.paths), options, argv)
    except ImportProblem as exc:
        print(f"neurotui: nothing imported: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the sessions folder: not writable, a full disk
        print(f"neurotui: nothing imported: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("neurotui: nothing imported: out of memory reading the run", file=sys.stderr)
        return 2
    print(f"neurotui: imported {done.session_dir.name}")
    for line in done.said:
        print(f"  {line}")
    print(f"  `neurotui replay {done.session_dir.name}` replays it; `neurotui compare "
          f"{done.session_dir.name} OTHER` compares it")
    return 0
