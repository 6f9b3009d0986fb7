"""The patterns report: what a parser makes of a whole saved log, each position a progress
bar drew included, and the step-like lines it did not recognise (``neurotui patterns``)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass

from neurotui.sources.steplog.bars import _search_bar
from neurotui.sources.steplog.parser import StepLineParser
from neurotui.sources.steplog.records import MAX_LINE_CHARS, CompileLine, StepLine
from neurotui.sources.steplog.text import _ANSI_RE, strip_rank_prefix


@dataclass(frozen=True)
class LogReport:
    """What a parser makes of a log: each recognised step and compile event with its
    1-based line number, and up to :data:`MAX_UNMATCHED` step-like lines it did not
    recognise (candidates for a ``--step-pattern``)."""

    steps: list[tuple[int, StepLine]]
    compiles: list[tuple[int, CompileLine]]
    unmatched: list[tuple[int, str]]
    lines: int


MAX_UNMATCHED = 20
#: How much of an unmatched line a report keeps.
_UNMATCHED_CHARS = 400
_STEPLIKE_RE = re.compile(r"(?i)\b(?:loss|step|iter|epoch)|it/s|s/it")


#: CloudWatch and rsyslog write control characters as ``#`` and three octal digits: a
#: carriage return arrives as ``#015`` (SageMaker training logs).
_OCTAL_CR = "#015"


def _positions(rest: str) -> list[str]:
    """The positions a line drew: the parts between carriage returns (or their ``#015``
    stand-ins), and within a part each of several bar positions glued together by a copy
    that lost its carriage returns (``...1.2it/s]Epoch 0:  20%|██| 2/10 [...]``)."""
    parts = rest.split("\r")
    if _OCTAL_CR in rest:
        parts = [piece for part in parts for piece in part.split(_OCTAL_CR)]
    out: list[str] = []
    for part in parts:
        if part.count("it/s") + part.count("s/it") < 2:
            out.append(part)
            continue
        start = 0
        while (m := _search_bar(part, start)) is not None and m.group(0).endswith("]"):
            if not part[m.end() :].strip():
                break
            out.append(part[start : m.end()])
            start = m.end()
        out.append(part[start:])
    return out


def _steplike(text: str) -> bool:
    return any(c.isdigit() for c in text) and _STEPLIKE_RE.search(text) is not None


def explain(lines: Iterable[str], parser: StepLineParser) -> LogReport:
    """Parse a whole log the way it was written: every line, and within a line every
    position a progress bar drew between carriage returns. Pure; never raises on text.

    The launcher's rank prefix is taken from the start of the line and applies to all
    of its positions. Saved logs also hold carriage returns written as ``#015`` (CloudWatch,
    rsyslog) and bar positions glued together where a copy lost its carriage returns; both
    are read as separate positions (see :func:`_positions`).
    """
    steps: list[tuple[int, StepLine]] = []
    compiles: list[tuple[int, CompileLine]] = []
    unmatched: list[tuple[int, str]] = []
    count = 0
    for count, line in enumerate(lines, 1):
        if not isinstance(line, str):
            continue
        body = line.rstrip("\n")
        if len(body) > MAX_LINE_CHARS:
            continue
        rank, rest = strip_rank_prefix(body)
        for position in _positions(rest):
            if not position.strip():
                continue
            record = parser.parse(position)
            if isinstance(record, StepLine):
                if record.rank is None and rank is not None:
                    record = dataclasses.replace(record, rank=rank)
                steps.append((count, record))
            elif isinstance(record, CompileLine):
                compiles.append((count, record))
            elif len(unmatched) < MAX_UNMATCHED and _steplike(position):
                clean = _ANSI_RE.sub("", position) if "\x1b" in position else position
                unmatched.append((count, clean[:_UNMATCHED_CHARS]))
    return LogReport(steps=steps, compiles=compiles, unmatched=unmatched, lines=count)
