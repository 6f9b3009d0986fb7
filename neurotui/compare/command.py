"""The `neurotui compare` command: its arguments, then the table (load.py, rows.py and
render.py, with pandas: imported only when the command runs, so that other commands start
without it), or the compare screen on a terminal (ui/, imported only then)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neurotui.session.jobs import job_parts
from neurotui.session.meta import SessionFormatError
from neurotui.session.paths import SessionNotFound, find_session
from neurotui.terminal import on_a_terminal

FORMATS = ("table", "markdown", "csv", "json")
"""What render.render writes."""
PAGE_FORMATS = ("html", "svg")
"""What page.py writes: a page to share, or its charts alone."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare", help="compare runs side by side (throughput, samples per dollar)",
        description="One row per session: instance, cores, batch, compile time, steady step "
                    "time, throughput, price and samples per dollar, relative to a baseline. "
                    "A job of many nodes (its id) is one row: its nodes' sessions together.")
    p.add_argument("sessions", nargs="*", metavar="SESSION",
                   help="folder name under sessions/ or any unique part of it, or a job id")
    p.add_argument("--baseline", metavar="SESSION",
                   help="the session the others are measured against (default: the first)")
    p.add_argument("--format", choices=FORMATS + PAGE_FORMATS, default="table",
                   help="table (fitted to the terminal; piped: every column), markdown, csv, "
                        "json, html (one self-contained page to share) or svg (its charts)")
    p.add_argument("--out", metavar="FILE", type=Path,
                   help="write to FILE instead of standard output")
    p.add_argument("--wide", action="store_true",
                   help="the table with every column, whatever the terminal's width")
    p.add_argument("--columns", metavar="A,B,C",
                   help="the table with these columns (keys like samples_per_s, or headers "
                        "like SAMPLES/S), in this order")
    p.add_argument("--price", action="append", default=[], metavar="INSTANCE=USD_PER_HOUR",
                   help="what-if: price runs on INSTANCE (or the session SESSION) at this "
                        "USD per hour, optionally saying what it is (=15.49:Capacity Block); "
                        "what was measured is unchanged (repeatable)")
    p.add_argument("--region", metavar="R",
                   help="what-if: price runs at the price table's on-demand price for "
                        "region R (sourced, dated; none there: no price)")
    p.add_argument("--spot", action="store_true",
                   help="what-if: price runs at the spot price: the --price given, else the "
                        "live one (EC2 spot price history: boto3 and AWS credentials)")
    p.add_argument("--dataset-size", type=float, metavar="N",
                   help="samples in an epoch: each run's epoch time and cost at its steady "
                        "rate (default: each run's own --dataset-size, if it gave one)")
    p.add_argument("--tui", action="store_true",
                   help="pick and compare sessions on screen (the dashboard's compare screen)")
    return p


CompareScreen = Callable[[Path, list[Path], "Path | None"], int]
"""Shows the chosen sessions in the dashboard's compare screen (`--tui`): the command line
hands it in, so this package never imports the Textual views above it."""


def run(args: argparse.Namespace, root: Path, *, show_screen: CompareScreen | None = None) -> int:
    """`neurotui compare`: 0 when every session was read; 1 when some could not be (named on
    stderr, the others still compared); 2 when a name matches no session or none is read."""
    if args.dataset_size is not None and not args.dataset_size > 0:
        print("neurotui: --dataset-size must be a number of samples above 0", file=sys.stderr)
        return 2
    from neurotui.compare.whatif import WhatIf, WhatIfError, parse_price_plan

    try:
        plan = WhatIf(*parse_price_plan(args.price), region=args.region, spot=args.spot)
    except WhatIfError as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    if (args.wide or args.columns) and args.format != "table":
        print("neurotui: --wide and --columns shape the text table (--format table)",
              file=sys.stderr)
        return 2
    if not args.sessions and not args.tui:
        print("neurotui: compare needs at least one SESSION (or --tui to pick on screen)",
              file=sys.stderr)
        return 2
    try:
        paths = _unique([_target(root, name) for name in args.sessions])
        named_base = _target(root, args.baseline) if args.baseline else None
    except SessionNotFound as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    if args.tui:
        if plan.asked or args.wide or args.columns or args.out or args.format != "table":
            print("neurotui: compare --tui shows the recorded prices on screen; --price, "
                  "--region, --spot, --wide, --columns, --format and --out are for the "
                  "printed comparison (without --tui)", file=sys.stderr)
            return 2
        if any(isinstance(p, Job) for p in [*paths, named_base]):
            print("neurotui: compare --tui compares sessions; a job of many nodes is compared "
                  "as a table (without --tui)", file=sys.stderr)
            return 2
        if not on_a_terminal() or show_screen is None:
            print("neurotui: compare --tui needs a terminal; without it, compare prints the "
                  "table", file=sys.stderr)
            return 2
        return show_screen(root, paths, named_base)  # type: ignore[arg-type]
    from neurotui.compare.layout import UnknownColumnError
    from neurotui.compare.load import LoadedSession, load_job, load_session
    from neurotui.compare.rows import compare_rows
    from neurotui.compare.whatif import reprice, unmatched_keys

    base_path = named_base or paths[0]
    if base_path not in paths:
        paths.insert(0, base_path)
    loaded: list[LoadedSession] = []
    failed = 0
    keys = []
    for path in paths:
        try:
            loaded.append(load_job(path.id, path.parts) if isinstance(path, Job)
                          else load_session(path))
            keys.append(path)
        except SessionFormatError as exc:
            print(f"neurotui: cannot compare {path.name}: {exc}", file=sys.stderr)
            failed += 1
    if not loaded:
        return 2
    for s in loaded:
        if s.problems:
            print(f"neurotui: {s.path}: {s.problems}", file=sys.stderr)
    baseline = keys.index(base_path) if base_path in keys else 0
    if base_path not in keys:
        print(f"neurotui: baseline {base_path.name} unreadable; relative to {keys[0].name}",
              file=sys.stderr)
    for key in unmatched_keys(plan, loaded):
        print(f"neurotui: --price {key}: no compared session or instance type of that name; "
              "ignored", file=sys.stderr)
    loaded, prices = reprice(loaded, plan)
    rows = compare_rows(loaded, baseline, dataset_size=args.dataset_size)
    for row, price in zip(rows, prices, strict=True):
        row["price_basis"], row["price_note"] = price.basis, price.note
    try:
        text = _rendered(args, rows, loaded)
    except UnknownColumnError as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    if args.out is None:
        sys.stdout.write(text)
    else:
        try:
            args.out.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"neurotui: cannot write {args.out}: {exc}", file=sys.stderr)
            return 2
        print(f"neurotui: wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


def _rendered(args: argparse.Namespace, rows: list[dict[str, Any]], loaded: list[Any]) -> str:
    """The output in the asked format. The text table fits the terminal (COLUMNS, or the
    tty's width); piped without COLUMNS it keeps every column, for scripts."""
    from neurotui.compare import layout, page
    from neurotui.compare.overlay import throughput_overlay
    from neurotui.compare.render import _footnotes, render

    notes = [*_footnotes(rows),
             *(f"{r['session']} price: {r['price_note']}" for r in rows)]
    if args.format in PAGE_FORMATS:
        overlay = throughput_overlay(loaded, page.curve_bucket_s(loaded))
        return page.render_page(rows, overlay, notes=notes) if args.format == "html" \
            else page.render_svg(rows, overlay)
    if args.format != "table":
        return render(rows, args.format)
    columns = layout.pick_columns(rows, args.columns.split(",")) \
        if args.columns else None
    if args.out is None and (columns is not None or args.wide or "COLUMNS" in os.environ
                             or sys.stdout.isatty()):
        width = shutil.get_terminal_size().columns
        return layout.render_fitted(rows, width, notes=notes, wide=args.wide, columns=columns)
    if columns is not None or args.wide:
        return layout.render_fitted(rows, 0, notes=notes, wide=args.wide, columns=columns)
    table = render(rows, "table")
    return table + "\n".join([layout.decision_line(rows), *notes[-len(rows):]]) + "\n"


@dataclass(frozen=True)
class Job:
    """A job of many nodes named on the command line: its id and its nodes' sessions."""

    id: str
    parts: tuple[Path, ...]

    @property
    def name(self) -> str:
        return f"job {self.id}"


def _target(root: Path, name: str) -> Path | Job:
    """A job id names the job (all its nodes); anything else names a session."""
    parts = job_parts(root, name)
    return Job(name, tuple(parts)) if parts else find_session(root, name)


def _unique(paths: list[Path | Job]) -> list[Path | Job]:
    """Each session once (named twice, or by two unique parts), in the order given."""
    return list(dict.fromkeys(paths))
