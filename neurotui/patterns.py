"""`neurotui patterns LOGFILE`: what a log yields (steps, their values, compile events) and
which step-like lines matched nothing, so a --step-pattern can be tried before a run.

A view without Textual over the parsers (sources/steplog/report.py's explain): it reads one file
and prints; log text is shown literally, control characters escaped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the parsers load with the command, not with every command line
    from neurotui.sources.steplog.records import StepLine
    from neurotui.sources.steplog.report import LogReport

SHOWN_STEPS = 8
"""Steps printed at each end of the log (all of them are counted)."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "patterns", help="show which steps a training log yields, and the lines that matched "
                         "nothing (try a --step-pattern)",
        description="Parse a training log as `neurotui run` would and report what it finds.")
    p.add_argument("logfile", metavar="LOGFILE", help="a log file (or - for standard input)")
    p.add_argument("--step-pattern", action="append", default=[], metavar="REGEX",
                   help="a pattern with named groups (step, loss, samples, throughput, dt, "
                        "...), tried before the built-in formats; repeatable")
    return p


def run(args: argparse.Namespace) -> int:
    """0: read (whatever it found); 2: unreadable file or unusable pattern."""
    from neurotui.sources.steplog.parser import StepLineParser
    from neurotui.sources.steplog.report import explain

    try:
        parser = (StepLineParser.from_patterns(args.step_pattern, include_defaults=True)
                  if args.step_pattern else StepLineParser.default())
    except ValueError as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    try:
        source = sys.stdin.buffer if args.logfile == "-" else None
        text = source.read() if source is not None else Path(args.logfile).read_bytes()
    except OSError as exc:
        print(f"neurotui: cannot read {args.logfile}: {exc}", file=sys.stderr)
        return 2
    lines = text.decode("utf-8", errors="replace").split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    print(report_text(explain(lines, parser), args.logfile))
    return 0


def report_text(report: LogReport, name: str) -> str:
    out = [f"{literal(name)}: {report.lines} lines, {len(report.steps)} step(s), "
           f"{len(report.compiles)} compile event(s)"]
    steps = report.steps
    if steps:
        out.append("steps (line: what was read):")
        shown = steps if len(steps) <= 2 * SHOWN_STEPS else [
            *steps[:SHOWN_STEPS], None, *steps[-SHOWN_STEPS:]]
        for item in shown:
            if item is None:
                out.append(f"  ... {len(steps) - 2 * SHOWN_STEPS} more ...")
            else:
                out.append(f"  {item[0]:>6}: {step_values(item[1])}")
    for line_no, event in report.compiles[:SHOWN_STEPS]:
        out.append(f"  {line_no:>6}: compile event {event.what}")
    if report.unmatched:
        out.append("step-like lines that matched nothing (a --step-pattern could read them):")
        out.extend(f"  {line_no:>6}: {literal(text)}" for line_no, text in report.unmatched)
    elif not steps:
        out.append("no step-like line either: does the script print its steps? "
                   "(the automatic probe times PyTorch optimizer steps without any)")
    return "\n".join(out)


def step_values(step: StepLine) -> str:
    """The figures a step line carried; the ones it did not are left out."""
    fields = [("step", step.step), ("rank", step.rank), ("loss", step.loss),
              ("samples", step.samples), ("samples_total", step.samples_total),
              ("throughput", step.throughput), ("dt", step.dt),
              ("global_batch", step.global_batch)]
    if step.bar_n is not None:
        fields.append(("bar", f"{step.bar_n}/{step.bar_total if step.bar_total else '?'}"
                       + (f" {step.bar_key!r}" if step.bar_key else "")))
    return "  ".join(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                     for name, value in fields if value is not None) or "(no values)"


def literal(text: str) -> str:
    """Text as data: control characters (escape sequences, carriage returns) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
