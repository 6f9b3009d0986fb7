"""The records a step log's lines become: a rule's raw fields (:data:`_Fields`), a step
(:class:`StepLine`, the supervisor's lighter :class:`StepValues`, the four figures of
:data:`StepFigures`) and a compile event (:class:`CompileLine`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

_Fields = dict[str, object]
"""What a rule (rules.py, bars.py) reads from a line: raw field values by name, made typed
by fields.py."""

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


StepFigures = tuple["int | None", "int | None", "float | None", "float | None"]
"""A step line's step, rank, samples and loss, where it prints no other figure: our runner's
line, a plain `step N loss X` (StepLineParser.parse_figures_many)."""
