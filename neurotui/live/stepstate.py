"""The run's steps, taken in incrementally and kept in bounded numpy state.

The dashboard must follow a 32-rank run at 10 steps/s per rank for days within a few percent
of one core. Re-running the batch figures over the whole step table every second cannot do
that, so this module keeps, per rank, the last `recent` steps (numpy arrays) plus running
totals, a bucketed whole-run history (history.py) and the steady-state tracker. Every figure
is computed by the incremental form metrics defines beside its batch form (metrics/__init__);
where a figure is limited to the recent steps, its label says so.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui import metrics
from neurotui.live.history import RunHistory
from neurotui.metrics.breakdown import BreakdownTracker
from neurotui.metrics.common import stacked_by_length
from neurotui.metrics.compiles import TORCH_COMPILE, compile_spans
from neurotui.metrics.ranks import last_compiles
from neurotui.session.columns import Columns, distinct_ints
from neurotui.session.stepprecedence import STEP_SOURCES

if TYPE_CHECKING:
    import pandas as pd

RECENT = 256
"""Steps kept per rank (25 s at 10 steps/s, all of a slow run's recent past)."""
_FIELDS = ("t", "step", "step_time", "samples", "samples_covered", "past")


@dataclass
class RankRecent:
    """One rank's latest attempt: its last steps, and what the next step is measured from."""

    attempt: int
    cols: dict[str, np.ndarray] = field(default_factory=dict)
    _median: tuple[float, int] | None = field(default=None, repr=False)
    _median_known: bool = field(default=False, repr=False)
    """The median step time worked out since the last rows came (a job of thousands of
    ranks asks every frame; a rank gains rows every few seconds at most)."""

    def __len__(self) -> int:
        return len(self.cols["t"]) if self.cols else 0

    def extend(self, new: Mapping[str, np.ndarray], keep: int) -> None:
        if not self.cols:
            self.cols = {k: np.asarray(new[k])[-keep:].copy() for k in _FIELDS}
        else:
            self.cols = {k: np.concatenate([self.cols[k], new[k]])[-keep:] for k in _FIELDS}
        self._median_known = False

    @property
    def last_t(self) -> float:
        return float(self.cols["t"][-1])

    @property
    def last_step(self) -> int:
        return int(self.cols["step"][-1])

    def median_step_time(self) -> tuple[float, int] | None:
        if not self._median_known:
            self.median_known(metrics.rank_median(self.cols["step_time"],
                                                  self.cols["past"].astype(bool)))
        return self._median

    @property
    def median_due(self) -> bool:
        """Rows came since its median step time was worked out."""
        return not self._median_known

    def median_known(self, median: tuple[float, int] | None) -> None:
        """Its median step time, worked out (by StepState.rank_medians, for every rank)."""
        self._median, self._median_known = median, True


SLICED_PASSES_MAX = 4096
"""At most this many passes over a rank (ranks x chunks) for a big batch taken in time-ordered
slices (StepState.add): 32 ranks x 29 chunks for an attach to 3 M steps of a node; a pass
costs about what gathering 10 k rows into rank order does."""


class StepState:
    def __init__(self, started_at: float | None, recent: int = RECENT,
                 warmup_steps: int = metrics.DEFAULT_WARMUP_STEPS) -> None:
        self.started_at = started_at
        self.recent = recent
        self.warmup_steps = warmup_steps
        self.history: RunHistory | None = (
            RunHistory(started_at) if started_at is not None else None)
        self.clock = metrics.StepClock(warmup_steps)
        self.tracker = metrics.SteadyTracker(warmup_steps)
        self.breakdown = BreakdownTracker(started_at)
        """The step breakdown (metrics/breakdown.py): phase rows joined to these steps."""
        self.total_samples = 0.0
        self.rows = 0
        self.late_rows = 0
        """Rows handed to `add` that were not after their rank's last row (left out)."""
        self.ranks: dict[int, RankRecent] = {}
        self.latest_attempt = -1
        self.last_t = -math.inf
        self.last_loss: float | None = None
        self._last_loss_t = -math.inf
        self._rates: dict[int, float | None] = {}
        self._rates_key: tuple[float, float, int] | None = None
        self.sources: set[str] = set()
        """The `src` of the rows taken (probe, auto, log): where the figures come from."""

    # -- taking rows in ------------------------------------------------------------------
    def add(self, new: Columns | pd.DataFrame, chunk: int = 100_000, *,
            phases: Columns | pd.DataFrame | None = None,
            late_losses: Sequence[tuple[float, int, float]] = ()) -> None:
        """Take in rows handed over only once each (SessionReader.take_steps), in time order;
        `phases`: the phase rows handed over with them (TakenSteps.phases).

        The reader merges several files by time, so rows of one rank may come later than rows
        already taken of other ranks: new rows are found per rank, as those after the rank's
        last row taken, not by position. A row not after its own rank's last row (a clock that
        went back) cannot be placed any more: it is left out and counted in `late_rows`.
        `late_losses`: (t, rank, loss) of losses whose rows were taken before
        (TakenSteps.late_losses): the newest may be the last loss.
        """
        for t_loss, _, value in late_losses:
            if t_loss >= self._last_loss_t:
                self.last_loss, self._last_loss_t = value, t_loss
        if not len(new):
            return
        new = Columns.of(new)
        fresh = self._new_rows(new) if self.clock.carry else new
        self.late_rows += len(new) - len(fresh)
        if not len(fresh):
            return
        loss = fresh.floats("loss")
        known_loss = np.flatnonzero(np.isfinite(loss))
        # The batch is in time order: its last loss is its newest (a job's nodes come in
        # batches of their own: the newest of all of them is kept).
        if len(known_loss) and (t_loss := float(fresh["t"][known_loss[-1]])) >= \
                self._last_loss_t:
            self.last_loss, self._last_loss_t = float(loss[known_loss[-1]]), t_loss
        if self.history is None:
            self.history = RunHistory(float(np.nanmin(fresh.floats("t"))))
        self.breakdown.stage(phases)
        if len(fresh) <= chunk:
            self._ingest(fresh)
        else:
            self._ingest_in_chunks(fresh, chunk)
        self.breakdown.stage(None)  # unclaimed phase rows (of rows left out) go
        self.rows += len(fresh)

    def _ingest_in_chunks(self, fresh: Columns, chunk: int) -> None:
        """A big batch (an attach). Each chunk's work is per rank: time-ordered chunks
        (slices: no copy) pass every rank in every chunk, which a node's few ranks can
        afford; a job of thousands could not (120 k passes for 2,048 ranks and 6 M rows), and
        goes in chunks of whole ranks, though gathering them copies every row (a quarter of
        a second of an attach to 3 M steps of 32 ranks)."""
        key = _group_key(fresh)
        t = fresh.floats("t")
        if len(distinct_ints(key)) * -(-len(fresh) // chunk) <= SLICED_PASSES_MAX:
            for start, end in _chunks(t, chunk):
                self._ingest(fresh.rows(slice(start, end)))
            return
        order = np.argsort(key, kind="stable")
        for start, end in _chunks(t, chunk, order):
            self._ingest(fresh.rows(order[start:end]))

    def _new_rows(self, df: Columns) -> Columns:
        """Rows after their rank's last row taken."""
        t = df.floats("t")
        step = df.floats("step")
        rank = df["rank"].astype(np.int64, copy=False)
        attempt = df["attempt"].astype(np.int64, copy=False)
        new = np.ones(len(df), dtype=bool)
        # The (attempt, rank) pairs of these rows, not every pair taken so far: a job's node
        # brings 32 of its 2,048 ranks.
        key = _group_key(df)
        for pair in distinct_ints(key).tolist():
            mine = key == pair
            first = int(mine.argmax())
            carry = self.clock.carry.get((int(attempt[first]), int(rank[first])))
            if carry is not None:
                new[mine] = (t[mine] > carry.last_t) | (
                    (t[mine] == carry.last_t) & (step[mine] > carry.last_step))
        return df.rows(new)

    def _ingest(self, df: Columns) -> None:
        t = df.floats("t")
        rank = df["rank"].astype(np.int64, copy=False)
        attempt = df["attempt"].astype(np.int64, copy=False)
        step, samples, dt = (df.floats(name) for name in ("step", "samples", "dt"))
        if "src" in df:
            self.sources.update(metrics.steps_sources(df, STEP_SOURCES))
        self.last_t = max(self.last_t, float(np.nanmax(t)))
        # Stable sort by (attempt, rank) keeps each rank's rows in time order; the clock and
        # the tracker take every rank's rows in one pass, the rest rank by rank.
        key = _group_key(df)
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        firsts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        groups = list(zip(attempt[order[firsts]].tolist(), rank[order[firsts]].tolist(),
                          strict=True))
        cols = self.clock.take_groups(groups, firsts, t[order], step[order], dt[order],
                                      samples[order])
        self.tracker.add_groups(groups, firsts, cols["t"], cols["past"], cols["step_time"],
                                cols["samples"])
        ends = np.append(firsts[1:], len(order)).tolist()
        for (a, r), start, end in zip(groups, firsts.tolist(), ends, strict=True):
            mine = {name: values[start:end] for name, values in cols.items()}
            self.breakdown.add_group(a, r, mine["t"], mine["past"], mine["step_time"])
            self._remember(a, r, mine)
        # Warm-up flags: the history draws slow warm-up (compile) steps apart from its scale.
        self.history.add(cols["t"], cols["step_time"], cols["samples_covered"], cols["past"])
        self.total_samples += float(np.nansum(cols["samples_covered"]))

    def _remember(self, attempt: int, rank: int, cols: dict[str, np.ndarray]) -> None:
        self.latest_attempt = max(self.latest_attempt, attempt)
        mine = self.ranks.get(rank)
        if mine is None or attempt > mine.attempt:
            mine = self.ranks[rank] = RankRecent(attempt)
        elif attempt < mine.attempt:
            return  # late rows of an attempt already replaced
        mine.extend(cols, self.recent)

    # -- figures -------------------------------------------------------------------------
    def latest(self) -> dict[int, RankRecent]:
        """Ranks of the latest attempt."""
        return {r: v for r, v in self.ranks.items() if v.attempt == self.latest_attempt}

    def latest_step(self) -> int | None:
        latest = self.latest()
        return max(v.last_step for v in latest.values()) if latest else None

    def phase(self, meta: Mapping[str, Any], compiles: list[Mapping[str, Any]],
              now: float) -> metrics.Phase:
        """metrics.phase of the steps taken and the compile events up to `now`."""
        last_compile = max((float(c["t"]) for c in compiles if float(c["t"]) <= now),
                           default=None)
        return metrics.phase_of(meta, now, self.last_t if self.ranks else None, last_compile,
                                self.reached_steady())

    def reached_steady(self) -> bool:
        """A rank of the latest attempt is `warmup_steps` past its first step."""
        return any(bool(v.cols["past"][-1]) for v in self.latest().values() if len(v))

    def throughput(self, now: float, window_s: float = metrics.DEFAULT_WINDOW_S, *,
                   ranks: Collection[int] | None = None) -> float | None:
        """metrics.current_throughput over the kept steps (the window is 30 s; at most the
        last `recent` steps of a rank count, which still gives its rate); `ranks`: of these
        ranks only (a node's, of a job of many nodes)."""
        if not self.ranks:
            return None
        rates = self.rank_rates(now, window_s)
        return metrics.total_rate(rates.values() if ranks is None else
                                  (rates[r] for r in ranks if r in rates))

    def rank_rates(self, now: float, window_s: float = metrics.DEFAULT_WINDOW_S
                   ) -> dict[int, float | None]:
        """metrics.window_rates of the latest attempt's ranks; worked out once a frame (the
        job's figure and each node's share of it come from the same rates)."""
        key = (now, window_s, self.rows)
        if self._rates_key != key:
            latest = self.latest()
            self._rates = metrics.window_rates(
                ((r, (v.cols["t"], v.cols["samples_covered"], v.cols["step_time"],
                      v.cols["samples"])) for r, v in sorted(latest.items())), now, window_s)
            self._rates_key = key
        return self._rates

    def rank_medians(self) -> dict[int, tuple[float, int]]:
        """metrics.rank_median of each rank of the latest attempt that has one: those whose
        rows changed since, together (a numpy call for all of them, not one per rank)."""
        latest = sorted(self.latest().items())
        due = {rank: (use,) for rank, mine in latest if mine.median_due
               and len(use := metrics.median_steps(mine.cols["step_time"],
                                                   mine.cols["past"].astype(bool)))}
        for ranks, (use,) in stacked_by_length(due):
            for rank, median in zip(ranks, np.median(use, axis=1).tolist(), strict=True):
                self.ranks[rank].median_known((median, use.shape[1]))
        # (A rank with no timed step yet is left to its own median_step_time: None.)
        return {rank: med for rank, mine in latest
                if (med := mine.median_step_time()) is not None}

    def stalled(self, now: float, medians: Mapping[int, tuple[float, int]],
                compiles: list[Mapping[str, Any]],
                factor: float = metrics.DEFAULT_STALL_FACTOR,
                min_silence_s: float = metrics.DEFAULT_MIN_STALL_S) -> dict[int, float]:
        """metrics.stalled for the ranks of the latest attempt. A rank inside a torch.compile
        compile (its start recorded, its end not yet) is compiling, not stalled, however long
        the compile takes."""
        compiled = last_compiles(((float(c["t"]), c.get("rank")) for c in compiles), now)
        if any(c.get("src") == TORCH_COMPILE for c in compiles):
            for span in compile_spans(c for c in compiles if c.get("src") == TORCH_COMPILE):
                if span.start <= now and (span.end is None or span.end > now):
                    compiled[span.rank] = now
        return metrics.stalled(now, {r: v.last_t for r, v in self.latest().items()},
                               {r: m for r, (m, _) in medians.items()}, compiled, factor,
                               min_silence_s)

    def steady_recent(self) -> dict[int, dict[str, np.ndarray]]:
        """Per rank of the latest attempt, its kept steady steps with a known step time."""
        out = {}
        for rank, mine in self.latest().items():
            keep = mine.cols["past"].astype(bool) & np.isfinite(mine.cols["step_time"])
            if keep.any():
                out[rank] = {k: mine.cols[k][keep] for k in ("t", "step", "step_time")}
        return out


_CUT_LOOK = 256
"""Rows looked at past a cut at a time, for where the stamp there changes."""


def _chunks(t: np.ndarray, chunk: int, order: np.ndarray | None = None
            ) -> list[tuple[int, int]]:
    """(start, end) of about `chunk` rows each (positions in `order`, when given), cut only
    between rows of different stamps: the rows of one read of a log share its stamp, and a
    read's step time is its time over all of its steps (StepClock), so a read is taken whole,
    as with_step_time takes it. Only the rows at each cut are looked at: an attach takes
    millions, and its cuts nearly always fall between two stamps already."""
    cuts, start, n = [], 0, len(t)
    while start < n:
        end = min(start + chunk, n)
        while end < n:  # the row before the cut, and the next few: where do their stamps change?
            near = slice(end - 1, min(end + _CUT_LOOK, n))
            stamps = t[near] if order is None else t[order[near]]
            changed = np.flatnonzero(stamps[1:] != stamps[0])
            if len(changed):
                end += int(changed[0])
                break
            end = near.stop
        cuts.append((start, end))
        start = end
    return cuts


def _group_key(df: Columns) -> np.ndarray:
    """One sort key for each row's (attempt, rank), in 16 bits where it fits: numpy sorts
    those by radix (an attach takes millions of rows at once)."""
    rank = df["rank"].astype(np.int64, copy=False)
    attempt = df["attempt"].astype(np.int64, copy=False)
    low = int(rank.min())
    key = (attempt - int(attempt.min())) * (int(rank.max()) - low + 1) + (rank - low)
    return key.astype(np.uint16) if int(key.max()) < 1 << 16 else key
