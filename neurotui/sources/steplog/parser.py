"""The step-line parser: user patterns and the built-in rules tried in order on a cleaned
line, one line or a batch at a time. Everything is pure: no I/O, no state between lines but
the shape cache, and no input can make :meth:`StepLineParser.parse` raise."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from neurotui.sources.steplog.compile_lines import _may_compile, classify_compile
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
    _DEFAULT_RULES,
    _VALUE_GROUPS,
    KNOWN_GROUPS,
    _default_rules_for,
    _Fields,
    _maybe_step,
    _Rule,
)
from neurotui.sources.steplog.shapes import _ShapeMemo
from neurotui.sources.steplog.text import _ANSI_RE, _LATE_RANK_RE, _last_segment, strip_rank_prefix


def _compile_user_pattern(pattern: object) -> re.Pattern[str]:
    """Compile one user pattern, or say clearly why it cannot be used."""
    if not isinstance(pattern, str):
        raise TypeError(f"step pattern {pattern!r} is not a string")
    try:
        regex = re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise ValueError(f"step pattern {pattern!r} does not compile: {exc}") from exc
    names = set(regex.groupindex)
    unknown = names - KNOWN_GROUPS
    known = ", ".join(sorted(KNOWN_GROUPS))
    if unknown:
        raise ValueError(
            f"step pattern {pattern!r} has unknown named group(s) "
            f"{', '.join(sorted(unknown))}; known: {known}"
        )
    if not names & _VALUE_GROUPS:
        raise ValueError(
            f"step pattern {pattern!r} has no named group among {known} (besides rank)"
        )
    if regex.search("") is not None:
        raise ValueError(f"step pattern {pattern!r} matches an empty line, so every line")
    return regex


def _regex_rule(regex: re.Pattern[str]) -> _Rule:
    def rule(text: str) -> _Fields | None:
        m = regex.search(text)
        return None if m is None else m.groupdict()

    return rule


class StepLineParser:
    """Recognise step lines (configurable patterns) and compile events in stdout lines.

    User patterns are regexes with named groups from :data:`KNOWN_GROUPS`, tried
    in order with ``re.search`` before the built-in formats (if included). Compile
    events are always recognised: their wording comes from Neuron, not the script.

    Cost: an ordinary non-matching line with the default rules goes through about twenty
    substring tests and no regex (measured about 2 us per line on the dev VM;
    ``test_ordinary_lines_are_cheap`` guards it loosely). Each user pattern adds one
    ``re.search``. Built-in regexes use bounded repeats and separate searches, so a
    hostile 64 KiB line still costs milliseconds, not seconds.
    """

    __slots__ = ("_defaults", "_names", "_shapes", "_user_rules")

    def __init__(self, patterns: Sequence[str] = (), *, include_defaults: bool = False) -> None:
        if isinstance(patterns, (str, bytes)):
            raise TypeError("patterns must be a list of regex strings, not one string")
        user = [(pattern, _regex_rule(_compile_user_pattern(pattern))) for pattern in patterns]
        self._user_rules = tuple(rule for _, rule in user)
        self._defaults = include_defaults
        self._shapes: _ShapeMemo | None = None  # parse_values_many's (made at its first call)
        names = [name for name, _ in user]
        if include_defaults:
            names.extend(name for name, _ in _DEFAULT_RULES)
        self._names = tuple(names)

    @classmethod
    def default(cls) -> StepLineParser:
        """The built-in formats: neurotui runner, torch-neuronx BERT, HF Trainer dicts,
        progress bars (tqdm / Lightning / NeMo / NxD Training / HF Trainer / torchtune /
        YOLO), Megatron-LM / NeMo 2 / nanotron iteration lines, epoch / batch counters (the
        PyTorch ImageNet, MNIST and CIFAR-10 examples, torchvision, timm, mmengine / mmcv),
        fairseq, char-rnn, CycleGAN / pix2pix, DeepSpeed's step and throughput reports,
        plain ``step N ... loss X`` (torch-xla, detectron2, nanoGPT, NxD, ...), and lines with
        no "step" word: BigDL, ``Batch N/M`` counters, word_language_model, tinygrad and
        Composer's blocks."""
        return cls((), include_defaults=True)

    @classmethod
    def from_patterns(
        cls, patterns: Iterable[str], *, include_defaults: bool = False
    ) -> StepLineParser:
        """A parser for the user's own patterns; ValueError names any unusable one."""
        if isinstance(patterns, (str, bytes)):
            raise TypeError("patterns must be a list of regex strings, not one string")
        return cls(list(patterns), include_defaults=include_defaults)

    @property
    def rule_names(self) -> tuple[str, ...]:
        """User pattern sources and built-in format names, in the order they are tried."""
        return self._names

    def __repr__(self) -> str:
        return f"StepLineParser({list(self._names)!r})"

    def parse(self, line: str) -> StepLine | CompileLine | None:
        """One stdout line to a record, or None for an ordinary line. Never raises.

        A line that still holds carriage returns is read as a terminal shows it (its
        last non-blank part); :func:`explain` instead reads every part.
        """
        try:
            return self._parse(line)  # type: ignore[return-value]  # (a StepLine)
        except Exception:  # text is untrusted; one odd line must not stop supervision
            return None

    def parse_values(self, line: str) -> StepValues | CompileLine | None:
        """As :meth:`parse`, a step line as :class:`StepValues` (no ``printed_time``): the
        supervisor's, for every line a job prints. Never raises."""
        try:
            return self._parse(line, True)  # type: ignore[return-value]
        except Exception:  # text is untrusted; one odd line must not stop supervision
            return None

    def parse_lines(self, lines: Iterable[str]) -> Iterator[StepLine | CompileLine]:
        """The records in ``lines`` (a log file, a replay), ordinary lines skipped."""
        for line in lines:
            record = self.parse(line)
            if record is not None:
                yield record

    def _parse(
        self, line: str | bytes, values: bool = False
    ) -> StepLine | StepValues | CompileLine | None:
        if isinstance(line, bytes):
            if len(line) > MAX_LINE_CHARS:
                return None
            line = line.decode("utf-8", "replace")
        elif not isinstance(line, str):
            return None
        if len(line) > MAX_LINE_CHARS:
            return None
        raw = line.rstrip("\r\n")
        rank, text = strip_rank_prefix(raw)
        if "\r" in text:
            # A tqdm bar redraws itself with \r; the terminal shows the last segment.
            text = _last_segment(text)
            if rank is None:
                rank, text = strip_rank_prefix(text)
        if "\x1b" in text:
            text = _ANSI_RE.sub("", text)
        kind = classify_compile(text)
        if kind is not None:
            return CompileLine(what=kind, line=raw)
        return self._step_of(text, rank, values)

    def _step_of(self, text: str, rank: int | None, values: bool,
                 defaults: tuple[_Rule, ...] = _ALL_DEFAULT_RULES, screen: bool = True,
                 ) -> StepLine | StepValues | None:
        """The step record of a cleaned line (no compile line, no colour codes, no carriage
        return), or None. `defaults`: the built-in rules to try (_default_rules_for);
        `screen`: whether the line goes through _maybe_step before them (False: few rules,
        whose own first tests, for their words, cost less than its dozen)."""
        found = self._winner(text, rank, values, defaults, screen)
        return None if found is None else found[0]

    def _winner(self, text: str, rank: int | None, values: bool,
                defaults: tuple[_Rule, ...] = _ALL_DEFAULT_RULES, screen: bool = True,
                ) -> tuple[StepLine | StepValues, _Rule, _Fields] | None:
        """_step_of's record, with the rule that matched and the fields it read."""
        if rank is None and "]:" in text:
            # ``2024-01-02 10:11:12 [rank1]: ...``: the launcher prefix after a time stamp.
            late = _LATE_RANK_RE.match(text)
            if late is not None:
                rank = int(late.group(1))
        for rule in self._user_rules:
            fields = rule(text)
            if fields is not None and \
                    (record := _build_step(fields, rank, text, values)) is not None:
                return record, rule, fields
        if self._defaults and (not screen or _maybe_step(text)):
            for rule in defaults:
                fields = rule(text)
                if fields is not None and \
                        (record := _build_step(fields, rank, text, values)) is not None:
                    return record, rule, fields
        return None

    def parse_values_many(self, lines: list[str]) -> list[StepValues | CompileLine | None]:
        """:meth:`parse_values` of each of ``lines`` (complete lines, without newlines), the
        supervisor's for a batch read from one log. What only a few lines hold (carriage
        returns, colour codes, a compiler's words) is looked for in the batch at once; a
        batch without any is parsed without those steps, about a third of a step line's
        parse. With the built-in rules only, a line of a shape learnt before is read first,
        without them (_ShapeMemo.parse_many). Never raises."""
        if self._user_rules or not self._defaults:
            return self._parse_batch(lines, self._step_of)
        if self._shapes is None:
            self._shapes = _ShapeMemo(self)
        return self._shapes.parse_many(lines)

    def parse_figures_many(self, lines: list[str]) -> list[StepFigures] | None:
        """The step, rank, samples and loss of each of ``lines`` where every one is a step line
        of a shape that prints no other figure and was read before (our runner's lines, a
        plain `step N loss X`): the supervisor's way for a busy log's batch, without a
        StepValues a line or the tests for figures such lines never print (a line's parse
        and record 2.6 us against 3.35 on the dev VM; 3.5 against 4.1 in the supervisor,
        whose caches are cold at each wakeup). Equal to parse_values_many's records of the
        same lines (tests/unit/supervisor/test_step_figures.py); None where one line is not such a
        line (then parse_values_many reads the batch)."""
        if self._user_rules or not self._defaults or self._shapes is None:
            return None
        try:
            return self._shapes.read_figures(lines)
        except Exception:  # text is untrusted: one odd line, and the batch goes the long way
            return None

    def figure_runs_many(self, lines: list[str]) -> list[tuple[int, int, tuple[int, ...]]] | None:
        """The runs of ``lines`` that parse_figures_many reads a run of one shape at a time,
        each as (start, end, places): the places of the step, rank, samples and loss in each
        of its lines ((start, end) each, -1 where the shape prints none), for a reader
        outside Python (the supervisor's _steprecords.c), however many runs there are. None
        where a line is not of a shape learnt to print those figures only, or begins with a
        bracket (a rank prefix, perhaps), or holds a newline."""
        if self._user_rules or not self._defaults or self._shapes is None:
            return None
        try:
            return self._shapes.figure_runs(lines)
        except Exception:  # text is untrusted: one odd line, and the batch goes the long way
            return None

    def _parse_batch(self, lines: list[str], step_of: Callable[..., StepLine | StepValues | None],
                     ) -> list[StepValues | CompileLine | None]:
        """parse_values_many's lines, each by `step_of` (_step_of, or the shape memo's)."""
        batch = "\n".join(lines)
        if "\r" in batch or "\x1b" in batch or _may_compile(batch):
            return [self.parse_values(line) for line in lines]
        records: list[StepValues | CompileLine | None] = []
        defaults = _default_rules_for(batch) if self._defaults else ()
        # Each built-in rule first looks for its own words (_RULE_WORDS), so the screen is
        # only a saving in front of several: no line it would stop can be a step.
        screen = len(defaults) > 2
        for line in lines:
            try:
                if len(line) > MAX_LINE_CHARS:
                    records.append(None)
                else:
                    # (strip_rank_prefix's own first test, without its call for most lines)
                    rank, text = strip_rank_prefix(line) if line[:1] in "[\x1b" else \
                        (None, line)
                    records.append(step_of(text, rank, True, defaults,  # type: ignore[arg-type]
                                           screen))
            except Exception:  # text is untrusted; one odd line must not stop supervision
                records.append(None)
        return records
