"""Turn lines of a training script's stdout into typed step and compile records.

Unmodified training scripts work with neurotui because their per-step lines are
recognised here, from the text they already print. Everything is pure: no I/O,
no state between lines, and no input can make :meth:`StepLineParser.parse` raise.

The rooms, each holding one thing:

- ``records``: the record types (StepLine, StepValues, StepFigures, CompileLine).
- ``text``: a line's pieces (numbers, rank prefix, colour codes, printed time stamps).
- ``compile_lines``: which lines are a Neuron compile event, and which kind.
- ``rules``: the per-framework rules and the word screens in front of them.
- ``bars``: the progress-bar rule (tqdm and the trainers drawn with it).
- ``fields``: a rule's raw fields made a typed record.
- ``parser``: StepLineParser, trying user patterns and the rules in order.
- ``shapes``: the speed cache of where a rule read each field in lines of one shape.
- ``report``: the patterns report of a whole saved log (explain).

The names callers use are importable from here, as before the split.
"""

from __future__ import annotations

from neurotui.sources.steplog.compile_lines import classify_compile
from neurotui.sources.steplog.parser import StepLineParser
from neurotui.sources.steplog.records import (
    COMPILE_KINDS,
    MAX_LINE_CHARS,
    CompileKind,
    CompileLine,
    Record,
    StepFigures,
    StepLine,
    StepValues,
)
from neurotui.sources.steplog.report import LogReport, explain
from neurotui.sources.steplog.rules import _PREFILTER, KNOWN_GROUPS  # _PREFILTER: floodgate.py's
from neurotui.sources.steplog.text import strip_rank_prefix

__all__ = [
    "COMPILE_KINDS",
    "KNOWN_GROUPS",
    "MAX_LINE_CHARS",
    "_PREFILTER",
    "CompileKind",
    "CompileLine",
    "LogReport",
    "Record",
    "StepFigures",
    "StepLine",
    "StepLineParser",
    "StepValues",
    "classify_compile",
    "explain",
    "strip_rank_prefix",
]
