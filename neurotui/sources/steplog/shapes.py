"""The speed cache: where a rule read its fields in lines of one shape (the text with its
digits made 0s), so that later lines of the shape are read at those places without the
rules, a column at a time, or outside Python (the supervisor's _steprecords.c)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Protocol

from neurotui.sources.steplog.fields import _build_step
from neurotui.sources.steplog.records import (
    MAX_LINE_CHARS,
    CompileLine,
    StepFigures,
    StepLine,
    StepValues,
)
from neurotui.sources.steplog.rules import (
    _ALL_DEFAULT_RULES,
    _RULE_WORDS,
    _Fields,
    _Rule,
    _rule_bert,
    _rule_plain,
    _rule_runner,
)
from neurotui.sources.steplog.text import strip_rank_prefix

_SHAPED_RULES = frozenset({_rule_runner, _rule_bert, _rule_plain})
"""Built-in rules whose every decision and every field depends on a line's shape only (its
text with each ASCII digit made a 0: what is not a digit, and how many digits each number
has), never on the digits' values: their regexes take digits as \\d (bounded repeats, no
digit of their own), and their code compares no value. A line of a shape one of them read
is read at the same places (_ShapeMemo)."""
_SHAPE = bytes.maketrans(b"123456789", b"000000000")
"""On the line's UTF-8 (a bytes translate is a tenth of a str one): the same shape of two
lines is the same text but for the ASCII digits, so the same places in either."""
_DIGIT_RUN_RE = re.compile(r"[0-9]+")
_SHAPES_KEPT = 512
_SEEN_ONCE: tuple[()] = ()  # a shape seen once: a second line of it is learnt
_Recipe = tuple[tuple[str, "tuple[int, int] | object"], ...]
"""Each field a rule read: where in the line (start, end), or its value (no digit in it)."""
_Reader = tuple[tuple[int, int, int, bool], ...]
"""A recipe as StepValues' arguments: (argument, start, end, read as a count) for each
field, where _build_step would only read each field's number (_direct_reader)."""
_STEP_VALUES_FIELDS = tuple(f.name for f in dataclasses.fields(StepValues))
_DIRECT_COUNTS = {"step": True, "rank": True, "samples": False, "loss": False,
                  "throughput": False, "dt": False, "samples_total": False,
                  "global_batch": False}
"""The fields _build_step reads as plain numbers: as a count (_count_field's int) or not
(_number_field's float). The bar's fields are not among them."""
_DIRECT_ARGUMENTS = {name: (_STEP_VALUES_FIELDS.index(name), count)
                     for name, count in _DIRECT_COUNTS.items()}
_NOT_NEGATIVE = frozenset({"samples", "throughput", "dt", "samples_total", "global_batch"})
"""The fields _build_step leaves out where they are below 0 (a bad field drops the field, not
the step). A sign is part of a line's shape: a shape that prints one there is read the long
way (_direct_reader), so the short ways (and _steprecords.c) never meet such a figure."""
"""Each of those fields' place among StepValues' arguments, and whether it is a count."""
_RANK_ARGUMENT = _STEP_VALUES_FIELDS.index("rank")
_STEP_ARGUMENTS = frozenset(_STEP_VALUES_FIELDS.index(name) for name in (
    "step", "samples", "loss", "throughput", "dt", "samples_total"))
"""Any of these makes a record (_build_step's test); a rank or a batch alone does not."""


_FIGURE_ARGUMENTS = tuple(_STEP_VALUES_FIELDS.index(name)
                          for name in ("step", "rank", "samples", "loss"))
_FiguresReader = tuple["Callable[[str], tuple[str, ...]]", int, int, int, int,
                       "tuple[int, ...]"]
"""A _Reader of those four figures only: an itemgetter of its pieces of a line (one C call
for all), where each figure is among them (-1: the shape does not print it), and the four
figures' places in the line, (start, end) each ((-1, -1): not printed), for the supervisor's
reader outside Python (StepLineParser.figure_runs_many)."""
_Learnt = tuple[_Recipe, "_Reader | None", "_FiguresReader | None"]


def _figures_reader(reader: _Reader | None) -> _FiguresReader | None:
    """`reader` as a _FiguresReader; None where it reads another figure too."""
    if reader is None:
        return None
    places = [-1, -1, -1, -1]
    spans = [-1] * 8
    pieces = []
    for argument, start, end, _ in reader:
        if argument not in _FIGURE_ARGUMENTS:
            return None
        figure = _FIGURE_ARGUMENTS.index(argument)
        places[figure] = len(pieces)
        spans[2 * figure:2 * figure + 2] = start, end
        pieces.append(slice(start, end))
    if len(pieces) == 1:
        pieces.append(slice(0, 0))  # itemgetter of one item gives the item, not a tuple
    return (itemgetter(*pieces), *places, tuple(spans))  # type: ignore[return-value]


def _direct_reader(recipe: _Recipe, text: str) -> _Reader | None:
    """The recipe of `text`'s shape as a _Reader, None where _build_step does more than
    read numbers at its places: a field it reads otherwise, a value with no digit, or a
    number int() or float() would not read as printed (_count_field and _number_field
    then read it their own way). Whether int() and float() read a piece depends on its
    characters but for its ASCII digits, which is its shape: so as in `text`, in every
    line of the shape."""
    reader: list[tuple[int, int, int, bool]] = []
    for name, at in recipe:
        if at is None:
            continue  # absent in every line of the shape: _build_step skips it too
        if name not in _DIRECT_ARGUMENTS or at.__class__ is not tuple:
            return None
        argument, count = _DIRECT_ARGUMENTS[name]
        start, end = at  # type: ignore[misc]
        piece = text[start:end]
        try:
            if len(piece) > (32 if count else 64):
                return None
            int(piece) if count else float(piece)
        except ValueError:
            return None
        if name in _NOT_NEGATIVE and piece.lstrip().startswith("-"):
            return None  # (below 0 in every line of the shape, or 0: _build_step decides)
        reader.append((argument, start, end, count))
    if not any(argument in _STEP_ARGUMENTS for argument, *_ in reader):
        return None  # no figure but a rank or a batch: _build_step finds no step
    return tuple(reader)


def _read_direct(reader: _Reader, text: str, rank: int | None) -> StepValues:
    """_build_step's record of a line of a shape read as numbers only, without its fields'
    dict and its pass over them."""
    arguments: list[int | float | None] = [None] * len(_STEP_VALUES_FIELDS)
    for argument, start, end, count in reader:
        piece = text[start:end]
        arguments[argument] = int(piece) if count else float(piece)
    if arguments[_RANK_ARGUMENT] is None:
        arguments[_RANK_ARGUMENT] = rank
    return StepValues(*arguments)  # type: ignore[arg-type]


def _column(read: Callable[[str], float], pieces: tuple[str, ...]) -> Iterable[float]:
    """`read` (int or float) of each of one field's `pieces` in a batch of lines; once where
    all are the same text, as a log's rank and batch size mostly are (equal text, equal
    number: half a line's reading where two of its four figures do not change)."""
    first = pieces[0]
    if pieces[-1] == first and pieces.count(first) == len(pieces):
        return [read(first)] * len(pieces)
    return map(read, pieces)


def _shape_runs(shaped: bytes, most: int) -> list[tuple[bytes, int, int]] | None:
    """The runs of lines of one shape in `shaped` (the lines' shapes, joined by newlines):
    each one's shape, and where its lines start and end; None where there are more than
    `most`. Found by comparing the text with a run's shape repeated (no line's shape is
    split off and compared on its own: a few comparisons of the text's bytes a run)."""
    runs: list[tuple[bytes, int, int]] = []
    text = shaped + b"\n"  # (each line its shape and a newline)
    at = line = 0
    while at < len(text):
        if len(runs) == most:
            return None
        unit = text[at:text.index(b"\n", at) + 1]
        # How many lines from `at` are of its shape: doubling while all are, then halving.
        found, beyond = 1, 2
        while text.startswith(unit * beyond, at):
            found, beyond = beyond, beyond * 2
        while beyond - found > 1:
            middle = (found + beyond) // 2
            if text.startswith(unit * middle, at):
                found = middle
            else:
                beyond = middle
        runs.append((unit[:-1], line, line + found))
        at += found * len(unit)
        line += found
    return runs


class _Rules(Protocol):
    """What the memo asks of its StepLineParser (parser.py, which makes the memo): its batch
    reading and its rules' winner for a line."""

    def _parse_batch(self, lines: list[str],
                     step_of: Callable[..., StepLine | StepValues | None],
                     ) -> list[StepValues | CompileLine | None]: ...

    def _winner(self, text: str, rank: int | None, values: bool,
                defaults: tuple[_Rule, ...] = ..., screen: bool = ...,
                ) -> tuple[StepLine | StepValues, _Rule, _Fields] | None: ...


_GROUPED_MIN_LINES = 8
"""read_figures reads a batch of several shapes a shape at a time where each shape has this
many lines on average (fewer: a line at a time, as cheap then)."""


class _ShapeMemo:
    """Where a rule read its fields in lines of one shape, for parse_values_many: a step line
    that differs from an earlier one only in its digits (the step, the loss of a fixed-width
    format) is read at those places, without the rules (about half a line's parse).

    Learnt at a shape's second line, and only where the rule that matched and every rule
    tried before it whose words the line holds are in _SHAPED_RULES: a copy of the line with
    each number's digits made one digit of its own (1s, 2s, ...) is parsed again, and where
    each field's digits are in it is where the rule reads that field in any line of the
    shape. tests/unit/sources/test_steplog_public_logs.py holds the records equal to those of the
    rules on every capture, and on copies of them with other digits."""

    __slots__ = ("_parser", "_recipes")

    def __init__(self, parser: _Rules) -> None:
        self._parser = parser
        self._recipes: dict[bytes, _Learnt | None] = {}

    def parse_many(self, lines: list[str]) -> list[StepValues | CompileLine | None]:
        """StepLineParser.parse_values_many: a line of a shape read as numbers only
        (_direct_reader) is read so first, and the rest by the parser's batch, the memo's
        step_of for each. A learnt shape holds no carriage return, colour code or compiler's
        word (it was learnt in a batch screened for them), so neither way could tell such a
        line apart: a batch whose every line is of such a shape is read without the
        batch's screens (its join, its words looked for), half of what a line cost."""
        records: list[StepValues | CompileLine | None] = [None] * len(lines)
        rest: list[int] = []
        recipes = self._recipes
        for i, line in enumerate(lines):
            try:
                first = line[:1]
                if first == "\x1b" or len(line) > MAX_LINE_CHARS:
                    rest.append(i)
                    continue
                rank, text = strip_rank_prefix(line) if first == "[" else (None, line)
                learnt = recipes.get(text.encode("utf-8", "surrogatepass").translate(_SHAPE))
                if learnt and learnt[1] is not None:
                    records[i] = _read_direct(learnt[1], text, rank)
                else:
                    rest.append(i)
            except Exception:  # text is untrusted; one odd line must not stop supervision
                records[i] = None
        if rest:
            if len(rest) == len(lines):
                return self._parser._parse_batch(lines, self.step_of)
            read = self._parser._parse_batch([lines[i] for i in rest], self.step_of)
            for i, record in zip(rest, read, strict=True):
                records[i] = record
        return records

    def read_figures(self, lines: list[str]) -> list[StepFigures] | None:
        """StepLineParser.parse_figures_many: each line's figures where every one is of a
        shape learnt to print the step, rank, samples and loss only, and has no rank prefix;
        None where one is not. (No shape is learnt of a line with a colour code, or over
        MAX_LINE_CHARS: parse_many reads those one by one.)"""
        if not lines:
            return []
        # The shapes of all the lines from one translate of their text, not one a line.
        shaped = "\n".join(lines).encode("utf-8", "surrogatepass").translate(_SHAPE)
        # Each run of lines of one shape read a column at a time: a log's step lines are of
        # one shape (most batches are one run), and a poll's logs come in rank order, the
        # ranks of one digit and of two each a run (about half the cost of a line at a
        # time at 32 ranks' ten lines each). A line with a rank prefix: a line at a time.
        runs = _shape_runs(shaped, max(1, len(lines) // _GROUPED_MIN_LINES))
        if runs is not None and runs[-1][2] != len(lines):
            return None  # (a line holding a newline: not one line)
        if runs is not None and all(shape[:1] != b"[" for shape, _, _ in runs):
            if len(runs) == 1:
                return self._read_columns(runs[0][0], lines)
            figures = []
            for shape, start, end in runs:
                read = self._read_columns(shape, lines[start:end])
                if read is None:
                    return None
                figures += read
            return figures
        shapes = shaped.split(b"\n")
        if len(shapes) != len(lines):
            return None
        first = shapes[0]
        if len(lines) >= 2 * _GROUPED_MIN_LINES and first[:1] != b"[" and \
                b"\n[" not in shaped:
            # A few shapes, each one's lines apart from each other: gathered, each shape's
            # read a column at a time.
            at: dict[bytes, list[int]] = {}
            for index, shape in enumerate(shapes):
                at.setdefault(shape, []).append(index)
            if len(at) * _GROUPED_MIN_LINES <= len(lines):
                grouped: list[StepFigures | None] = [None] * len(lines)
                for shape, indexes in at.items():
                    read = self._read_columns(shape, [lines[i] for i in indexes])
                    if read is None:
                        return None
                    for index, figure in zip(indexes, read, strict=True):
                        grouped[index] = figure
                return grouped  # type: ignore[return-value]  # (every index filled)
        recipes, figures = self._recipes, []
        for line, shape in zip(lines, shapes, strict=True):
            if line[:1] == "[" and strip_rank_prefix(line)[0] is not None:
                return None  # its rank is its prefix's where its text prints none
            learnt = recipes.get(shape)
            if not learnt or learnt[2] is None:
                return None
            get, step, rank, samples, loss, _ = learnt[2]
            pieces = get(line)
            figures.append((
                None if step < 0 else int(pieces[step]),
                None if rank < 0 else int(pieces[rank]),
                None if samples < 0 else float(pieces[samples]),
                None if loss < 0 else float(pieces[loss])))
        return figures

    def figure_runs(self, lines: list[str]) -> list[tuple[int, int, tuple[int, ...]]] | None:
        """StepLineParser.figure_runs_many: read_figures' runs of one shape, with the places
        of their figures, where it reads every line a run at a time."""
        if not lines:
            return []
        shaped = "\n".join(lines).encode("utf-8", "surrogatepass").translate(_SHAPE)
        # As many runs as there are: a run of one line is still cheaper read outside Python.
        runs = _shape_runs(shaped, len(lines))
        if runs is None or runs[-1][2] != len(lines):
            return None  # (a line holding a newline: not one line)
        placed = []
        recipes = self._recipes
        for shape, start, end in runs:
            learnt = recipes.get(shape)
            if shape[:1] == b"[" or not learnt or learnt[2] is None:
                return None
            placed.append((start, end, learnt[2][5]))
        return placed

    def _read_columns(self, shape: bytes, lines: list[str]) -> list[StepFigures] | None:
        """read_figures of `lines`, all of `shape`, a column at a time; None where no recipe
        for the shape was learnt."""
        learnt = self._recipes.get(shape)
        if not learnt or learnt[2] is None:
            return None
        get, step, rank, samples, loss, _ = learnt[2]
        pieces = list(zip(*map(get, lines), strict=True))
        empty = [None] * len(lines)
        return list(zip(
            empty if step < 0 else _column(int, pieces[step]),
            empty if rank < 0 else _column(int, pieces[rank]),
            empty if samples < 0 else _column(float, pieces[samples]),
            empty if loss < 0 else _column(float, pieces[loss]), strict=True))

    def step_of(self, text: str, rank: int | None, values: bool, defaults: tuple[_Rule, ...],
                screen: bool) -> StepLine | StepValues | None:
        """StepLineParser._step_of, read by the recipe of the line's shape where one was
        learnt."""
        shape = text.encode("utf-8", "surrogatepass").translate(_SHAPE)
        learnt = self._recipes.get(shape, _SEEN_ONCE)
        if learnt:
            recipe, reader, _ = learnt
            if reader is not None and values:
                return _read_direct(reader, text, rank)
            fields = {name: text[at[0]:at[1]] if at.__class__ is tuple else at
                      for name, at in recipe}
            record = _build_step(fields, rank, text, values)
            if record is not None:
                return record
        found = self._parser._winner(text, rank, values, defaults, screen)
        if learnt is not None and not learnt:  # () from get(): not seen yet, or seen once
            if len(self._recipes) >= _SHAPES_KEPT:
                self._recipes.clear()
            if shape not in self._recipes:
                self._recipes[shape] = _SEEN_ONCE
            else:
                recipe = self._learn(text, rank, values, defaults, screen, found)
                if recipe is None:
                    self._recipes[shape] = None
                else:
                    reader = _direct_reader(recipe, text)
                    self._recipes[shape] = (recipe, reader, _figures_reader(reader))
        return None if found is None else found[0]

    def _learn(self, text: str, rank: int | None, values: bool, defaults: tuple[_Rule, ...],
               screen: bool, found: tuple[StepLine | StepValues, _Rule, _Fields] | None,
               ) -> _Recipe | None:
        """The recipe of `text`'s shape; None where lines of it are to be read by the rules."""
        if found is None or (rank is None and "]:" in text):
            return None  # no step; or a rank after a time stamp, read from its digits
        _, rule, fields = found
        if rule not in _SHAPED_RULES or any(
                earlier not in _SHAPED_RULES and any(w in text for w in _RULE_WORDS[earlier])
                for earlier in _ALL_DEFAULT_RULES[:_ALL_DEFAULT_RULES.index(rule)]):
            return None
        runs = list(_DIGIT_RUN_RE.finditer(text))
        if len(runs) > 9:
            return None
        marked = list(text)
        for k, run in enumerate(runs):
            marked[run.start():run.end()] = str(k + 1) * (run.end() - run.start())
        marked_text = "".join(marked)
        again = self._parser._winner(marked_text, rank, values, defaults, screen)
        if again is None or again[1] is not rule or again[2].keys() != fields.keys():
            return None
        recipe: list[tuple[str, tuple[int, int] | object]] = []
        for name, value in fields.items():
            marked_value = again[2][name]
            if not isinstance(value, str) or _DIGIT_RUN_RE.search(value) is None:
                if marked_value != value or isinstance(value, (int, float)):
                    return None
                recipe.append((name, value))  # None, or words: the same in every line
                continue
            if not isinstance(marked_value, str) or marked_text.count(marked_value) != 1:
                return None
            start = marked_text.index(marked_value)
            end = start + len(marked_value)
            if text[start:end] != value:
                return None
            recipe.append((name, (start, end)))
        return tuple(recipe)
