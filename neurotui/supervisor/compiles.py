"""The supervisor's watch on compiles: torch.compile's, from the ranks' probe files, and
neuronx-cc's, from the log lines the follower reads. It raises two alerts, recorded in the
session (alerting.AlertRecorder) whoever watches: `recompile` (a graph compiled after its
rank's first step, with the rank, the step it followed, the frame, the guard that failed, its
seconds and their dollars at the run's price) and `compile-mismatch` (the ranks compiled
different numbers of graphs). One definition of a compile for both: metrics/compiles.py.

Light: it looks only at probe lines that hold a compile record, and works the figures out
again only when a compile record came. metrics/compiles.py is imported only then: importing
the metrics package brings numpy, which the supervisor of a job without compiles never needs
(0.33 M instructions a second more in bench_poll_work's `placed` case, 13.89 M against 13.56 M,
from the garbage collector walking the larger heap).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurotui import fmt
from neurotui.session.writer import read_meta
from neurotui.supervisor.alerting import Raised

if TYPE_CHECKING:
    from neurotui.metrics import compiles

RECOMPILE = "recompile"
MISMATCH = "compile-mismatch"
_SHOWN = 5  # recompiles named in the alert's evidence (the latest)
LONG_COMPILE_S = 10.0
"""A recompile is told once it ended (its seconds and reason known), or once it has run this
long (a neuronx-cc recompile can take an hour: said while it runs)."""


class CompileWatch:
    def __init__(self, session_dir: Path,
                 last_step: Callable[[int], int | None] = lambda rank: None) -> None:
        """`last_step`: a rank's latest step number so far (the stall watch's tracks: asked
        only when a compile comes, so nothing is kept per step here)."""
        self.session_dir = session_dir
        self.last_step = last_step
        self.records: list[dict[str, Any]] = []
        self.first: dict[tuple[int, int], float] = {}  # (rank, attempt) -> first step's t
        self.step_at: dict[tuple[int | None, float], int] = {}  # a compile -> the step before
        self._judged: tuple[int, int] = (-1, -1)
        self._running = False  # a recompile was still running when last judged
        self.compiling: dict[int | None, int] = {}
        """Rank -> its torch.compile compiles begun and not ended (the stall watch waits)."""
        self._alerts: tuple[Raised | None, Raised | None] = (None, None)

    def first_step(self, rank: int, attempt: int, t: float) -> None:
        """A rank's first step of an attempt from one of its sources (the earliest is kept)."""
        key = (rank, attempt)
        if t < self.first.get(key, t + 1):
            self.first[key] = t

    def take_probe_lines(self, block: bytes, steps: list[Any]) -> list[dict[str, Any]]:
        """The compile records among a probe file's whole lines (one os.write each);
        `steps`: the step records of the same lines, before `steps()` is told them (a
        compile follows the last of its rank's steps before it). Returns those records."""
        taken: list[dict[str, Any]] = []
        if b'"compile"' not in block:
            return taken
        for raw in block.split(b"\n"):
            if b'"kind": "compile"' not in raw and b'"kind":"compile"' not in raw:
                continue
            with contextlib.suppress(ValueError):
                record = json.loads(raw)
                if isinstance(record, dict) and record.get("kind") == "compile":
                    self._add(record, steps)
                    taken.append(record)
        return taken

    def log_compile(self, rank: int | None, what: str, t: float) -> None:
        """A neuronx-cc line the log follower classified (sources/steplog.py)."""
        self._add({"t": t, "kind": "compile", "rank": rank, "what": what}, [])

    def _add(self, record: dict[str, Any], steps: list[Any]) -> None:
        if record.get("src") == "torch.compile":  # (metrics.compiles.TORCH_COMPILE)
            rank, what = record.get("rank"), record.get("what")
            running = self.compiling.get(rank, 0) + (what == "compile") - (what != "compile")
            self.compiling[rank] = max(0, running)
        if record.get("what") == "compile":
            rank, t = record.get("rank"), float(record["t"])
            before = [s.step for s in steps if s.rank == rank and s.t <= t]
            seen = self.last_step(rank) if isinstance(rank, int) else None
            if before:
                self.step_at[(rank, t)] = before[-1]
            elif seen is not None:
                self.step_at[(rank, t)] = seen
        self.records.append(record)

    def alerts(self, now: float) -> tuple[Raised | None, Raised | None]:
        """(recompile, compile-mismatch) as they stand."""
        state = (len(self.records), len(self.first))
        if state == self._judged and not self._running:
            return self._alerts
        self._judged = state
        if not self.records:
            return self._alerts
        from neurotui.metrics import compiles  # (only now: see the module's docstring)

        spans = compiles.compile_spans(sorted(self.records, key=lambda r: float(r["t"])))
        figures = compiles.compile_figures(spans, self.first)
        self._running = any(s.end is None for s in figures.recompile_spans)
        self._alerts = (self._recompile(figures, now), self._mismatch(figures))
        return self._alerts

    def _recompile(self, figures: compiles.CompileFigures, now: float) -> Raised | None:
        late = tuple(s for s in figures.recompile_spans
                     if s.end is not None or now - s.start >= LONG_COMPILE_S)
        if not late:
            return None
        usd_per_hour = self._price()
        evidence = [self._told(span, usd_per_hour, now) for span in late[-_SHOWN:]]
        if len(late) > _SHOWN:
            evidence.insert(0, f"{len(late)} graphs compiled after the first step; the last "
                               f"{_SHOWN}:")
        # Of the ended ones only: a title that changed each second would be written again
        # each second (AlertRecorder writes a start again when its title changes).
        total = sum(s.seconds() or 0.0 for s in late)
        running = sum(1 for s in late if s.end is None)
        cost = total * usd_per_hour / 3600 if usd_per_hour else None
        title = (f"recompilation: {len(late)} graph{'s' if len(late) != 1 else ''} compiled "
                 f"after the first step ({fmt.seconds(total)}"
                 + (f", {fmt.usd(cost)}" if cost is not None else "")
                 + (f"; {running} still compiling" if running else "") + ")")
        return Raised("warning", title, tuple(evidence),
                      "keep shapes static (pad the last batch, drop_last=True), mark a size "
                      "dynamic (torch._dynamo.mark_dynamic), avoid Python branches on tensor "
                      "values; on Neuron, check the compile cache")

    def _told(self, span: compiles.CompileSpan, usd_per_hour: float | None, now: float) -> str:
        step = self.step_at.get((span.rank, span.start))
        took = span.seconds()  # (None: still running)
        bits = [f"rank {span.rank if span.rank is not None else '?'}"
                + (f" after step {step}" if step is not None else ""),
                f"{span.source} " + (f"recompiled {span.frame}" if span.frame else "compiled"),
                f"still compiling after {fmt.seconds(now - span.start)}" if took is None
                else f"{fmt.seconds(took)}"
                + (f" = {fmt.usd(took * usd_per_hour / 3600)} at {fmt.usd(usd_per_hour)}/h"
                   if usd_per_hour else "")]
        if span.reason:
            bits.append(f"because {span.reason.strip().splitlines()[0][:200]}")
        return "; ".join(bits)

    def _mismatch(self, figures: compiles.CompileFigures) -> Raised | None:
        from neurotui.metrics import compiles

        if not figures.mismatch:
            return None
        return Raised("warning", "ranks compiled different numbers of graphs",
                      (compiles.mismatch_text(figures.graphs_by_rank),),
                      "a rank took a path the others did not (a different shape or branch): "
                      "its extra compiles hold every rank up at the next collective")

    def _price(self) -> float | None:
        with contextlib.suppress(Exception):
            price = (read_meta(self.session_dir).get("price") or {}).get("usd_per_hour")
            if isinstance(price, (int, float)) and price > 0:
                return float(price)
        return None
