"""Step time and warm-up: the figures every other one is built on.

Two forms of one rule, side by side: `with_step_time` over a whole step table (summary,
compare, export), and `StepClock.take` over one rank's rows as they arrive (the live model),
continued from the rank's last row. Both derive through `_step_times` and `_reached`;
tests/unit/metrics/test_metrics_forms.py holds them equal on random runs in random pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from neurotui.metrics.common import (
    diff_in_groups,
    floats,
    group_starts,
    has_rows,
    is_frame,
    keyed,
    like,
    missing,
    numbers,
    rows,
    sort_steps,
    with_columns,
)

if TYPE_CHECKING:
    import pandas as pd

DERIVED = ("step_time", "steps_covered", "samples_covered")


def _step_times(elapsed: np.ndarray, advanced: np.ndarray, dt: np.ndarray | None,
                firsts: np.ndarray | None = None,
                carried: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rule: (step_time, steps_covered) of rows from the time and steps since the rank's
    previous row and the `dt` each reported, and each rank's last read, as (times, steps)
    per rank (`carried` on, for the rank's next rows; with `firsts` only). Computed in place
    of `elapsed` and `advanced` (float arrays the caller gives up: on a long run each is tens
    of MB).

    Rows sharing one stamp (elapsed 0) were read together: they stand for the steps written
    since the rank's previous stamp, so each gets its read's time over its read's steps.
    `firsts`: where each rank's rows begin (each rank's rows together); a rank's first rows
    may continue its read before them (`carried`: per rank, the (time, steps) of that read
    so far; NaN: none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rising = advanced > 0
        shared = elapsed == 0
        if shared.any():
            read_elapsed, read_advanced = _reads(elapsed, advanced, shared, firsts, carried)
        else:  # a read a row: each row's own (most logs, and every probe.step() rank)
            read_elapsed, read_advanced = elapsed, advanced
        lasts = np.append(firsts[1:], len(elapsed)) - 1 if firsts is not None else \
            np.empty(0, dtype=np.int64)
        last = (read_elapsed[lasts], read_advanced[lasts])  # (copies: taken before the divide)
        unknown = ~(rising & (read_elapsed > 0) & (read_advanced > 0))
        step_time = np.divide(read_elapsed, read_advanced, out=elapsed)  # from t and step
        step_time[unknown] = np.nan
        if dt is not None:  # reported by the rank: wins
            reported = np.isfinite(dt) & (dt > 0)
            step_time[reported] = dt[reported]
    covered = advanced
    covered[~rising] = 1.0
    return step_time, covered, *last


def _reads(elapsed: np.ndarray, advanced: np.ndarray, shared: np.ndarray,
           firsts: np.ndarray | None, carried: tuple[np.ndarray, np.ndarray] | None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the time and steps of its read: the elapsed of the read's first row (the
    time since the previous stamp) and the steps of all its rows. A rank's rows before the
    first that starts a read continue `carried`'s (its read so far: NaN where none)."""
    begins = ~shared  # a read begins at a new stamp, and at each rank's first row
    begins[0] = True
    if firsts is not None:
        begins[firsts] = True
    starts = np.flatnonzero(begins)
    lengths = np.diff(np.append(starts, len(shared)))
    read_elapsed, read_advanced = elapsed[starts], np.add.reduceat(advanced, starts)
    going_on = shared[starts]  # a rank's first rows, sharing the stamp of its last read
    if going_on.any():
        if carried is None or firsts is None:
            read_elapsed[going_on] = read_advanced[going_on] = np.nan
        else:
            rank = np.searchsorted(firsts, starts[going_on], side="right") - 1
            read_elapsed[going_on] = carried[0][rank]
            read_advanced[going_on] += carried[1][rank]
    return np.repeat(read_elapsed, lengths), np.repeat(read_advanced, lengths)


def _reached(progress: np.ndarray, warmup_steps: int) -> np.ndarray:
    """Rows whose progress (steps past the rank's first, NaN when unknown) reached warm-up's
    end."""
    with np.errstate(invalid="ignore"):
        return progress >= max(0, int(warmup_steps))


# -- the whole table -------------------------------------------------------------------------

def with_step_time(steps: pd.DataFrame) -> pd.DataFrame:
    """`steps` sorted by attempt, rank and time, with three derived columns.

    - step_time: seconds per step. `dt` when the rank reported it; otherwise the time since
      the same rank's previous record in the same attempt divided by the steps in between
      (log lines every k steps); for records read together (one stamp), the time since the
      rank's previous stamp over all their steps. NaN when unknown (first record or read,
      counter reset, t not rising).
    - steps_covered: steps since that previous record (1 for the first record and after a
      counter reset, e.g. a per-epoch step number).
    - samples_covered: samples x steps_covered. `samples` is per step (FORMAT.md), so a record
      every 10 steps stands for 10 steps' samples; totals and rates over time use this.

    Deriving this is the costly part of the figures on a long run: a caller wanting several
    of them (summary.summarize) derives it once and passes `timed=True` to the others.
    `steps`: a DataFrame, or the reader's Columns (the result is of the same kind).
    """
    if not has_rows(steps, "t", "rank", "step", "attempt"):
        base = list(steps.columns) if steps is not None else []
        if steps is not None and not is_frame(steps):  # no row: the same columns, and these
            return with_columns(rows(steps, np.zeros(len(steps), dtype=bool)),
                                {name: np.empty(0) for name in DERIVED})
        import pandas as pd

        return pd.DataFrame(columns=[*base, *DERIVED])
    df = sort_steps(steps)  # a new table: adding columns leaves the caller's alone
    starts = group_starts(df)
    elapsed = diff_in_groups(floats(df["t"]), starts)
    advanced = diff_in_groups(numbers(df["step"]), starts)
    dt = floats(df["dt"]) if "dt" in df.columns else None
    step_time, covered, *_ = _step_times(elapsed, advanced, dt)
    samples = floats(df["samples"]) if "samples" in df.columns else np.full(len(df), np.nan)
    return with_columns(df, dict(zip(DERIVED, (step_time, covered, samples * covered),
                                     strict=True)))


def past_warmup(df: pd.DataFrame, warmup_steps: int) -> pd.Series:
    """True for rows once their rank got `warmup_steps` steps past its first in the attempt.

    First step 1 and 10 warm-up steps -> steps 11.. count (the study's 11..N); a restart
    resuming at 300 skips 300..309, since it compiles again. "First" is the first step the
    rank recorded in the attempt (its first known one). Progress is a running maximum in time
    order, so a step counter that resets each epoch does not make every epoch start look like
    warm-up. `df` comes from with_step_time (time-sorted, each rank's rows of an attempt
    together), possibly filtered. A Series for a DataFrame, an array for Columns.
    """
    out = np.zeros(len(df), dtype=bool)
    if len(df):
        starts = group_starts(df)
        first = np.flatnonzero(starts)
        group = np.cumsum(starts) - 1
        step = numbers(df["step"])
        if missing(step).any():  # the first *known* step of each group (NaN: none known)
            at = np.where(missing(step), len(step), np.arange(len(step)))
            known_at = np.minimum.reduceat(at, first)
            anchor = np.append(step, np.nan)[known_at][group]
        else:
            anchor = step[first][group]
        reached = _reached(step - anchor, warmup_steps)
        # "the running maximum reached it" = "some row so far in the run reached it"
        count = np.cumsum(reached)
        before = (count - reached)[first][group]
        out = (count > before) & ~missing(step - anchor) & keyed(df)
    return like(df, out)


# -- one rank's rows as they come -------------------------------------------------------------

@dataclass(frozen=True)
class RankCarry:
    """What a rank's next rows are measured from: its last row, its first step, its
    progress so far."""

    last_t: float
    last_step: float
    first_step: float
    progress: float
    read: tuple[float, float]
    """The time and steps of the last row's read (rows sharing its stamp), which the next
    rows may continue."""


class StepClock:
    """with_step_time and past_warmup for rows that arrive a few at a time."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps
        self.carry: dict[tuple[int, int], RankCarry] = {}
        """(attempt, rank) -> where it stands."""

    def take(self, attempt: int, rank: int, t: np.ndarray, step: np.ndarray, dt: np.ndarray,
             samples: np.ndarray) -> dict[str, np.ndarray]:
        """One rank's new rows of one attempt (time order, after its last row): their step
        time, samples covered and warm-up flag (`past`), continued from its last row."""
        return self.take_groups([(attempt, rank)], np.zeros(1, dtype=np.int64), t, step, dt,
                                samples)

    def take_groups(self, groups: list[tuple[int, int]], firsts: np.ndarray, t: np.ndarray,
                    step: np.ndarray, dt: np.ndarray, samples: np.ndarray
                    ) -> dict[str, np.ndarray]:
        """`take` for the rows of several ranks at once: `groups` (attempt, rank), each one's
        rows together from its place in `firsts`, in time order. One pass over all of them:
        a job's refresh brings a few rows of each of hundreds of ranks, and numpy's cost a
        call, paid for each rank, was most of the live model's."""
        n = len(t)
        if not n:
            return {"t": t, "step": step, "step_time": t.copy(), "samples": samples,
                    "samples_covered": samples.copy(), "past": np.zeros(0, dtype=bool)}
        ends = np.append(firsts[1:], n)
        prevs = [self.carry.get(group) for group in groups]
        known = [p for p in prevs if p is not None]
        had = np.array([p is not None for p in prevs], dtype=bool)

        def per_rank(value: Callable[[RankCarry], float], default: np.ndarray | float
                     ) -> np.ndarray:
            out = np.array(np.broadcast_to(default, len(groups)), dtype=float)
            out[had] = [value(p) for p in known]
            return out

        before_t, before_step = np.empty(n), np.empty(n)  # each row's previous row
        before_t[1:], before_step[1:] = t[:-1], step[:-1]
        before_t[firsts] = per_rank(lambda p: p.last_t, np.nan)
        before_step[firsts] = per_rank(lambda p: p.last_step, np.nan)
        carried = (per_rank(lambda p: p.read[0], np.nan), per_rank(lambda p: p.read[1], np.nan))
        step_time, covered, last_time, last_steps = _step_times(
            t - before_t, step - before_step, dt, firsts, carried)
        rank_of_row = np.repeat(np.arange(len(groups)), ends - firsts)
        first_step = per_rank(lambda p: p.first_step, step[firsts])
        progress = np.fmax(step - first_step[rank_of_row],
                           per_rank(lambda p: p.progress, np.nan)[rank_of_row])
        _running_max_in_groups(progress, firsts, ends)  # NaN skipped
        for i, group in enumerate(groups):
            last = int(ends[i]) - 1
            self.carry[group] = RankCarry(float(t[last]), float(step[last]),
                                          float(first_step[i]), float(progress[last]),
                                          (float(last_time[i]), float(last_steps[i])))
        return {"t": t, "step": step, "step_time": step_time, "samples": samples,
                "samples_covered": samples * covered,
                "past": _reached(progress, self.warmup_steps)}


def _running_max_in_groups(values: np.ndarray, firsts: np.ndarray, ends: np.ndarray) -> None:
    """Each group's running maximum (np.fmax.accumulate: NaN skipped), in place; only the
    groups where it changes anything are passed over (steps mostly rise)."""
    with np.errstate(invalid="ignore"):
        falls = np.zeros(len(values), dtype=bool)
        falls[1:] = ~(values[1:] >= values[:-1])  # lower, or NaN on either side
    falls[firsts] = False
    if not falls.any():
        return
    for i in np.unique(np.searchsorted(firsts, np.flatnonzero(falls), side="right") - 1):
        start, end = int(firsts[i]), int(ends[i])
        values[start:end] = np.fmax.accumulate(values[start:end])
