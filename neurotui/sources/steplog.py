"""Turn lines of a training script's stdout into typed step and compile records.

Unmodified training scripts work with neurotui because their per-step lines are
recognised here, from the text they already print. Everything is pure: no I/O,
no state between lines, and no input can make :meth:`StepLineParser.parse` raise.

Text is data. Nothing is evaluated except the Hugging Face Trainer log dict, and
that only through :func:`ast.literal_eval`; escape sequences are never decoded.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COMPILE_KINDS",
    "KNOWN_GROUPS",
    "MAX_LINE_CHARS",
    "CompileKind",
    "CompileLine",
    "Record",
    "StepLine",
    "StepLineParser",
    "classify_compile",
    "strip_rank_prefix",
]

#: Longer lines are ignored: no step line is this long, and it bounds the work per line.
MAX_LINE_CHARS = 64 * 1024

CompileKind = Literal["compile", "cache_miss", "cache_hit", "compiled", "compile_failed"]
#: ``cache_miss`` means a compile follows (neuroncc 1.x prints no separate ``compile`` line).
COMPILE_KINDS: tuple[CompileKind, ...] = (
    "compile",
    "cache_miss",
    "cache_hit",
    "compiled",
    "compile_failed",
)


@dataclass(frozen=True, slots=True)
class StepLine:
    """One training step as the script reported it; fields it did not print are None.

    ``samples`` is the count of this step (the neurotui runner); ``samples_total`` is a
    running total (``consumed_samples`` of NxD Training and Megatron), which the consumer
    differences per rank. ``throughput`` is
    samples/s as printed by the script; ``dt`` is the step time in seconds.
    """

    step: int | None
    samples: float | None
    loss: float | None
    throughput: float | None
    dt: float | None
    rank: int | None
    samples_total: float | None = None


@dataclass(frozen=True, slots=True)
class CompileLine:
    """A Neuron compiler / compile-cache event; ``line`` is the input minus its newline."""

    what: CompileKind
    line: str


Record = StepLine | CompileLine

# --------------------------------------------------------------------------- helpers

# A number as scripts print it, including nan/inf. Repeats are bounded so that no
# built-in pattern can backtrack badly on a hostile 64 KiB line.
_NUM = (
    r"(?:[-+]?(?:\d{1,24}(?:\.\d{0,24})?|\.\d{1,24})(?:[eE][-+]?\d{1,4})?"
    r"|[-+]?(?i:nan|inf(?:inity)?)(?![A-Za-z]))"
)
# Stops a number match from ending early by backtracking ("2.3e" must not give 2).
_NUM_END = r"(?![\w]|\.\d)"

_RANK_PREFIX_RE = re.compile(
    r"\[(?:default|rank)(\d{1,7})\]:"  # torchrun --tee (local rank) / newer torchrun (rank)
    r"|\[\d{1,9},(\d{1,7})\]<(?:stdout|stderr|stddiag)>:",  # mpirun --tag-output
    re.ASCII,
)
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[@-Z\\-_]")


def strip_rank_prefix(line: str) -> tuple[int | None, str]:
    """Split a launcher's per-rank prefix off ``line``: ``(rank, rest)``.

    torchrun ``--tee`` writes ``[default0]:`` (local rank), newer torchrun ``[rank0]:``
    and mpirun ``--tag-output`` ``[1,0]<stdout>:`` (job, rank). Without one: ``(None, line)``.
    """
    if not line.startswith("["):
        return None, line
    m = _RANK_PREFIX_RE.match(line)
    if m is None:
        return None, line
    digits = m.group(1) if m.group(1) is not None else m.group(2)
    return int(digits), line[m.end() :]


def _to_float(text: str | None) -> float | None:
    """Read a printed number; None when it is not one (thousands commas allowed)."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    if not s or len(s) > 64:
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _to_int(text: str | None) -> int | None:
    """Read a step/rank count; ``1.000`` (NxD's global_step) counts, ``1.5`` does not."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    if not s or len(s) > 32:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    value = _to_float(s)
    if value is None or not math.isfinite(value) or not value.is_integer():
        return None
    return int(value)


def _inverse(value: float | None) -> float | None:
    """Seconds per step from steps per second (tqdm switches units below 1 it/s)."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return 1.0 / value


# --------------------------------------------------------------------------- compile events

_COMPILER_STATUS_RE = re.compile(r"Compiler status:?\s{0,8}([A-Za-z]{1,16})")
_ERROR_WORD_RE = re.compile(r"\bERROR\b")


def classify_compile(text: str) -> CompileKind | None:
    """Say which Neuron compile event ``text`` reports, if any.

    The literal checks come first so an ordinary line costs a few substring tests.
    A wrapped fragment that only holds the tail of a cache-hit message
    (``....neff. Exiting with a successfully compiled graph.``) is not an event.
    """
    if "ompiler" in text:
        m = _COMPILER_STATUS_RE.search(text)
        if m is not None:
            return "compiled" if m.group(1).upper() == "PASS" else "compile_failed"
        if "Call compiler with cmd" in text:
            return "compile"
    if "neff" in text:
        if "cached failed neff" in text:
            return "compile_failed"
        if "Using a cached neff" in text:
            return "cache_hit"
    if "_WRAPPER||" in text:
        if "No candidate found" in text:
            return "cache_miss"
        if _ERROR_WORD_RE.search(text) is not None:
            return "compile_failed"
        if "Exiting with a successfully compiled graph" in text and ".neff" not in text:
            return "compiled"
    if "RunNeuronCCImpl: error condition" in text:
        return "compile_failed"
    return None


# --------------------------------------------------------------------------- step rules

# A rule takes the cleaned text and returns raw field values, or None when the line
# is not its kind. Every built-in rule starts with cheap substring tests.
_Fields = dict[str, object]
_Rule = Callable[[str], "_Fields | None"]

#: Named groups a user pattern may use. ``dt_ms`` is milliseconds and ``it_per_s``
#: iterations per second; both are turned into ``dt`` seconds.
KNOWN_GROUPS = frozenset(
    {"step", "samples", "samples_total", "loss", "throughput", "dt", "dt_ms", "it_per_s", "rank"}
)
_VALUE_GROUPS = KNOWN_GROUPS - {"rank"}

_RUNNER_MARK = "neurotui-runner "
_RUNNER_KEYS = frozenset({"step", "rank", "samples", "loss", "dt", "throughput"})


def _rule_runner(text: str) -> _Fields | None:
    """``neurotui-runner step=12 rank=0 samples=16 loss=6.9077 dt=0.1234`` (any key order)."""
    at = text.find(_RUNNER_MARK)
    if at < 0:
        return None
    fields: _Fields = {}
    for token in text[at + len(_RUNNER_MARK) :].split(None, 32)[:32]:
        key, sep, value = token.partition("=")
        if sep and key in _RUNNER_KEYS:
            fields[key] = value
    if "step" not in fields and "loss" not in fields:
        return None
    return fields


_BERT_RE = re.compile(
    r"\(\s{0,4}\d{1,9},\s{0,4}(?P<step>\d{1,15})\s{0,4}\)\s{1,8}step_loss\s{0,4}:\s{0,4}"
    rf"(?P<loss>{_NUM}){_NUM_END}"
    rf"(?:\s{{1,8}}learning_rate\s{{0,4}}:\s{{0,4}}{_NUM}{_NUM_END})?"
    rf"(?:\s{{1,8}}throughput\s{{0,4}}:\s{{0,4}}(?P<throughput>{_NUM}){_NUM_END})?",
    re.ASCII,
)


def _rule_bert(text: str) -> _Fields | None:
    """torch-neuronx BERT: ``LOG <date> - (epoch, step) step_loss : L ... throughput : T``."""
    if "step_loss" not in text:
        return None
    m = _BERT_RE.search(text)
    return None if m is None else m.groupdict()


_HF_NONFINITE_RE = re.compile(r"(?<![\w'\".])(-?)(nan|inf)(?![\w'\"])")
_HF_SENTINELS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_HF_MAX_CHARS = 4096


_HF_SENTINEL = "__neurotui_nonfinite__:"


def _hf_sentinel(m: re.Match[str]) -> str:
    return f"'{_HF_SENTINEL}{m.group(1)}{m.group(2)}'"


def _hf_number(value: object) -> float | None:
    if isinstance(value, str) and value.startswith(_HF_SENTINEL):
        return _HF_SENTINELS.get(value[len(_HF_SENTINEL) :])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def _rule_hf_dict(text: str) -> _Fields | None:
    """Hugging Face Trainer: ``{'loss': nan, 'learning_rate': 4.8e-05, 'epoch': 0.12}``.

    ``literal_eval`` rejects bare ``nan``/``inf``, so they become sentinel strings
    first. Only dicts with a numeric ``'loss'`` key count: eval and summary dicts
    (``eval_loss``, ``train_loss``) are not training steps.
    """
    if "'loss'" not in text:
        return None
    s = text.strip()
    if len(s) > _HF_MAX_CHARS or not s.startswith("{") or not s.endswith("}"):
        return None
    try:
        data = ast.literal_eval(_HF_NONFINITE_RE.sub(_hf_sentinel, s))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    loss = _hf_number(data.get("loss"))
    if loss is None:
        return None
    step = data.get("step")
    fields: _Fields = {"loss": loss}
    if isinstance(step, int) and not isinstance(step, bool):
        fields["step"] = step
    return fields


_TQDM_RATE_RE = re.compile(
    r"\|\s{0,8}\d{1,12}/(?:\d{1,12}|\?)\s{0,4}\[[^\[\]|]{0,64}?"
    rf"(?:(?P<dt>{_NUM})s/it|(?P<it_per_s>{_NUM})it/s)",
    re.ASCII,
)
_TQDM_GLOBAL_STEP_RE = re.compile(rf"\bglobal_step=(?P<v>{_NUM}){_NUM_END}", re.ASCII)
_TQDM_SAMPLES_RE = re.compile(rf"\bconsumed_samples=(?P<v>{_NUM}){_NUM_END}", re.ASCII)
_TQDM_LOSS_RES = tuple(
    re.compile(rf"\b{key}=(?P<v>{_NUM}){_NUM_END}", re.ASCII)
    for key in ("loss", "reduced_train_loss", "train_loss")
)


def _rule_tqdm(text: str) -> _Fields | None:
    """NxD Training / PyTorch Lightning progress bar with a loss or global_step postfix.

    ``Epoch 0: 3%|▎ | 3/91 [16:05<7:52:06, 321.89s/it, loss=6.7, ..., global_step=1.000,
    consumed_samples=2048.0]``. The bar's own counter restarts every epoch, so the step
    is only taken from ``global_step``. A bar without loss or global_step (a data
    loader, a download) is not a training step.
    """
    if "loss=" not in text and "global_step=" not in text:
        return None
    if "s/it" not in text and "it/s" not in text:
        return None
    m = _TQDM_RATE_RE.search(text)
    if m is None:
        return None
    tail = text[m.end() :]
    fields: _Fields = {"dt": m.group("dt"), "it_per_s": m.group("it_per_s")}
    if (g := _TQDM_GLOBAL_STEP_RE.search(tail)) is not None:
        fields["step"] = g.group("v")
    if (s := _TQDM_SAMPLES_RE.search(tail)) is not None:
        fields["samples_total"] = s.group("v")
    for loss_re in _TQDM_LOSS_RES:
        if (lm := loss_re.search(tail)) is not None:
            fields["loss"] = lm.group("v")
            break
    if "step" not in fields and "loss" not in fields:
        return None
    return fields


_MEGATRON_ITER_RE = re.compile(r"\biteration\s{1,24}(\d{1,15})\s{0,8}/\s{0,24}\d{1,15}\s{0,8}\|")
_MEGATRON_SAMPLES_RE = re.compile(r"\bconsumed samples:\s{0,24}(\d{1,20})\b")
_MEGATRON_DT_RE = re.compile(rf"elapsed time per iteration \(ms\):\s{{0,24}}({_NUM}){_NUM_END}")
_MEGATRON_LOSS_RE = re.compile(rf"\blm loss:\s{{0,24}}({_NUM}){_NUM_END}")


def _rule_megatron(text: str) -> _Fields | None:
    """Megatron-LM / NeMo: ``iteration 10/ 500 | consumed samples: 320 | ... lm loss: ...``."""
    if "consumed samples:" not in text:
        return None
    it = _MEGATRON_ITER_RE.search(text)
    if it is None:
        return None
    fields: _Fields = {"step": it.group(1)}
    if (s := _MEGATRON_SAMPLES_RE.search(text)) is not None:
        fields["samples_total"] = s.group(1)
    if (d := _MEGATRON_DT_RE.search(text)) is not None:
        fields["dt_ms"] = d.group(1)
    if (lm := _MEGATRON_LOSS_RE.search(text)) is not None:
        fields["loss"] = lm.group(1)
    return fields


_PLAIN_STEP_RE = re.compile(
    r"\b(?:global[_ ]?)?(?:step|iter|iteration)\b\s{0,4}[:=#]?\s{0,4}\[?\s{0,4}"
    r"(?P<step>\d{1,15})(?:\s{0,4}/\s{0,4}\d{1,15})?(?![\w.])",
    re.ASCII | re.IGNORECASE,
)
_PLAIN_LOSS_RE = re.compile(
    r"\b(?:[a-z]{1,12}_)?loss\b\s{0,4}[:=]?\s{0,4}(?:tensor\()?"
    rf"(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII | re.IGNORECASE,
)
# Evaluation and summary lines also say "step ... loss" but are not training steps.
_PLAIN_NOT_TRAIN_RE = re.compile(
    r"\b(?:val|valid|validation|eval|evaluation|test|dev|best)(?:_|\b)",
    re.ASCII | re.IGNORECASE,
)
# A value that stands alone ("123.4 samples/s"), not one that belongs to a key ("x=123.4").
_FREE = r"(?<![^\s,;(\[|])"
_PLAIN_DT_RES = (
    re.compile(
        r"\b(?:time|dt|step[_ ]?time|iter[_ ]?time|elapsed|duration)\b\s{0,4}[:=]?\s{0,4}"
        rf"(?P<v>{_NUM})\s{{0,2}}(?P<unit>ms|s|sec|secs|seconds)\b",
        re.ASCII | re.IGNORECASE,
    ),
    re.compile(rf"{_FREE}(?P<v>{_NUM})\s{{0,2}}(?P<unit>s)/it\b", re.ASCII),
    re.compile(rf"{_FREE}(?P<v>{_NUM})\s{{0,2}}(?P<unit>it)/s\b", re.ASCII),
)
_PLAIN_THROUGHPUT_RES = (
    re.compile(
        r"\bsamples?(?:/|_per_|\s+per\s+)s(?:ec(?:ond)?)?\b\s{0,4}[:=]\s{0,4}"
        rf"(?P<v>{_NUM}){_NUM_END}",
        re.ASCII | re.IGNORECASE,
    ),
    re.compile(
        rf"{_FREE}(?P<v>{_NUM})\s{{0,2}}samples?(?:/|\s+per\s+)s(?:ec(?:ond)?)?\b",
        re.ASCII | re.IGNORECASE,
    ),
)


def _rule_plain(text: str) -> _Fields | None:
    """Hand-written ``step 10 | loss 2.31`` / ``iter 10: loss 4.23, time 120.5ms`` lines.

    Needs the words step/iter(ation) then a number, and later a loss word then a
    number, so "resuming at step 28125" or "loss scale 1024" are not steps. Lines
    naming val/eval/test/best are skipped. The two searches are separate (not one
    ``step.*loss`` regex) so a hostile line cannot make the search quadratic.
    """
    if "loss" not in text and "Loss" not in text and "LOSS" not in text:
        return None
    st = _PLAIN_STEP_RE.search(text)
    if st is None:
        return None
    lo = _PLAIN_LOSS_RE.search(text, st.end())
    if lo is None or _PLAIN_NOT_TRAIN_RE.search(text) is not None:
        return None
    fields: _Fields = {"step": st.group("step"), "loss": lo.group("loss")}
    for dt_re in _PLAIN_DT_RES:
        if (d := dt_re.search(text)) is not None:
            unit = d.group("unit").lower()
            key = {"ms": "dt_ms", "it": "it_per_s"}.get(unit, "dt")
            fields[key] = d.group("v")
            break
    for tp_re in _PLAIN_THROUGHPUT_RES:
        if (t := tp_re.search(text)) is not None:
            fields["throughput"] = t.group("v")
            break
    return fields


# Order matters: specific formats before the loose "step ... loss" rule.
_DEFAULT_RULES: tuple[tuple[str, _Rule], ...] = (
    ("neurotui-runner", _rule_runner),
    ("torch-neuronx-bert", _rule_bert),
    ("hf-trainer-dict", _rule_hf_dict),
    ("nxdt-ptl-progress-bar", _rule_tqdm),
    ("megatron", _rule_megatron),
    ("plain-step-loss", _rule_plain),
)


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


def _build_step(fields: _Fields, prefix_rank: int | None) -> StepLine | None:
    """Typed record from raw field strings; None when no value could be read."""

    def num(key: str) -> float | None:
        value = fields.get(key)
        if isinstance(value, float):
            return value
        return _to_float(value) if isinstance(value, str) else None

    def count(key: str) -> int | None:
        value = fields.get(key)
        if isinstance(value, int):
            return value
        return _to_int(value) if isinstance(value, str) else None

    dt = num("dt")
    if dt is None and (ms := num("dt_ms")) is not None:
        dt = ms / 1000.0
    if dt is None:
        dt = _inverse(num("it_per_s"))
    step, samples, loss, throughput = count("step"), num("samples"), num("loss"), num("throughput")
    samples_total = num("samples_total")
    if step is None and samples is None and loss is None and throughput is None and dt is None \
            and samples_total is None:
        return None
    rank = count("rank")
    return StepLine(
        step=step,
        samples=samples,
        loss=loss,
        throughput=throughput,
        dt=dt,
        rank=prefix_rank if rank is None else rank,
        samples_total=samples_total,
    )


class StepLineParser:
    """Recognise step lines (configurable patterns) and compile events in stdout lines.

    User patterns are regexes with named groups from :data:`KNOWN_GROUPS`, tried
    in order with ``re.search`` before the built-in formats (if included). Compile
    events are always recognised: their wording comes from Neuron, not the script.

    Cost: an ordinary non-matching line with the default rules goes through about a
    dozen substring tests and no regex (measured 0.7-1.9 us per line on the dev VM;
    ``test_ordinary_lines_are_cheap`` guards it loosely). Each user pattern adds one
    ``re.search``. Built-in regexes use bounded repeats and separate searches, so a
    hostile 64 KiB line still costs milliseconds, not seconds.
    """

    __slots__ = ("_defaults", "_names", "_user_rules")

    def __init__(self, patterns: Sequence[str] = (), *, include_defaults: bool = False) -> None:
        if isinstance(patterns, (str, bytes)):
            raise TypeError("patterns must be a list of regex strings, not one string")
        user = [(pattern, _regex_rule(_compile_user_pattern(pattern))) for pattern in patterns]
        self._user_rules = tuple(rule for _, rule in user)
        self._defaults = include_defaults
        names = [name for name, _ in user]
        if include_defaults:
            names.extend(name for name, _ in _DEFAULT_RULES)
        self._names = tuple(names)

    @classmethod
    def default(cls) -> StepLineParser:
        """The built-in formats: neurotui runner, torch-neuronx BERT, HF Trainer dicts,
        NxD Training / PTL progress bars, Megatron, and plain ``step N ... loss X``."""
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
        """One stdout line to a record, or None for an ordinary line. Never raises."""
        try:
            return self._parse(line)
        except Exception:  # text is untrusted; one odd line must not stop supervision
            return None

    def parse_lines(self, lines: Iterable[str]) -> Iterator[StepLine | CompileLine]:
        """The records in ``lines`` (a log file, a replay), ordinary lines skipped."""
        for line in lines:
            record = self.parse(line)
            if record is not None:
                yield record

    def _parse(self, line: str | bytes) -> StepLine | CompileLine | None:
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
        for rule in self._user_rules:
            fields = rule(text)
            if fields is not None and (record := _build_step(fields, rank)) is not None:
                return record
        # Prefilter: every built-in format needs one of these words, so an ordinary
        # line costs these few substring tests and no regex at all.
        if self._defaults and (
            "loss" in text
            or "Loss" in text
            or "LOSS" in text
            or "global_step=" in text
            or "consumed samples:" in text
            or _RUNNER_MARK in text
        ):
            for _, rule in _DEFAULT_RULES:
                fields = rule(text)
                if fields is not None and (record := _build_step(fields, rank)) is not None:
                    return record
        return None


def _last_segment(text: str) -> str:
    for segment in reversed(text.split("\r")):
        if segment.strip():
            return segment
    return ""
