"""Turn lines of a training script's stdout into typed step and compile records.

Unmodified training scripts work with neurotui because their per-step lines are
recognised here, from the text they already print. Everything is pure: no I/O,
no state between lines, and no input can make :meth:`StepLineParser.parse` raise.

Text is data. Nothing is evaluated except the Hugging Face Trainer log dict, and
that only through :func:`ast.literal_eval`; escape sequences are never decoded.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from operator import itemgetter
from typing import Literal

__all__ = [
    "COMPILE_KINDS",
    "KNOWN_GROUPS",
    "MAX_LINE_CHARS",
    "CompileKind",
    "CompileLine",
    "LogReport",
    "Record",
    "StepLine",
    "StepLineParser",
    "StepValues",
    "classify_compile",
    "explain",
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
    differences per rank. ``throughput`` is samples/s as printed by the script (never
    tokens/s); ``dt`` is the step time in seconds (``11.5K`` ms reads as 11.5 s).
    ``global_batch`` is a printed global batch size. ``printed_time`` is the line's own
    date-and-time stamp as unix seconds (a stamp without a zone is local time), None when
    the line has no full date and time.

    Progress bars set ``bar_n``/``bar_total`` (the bar's own counter, ``45/100``) and
    ``bar_key`` (its description without digits: ``"Epoch 0"`` -> ``"Epoch"``, ``""`` for an
    unlabelled bar); ``step`` stays None unless the line also prints a global step. The
    per-epoch batch counters of the PyTorch ImageNet example (``Epoch: [0][ 40/5005]``)
    are reported the same way.
    """

    step: int | None
    samples: float | None
    loss: float | None
    throughput: float | None
    dt: float | None
    rank: int | None
    samples_total: float | None = None
    global_batch: float | None = None
    printed_time: float | None = None
    bar_n: int | None = None
    bar_total: int | None = None
    bar_key: str | None = None


@dataclass(slots=True)
class StepValues:
    """A step line's figures as the supervisor takes them (:meth:`StepLineParser.parse_values`):
    :class:`StepLine`'s fields but ``printed_time``, which it does not use.

    Not frozen because the supervisor builds one for every step line it reads (hundreds a
    second at 32 ranks), and a frozen dataclass costs several times as much to build (its
    ``__init__`` goes through ``object.__setattr__`` for each field)."""

    step: int | None
    samples: float | None
    loss: float | None
    throughput: float | None
    dt: float | None
    rank: int | None
    samples_total: float | None = None
    global_batch: float | None = None
    bar_n: int | None = None
    bar_total: int | None = None
    bar_key: str | None = None


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
# A number with nanotron's human-readable suffix: ``11.5K``, ``85.8G``.
_NUMX = rf"(?:{_NUM})[KMGTP]?"
_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}

_RANK_PREFIX_RE = re.compile(
    # torchrun --tee: ``[default0]:`` (role "default", local rank), newer torchrun ``[rank0]:``,
    # the usual named roles ``[trainer0]:`` / ``[worker0]:`` (not any word: ``[step10]:``
    # is a script's own text), and any role in a prefix template ``[trainer0|0]:``.
    r"\[(?:default|rank|trainer|worker)(\d{1,7})\]:"
    r"|\[[A-Za-z][A-Za-z_-]{0,31}?(\d{1,7})\|\d{1,7}\]:"
    # mpirun --tag-output ``[1,0]<stdout>:``; SageMaker's ``[1,mpirank:0,algo-1]<stdout>:``.
    r"|\[\d{1,9},(?:mpirank:)?(\d{1,7})(?:,[\w.-]{1,64})?\]<(?:stdout|stderr|stddiag)>:",
    re.ASCII,
)
# OSC sequences (Rich's file:// hyperlinks) first, then CSI and two-byte escapes.
_ANSI_RE = re.compile(
    r"\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[@-Z\\-_]"
)
_LEADING_ANSI_RE = re.compile(r"(?:\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]){1,8}")
# A rank prefix that follows a time stamp: ``2024-01-02 10:11:12 [rank1]: ...``.
_LATE_RANK_RE = re.compile(r"[\d\s\-:.,/TZ\[\]]{1,48}?\[(?:default|rank)(\d{1,7})\]:", re.ASCII)


def strip_rank_prefix(line: str) -> tuple[int | None, str]:
    """Split a launcher's per-rank prefix off ``line``: ``(rank, rest)``.

    torchrun ``--tee`` writes ``[default0]:`` (local rank), newer torchrun ``[rank0]:``, a
    named role ``[trainer0]:`` or, with a prefix template, ``[trainer0|0]:`` (the first number
    is taken); mpirun ``--tag-output`` ``[1,0]<stdout>:`` (job, rank), under SageMaker
    ``[1,mpirank:0,algo-1]<stdout>:``. Colour codes in front of the prefix are skipped (and
    dropped with it). Without one: ``(None, line)``.
    """
    start = 0
    if line.startswith("\x1b"):
        lead = _LEADING_ANSI_RE.match(line)
        if lead is not None:
            start = lead.end()
    if not line.startswith("[", start):
        return None, line
    m = _RANK_PREFIX_RE.match(line, start)
    if m is None:
        return None, line
    digits = m.group(1) or m.group(2) or m.group(3)
    return int(digits), line[m.end() :]


def _to_float(text: str | None) -> float | None:
    """Read a printed number; None when it is not one (thousands commas and nanotron's
    ``K``/``M``/``G``/``T``/``P`` suffixes allowed)."""
    if text is None:
        return None
    if len(text) <= 64:
        try:  # the usual case, plain digits: as the general path below would read them
            return float(text)
        except ValueError:
            pass
    s = text.strip().replace(",", "")
    if not s or len(s) > 64:
        return None
    scale = 1.0
    if s[-1] in _SUFFIX and len(s) > 1 and (s[-2].isdigit() or s[-2] == "."):
        scale = _SUFFIX[s[-1]]
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        return None
    return value * scale


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


# --------------------------------------------------------------------------- time stamps

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
)}
_TS_ISO_RE = re.compile(
    r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"(Z|[+-]\d{2}:?\d{2})?(?!\d)",
    re.ASCII,
)
_TS_US_RE = re.compile(
    r"(?<![\d/])(\d{2})/(\d{2})/(\d{4}|\d{2}),? (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?"
    r"(?: ?([AP]M)\b)?(?!\d)",
    re.ASCII,
)
_TS_ASCTIME_RE = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r" {1,2}(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\b",
    re.ASCII,
)
#: Only the start of a line is searched: a stamp is a prefix, not a date in a path.
_TS_SEARCH_CHARS = 120


def _stamp(
    year: int, month: int, day: int, hh: int, mm: int, ss: int, frac: str | None, zone: str | None
) -> float | None:
    try:
        micro = int((frac or "0")[:6].ljust(6, "0"))
        when = datetime(year, month, day, hh, mm, ss, micro)
        if zone:
            if zone == "Z":
                tz = timezone.utc
            else:
                sign = -1 if zone[0] == "-" else 1
                digits = zone[1:].replace(":", "")
                tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
            when = when.replace(tzinfo=tz)
        return when.timestamp()  # naive: local time
    except (ValueError, OverflowError, OSError):
        return None


_FIRST_DIGIT = re.compile(r"\d")


def _printed_time(text: str) -> float | None:
    """Unix seconds of the full date-and-time stamp at the start of ``text``, if any.

    Megatron ``[2025-01-02 10:11:12]``, Python logging ``2025-03-12 11:10:21,511``,
    ISO ``2023-06-15T12:11:12Z``, torch-neuronx ``LOG Wed Dec 21 00:12:27 2022`` and
    ``MM/DD/YYYY HH:MM:SS`` (HF / nanotron / neuron-cc logging). The stamp must be the
    first number on the line (words and brackets may come before it: ``[titan] ``), so
    a date further on (a checkpoint path) is not taken. A time without a date (Rich's
    ``[20:31:51]``, absl's ``I0302 02:18:34``) gives None.
    """
    head = text[:_TS_SEARCH_CHARS]
    if ":" not in head:
        return None  # every form has its HH:MM:SS (most step lines have no stamp)
    digit = _FIRST_DIGIT.search(head)
    if digit is None:
        return None
    first = digit.start()
    if (m := _TS_ISO_RE.match(head, first)) is not None:
        y, mo, d, hh, mi, ss, frac, zone = m.groups()
        return _stamp(int(y), int(mo), int(d), int(hh), int(mi), int(ss), frac, zone)
    if (m := _TS_US_RE.match(head, first)) is not None:
        mo, d, y, hh, mi, ss, frac, ampm = m.groups()
        year = int(y) + (2000 if len(y) == 2 else 0)
        hour = int(hh)
        if ampm is not None and 1 <= hour <= 12:
            hour = hour % 12 + (12 if ampm == "PM" else 0)
        return _stamp(year, int(mo), int(d), hour, int(mi), int(ss), frac, None)
    if (m := _TS_ASCTIME_RE.search(head, max(0, first - 12))) is not None:
        mon, d, hh, mi, ss, y = m.groups()
        if m.start(2) == first:
            return _stamp(int(y), _MONTHS[mon], int(d), int(hh), int(mi), int(ss), None, None)
    return None


# --------------------------------------------------------------------------- compile events

_COMPILER_STATUS_RE = re.compile(r"Compiler status:?\s{0,8}([A-Za-z]{1,16})")
_ERROR_WORD_RE = re.compile(r"\bERROR\b")


def classify_compile(text: str) -> CompileKind | None:
    """Say which Neuron compile event ``text`` reports, if any.

    The literal checks come first so an ordinary line costs a few substring tests.
    A wrapped fragment that only holds the tail of a cache-hit message
    (``....neff. Exiting with a successfully compiled graph.``) is not an event.
    Of a neuron(x)-cc error block only its ``An Internal Compiler Error has occurred``
    line is an event, so one failure is one event, not one per traceback line.
    """
    if "ompiler" in text:
        m = _COMPILER_STATUS_RE.search(text)
        if m is not None:
            return "compiled" if m.group(1).upper() == "PASS" else "compile_failed"
        if "Call compiler with cmd" in text:
            return "compile"
        if "An Internal Compiler Error has occurred" in text:
            return "compile_failed"
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
    if "exit status" in text and "returned non-zero exit status" in text and "neuron" in text:
        # neuron_parallel_compile: CalledProcessError: Command '['neuronx-cc', ...]'
        return "compile_failed"
    if "neuronx-cc terminated abnormally" in text:
        return "compile_failed"
    if "recompiled" in text and ": the corresponding graph will be recompiled" in text:
        # optimum-neuron: ``.../model.neff not found in aws-neuron/optimum-neuron-cache: ...``
        return "cache_miss"
    return None


# --------------------------------------------------------------------------- step rules

# A rule takes the cleaned text and returns raw field values, or None when the line
# is not its kind. Every built-in rule starts with cheap substring tests.
_Fields = dict[str, object]
_Rule = Callable[[str], "_Fields | None"]

#: Named groups a user pattern may use. ``dt_ms`` is milliseconds and ``it_per_s``
#: iterations per second; both are turned into ``dt`` seconds.
KNOWN_GROUPS = frozenset(
    {
        "step",
        "samples",
        "samples_total",
        "loss",
        "throughput",
        "dt",
        "dt_ms",
        "it_per_s",
        "rank",
        "global_batch",
    }
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
_HF_OPEN_LOSS_RE = re.compile(rf"\{{\s{{0,4}}'loss':\s{{0,4}}'?(?P<loss>{_NUM})'?,", re.ASCII)


_HF_SENTINEL = "__neurotui_nonfinite__:"


def _hf_sentinel(m: re.Match[str]) -> str:
    return f"'{_HF_SENTINEL}{m.group(1)}{m.group(2)}'"


def _hf_number(value: object) -> float | None:
    """A dict value as a float: numbers, the non-finite sentinels, and numeric strings
    (newer ``transformers`` logs ``{'loss': '1.248', ...}``)."""
    if isinstance(value, str):
        if value.startswith(_HF_SENTINEL):
            return _HF_SENTINELS.get(value[len(_HF_SENTINEL) :])
        if len(value) > 40:
            return None
        return _to_float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def _literal(text: str) -> object:
    """``ast.literal_eval`` without its compile-time warnings: some inputs (``'\\d'``,
    ``1if 1else 2``) make Python print a SyntaxWarning/DeprecationWarning to stderr, and
    under ``-W error`` the warning would become an error that loses the step."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def _rule_hf_dict(text: str) -> _Fields | None:
    """Hugging Face Trainer: ``{'loss': nan, 'learning_rate': 4.8e-05, 'epoch': 0.12}``.

    The dict may sit inside other text (a Rich or ``logging`` prefix such as
    ``[20:31:51] {...}   train.py:42``, literal markup ``[bold]{...}[/bold]``): the span
    from the first ``{`` to the last ``}`` is read. ``literal_eval`` rejects bare
    ``nan``/``inf``, so they become sentinel strings first. Only dicts with a numeric
    ``'loss'`` key count: eval and summary dicts (``eval_loss``, ``train_loss``) are not
    training steps. A dict cut off by a line wrap gives its loss when that comes first and
    is whole (followed by a comma).
    """
    if "'loss'" not in text:
        return None
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        return None
    if end < start:
        # Wrapped onto the next line (a narrow terminal, a paste): the loss, when it comes
        # first and is followed by its comma, is whole; the rest of the dict is not there.
        m = _HF_OPEN_LOSS_RE.match(text, start)
        return None if m is None else {"loss": m.group("loss")}
    s = text[start : end + 1]
    if len(s) > _HF_MAX_CHARS or "'loss'" not in s:
        return None
    try:
        data = _literal(_HF_NONFINITE_RE.sub(_hf_sentinel, s))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    loss = _hf_number(data.get("loss"))
    if loss is None:
        return None
    fields: _Fields = {"loss": loss}
    step = data.get("step")
    if isinstance(step, (int, str)) and not isinstance(step, bool):
        fields["step"] = step
    return fields


# ---- progress bars (tqdm, and Lightning / NeMo / NxD Training / HF Trainer on top of it)

# ``desc:  45%|bar| 45/100 [00:02<00:02, 19.8it/s, loss=2.31]`` or, without a total,
# ``desc: 3it [00:32, 10.68s/it, ...]``. The bracket may be cut off at the end of a line.
# Notebooks and log services drop the bar glyphs and the pipes: ``desc:  50% 1/2 [...]``.
# Three patterns, each starting with a literal or a digit so that the search skips ahead
# quickly (one alternation that starts with a look-behind tries every position).
_BAR_COUNTER = r"(?P<n>\d{1,12})/(?P<total>\d{1,12}|\?)\s{0,4}\[(?P<inner>[^\[\]]{0,800})(?:\]|$)"
_BAR_PIPE_RE = re.compile(rf"\|\s{{0,8}}{_BAR_COUNTER}", re.ASCII)
_BAR_GLYPHLESS_RE = re.compile(rf"%\s{{1,9}}{_BAR_COUNTER}", re.ASCII)  # after a digit
_BAR_NO_TOTAL_RE = re.compile(  # after the start, a space, ``:`` or ``|``
    r"(?P<n>\d{1,12})[A-Za-z]{1,12} \[(?P<inner>(?:\d{1,4}:)?\d{1,2}:\d{2}[^\[\]]{0,800})(?:\]|$)",
    re.ASCII,
)
_BAR_NO_TOTAL_AFTER = frozenset(" \t:|")
_BAR_MAX_TRIES = 64


def _search_bar(text: str, pos: int = 0) -> re.Match[str] | None:
    """The first bar counter in ``text[pos:]``: ``| 45/100 [...]``, else ``50% 1/2 [...]``
    (drawn without glyphs), else ``3it [00:32, ...]`` (no total); the match has groups
    ``n``, ``inner`` and, but for the last form, ``total``. The forms are tried in that
    order, not together: a line does not mix them, and most bars are the first."""
    if "|" in text and (m := _BAR_PIPE_RE.search(text, pos)) is not None:
        return m
    if "%" in text:
        for i, m in enumerate(_BAR_GLYPHLESS_RE.finditer(text, pos)):
            if i >= _BAR_MAX_TRIES:
                break
            if m.start() > 0 and text[m.start() - 1].isdigit():
                return m
    if " [" in text:
        for i, m in enumerate(_BAR_NO_TOTAL_RE.finditer(text, pos)):
            if i >= _BAR_MAX_TRIES:
                break
            if m.start() == 0 or text[m.start() - 1] in _BAR_NO_TOTAL_AFTER:
                return m
    return None
_BAR_RATE_RE = re.compile(
    rf"\s{{0,8}}(?:(?P<v>{_NUM})|\?)\s?(?P<unit>[A-Za-z]{{1,12}})/(?P<den>[A-Za-z]{{1,12}})\s{{0,8}}",
    re.ASCII,
)
#: Units of a bar that counts training steps; anything else (B/s, MB/s, examples/s) is
#: a download, a dataset map or the like.
_BAR_STEP_UNITS = frozenset({"it", "its", "step", "steps", "batch", "batches", "iter", "iters"})
# Bars whose description says they are not training: validation, evaluation, tests,
# sanity checks, dataset maps and filters, downloads, loading, tokenising, generation.
_BAR_NOT_TRAIN_RE = re.compile(
    r"(?<![a-z])(?:val(?:id(?:ation|ating|ate)?)?|eval(?:uat(?:e|ing|ion))?"
    r"|predict(?:ing|ion)?|test(?:ing)?|sanity|map|filter|download(?:ing)?|load(?:ing)?"
    r"|tokeni[sz](?:e|ing|ation)|generat(?:e|ing|ion)|infer(?:ence|ring)?)(?![a-z])",
    re.IGNORECASE,
)
_BAR_GLYPHS = " |#:\u2588\u2589\u258a\u258b\u258c\u258d\u258e\u258f\u2590\t"
_BAR_PCT_RE = re.compile(r"\s{0,8}\d{1,3}%$")
_BAR_PCT_DIGITS_RE = re.compile(r"\s{0,8}\d{1,3}$")  # the match took the glyph-less bar's %
_BAR_KEY_RE = re.compile(r"[-+]?\d[\d.]{0,40}(?:[eE][-+]?\d{1,4})?")
# torchtune writes ``f"{epoch}|{global_step}|Loss: {loss}"`` as the bar description.
_TORCHTUNE_DESC_RE = re.compile(
    rf"(?<![\w|.])(?P<epoch>\d{{1,6}})\|(?P<step>\d{{1,15}})\|Loss:\s{{0,4}}(?P<loss>{_NUM}){_NUM_END}$",
    re.ASCII,
)
_BAR_LOSS_KEYS = ("loss", "reduced_train_loss", "train_loss")
#: An unlabelled bar this fast with nothing in its postfix is a download or a dataset
#: pass, not training steps (10 ms a step is quicker than any real training step here).
_BAR_MAX_UNLABELLED_IT_PER_S = 100.0
#: Descriptions of an outer bar over epochs (no epoch number in them, unlike Lightning's).
_BAR_EPOCH_COUNTER_DESCS = frozenset({"Epoch", "Epochs", "epoch", "epochs", "EPOCH"})
_BAR_POSTFIX_KEYS = {
    "global_step": "step",
    "consumed_samples": "samples_total",
    "throughput": "throughput",
    "samples/sec": "throughput",
    "samples_per_second": "throughput",
    "train_step_timing in s": "dt",
    "global_batch_size": "global_batch",
}


def _bar_description(prefix: str, with_total: bool, glyphless: bool = False) -> str:
    """The bar's description from the text before its counter (for a bar drawn without
    glyphs, ``Epoch 0:  50% 1/2 [``, the text before its percentage's ``%``)."""
    desc = prefix
    if glyphless:
        desc = _BAR_PCT_DIGITS_RE.sub("", prefix)
    elif with_total:
        cut = prefix.rfind("%|")
        if cut >= 0:
            desc = _BAR_PCT_RE.sub("", prefix[: cut + 1])
    return desc.rstrip(_BAR_GLYPHS).strip().rstrip(":").strip()


def _bar_key(desc: str) -> str:
    return " ".join(_BAR_KEY_RE.sub(" ", desc).split()).strip(" :|,.-")


def _rule_bar(text: str) -> _Fields | None:
    """One tqdm position of a training bar: Lightning, NeMo / NxD Training, HF Trainer.

    ``Epoch 0: 3%|▎ | 3/91 [16:05<7:52:06, 321.89s/it, loss=6.7, ..., global_step=1.000,
    consumed_samples=2048.0]``. The bar's own counter (``3/91``) goes to ``bar_n`` /
    ``bar_total`` (it restarts every epoch); ``step`` is only taken from a printed
    ``global_step``. ``dt`` comes from ``train_step_timing in s`` when printed, else from
    the bar's rate (``s/it``, or the inverse of ``it/s``). Bars of other work (validation,
    a dataset map, a download: see ``_BAR_NOT_TRAIN_RE``, or a rate in bytes or
    examples per second) are not steps, nor is a position that has counted nothing yet
    (``0/2``, even with the last epoch's loss still in its postfix), nor an unlabelled bar
    faster than ``_BAR_MAX_UNLABELLED_IT_PER_S`` with nothing in its postfix. A position cut
    off before its ``]`` loses its last postfix item: the value may be cut too.
    """
    m = _search_bar(text)
    if m is None:
        return None
    with_total = m.re is not _BAR_NO_TOTAL_RE
    n = int(m.group("n"))
    inner = m.group("inner")
    desc = _bar_description(text[: m.start()], with_total, m.re is _BAR_GLYPHLESS_RE)
    if _BAR_NOT_TRAIN_RE.search(desc) is not None:
        return None
    items = inner.split(",", 64)[1:]  # the first item is the elapsed/remaining time
    if items and not m.group(0).endswith("]"):
        items = items[:-1]  # ``loss=0.`` at a cut: the number may have gone on
    fields: _Fields = {"bar_n": n, "bar_key": _bar_key(desc)}
    total = m.group("total") if with_total else None
    if total is not None and total != "?":
        fields["bar_total"] = int(total)
    if items and (rate := _BAR_RATE_RE.fullmatch(items[0])) is not None:
        items = items[1:]
        unit, den = rate.group("unit"), rate.group("den")
        if unit == "s" and den in _BAR_STEP_UNITS:
            fields["dt"] = rate.group("v")
        elif den == "s" and unit in _BAR_STEP_UNITS:
            fields["it_per_s"] = rate.group("v")
        else:
            return None  # B/s, MB/s, examples/s, ...: not a training bar
    loss_rank = len(_BAR_LOSS_KEYS)
    for item in items[:48]:
        key, sep, value = item.partition("=")
        if not sep:
            continue
        key = key.strip()
        if key in _BAR_POSTFIX_KEYS:
            name = _BAR_POSTFIX_KEYS[key]
            if name == "dt" and _to_float(value) is not None:
                fields.pop("it_per_s", None)
                fields["dt"] = value  # NeMo's measured step time beats the bar's smoothed rate
            else:
                fields.setdefault(name, value)
        elif (
            key in _BAR_LOSS_KEYS
            and _BAR_LOSS_KEYS.index(key) < loss_rank
            and _to_float(value) is not None  # ``loss=`` with nothing after is no value
        ):
            fields["loss"], loss_rank = value, _BAR_LOSS_KEYS.index(key)
    if (tt := _TORCHTUNE_DESC_RE.search(desc)) is not None:
        fields.setdefault("step", tt.group("step"))
        fields.setdefault("loss", tt.group("loss"))
        fields["bar_key"] = ""
    if n == 0 and "step" not in fields:
        return None  # the bar has just been drawn; no step has finished yet
    if desc in _BAR_EPOCH_COUNTER_DESCS and "loss" not in fields and "step" not in fields:
        # ``for epoch in trange(n, desc="Epoch")`` around an inner batch bar: its positions
        # count epochs, not steps (Lightning's bar says which epoch: ``Epoch 3``).
        return None
    if (
        not fields["bar_key"]
        and "loss" not in fields
        and "step" not in fields
        and (rate := _to_float(fields.get("it_per_s"))) is not None  # type: ignore[arg-type]
        and rate >= _BAR_MAX_UNLABELLED_IT_PER_S
    ):
        return None  # a download or a dataset pass drawn without a description
    return fields


# ---- "key: value | key: value" lines: Megatron-LM, NeMo 2, nanotron

_PIPE_KV_RE = re.compile(
    r"(?P<key>[A-Za-z][A-Za-z0-9_ ()/.-]{0,60}?)\s{0,4}:?\s{1,24}"
    rf"(?P<val>{_NUMX})(?:\s{{0,24}}/\s{{0,24}}(?P<of>{_NUMX}))?\s{{0,8}}$",
    re.ASCII,
)
_PIPE_KEYS = {
    "iteration": "iteration",
    "global_step": "step",
    "consumed_samples": "samples_total",
    "global_batch_size": "global_batch",
    "elapsed_time_per_iteration_(ms)": "dt_ms",
    "elapsed_time_per_iteration_ms": "dt_ms",
    "train_step_timing_in_s": "dt",
    "samples_per_second": "throughput",
    "samples/sec": "throughput",
    "samples/s": "throughput",
}
# Loss keys, most specific first.
_PIPE_LOSS_KEYS = ("lm_loss", "reduced_train_loss", "loss", "train_loss", "training_loss_step")


def _rule_pipe_kv(text: str) -> _Fields | None:
    """``key: value | key: value`` iteration lines.

    Megatron-LM ``iteration 10/ 500 | consumed samples: 320 | elapsed time per iteration
    (ms): 1234.5 | ... | global batch size: 32 | lm loss: 1.06E+01 |`` (also the 2019 form
    without colons), NeMo 2 ``Training epoch 0, iteration 0/9 | ... | global_step: 0 |
    reduced_train_loss: 11.02``, nanotron ``iteration: 8 / 100 | ... |
    elapsed_time_per_iteration_ms: 11.5K | global_batch_size: 64 | lm_loss: 2.38``.
    ``global_step`` wins over ``iteration`` (NeMo's iteration restarts every epoch).
    A line whose first part names validation/evaluation is not a training step.
    """
    if "iteration" not in text or "|" not in text:
        return None
    parts = text.split("|", 64)
    if _PLAIN_NOT_TRAIN_RE.search(parts[0]) is not None:
        return None
    fields: _Fields = {}
    loss_rank = len(_PIPE_LOSS_KEYS)
    for part in parts[:64]:
        if len(part) > 240 or not any(c.isdigit() for c in part):
            continue
        m = _PIPE_KV_RE.search(part)
        if m is None:
            continue
        key = "_".join(m.group("key").lower().split())
        if key in _PIPE_LOSS_KEYS:
            if _PIPE_LOSS_KEYS.index(key) < loss_rank:
                fields["loss"], loss_rank = m.group("val"), _PIPE_LOSS_KEYS.index(key)
            continue
        name = _PIPE_KEYS.get(key)
        if name is not None:
            fields.setdefault(name, m.group("val"))
    iteration = fields.pop("iteration", None)
    if "step" not in fields and iteration is not None:
        fields["step"] = iteration
    if "step" not in fields or len(fields) < 2:
        return None
    return fields


# ---- epoch / batch counters: the PyTorch ImageNet and MNIST examples, torchvision's
# MetricLogger, timm, mmengine / mmcv (mmdetection, mmpretrain, ...), OpenPCDet

_EPOCH_BATCH_RE = re.compile(
    # ``Epoch: [0][ 400/80073]``, ``Epoch: [0]  [ 103/5005]``, ``Epoch(train) [1][10/90]``,
    # ``Epoch [1][2400/7517]``, timm ``Train: 0 [  50/1251 (  4%)]``, OpenPCDet
    # ``Train:    1/3 ( 33%) [  49/323 ( 15%)]`` and the MNIST example
    # ``Train Epoch: 1 [640/60000 (1%)]``; never ``Epoch(val)`` or ``Test: [ 0/30]``.
    r"\b(?P<word>Epoch(?:\(train\))?|Train(?P<mnist> Epoch)?):?\s{0,8}\[?\s{0,8}\d{1,9}"
    r"(?:\s{0,4}/\s{0,4}\d{1,9})?\]?\s{0,8}(?:\(\s{0,4}\d{1,3}%\)\s{0,8})?"
    r"\[\s{0,12}(?P<n>\d{1,12})\s{0,4}/\s{0,4}(?P<total>\d{1,12})(?:\s{0,4}\(\s{0,4}\d{1,3}%\))?\]",
    re.ASCII,
)
_EPOCH_BATCH_LOSS_RE = re.compile(rf"\b[Ll]oss:?\s{{1,8}}(?P<v>{_NUM}){_NUM_END}", re.ASCII)
# A step time, ``0.315`` or timm's ``0.320s``; not data/forward/backward time, not an eta.
_EPOCH_BATCH_TIME_RE = re.compile(
    rf"(?P<what>\b\w{{1,12}}[ _])?\b[Tt]ime:?\s{{1,8}}(?P<v>{_NUM})(?:s\b|{_NUM_END})", re.ASCII
)
_EPOCH_BATCH_TIME_NOT = frozenset({"data ", "data_", "forward ", "backward ", "last_", "eta "})
_EPOCH_BATCH_TPUT_RE = re.compile(
    rf"\b(?:img|imgs|images|samples?)/s(?:ec)?:?\s{{1,8}}(?P<v>{_NUM}){_NUM_END}"
    # timm: ``Time: 0.320s,  400.32/s`` (samples per second over the step)
    rf"|\b[Tt]ime:?\s{{1,8}}{_NUM}s,\s{{1,8}}(?P<v2>{_NUM})/s\b",
    re.ASCII,
)


def _step_time(tail: str) -> str | None:
    """The first ``time: x`` in ``tail`` that is the step's own time."""
    for i, m in enumerate(_EPOCH_BATCH_TIME_RE.finditer(tail)):
        if i >= 8:
            break
        what = (m.group("what") or "").lower()
        if what not in _EPOCH_BATCH_TIME_NOT:
            return m.group("v")
    return None


def _rule_epoch_batch(text: str) -> _Fields | None:
    """Per-epoch batch counters: ``Epoch: [0][ 400/80073]\\tTime  0.315 ( 0.372)\\t...
    Loss 6.98e+00 (7.08e+00)``, torchvision's ``Epoch: [0]  [ 103/5005]  eta: ...  img/s:
    13.6  loss: 6.85 (6.94) ... time: 2.54``, mmengine ``Epoch(train)  [83][  50/2693]  ...
    time: 1.11  data_time: 0.09 ... loss: 1917.4``, timm ``Train: 0 [  50/73 ( 70%)]  Loss:
    6.77 (6.83)  Time: 0.320s,  400.32/s``. The batch index restarts every epoch, so it is
    reported as a bar position (``bar_key`` ``"Epoch"``); the value before the running
    average in parentheses is this batch's. The MNIST example's ``[640/60000 (1%)]`` counts
    samples, not batches: it is reported as ``samples_total`` (a running total that starts
    again each epoch), not as a position. A line without a loss or a time is not a step."""
    if "Epoch" not in text and "Train" not in text:
        return None
    m = _EPOCH_BATCH_RE.search(text)
    if m is None:
        return None
    tail = text[m.end() :]
    fields: _Fields
    if m.group("mnist"):
        fields = {"samples_total": m.group("n")}
    else:
        fields = {"bar_n": m.group("n"), "bar_total": m.group("total"), "bar_key": "Epoch"}
    if (lo := _EPOCH_BATCH_LOSS_RE.search(tail)) is not None:
        fields["loss"] = lo.group("v")
    if (dt := _step_time(tail)) is not None:
        fields["dt"] = dt
    if (tp := _EPOCH_BATCH_TPUT_RE.search(tail)) is not None:
        fields["throughput"] = tp.group("v") or tp.group("v2")
    if "loss" not in fields and "dt" not in fields:
        return None
    return fields


# ``[1,  2000] loss: 2.183`` (PyTorch's CIFAR-10 tutorial and the many loops copied from it):
# ``[epoch, batch]`` at the start of the line, then the loss.
_EPOCH_COMMA_BATCH_RE = re.compile(
    r"^\s{0,8}\[\s{0,4}\d{1,9},\s{0,12}(?P<n>\d{1,12})\]:?\s{0,8}(?:[a-z]{1,12}[_ ])?"
    rf"loss\s{{0,4}}[:=]?\s{{0,4}}(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII | re.IGNORECASE,
)


def _rule_epoch_comma_batch(text: str) -> _Fields | None:
    """``[1,  2000] loss: 2.183`` / ``[1,   300]: loss: 0.719 , acc: 79.59``: a position in
    the epoch (``bar_key`` ``"Epoch"``) with its loss."""
    if not text.lstrip().startswith("["):
        return None
    m = _EPOCH_COMMA_BATCH_RE.match(text)
    if m is None:
        return None
    return {"bar_n": m.group("n"), "bar_key": "Epoch", "loss": m.group("loss")}


# ---- fairseq, char-rnn, CycleGAN / pix2pix, DeepSpeed

# fairseq ``| epoch 009:   1000 / 2737 loss=6.220, ..., bsz=108, num_updates=22897, ...`` and
# the 2018 form ``| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, ...``. The epoch's
# summary (``| epoch 009 | loss 6.233 | ...``) and validation lines have no counter.
_FAIRSEQ_RE = re.compile(
    r"\bepoch\s{1,4}\d{1,9}:?\s{1,24}(?P<n>\d{1,12})\s{0,4}/\s{0,4}(?P<total>\d{1,12})\s{1,8}"
    rf"loss=(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII,
)
_FAIRSEQ_KEYS_RE = re.compile(
    rf"\b(?P<key>num_updates|ups|bsz)=(?P<v>{_NUM}){_NUM_END}", re.ASCII
)


def _rule_fairseq(text: str) -> _Fields | None:
    """fairseq's progress lines. ``num_updates`` is the global step (else the epoch's
    counter is a bar position), ``ups`` updates per second gives ``dt`` and ``bsz`` the
    sentences of an update (``global_batch``)."""
    if "loss=" not in text or "epoch" not in text:
        return None
    m = _FAIRSEQ_RE.search(text)
    if m is None or _PLAIN_NOT_TRAIN_RE.search(text, 0, m.start()) is not None:
        return None
    fields: _Fields = {"loss": m.group("loss")}
    for i, kv in enumerate(_FAIRSEQ_KEYS_RE.finditer(text, m.end())):
        if i >= 8:
            break
        key = kv.group("key")
        name = {"num_updates": "step", "ups": "it_per_s", "bsz": "global_batch"}[key]
        fields.setdefault(name, kv.group("v"))
    if "step" not in fields:
        fields.update(bar_n=m.group("n"), bar_total=m.group("total"), bar_key="epoch")
    return fields


# char-rnn (Lua, and its TensorFlow and PyTorch ports): ``112/9500 (epoch 0.589),
# train_loss = 3.44701844, grad/param norm = 3.86e-01, time/batch = 0.1673s``.
_CHAR_RNN_RE = re.compile(
    r"^\s{0,8}(?P<step>\d{1,12})/\d{1,12}\s{0,4}\(epoch\s{0,4}[\d.]{1,16}\),\s{0,4}"
    rf"train_loss\s{{0,4}}=\s{{0,4}}(?P<loss>{_NUM}){_NUM_END}"
    rf"(?:.{{0,200}}?time/batch\s{{0,4}}=\s{{0,4}}(?P<dt>{_NUM})s?(?![\w.]))?",
    re.ASCII,
)


def _rule_char_rnn(text: str) -> _Fields | None:
    """``N/total (epoch e), train_loss = L, ..., time/batch = T``: N is the global iteration."""
    if "train_loss" not in text:
        return None
    m = _CHAR_RNN_RE.match(text)
    return None if m is None else m.groupdict()


# pytorch-CycleGAN-and-pix2pix's Visualizer (copied by many GAN repositories):
# ``(epoch: 355, iters: 100, time: 0.078, data: 3.094) G_GAN: 18.230 G_L1: 12.882 ...``.
# ``iters`` counts images within the epoch; ``time`` is the computation time per image.
_GAN_RE = re.compile(
    r"^\s{0,8}\(epoch:\s{0,4}\d{1,9},\s{0,4}iters:\s{0,4}(?P<n>\d{1,12}),\s{0,4}"
    rf"time:\s{{0,4}}{_NUM},\s{{0,4}}data:\s{{0,4}}{_NUM}\)"
    rf"\s{{1,8}}[A-Za-z][\w.]{{0,40}}:\s{{0,4}}{_NUM}{_NUM_END}",
    re.ASCII,
)


def _rule_gan_visualizer(text: str) -> _Fields | None:
    """CycleGAN / pix2pix loss lines: a position in the epoch (``bar_key`` ``"epoch"``). Its
    losses are several named terms (``G_GAN``, ``D_A``, ...), none of them *the* loss, so
    no loss is taken; nor is ``time``, which is per image, not per step."""
    if "iters:" not in text:
        return None
    m = _GAN_RE.match(text)
    if m is None:
        return None
    return {"bar_n": m.group("n"), "bar_key": "epoch"}


# DeepSpeed's engine reports every ``steps_per_print`` steps:
# ``[Rank 0] step=40, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]`` and its throughput timer
# ``epoch=0/micro_step=34/global_step=34, RunningAvgSamplesPerSec=7.86, CurrSamplesPerSec=8.0``
# (older: ``0/40, SamplesPerSec=83.48``).
_DS_STEP_RE = re.compile(r"\bstep=(?P<step>\d{1,15}), skipped=\d{1,15}, lr=", re.ASCII)
_DS_TIMER_RE = re.compile(
    r"(?:\bglobal_step=(?P<step>\d{1,15})|(?<![\w/])\d{1,9}/(?P<n>\d{1,15})), "
    rf"(?:RunningAvg)?SamplesPerSec=(?P<avg>{_NUM}){_NUM_END}"
    rf"(?:, CurrSamplesPerSec=(?P<cur>{_NUM}){_NUM_END})?",
    re.ASCII,
)


def _rule_deepspeed(text: str) -> _Fields | None:
    """DeepSpeed's step report (the step) and throughput timer (samples/s, the current
    step's rate when printed, else the running average)."""
    if "skipped=" in text:
        m = _DS_STEP_RE.search(text)
        return None if m is None else {"step": m.group("step")}
    if "SamplesPerSec=" not in text:
        return None
    t = _DS_TIMER_RE.search(text)
    if t is None:
        return None
    fields: _Fields = {"throughput": t.group("cur") or t.group("avg")}
    if t.group("step") is not None:
        fields["step"] = t.group("step")
    else:
        fields.update(bar_n=t.group("n"), bar_key="DeepSpeed")
    return fields


_DATA_INDEX_RE = re.compile(
    r"\bEpoch\s{0,4}\d{1,9},\s{0,4}Data index:\s{0,4}(?P<n>\d{1,12}),\s{0,4}Loss:\s{0,4}"
    rf"(?:tensor\()?(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII,
)


def _rule_data_index(text: str) -> _Fields | None:
    """torch-neuronx tutorials: ``Epoch 0, Data index: 3, Loss: 0.1943359375``."""
    if "Data index" not in text:
        return None
    m = _DATA_INDEX_RE.search(text)
    if m is None:
        return None
    return {"bar_n": m.group("n"), "bar_key": "Epoch", "loss": m.group("loss")}


_PLAIN_STEP_RE = re.compile(
    # ``iters: 100, epoch: 1 | loss: 0.34`` (Time-Series-Library and its many copies)
    r"\b(?:global[_ ]?)?(?:step|iters?|iteration)\b\s{0,4}[:=#]?\s{0,4}\[?\s{0,4}"
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
    # ``-- It/s: 1.69``: the rate as a key.
    re.compile(
        rf"\b(?P<unit>it)/s\s{{0,4}}[:=]\s{{0,4}}(?P<v>{_NUM}){_NUM_END}",
        re.ASCII | re.IGNORECASE,
    ),
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

    Each optional search runs only when the word it needs is in the line: several start
    with a look-behind, which the regex engine tries at every position (about 2.5 us each
    on a short line), and most step lines print none of them.
    """
    if "loss" not in text and "Loss" not in text and "LOSS" not in text:
        return None
    st = _PLAIN_STEP_RE.search(text)
    if st is None:
        return None
    lo = _PLAIN_LOSS_RE.search(text, st.end())
    if lo is None:
        return None
    lower = text.lower()
    if ("val" in lower or "test" in lower or "dev" in lower or "best" in lower) and \
            _PLAIN_NOT_TRAIN_RE.search(text) is not None:
        return None
    fields: _Fields = {"step": st.group("step"), "loss": lo.group("loss")}
    # The first of _PLAIN_DT_RES that finds a time, each tried only with the word it needs.
    d = None
    if "time" in lower or "dt" in lower or "elapsed" in lower or "duration" in lower:
        d = _PLAIN_DT_RES[0].search(text)
    if d is None and "s/it" in text:
        d = _PLAIN_DT_RES[1].search(text)
    if d is None and "it/s" in text:
        d = _PLAIN_DT_RES[2].search(text)
    if d is None and "it/s" in lower:
        d = _PLAIN_DT_RES[3].search(text)
    if d is not None:
        unit = d.group("unit").lower()
        key = {"ms": "dt_ms", "it": "it_per_s"}.get(unit, "dt")
        fields[key] = d.group("v")
    if "sample" in lower:
        for tp_re in _PLAIN_THROUGHPUT_RES:
            if (t := tp_re.search(text)) is not None:
                fields["throughput"] = t.group("v")
                break
    return fields


# ---- Keras-style bars, OpenNMT-py, OLMo, a bare step number at the start of the line

# Keras ``Model.fit`` (and the PyTorch loops that copy its bar): ``1719/1719
# [==============================] - 4s 2ms/step - loss: 1.0187 - accuracy: 0.68 - val_loss:
# 0.52``; mid-epoch ``13184/60000 [=====>......] - ETA: 3s - loss: 0.0952``; verbose=2 drops
# the bar: ``1079/1079 - 21s - loss: 0.2431 - 21s/epoch - 19ms/step``.
_KERAS_RE = re.compile(
    r"^\s{0,12}(?P<n>\d{1,12})/(?P<total>\d{1,12}|Unknown)\s{1,4}(?:\[[=>.]{1,200}\]\s{1,4})?- ",
    re.ASCII,
)
_KERAS_LOSS_RE = re.compile(rf" - loss: (?P<v>{_NUM}){_NUM_END}", re.ASCII)
_KERAS_DT_RE = re.compile(rf"\b(?P<v>{_NUM})(?P<unit>us|ms|s)/step\b", re.ASCII)
_KERAS_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _rule_keras(text: str) -> _Fields | None:
    """A Keras progress-bar position: the counter restarts every epoch (``bar_key``
    ``"Epoch"``), ``loss`` is the training loss (``val_loss`` is not), ``2ms/step`` the step
    time. A position with no loss (``0/1719``, a predict bar) is not a step."""
    if " - loss: " not in text:
        return None
    m = _KERAS_RE.match(text)
    if m is None or m.group("n") == "0":
        return None
    lo = _KERAS_LOSS_RE.search(text, m.end() - 3)
    if lo is None:
        return None
    fields: _Fields = {"bar_n": m.group("n"), "bar_key": "Epoch", "loss": lo.group("v")}
    if m.group("total") != "Unknown":
        fields["bar_total"] = m.group("total")
    if (d := _KERAS_DT_RE.search(text, m.end())) is not None:
        value = _to_float(d.group("v"))
        if value is not None:
            fields["dt"] = value * _KERAS_UNIT_S[d.group("unit")]
    return fields


# OpenNMT-py: ``[2019-03-21 18:31:43,773 INFO] Step 2250/200000; acc:  31.18; ppl: 57.53;
# xent: 4.05; lr: 0.00028; 5092/261 tok/s;   6641 sec``; before 2018 ``Epoch  1,
# 12850/37527; acc: ...; xent: 9.46; ...``. ``xent`` (cross-entropy) is its training loss;
# ``sec`` is the time since the start, not the step's.
_ONMT_RE = re.compile(
    r"(?:\bStep\s{1,4}(?P<step>\d{1,15})\s{0,4}/\s{0,12}\d{1,15}"
    r"|\bEpoch\s{1,4}\d{1,9},\s{1,8}(?P<n>\d{1,12})/\s{0,12}(?P<total>\d{1,12}));"
    rf"[^|]{{0,120}}?\bxent:\s{{0,8}}(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII,
)


def _rule_opennmt(text: str) -> _Fields | None:
    """OpenNMT-py's training report (its validation report has no step counter)."""
    if "xent:" not in text:
        return None
    m = _ONMT_RE.search(text)
    if m is None or _PLAIN_NOT_TRAIN_RE.search(text, 0, m.start()) is not None:
        return None
    if m.group("step") is not None:
        return {"step": m.group("step"), "loss": m.group("loss")}
    fields: _Fields = {"bar_n": m.group("n"), "bar_total": m.group("total"), "bar_key": "Epoch"}
    fields["loss"] = m.group("loss")
    return fields


# OLMo's trainer logs each step as a block: a header ``... olmo.train:908  INFO
# [step=2/739328,epoch=0]`` (the only line that names the step) and one metric a line under
# it. The header is the step's report; the loss is on a later line, so it is not taken.
_OLMO_RE = re.compile(r"\[step=(?P<step>\d{1,15})/(?:\d{1,15}|\?)(?:,epoch=\d{1,9})?\]\s{0,8}$")


def _rule_olmo(text: str) -> _Fields | None:
    if "[step=" not in text:
        return None
    m = _OLMO_RE.search(text)
    return None if m is None else {"step": m.group("step")}


# ``420 | loss 4.0625 | lr 9.000000e-04 | 7367.57ms``: a hand-written loop that prints the
# step number alone in the first cell, then its loss; a cell that is only a duration is the
# step time.
_LEADING_STEP_RE = re.compile(
    r"^\s{0,8}(?P<step>\d{1,15})\s{0,4}\|\s{0,4}(?:train[_ ])?loss\s{0,4}[:=]?\s{0,4}"
    rf"(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII | re.IGNORECASE,
)
_CELL_DURATION_RE = re.compile(
    rf"\|\s{{0,4}}(?:(?:step[_ ])?time:?\s{{0,4}})?(?P<v>{_NUM})\s?(?P<unit>ms|s)\s{{0,8}}(?:\||$)",
    re.ASCII,
)


def _rule_leading_step(text: str) -> _Fields | None:
    if "|" not in text or not text.lstrip()[:1].isdigit():
        return None
    m = _LEADING_STEP_RE.match(text)
    if m is None:
        return None
    fields: _Fields = {"step": m.group("step"), "loss": m.group("loss")}
    if (d := _CELL_DURATION_RE.search(text, m.end())) is not None:
        fields["dt_ms" if d.group("unit") == "ms" else "dt"] = d.group("v")
    return fields


# Order matters: specific formats before the loose "step ... loss" rule.
_DEFAULT_RULES: tuple[tuple[str, _Rule], ...] = (
    ("neurotui-runner", _rule_runner),
    ("torch-neuronx-bert", _rule_bert),
    ("hf-trainer-dict", _rule_hf_dict),
    ("progress-bar", _rule_bar),
    ("megatron-nemo-nanotron", _rule_pipe_kv),
    ("epoch-batch-counter", _rule_epoch_batch),
    ("epoch-comma-batch", _rule_epoch_comma_batch),
    ("epoch-data-index", _rule_data_index),
    ("fairseq", _rule_fairseq),
    ("char-rnn", _rule_char_rnn),
    ("cyclegan-pix2pix", _rule_gan_visualizer),
    ("deepspeed", _rule_deepspeed),
    ("keras", _rule_keras),
    ("opennmt-py", _rule_opennmt),
    ("olmo", _rule_olmo),
    ("leading-step-number", _rule_leading_step),
    ("plain-step-loss", _rule_plain),
)
_RULE_WORDS: dict[_Rule, tuple[str, ...]] = {
    # What each built-in rule's own first test needs in the line (one of these words): a
    # batch of lines holding none of a rule's words is not shown to that rule at all.
    _rule_runner: (_RUNNER_MARK,),
    _rule_bert: ("step_loss",),
    _rule_hf_dict: ("'loss'",),
    _rule_bar: ("|", "%", " ["),  # _search_bar's three forms
    _rule_pipe_kv: ("iteration",),
    _rule_epoch_batch: ("Epoch", "Train"),
    _rule_epoch_comma_batch: ("[",),
    _rule_data_index: ("Data index",),
    _rule_fairseq: ("loss=",),
    _rule_char_rnn: ("train_loss",),
    _rule_gan_visualizer: ("iters:",),
    _rule_deepspeed: ("skipped=", "SamplesPerSec="),
    _rule_keras: (" - loss: ",),
    _rule_opennmt: ("xent:",),
    _rule_olmo: ("[step=",),
    _rule_leading_step: ("|",),
    _rule_plain: ("loss", "Loss", "LOSS"),
}
_RULE_WORD_LIST = tuple(sorted({word for words in _RULE_WORDS.values() for word in words}))
_ALL_DEFAULT_RULES = tuple(rule for _, rule in _DEFAULT_RULES)


def _default_rules_for(batch: str) -> tuple[_Rule, ...]:
    """The built-in rules, in order, that could match a line of ``batch`` (a rule none of
    whose words the batch holds could not): a batch of plain ``step N loss X`` lines is shown
    to one rule, not seventeen (about 2 us a line)."""
    present = 0
    for bit, word in enumerate(_RULE_WORD_LIST):
        if word in batch:
            present |= 1 << bit
    return _rules_with_words(present)


@functools.lru_cache(maxsize=256)
def _rules_with_words(present: int) -> tuple[_Rule, ...]:
    return tuple(rule for rule in _ALL_DEFAULT_RULES if any(
        present >> _RULE_WORD_LIST.index(word) & 1 for word in _RULE_WORDS[rule]))


# Every built-in format needs one of these; an ordinary line costs these tests and no regex.
_PREFILTER = (
    "loss",
    "Loss",
    "LOSS",
    "it/s",
    "s/it",
    "%|",
    "it [",
    "iter",  # Megatron ``iteration``; CycleGAN / pix2pix ``iters:`` (no word "loss" there)
    _RUNNER_MARK,
    "SamplesPerSec=",  # DeepSpeed's throughput timer
    "step=",  # DeepSpeed's ``step=40, skipped=2``; OLMo's ``[step=2/739328,epoch=0]`` header
    "xent:",  # OpenNMT-py (its loss is the cross-entropy)
)


def _maybe_step(text: str) -> bool:
    """Whether ``text`` holds one of :data:`_PREFILTER` (the two are kept equal by a test).

    Written out as one boolean expression because ``any()`` over the tuple costs more in
    generator steps than the substring tests themselves (about 1.4 against 0.9 us for an
    ordinary 140-character line), and every line the job prints comes through here."""
    return (
        "loss" in text
        or "Loss" in text
        or "LOSS" in text
        or "it/s" in text
        or "s/it" in text
        or "%|" in text
        or "it [" in text
        or "iter" in text
        or _RUNNER_MARK in text
        or "SamplesPerSec=" in text
        or "step=" in text
        or "xent:" in text
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


def _number_field(value: object) -> float | None:
    """A field as a float: a printed string read as _to_float reads it; None when absent."""
    if isinstance(value, str):
        if len(value) <= 64:
            try:  # the usual case, plain digits (_to_float's first try, without its call)
                return float(value)
            except ValueError:
                pass
        return _to_float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _count_field(value: object) -> int | None:
    """A field as an int: a printed string read as _to_int reads it; None when absent."""
    if isinstance(value, str):
        if len(value) <= 32:
            try:  # the usual case, plain digits (int() strips spaces as _to_int does)
                return int(value)
            except ValueError:
                pass
        return _to_int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _build_step(
    fields: _Fields, prefix_rank: int | None, text: str, values: bool = False
) -> StepLine | StepValues | None:
    """Typed record from raw field strings; None when no value could be read. A StepValues
    when `values` (the supervisor's), else a StepLine.

    Runs for every step line the supervisor reads (hundreds a second at 32 ranks): one pass
    over the fields the rule gave (two or three, most lines), module-level helpers, no
    closures, and no lookup of the many absent ones."""
    step = samples = loss = throughput = samples_total = global_batch = None
    dt = dt_ms = it_per_s = bar_n = bar_total = rank = bar_key = None
    for key, v in fields.items():
        if v is None:
            continue
        # The usual keys first; a rule's key strings are the same objects as these.
        if key == "step":
            step = _count_field(v)
        elif key == "loss":
            loss = _number_field(v)
        elif key == "samples":
            samples = _number_field(v)
        elif key == "dt":
            dt = _number_field(v)
        elif key == "rank":
            rank = _count_field(v)
        elif key == "throughput":
            throughput = _number_field(v)
        elif key == "dt_ms":
            dt_ms = _number_field(v)
        elif key == "it_per_s":
            it_per_s = _number_field(v)
        elif key == "samples_total":
            samples_total = _number_field(v)
        elif key == "global_batch":
            global_batch = _number_field(v)
        elif key == "bar_n":
            bar_n = _count_field(v)
        elif key == "bar_total":
            bar_total = _count_field(v)
        elif key == "bar_key" and isinstance(v, str):
            bar_key = v
    # A bad field drops the field, not the step: a count, rate or time below 0 is no figure
    # (a session's reader refuses a step whose samples or time is negative, and samples are
    # worked out of a rate). The loss may be below 0; the step and rank are the step's own.
    if samples is not None and samples < 0:
        samples = None
    if throughput is not None and throughput < 0:
        throughput = None
    if dt is not None and dt < 0:
        dt = None
    if dt_ms is not None and dt_ms < 0:
        dt_ms = None
    if samples_total is not None and samples_total < 0:
        samples_total = None
    if global_batch is not None and global_batch < 0:
        global_batch = None
    if dt is None:
        dt = dt_ms / 1000.0 if dt_ms is not None else _inverse(it_per_s)
    if (
        step is None
        and samples is None
        and loss is None
        and throughput is None
        and dt is None
        and samples_total is None
        and bar_n is None
    ):
        return None
    if rank is None:
        rank = prefix_rank
    if values:
        return StepValues(step, samples, loss, throughput, dt, rank, samples_total,
                          global_batch, bar_n, bar_total, bar_key)
    return StepLine(step, samples, loss, throughput, dt, rank, samples_total, global_batch,
                    _printed_time(text), bar_n, bar_total, bar_key)


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
        fairseq, char-rnn, CycleGAN / pix2pix, DeepSpeed's step and throughput reports, and
        plain ``step N ... loss X`` (torch-xla, detectron2, nanoGPT, ...)."""
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
        same lines (tests/unit/test_step_figures.py); None where one line is not such a
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
StepFigures = tuple["int | None", "int | None", "float | None", "float | None"]
"""A step line's step, rank, samples and loss, where it prints no other figure: our runner's
line, a plain `step N loss X` (StepLineParser.parse_figures_many)."""
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
    shape. tests/unit/test_steplog_public_logs.py holds the records equal to those of the
    rules on every capture, and on copies of them with other digits."""

    __slots__ = ("_parser", "_recipes")

    def __init__(self, parser: StepLineParser) -> None:
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


def _may_compile(text: str) -> bool:
    """Whether ``text`` holds a word that every compile line :func:`classify_compile` finds
    holds (a test keeps the two in step): False means no line of it is one."""
    return (
        "ompiler" in text
        or "neff" in text
        or "_WRAPPER||" in text
        or "RunNeuronCCImpl" in text
        or "exit status" in text
        or "terminated abnormally" in text
        or "recompiled" in text
    )


def _last_segment(text: str) -> str:
    for segment in reversed(text.split("\r")):
        if segment.strip():
            return segment
    return ""


# --------------------------------------------------------------------------- explain


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
