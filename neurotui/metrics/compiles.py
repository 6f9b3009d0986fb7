"""What compiling cost: one definition of "a compile" for both sources.

A session's `compile` records come from two places (session/FORMAT.md):

- torch.compile, recorded by the automatic probe inside each rank (`src: "torch.compile"`):
  a `compile` record as TorchDynamo starts a compile and a `compiled` record as it ends, both
  with the compile's `id` ("frame/compile number") and `trigger` (`dynamo`: a graph traced and
  compiled; `backward`: that graph's backward, compiled at its first use);
- neuronx-cc's log lines on the XLA path (no `src`): `compile` or `cache_miss` opens a compile
  of that rank, `compiled` or `compile_failed` ends it, `cache_hit` is none.

A compile is one span from its start to its end (None while it runs, or where its end was
never recorded: one begun before its rank's first step is taken to end there). A *graph* is a
span that is not a backward. Compile seconds are a rank's spans added up; the run's figure is
the slowest rank's (the ranks compile side by side, and the job waits for the last). A
recompile is a graph compiled after its rank's first step of that attempt. Ranks that
compiled different numbers of graphs are a mismatch: one of them took a path (a shape, a
branch) the others did not.

Pure functions; `now` is a parameter (a live run counts a running compile up to it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

TORCH_COMPILE = "torch.compile"
NEURONX_CC = "neuronx-cc"
_STARTS = ("compile", "cache_miss")
_ENDS = ("compiled", "compile_failed")


@dataclass(frozen=True)
class CompileSpan:
    """One compile of one rank (None: a log line of no known rank)."""

    rank: int | None
    attempt: int | None
    start: float
    end: float | None
    source: str  # TORCH_COMPILE or NEURONX_CC
    backward: bool = False
    recompile_flag: bool = False  # torch.compile: a frame's compile number > 0
    reason: str | None = None  # the guard that failed (torch.compile recompiles)
    function: str | None = None
    file: str | None = None
    line: int | None = None
    compile_id: str | None = None
    failed: bool = False
    graph_breaks: int | None = None

    def seconds(self, now: float | None = None) -> float | None:
        """How long it took (a running one: up to `now`; None where neither is known)."""
        end = self.end if self.end is not None else now
        return None if end is None else max(0.0, end - self.start)

    @property
    def frame(self) -> str | None:
        """'forward (model.py:12)', or None where the record names no frame."""
        if not self.function:
            return None
        where = f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else "?"
        return f"{self.function} ({where})"


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) else None


def compile_spans(events: Iterable[Mapping[str, Any]]) -> list[CompileSpan]:
    """The compiles that `compile` records (in time order) tell, by start time."""
    spans: list[CompileSpan] = []
    open_torch: dict[tuple[Any, ...], int] = {}  # (rank, attempt, id, trigger) -> index
    open_cc: dict[int | None, int] = {}  # rank -> index of its running neuronx-cc compile
    for record in events:
        t = record.get("t")
        if not isinstance(t, (int, float)) or not math.isfinite(t):
            continue
        rank, what = _int(record.get("rank")), record.get("what")
        if record.get("src") == TORCH_COMPILE:
            trigger = str(record.get("trigger") or "dynamo")
            attempt = _int(record.get("attempt"))
            key = (rank, attempt, record.get("id"), trigger)
            if what == "compile":
                open_torch[key] = len(spans)
                spans.append(CompileSpan(
                    rank, attempt, float(t), None, TORCH_COMPILE, backward=trigger == "backward",
                    recompile_flag=bool(record.get("recompile")),
                    reason=record.get("reason") if isinstance(record.get("reason"), str) else None,
                    function=record.get("function") if isinstance(record.get("function"), str)
                    else None,
                    file=record.get("file") if isinstance(record.get("file"), str) else None,
                    line=_int(record.get("line")), compile_id=str(record.get("id"))))
            elif what in _ENDS and key in open_torch:
                i = open_torch.pop(key)
                spans[i] = _ended(spans[i], float(t), what == "compile_failed",
                                  _int(record.get("graph_breaks")))
            continue
        if what in _STARTS:
            if rank not in open_cc:  # a cache miss then its compile line: one compile
                open_cc[rank] = len(spans)
                spans.append(CompileSpan(rank, None, float(t), None, NEURONX_CC))
        elif what in _ENDS and rank in open_cc:
            i = open_cc.pop(rank)
            spans[i] = _ended(spans[i], float(t), what == "compile_failed", None)
    return sorted(spans, key=lambda s: s.start)


def _ended(span: CompileSpan, t: float, failed: bool, breaks: int | None) -> CompileSpan:
    return CompileSpan(span.rank, span.attempt, span.start, t, span.source, span.backward,
                       span.recompile_flag, span.reason, span.function, span.file, span.line,
                       span.compile_id, failed, breaks)


def first_steps(rows: Iterable[tuple[float, int, int]]) -> dict[tuple[int, int], float]:
    """(rank, attempt) -> the time of its first step, of (t, rank, attempt) rows."""
    first: dict[tuple[int, int], float] = {}
    for t, rank, attempt in rows:
        key = (int(rank), int(attempt))
        if key not in first or t < first[key]:
            first[key] = float(t)
    return first


def first_step_of(span: CompileSpan, first: Mapping[tuple[int, int], float]) -> float | None:
    """The first step of the span's rank and attempt (any attempt where the record says none;
    any rank where it names none)."""
    if span.rank is not None and span.attempt is not None:
        return first.get((span.rank, span.attempt))
    times = [t for (rank, _), t in first.items() if span.rank is None or rank == span.rank]
    return min(times) if times else None


@dataclass(frozen=True)
class CompileFigures:
    compile_s: float | None
    """Seconds compiling: the slowest rank's spans added up (None: no compile recorded)."""
    compiles: int
    """Graphs compiled (backward compiles not counted), all ranks."""
    recompiles: int | None
    """Graphs compiled after their rank's first step: the most any rank had (None: no step)."""
    recompile_spans: tuple[CompileSpan, ...]
    graphs_by_rank: dict[int, int] = field(default_factory=dict)
    mismatch: bool = False
    """Ranks (of the latest attempt, none of them compiling) compiled different numbers."""
    before_first_step_s: float | None = None
    """Of the slowest rank, seconds compiling before its first step."""
    graph_breaks: int | None = None
    sources: tuple[str, ...] = ()

    def usd(self, usd_per_hour: float | None) -> float | None:
        """What the compile time cost at the run's price."""
        if self.compile_s is None or not usd_per_hour:
            return None
        return self.compile_s * float(usd_per_hour) / 3600.0


def compile_figures(spans: Iterable[CompileSpan], first: Mapping[tuple[int, int], float],
                    now: float | None = None) -> CompileFigures:
    spans = [s for s in spans if now is None or s.start <= now]
    by_rank_s: dict[int | None, float] = {}
    before_s: dict[int | None, float] = {}
    late_by_rank: dict[int | None, int] = {}
    graphs: dict[int, int] = {}
    latest_attempt = max((s.attempt for s in spans if s.attempt is not None), default=None)
    late: list[CompileSpan] = []
    compiling: set[int] = set()
    breaks: int | None = None
    for span in spans:
        end = span.end if span.end is not None and (now is None or span.end <= now) else None
        stepped = first_step_of(span, first)
        if end is None and stepped is not None and span.start < stepped and \
                (now is None or stepped <= now):
            end = stepped  # its end not recorded (a log without the compiler's status line)
        took = (end if end is not None else (now if now is not None else span.start)) - span.start
        by_rank_s[span.rank] = by_rank_s.get(span.rank, 0.0) + max(0.0, took)
        if stepped is None or span.start < stepped:
            before_s[span.rank] = before_s.get(span.rank, 0.0) + max(0.0, took)
        if span.graph_breaks is not None:
            breaks = max(breaks or 0, span.graph_breaks)
        if span.backward:
            continue
        if span.rank is not None and span.attempt == latest_attempt:
            graphs[span.rank] = graphs.get(span.rank, 0) + 1
            if end is None:
                compiling.add(span.rank)
        if stepped is not None and span.start > stepped:
            late.append(span)
            late_by_rank[span.rank] = late_by_rank.get(span.rank, 0) + 1
    any_step = bool(first) and any(t <= now for t in first.values()) if now is not None \
        else bool(first)
    return CompileFigures(
        compile_s=max(by_rank_s.values()) if by_rank_s else None,
        compiles=sum(1 for s in spans if not s.backward),
        recompiles=max(late_by_rank.values(), default=0) if any_step else None,
        recompile_spans=tuple(late),
        graphs_by_rank=graphs,
        mismatch=not compiling and len(set(graphs.values())) > 1,
        before_first_step_s=max(before_s.values()) if before_s else None,
        graph_breaks=breaks,
        sources=tuple(sorted({s.source for s in spans})))


def compiling_now(spans: Iterable[CompileSpan], now: float) -> CompileSpan | None:
    """The compile running at `now` that began first (None: none)."""
    running = [s for s in spans if s.start <= now and (s.end is None or s.end > now)]
    return min(running, key=lambda s: s.start) if running else None


def mismatch_text(graphs_by_rank: Mapping[int, int]) -> str:
    """'rank 0: 2 graphs, rank 1: 3 graphs'."""
    return ", ".join(f"rank {rank}: {n} graph{'s' if n != 1 else ''}"
                     for rank, n in sorted(graphs_by_rank.items()))
