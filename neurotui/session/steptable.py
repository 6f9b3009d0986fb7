"""The step table of a session: the per-rank step rows (and phase timings) a reader takes in,
as numpy columns (columns.py).

A rank's rows come from its best source (stepsources.PRECEDENCE): rows of worse sources taken
before a better one appeared go at the next flush, and a log line's loss is put on the
automatic probe's row of its step (stepsources.put_log_losses). Rows wait in typed arrays
until asked for (`steps()`, `take_steps()`), then are merged in time order. What reads the
files, checks each line and counts the problems is reader.py; this holds the rows it took.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from array import array
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui.session import bulk
from neurotui.session.columns import Columns, distinct_ints
from neurotui.session.stepsources import (
    AUTO,
    LOG,
    PLACED_LOSS_COLUMNS,
    PRECEDENCE,
    SOURCE_CODE,
    STEP_SOURCES,
    place_losses,
    purged,
    put_log_losses,
    put_placed_losses,
)

if TYPE_CHECKING:
    import pandas as pd

STEP_COLUMNS = ("t", "rank", "step", "samples", "loss", "dt", "src", "attempt")


class _StepColumns:
    """Steps not yet in the table, as typed arrays: 8 bytes a value, not a Python object."""

    # Column -> (array type code, dtype of the table's column).
    _TYPES = {"t": ("d", "float64"), "rank": ("q", "int64"), "step": ("q", "int64"),
              "samples": ("d", "float64"), "loss": ("d", "float64"), "dt": ("d", "float64"),
              "src": ("b", "int8"), "attempt": ("q", "int64")}

    def __init__(self) -> None:
        (self.t, self.rank, self.step, self.samples, self.loss, self.dt, self.src,
         self.attempt) = (array(code) for code, _ in self._TYPES.values())

    def __len__(self) -> int:
        return len(self.t)

    def unsorted(self) -> Columns:
        """The rows as added, as views of the arrays: let go of them before adding more
        (an array exporting its buffer cannot grow)."""
        return Columns({name: np.frombuffer(getattr(self, name), dtype=dtype)
                        for name, (_, dtype) in self._TYPES.items()}, len(self))

    def columns(self, keep: np.ndarray | None = None) -> Columns:
        """The rows (those `keep` says, a mask) in time order (stable), taking over the
        arrays' memory; leaves this empty. Rows already in order are not copied, others one
        column at a time: a first read of a long run holds millions of rows."""
        t = np.frombuffer(self.t, dtype="float64")
        order = None
        if keep is not None and not keep.all():
            order = np.flatnonzero(keep)
            if len(order) > 1 and not bool((t[order[1:]] >= t[order[:-1]]).all()):
                order = order[np.argsort(t[order], kind="stable")]
        elif len(t) > 1 and not bool((t[1:] >= t[:-1]).all()):
            order = np.argsort(t, kind="stable")
        del t
        columns: dict[str, np.ndarray] = {}
        spare: array[Any] | None = None  # the last column's unsorted values, done with
        for name, (code, dtype) in self._TYPES.items():
            held = getattr(self, name)
            values = np.frombuffer(held, dtype=dtype)
            # The table keeps these arrays (or their sorted copy): start afresh.
            setattr(self, name, array(code))
            if order is None:
                columns[name] = values
                continue
            # Sorted into the memory the previous column's unsorted values leave: new memory
            # costs a page fault every 4 KiB (with numpy's huge pages, a compaction): 0.3 s
            # of a cold open of 2.8 M rows, against 0.09 s of copying.
            out = None
            if spare is not None and spare.itemsize * len(spare) == len(order) * values.itemsize:
                out = np.frombuffer(spare, dtype=dtype)
            # take, not values[order]: half the time for a column of millions.
            columns[name] = np.take(values, order, out=out)
            del values, out
            spare = held
        return Columns(columns, len(order) if order is not None else None)


class _PhaseColumns:
    """Per-step phase timings not yet in the table: a typed array per phase name (NaN where
    a step did not report it), not a dict per step (half a KB each: 0.5 GB a million steps)."""

    def __init__(self) -> None:
        self.t, self.rank, self.values = self._empty()

    @staticmethod
    def _empty() -> tuple[array[float], array[int], dict[str, array[float]]]:
        return array("d"), array("q"), {}

    def __len__(self) -> int:
        return len(self.t)

    def append(self, t: float, rank: int, phases: dict[str, Any]) -> None:
        n = len(self.t)
        for name, value in phases.items():
            if name in ("t", "rank"):
                continue  # the step's own columns
            column = self.values.get(name)
            if column is None:
                column = self.values[name] = array("d", [math.nan]) * n
            column.append(_seconds(value))
        self.t.append(t)
        self.rank.append(rank)
        for column in self.values.values():
            if len(column) == n:
                column.append(math.nan)

    def extend(self, t: np.ndarray, rank: np.ndarray, phases: list[dict[str, float]]) -> None:
        """`append` for many steps at once whose phase timings are all floats (bulk)."""
        n_before, n = len(self.t), len(phases)
        for name in dict.fromkeys(name for p in phases for name in p):
            if name in ("t", "rank"):
                continue
            values = np.fromiter((p.get(name, math.nan) for p in phases), float, n)
            column = self.values.get(name)
            if column is None:
                column = self.values[name] = array("d", [math.nan]) * n_before
            column.frombytes(values.tobytes())
        self.t.frombytes(np.asarray(t, dtype="float64").tobytes())
        self.rank.frombytes(np.asarray(rank, dtype="int64").tobytes())
        for column in self.values.values():
            if len(column) < len(self.t):  # a phase none of these steps reported
                column.extend(array("d", [math.nan]) * (len(self.t) - len(column)))

    def columns(self) -> Columns:
        """Columns t, rank and the phases in the order first seen; leaves this empty."""
        columns = {"t": np.frombuffer(self.t, dtype="float64"),
                   "rank": np.frombuffer(self.rank, dtype="int64"),
                   **{name: np.frombuffer(column, dtype="float64")
                      for name, column in self.values.items()}}
        self.t, self.rank, self.values = self._empty()  # the table keeps the old arrays
        return Columns(columns)


@dataclass(frozen=True)
class TakenSteps:
    """What `SessionReader.take_steps` hands over: rows as in `steps()` and `phases()`, as
    columns (`src` as codes into STEP_SOURCES)."""

    steps: Columns
    """The new step rows, in time order (the rows of earlier calls may be later than some)."""
    phases: Columns
    late_losses: tuple[tuple[float, int, float], ...] = ()
    """(t, rank, loss) of log lines read after the automatic probe's step they go with was
    handed out (the supervisor places such a line a poll or two after its step): that row
    is gone from this reader, so the loss comes on its own (the dashboard's last loss)."""
    more: tuple[TakenSteps, ...] = ()
    """Further batches, each as these, to be taken in after this one: of other ranks (a job's
    other nodes), or of one reader's later rows (the rows read after a cache that was behind,
    and those of the cache they overlap). Each is taken in on its own, without joining
    millions of rows into one table first."""

    def batches(self) -> tuple[TakenSteps, ...]:
        return (self, *self.more)

    def joined(self) -> TakenSteps:
        """One reader's batches as one (their rows copied into one table, in time order)."""
        if not self.more:
            return self
        batches = self.batches()
        return TakenSteps(_joined([b.steps for b in batches]),
                          _joined([b.phases for b in batches]))

    @property
    def rows(self) -> int:
        return sum(len(batch.steps) for batch in self.batches())


class StepTable:
    """The steps a SessionReader took, kept whole or handed out (`take_steps`)."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self._new = _StepColumns()
        self._steps = _StepColumns().columns()
        self._phases: Columns | None = None
        self._frames: dict[str, tuple[Columns, pd.DataFrame]] = {}
        """steps()/phases() as DataFrames, kept while their columns stay the same."""
        self._new_phases = _PhaseColumns()
        self._rank_sources: dict[int, set[int]] = {}
        """Per rank, the sources whose steps were taken (the best of them is kept)."""
        self._purge: dict[int, int] = {}
        """Rank -> its new best source: rows of worse sources go at the next flush."""
        self.log_losses: list[tuple[float, int, float]] = []
        """(t, rank, loss) of log lines of ranks the automatic probe times: put on its rows."""
        self._late_losses: list[tuple[float, int, float]] = []
        """Of those, the ones whose rows were handed out already (TakenSteps.late_losses)."""
        self._placed: list[Columns] = []
        """Losses of log lines the supervisor placed after an automatic probe step (their
        records name it: PLACED_LOSS_COLUMNS), as read in bulk: put on that step's row at the
        next flush, never rows of their own."""
        self._placed_lines: list[tuple[int, int, int, float, float]] = []
        """The same, read line by line (a row of PLACED_LOSS_COLUMNS each)."""
        self._placed_waiting = _no_placed_losses()
        """Of those, the ones whose row was not there at the last flush: looked for once more
        (the probe file may be read after the events), then given up (late, if handed out)."""
        self.samples_per_step = _positive((meta.get("config") or {}).get("samples_per_step"))
        self._job_world_size = _job_world_size(meta)
        """A node of a job of many nodes: the job's ranks, when its launch says (a node's
        share of --samples-per-step, the whole job's batch, is its ranks' share of these)."""
        self.samples_from: set[str] = set()
        """How the steps' samples were known: `batch` (reported with the step), `line`
        (printed in a log line), `throughput` (printed samples/s x step time),
        `samples_per_step` (the user's --samples-per-step)."""
        self.streaming = False
        """True once take_steps() was called: steps are handed out, not kept."""
        self._handed: dict[int, set[int]] = {}
        """Per rank, the sources of rows already handed out by take_steps()."""
        self._voided = False
        """Rows already handed out were dropped since: take_steps() says start over."""

    def restore(self, steps: Columns, phases: Columns) -> Columns:
        """A cache's rows as the table (an appended cache's in time order: late lines);
        returns the steps as kept."""
        self._steps = _in_time_order(steps)
        self._phases = _phases_in_time_order(phases) if phases.columns else None
        return self._steps

    def go_on_from(self, rank_sources: dict[int, list[int]], samples_from: list[str]) -> None:
        """Where a cache's read ended: the step sources seen per rank, how samples were known."""
        self._rank_sources = {rank: set(codes) for rank, codes in rank_sources.items()}
        self.samples_from = set(samples_from)

    def handed_out(self, rank_sources: dict[int, list[int]]) -> None:
        """As a follower that handed out rows of these sources per rank (a cache's)."""
        self._handed = {rank: set(codes) for rank, codes in rank_sources.items()}
        self.streaming = True

    def rank_sources(self) -> dict[int, list[int]]:
        """Per rank, the `src` codes of the steps taken."""
        return {rank: sorted(codes) for rank, codes in self._rank_sources.items()}

    def take_decoded(self, steps: bulk.DecodedSteps) -> int:
        """add_step for a bulk of decoded step lines, column by column."""
        if not len(steps.t):
            return 0
        if isinstance(steps.src, bulk.Same):  # a probe file's: one source
            src = np.full(len(steps.t), SOURCE_CODE[steps.src.value], dtype=np.int8)
        else:
            src = np.array(list(map(SOURCE_CODE.__getitem__, steps.src)), dtype=np.int8)
        rank = steps.rank
        keep = np.ones(len(rank), dtype=bool)
        placed_losses = 0
        placed_rows = (steps.after_step >= 0) & (src == LOG)
        if placed_rows.any():  # the losses of placed log lines, never rows
            keep &= ~placed_rows
            at = np.flatnonzero(placed_rows & np.isfinite(steps.loss))
            self._placed.append(Columns({
                "rank": rank[at], "attempt": steps.attempt[at],
                "after_step": steps.after_step[at], "loss": steps.loss[at], "t": steps.t[at]}))
            placed_losses = len(at)
        considered = keep.copy()  # (rows whose rank is seen, as line by line)
        seen_before = set(self._rank_sources) if self.samples_per_step is not None else set()
        # Which (rank, source) pairs are kept, asked once per pair in the order first met:
        # the rows of a worse source met first go at the next flush (as line by line).
        pair = rank * len(STEP_SOURCES) + src
        pairs, first = np.unique(pair[keep], return_index=True)
        for p in pairs[np.argsort(first)].tolist():
            r, s = divmod(p, len(STEP_SOURCES))
            if not self._keep_source(r, s):
                keep &= pair != p
        losses = len(self.log_losses)
        if not keep.all():
            dropped = ~keep & (src == LOG) & np.isfinite(steps.loss)
            # Thousands of log rows a read (a probe-timed job's lines): each rank's best
            # source asked once, not once a row.
            timed = [r for r in np.unique(rank[dropped]).tolist()
                     if self._best_source(r) == AUTO]
            placed = np.flatnonzero(dropped & np.isin(rank, timed))
            self.log_losses.extend(zip(steps.t[placed].tolist(), rank[placed].tolist(),
                                        steps.loss[placed].tolist(), strict=True))
        losses = len(self.log_losses) - losses + placed_losses  # taken in: counted as added
        every = bool(keep.all())
        kept = np.flatnonzero(keep)
        samples = steps.samples
        if self.samples_per_step is not None:
            samples = self._shared_batch(samples, rank, keep, considered, seen_before)
        new = self._new
        for name, values, dtype in (("t", steps.t, "float64"), ("rank", rank, "int64"),
                                    ("step", steps.step, "int64"),
                                    ("samples", samples, "float64"),
                                    ("loss", steps.loss, "float64"),
                                    ("dt", steps.dt, "float64"), ("src", src, "int8"),
                                    ("attempt", steps.attempt, "int64")):
            column = values if every else values[kept]
            getattr(new, name).frombytes(
                memoryview(np.ascontiguousarray(column, dtype=dtype)).cast("B"))
        known = keep & ~np.isnan(steps.samples)
        if isinstance(steps.samples_from, bulk.Same):
            told = {steps.samples_from.value} if known.any() else set()
        else:
            told = set(steps.samples_from if known.all() else
                       itertools.compress(steps.samples_from, known))
        self.samples_from.update(str(x or "batch") for x in told)
        phases = steps.phases
        with_phases = [] if isinstance(phases, bulk.Same) or not any(phases) else \
            [i for i in kept.tolist() if phases[i]]
        if with_phases:
            self._new_phases.extend(steps.t[with_phases], rank[with_phases],
                                    [phases[i] for i in with_phases])
        return len(kept) + losses

    def _shared_batch(self, samples: np.ndarray, rank: np.ndarray, keep: np.ndarray,
                      considered: np.ndarray, seen_before: set[int]) -> np.ndarray:
        """`samples`, with the kept rows that report none given the user's --samples-per-step
        shared by the job's ranks: its world size where known, else the ranks seen up to that
        row (before this piece, and in it so far), as add_step gives them line by line."""
        missing = keep & np.isnan(samples)
        if not missing.any():
            return samples
        assert self.samples_per_step is not None
        if self._job_world_size:
            ranks_seen = np.full(len(samples), float(self._job_world_size))
        else:
            order = np.flatnonzero(considered)
            ranks, first = np.unique(rank[order], return_index=True)
            met = np.zeros(len(order), dtype=np.int64)
            met[first[~np.isin(ranks, list(seen_before))]] = 1
            ranks_seen = np.full(len(samples), np.nan)
            ranks_seen[order] = len(seen_before) + np.cumsum(met)
        shared = samples.copy()
        shared[missing] = self.samples_per_step / ranks_seen[missing]
        self.samples_from.add(SAMPLES_PER_STEP)
        return shared

    def add_step(self, r: dict[str, Any], t: float, rank: int, step: int,
                 values: tuple[float, float, float], attempt: int) -> int:
        """One step line's record `r`, its numbers read and checked by the reader: (samples,
        loss, dt) as `values`. Returns the records added (0: a worse source's row)."""
        src = r.get("src")
        src = SOURCE_CODE[src] if isinstance(src, str) else LOG  # {} is no key
        after_step = r.get("after_step")
        if src == LOG and after_step.__class__ is int and 0 <= after_step < bulk.MAX_STEP:
            if not math.isfinite(values[1]):
                return 0
            self._placed_lines.append((rank, attempt, after_step, values[1], t))
            return 1  # a loss taken in (put on its step's row at the next flush)
        if not self._keep_source(rank, src):
            if src == LOG and math.isfinite(values[1]) and self._best_source(rank) == AUTO:
                self.log_losses.append((t, rank, values[1]))
                return 1  # a loss taken in (put on the probe's row at the next flush)
            return 0
        samples = values[0]
        if math.isnan(samples):
            if self.samples_per_step is not None:
                # The user's global batch, shared by the job's ranks (one node: those that
                # report steps so far).
                samples = self.samples_per_step / (self._job_world_size
                                                    or len(self._rank_sources))
                self.samples_from.add(SAMPLES_PER_STEP)
        else:
            self.samples_from.add(str(r.get("samples_from") or "batch"))
        new = self._new
        new.t.append(t)
        new.rank.append(rank)
        new.step.append(step)
        new.samples.append(samples)
        new.loss.append(values[1])
        new.dt.append(values[2])
        new.src.append(src)
        new.attempt.append(attempt)
        phases = r.get("phases")
        if isinstance(phases, dict) and phases:
            self._new_phases.append(t, rank, phases)
        return 1

    def _keep_source(self, rank: int, src: int) -> bool:
        """Whether a `src` step row of `rank` is kept: a rank's steps come from its best source
        (PRECEDENCE); rows of worse sources taken before the better one appeared go."""
        best = self._best_source(rank)
        if best is not None and PRECEDENCE[best] < PRECEDENCE[src]:
            return False
        seen = self._rank_sources.setdefault(rank, set())
        if src in seen:
            return True
        if seen:  # a better source than every one so far: theirs go
            self._purge[rank] = src
            self._voided |= bool(self._handed.get(rank, set()) - {src})
        seen.add(src)
        return True

    def _best_source(self, rank: int) -> int | None:
        seen = self._rank_sources.get(rank)
        return min(seen, key=PRECEDENCE.__getitem__) if seen else None

    # -- the table ----------------------------------------------------------------------------
    def steps(self) -> pd.DataFrame:
        """One row per rank per step, in time order, from each rank's best source (the probe,
        then the automatic probe, then log lines). Treat it as read-only: it is shared between
        calls."""
        self._refuse_if_streaming("steps")
        return self._frame_of("steps", self.flush_steps())

    def phases(self) -> pd.DataFrame:
        """Per-step phase timings (data, forward, ...) where the script reported them."""
        self._refuse_if_streaming("phases")
        return self._frame_of("phases", self.flush_phases())

    def step_columns(self) -> Columns:
        """steps() as numpy columns (`src` as codes into STEP_SOURCES): no pandas needed."""
        self._refuse_if_streaming("step_columns")
        return self.flush_steps()

    def phase_columns(self) -> Columns:
        """phases() as numpy columns."""
        self._refuse_if_streaming("phase_columns")
        return self.flush_phases()

    def _frame_of(self, what: str, columns: Columns) -> pd.DataFrame:
        kept = self._frames.get(what)
        if kept is None or kept[0] is not columns:
            kept = self._frames[what] = (columns, columns.to_frame({"src": STEP_SOURCES}))
        return kept[1]

    def take_steps(self) -> TakenSteps | None:
        """The steps (and phase rows) taken in since the last call: all there are at the first.

        For a follower that keeps its own running figures (the dashboard): from the first call
        on, this reader hands its steps out instead of keeping them, so `steps()` and
        `phases()` refuse. None when rows already handed out have been dropped since (a rank's
        log or automatic rows, once a better source reported): the follower must start over
        with a new reader.
        """
        self.streaming = True
        if self._voided:
            return None
        # In pieces: the cached rows and the rows read after them are not joined (a copy of
        # the 2.8 M rows an attach restores: 160 MB, 0.07-0.27 s).
        parts, phases = self._flush_step_parts(), self.flush_phases()
        self._steps = _StepColumns().columns()
        self._phases = None
        late, self._late_losses = tuple(self._late_losses), []
        for steps in parts:
            # One int64 per (rank, source): np.unique(axis=1) of the pairs took 2 s for the
            # 3 M rows an attach restores, this 0.05 s.
            pairs = distinct_ints(steps["rank"].astype(np.int64) * len(STEP_SOURCES)
                                  + steps["src"].astype(np.int64))
            for pair in pairs.tolist():
                rank, src = divmod(pair, len(STEP_SOURCES))
                self._handed.setdefault(rank, set()).add(src)
        taken = _in_batches(parts, phases)
        return replace(taken, late_losses=late) if late else taken

    def _refuse_if_streaming(self, what: str) -> None:
        if self.streaming:
            raise RuntimeError(f"{what}(): this reader hands its steps out (take_steps) and "
                               "keeps none; read the session with a reader of its own")

    def flush_steps(self) -> Columns:
        """The step table, with the rows waiting in typed arrays merged in."""
        self._steps = _joined(self._flush_step_parts())
        return self._steps

    def _flush_step_parts(self) -> list[Columns]:
        """The step table with the rows waiting in typed arrays merged in, as pieces one
        after another in time (_merge_in_time_order); never none."""
        losses, self.log_losses = self.log_losses, []
        keep_new: np.ndarray | None = None
        moved: list[Columns] = []  # rows that go whose losses stay, on the automatic rows
        if self._purge:  # once per rank: a better source appeared after rows of worse ones
            # Before the new rows are sorted: a cold read takes all of a rank's log rows
            # (events.jsonl comes first), then its probe file's, which outrank them.
            purge, self._purge = self._purge, {}
            if len(self._steps):
                keep, lost = purged(self._steps, purge)
                if not keep.all():  # (a purge of new rows only leaves the table as it is)
                    self._steps = self._steps.rows(keep)
                moved.append(lost)
            if len(self._new):
                keep_new, lost = purged(self._new.unsorted(), purge)
                moved.append(lost)
            # A loss of a log line goes onto an automatic row only, and a rank timed by the
            # script's own probe keeps none of those.
            losses = [loss for loss in losses if self._best_source(loss[1]) == AUTO]
        parts = [self._steps]
        chunk = self._new.columns(keep_new) if len(self._new) else None
        if losses and chunk is not None:
            chunk, losses = put_log_losses(chunk, losses)
        if losses:  # their rows were read before (a line placed a poll after its step)
            if self.streaming:
                self._late_losses += losses  # handed out: only the loss can go on
            elif len(self._steps):
                self._steps = put_log_losses(self._steps, losses)[0]
                parts = [self._steps]
        if self._placed or self._placed_lines or len(self._placed_waiting):
            placed = self._pending_placed_losses()
            tried_before = len(self._placed_waiting)
            missed = np.arange(len(placed))
            if chunk is not None:
                chunk, missed = put_placed_losses(chunk, placed)
            if len(missed) and not self.streaming and len(self._steps):
                self._steps, still = put_placed_losses(self._steps, placed.rows(missed))
                missed = missed[still]
                parts = [self._steps]
            # Not found a second time: given up (its row handed out, if streaming: only the
            # loss can go on); found first time: looked for at the next flush.
            self._placed_waiting = placed.rows(missed[missed >= tried_before])
            given_up = placed.rows(missed[missed < tried_before])
            if self.streaming and len(given_up):
                self._late_losses += zip(given_up["t"].tolist(), given_up["rank"].tolist(),
                                         given_up["loss"].tolist(), strict=True)
        if chunk is not None:
            parts = _merge_in_time_order(self._steps, chunk)
        if moved:
            table = _joined(parts)
            lost = Columns.concat(moved)
            if len(lost):  # each rank's in the order they had in the table
                table = place_losses(table, lost["t"], lost["rank"], lost["loss"],
                                     in_time_order=True)[0]
            parts = [table]
        return parts

    def _pending_placed_losses(self) -> Columns:
        """The placed losses waiting from the last flush, then those taken since, as one
        table (PLACED_LOSS_COLUMNS); none wait after."""
        parts = [self._placed_waiting, *self._placed]
        if self._placed_lines:
            lines = np.array(self._placed_lines, dtype=np.float64).reshape(-1, 5)
            parts.append(Columns({name: lines[:, i] for i, name
                                  in enumerate(PLACED_LOSS_COLUMNS)}))
        self._placed, self._placed_lines = [], []
        return Columns.concat(parts)

    def flush_phases(self) -> Columns:
        if len(self._new_phases):
            chunk = self._new_phases.columns()
            self._phases = _phases_in_time_order(chunk if self._phases is None else
                                                 Columns.concat([self._phases, chunk]))
        return self._phases if self._phases is not None else Columns()


SAMPLES_PER_STEP = "samples_per_step"


def _job_world_size(meta: dict[str, Any]) -> int | None:
    """The ranks of the job a node's session is part of: --nnodes x --nproc-per-node, where
    both are plain numbers (an elastic "1:4" says no fixed count); None: one node."""
    job = meta.get("job")
    if not isinstance(job, dict) or not job.get("id"):
        return None
    try:
        size = int(str(job.get("nnodes"))) * int(str(job.get("nproc_per_node")))
    except ValueError:
        return None
    return size if size > 0 else None


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _merge_in_time_order(table: Columns, chunk: Columns) -> list[Columns]:
    """Both in time order: the rows of a stable sort of the two one after the other, in
    pieces that follow each other in time (not joined: the caller joins them, or hands them
    out as they are). Only the rows of `table` from the chunk's first time on are sorted
    again (late lines: a slow log); the rows before it are the first piece, as they lie, and
    every row of a later piece is at or after that time."""
    if not len(table):
        return [chunk]
    if not len(chunk):
        return [table]
    start = int(np.searchsorted(table["t"], chunk["t"][0], side="left"))
    if start == len(table):
        return [table, chunk]
    tail = Columns.concat([table.rows(slice(start, None)), chunk])
    tail = tail.rows(np.argsort(tail["t"], kind="stable"))
    return [table.rows(slice(None, start)), tail] if start else [tail]


def _in_batches(parts: list[Columns], phases: Columns) -> TakenSteps:
    """Step pieces that follow each other in time as batches, each with the phase rows of
    its times (a phase row is joined to its step by rank and time as each batch is taken
    in)."""
    if len(parts) == 1:
        return TakenSteps(parts[0], phases)
    t = phases["t"] if len(phases) else np.empty(0)
    cuts = [0, *(int(np.searchsorted(t, part["t"][0], side="left")) for part in parts[1:]),
            len(t)]
    batches = [TakenSteps(part, phases.rows(slice(cuts[k], cuts[k + 1])) if len(t) else phases)
               for k, part in enumerate(parts)]
    return replace(batches[0], more=tuple(batches[1:]))


def _joined(parts: list[Columns]) -> Columns:
    """Tables one after the other; one with rows (or the first, when none has any: its
    columns stay named) as it is, not copied."""
    full = [part for part in parts if len(part)]
    return parts[0] if not full else full[0] if len(full) == 1 else Columns.concat(full)


def _in_time_order(table: Columns) -> Columns:
    """`table` in time order, as a stable sort by "t" puts it; a table in order is handed back
    as it is. Only the rows the sort moves are gathered, the rest copied as they lie: a cache
    the keeper appended to (every 8 MiB of a day-long run) is in order but where an append
    overlaps the rows before it by seconds."""
    t = table["t"]
    if len(t) < 2 or bool((t[1:] >= t[:-1]).all()):
        return table
    order = np.argsort(t, kind="stable")
    moved = np.flatnonzero(order != np.arange(len(order)))
    source = order[moved]
    columns = {}
    for name, values in table.items():
        column = values.copy()
        column[moved] = values[source]
        columns[name] = column
    return Columns(columns, len(table))


def _phases_in_time_order(phases: Columns) -> Columns:
    """Phase rows in time order (a stable sort), t and rank first, then the phases in the
    order they first have a value in it: the same whatever order the rows were read in (all
    files at once, poll after poll, or a cache appended to)."""
    if not len(phases):
        return phases
    phases = _in_time_order(phases)
    names = [name for name in phases.columns if name not in ("t", "rank")]
    first = {}
    for name in names:
        known = ~np.isnan(phases[name])
        at = int(known.argmax())
        first[name] = at if known[at] else len(known)
    order = ["t", "rank", *sorted(names, key=first.__getitem__)]
    if order == phases.columns:
        return phases
    return Columns({name: phases[name] for name in order}, len(phases))


def _seconds(value: Any) -> float:
    """A phase timing as a float; NaN (missing) for anything not a number."""
    if isinstance(value, (int, float)):
        with contextlib.suppress(OverflowError):
            return float(value)
    return math.nan


def _no_placed_losses() -> Columns:
    return Columns({name: np.zeros(0) for name in PLACED_LOSS_COLUMNS})
