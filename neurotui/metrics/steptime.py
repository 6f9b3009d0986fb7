"""Step time and warm-up: the figures every other one is built on.

Two forms of one rule, side by side: `with_step_time` over a whole step table (summary,
compare, export), and `StepClock.take` over one rank's rows as they arrive (the live model),
continued from the rank's last row. Both derive through `_step_times` and `_reached`;
tests/unit/test_metrics_forms.py holds them equal on random runs in random pieces.
"""

from __future__ import annotations

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
                carried: tuple[float, float] | None = None
                ) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """The rule: (step_time, steps_covered) of rows from the time and steps since the rank's
    previous row and the `dt` each reported, and the (time, steps) of the last row's read
    (`carried` on, for the rank's next rows). Computed in place of `elapsed` and `advanced`
    (float arrays the caller gives up: on a long run each is tens of MB).

    Rows sharing one stamp (elapsed 0) were read together: they stand for the steps written
    since the rank's previous stamp, so each gets its read's time over its read's steps.
    A read's first row may continue the rows before it (`carried`: their read so far)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rising = advanced > 0
        shared = elapsed == 0
        if shared.any():
            read_elapsed, read_advanced = _reads(elapsed, advanced, shared, carried)
        else:  # a read a row: each row's own (most logs, and every probe.step() rank)
            read_elapsed, read_advanced = elapsed, advanced
        last = (float(read_elapsed[-1]), float(read_advanced[-1])) if len(elapsed) else (
            carried or (np.nan, np.nan))
        unknown = ~(rising & (read_elapsed > 0) & (read_advanced > 0))
        step_time = np.divide(read_elapsed, read_advanced, out=elapsed)  # from t and step
        step_time[unknown] = np.nan
        if dt is not None:  # reported by the rank: wins
            reported = np.isfinite(dt) & (dt > 0)
            step_time[reported] = dt[reported]
    covered = advanced
    covered[~rising] = 1.0
    return step_time, covered, last


def _reads(elapsed: np.ndarray, advanced: np.ndarray, shared: np.ndarray,
           carried: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the time and steps of its read: the elapsed of the read's first row (the
    time since the previous stamp) and the steps of all its rows. Rows before the first that
    starts a read continue `carried`'s."""
    starts = np.flatnonzero(~shared)
    lead = int(starts[0]) if len(starts) else len(shared)
    lengths = np.diff(np.append(starts, len(shared)))
    read_elapsed, read_advanced = np.empty_like(elapsed), np.empty_like(advanced)
    if lead:
        before_elapsed, before_advanced = carried if carried is not None else (np.nan, np.nan)
        read_elapsed[:lead] = before_elapsed
        read_advanced[:lead] = before_advanced + advanced[:lead].sum()
    if len(starts):
        read_elapsed[lead:] = np.repeat(elapsed[starts], lengths)
        read_advanced[lead:] = np.repeat(np.add.reduceat(advanced, starts), lengths)
    return read_elapsed, read_advanced


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
    step_time, covered, _ = _step_times(elapsed, advanced, dt)
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
        prev = self.carry.get((attempt, rank))
        prev_t, prev_step = (prev.last_t, prev.last_step) if prev is not None else (
            np.nan, np.nan)
        elapsed = t - np.concatenate([[prev_t], t[:-1]])
        advanced = step - np.concatenate([[prev_step], step[:-1]])
        step_time, covered, read = _step_times(elapsed, advanced, dt,
                                               prev.read if prev is not None else None)
        first = prev.first_step if prev is not None else float(step[0])
        progress = step - first
        if prev is not None:
            progress = np.fmax(progress, prev.progress)
        progress = np.fmax.accumulate(progress)  # the running maximum, NaN skipped
        self.carry[(attempt, rank)] = RankCarry(float(t[-1]), float(step[-1]), first,
                                                float(progress[-1]), read)
        return {"t": t, "step": step, "step_time": step_time, "samples": samples,
                "samples_covered": samples * covered,
                "past": _reached(progress, self.warmup_steps)}
