"""Of a rank's step rows, its best source's; and the losses its log lines printed.

A rank's steps may come from three sources (STEP_SOURCES): the script's own `neurotui.probe`
calls, the automatic probe, and its log lines. Only the best one's rows are kept (PRECEDENCE,
stepprecedence.py's table, which the supervisor reads too),
so a script that both calls the probe and prints its steps is not counted twice; the rows of
a worse source read before the better one appeared go when the reader next flushes (`purged`).
A loss a log line printed is put onto the automatic probe's row of the step it was printed
after: the loss a script prints belongs to the step it just took. The supervisor names that
step in the line's record (`after_step`: it placed the line by the probe's steps), and
`put_placed_losses` puts the loss on that row; the records of sessions from before
(format 1 without `after_step`) are placed here by time instead, on the row just before the
line (`put_log_losses`).

Column-wise: a cold read of a day-long run purges and places millions of rows at once.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from neurotui.session.columns import Columns
from neurotui.session.stepprecedence import AUTO, LOG, PRECEDENCE, PROBE, STEP_SOURCES

__all__ = [
    "AUTO",
    "LOG",
    "PLACED_LOSS_COLUMNS",
    "PRECEDENCE",
    "PROBE",
    "SOURCE_CODE",
    "STEP_SOURCES",
    "place_losses",
    "purged",
    "put_log_losses",
    "put_placed_losses",
]



class _SourceCode(dict[Any, int]):
    """`src` -> its code; anything else (None, a source of a newer version) is a log's."""

    def __missing__(self, key: Any) -> int:
        return LOG


SOURCE_CODE = _SourceCode({name: code for code, name in enumerate(STEP_SOURCES)})
PRECEDENCE_OF_CODE = np.array([PRECEDENCE[code] for code in range(len(STEP_SOURCES))])


def purged(table: Columns, purge: dict[int, int]) -> tuple[np.ndarray, Columns]:
    """Which of `table`'s rows stay once each rank in `purge` (rank -> its best source) keeps
    only its best source's; and of the log rows that go, those with a loss where the automatic
    probe times their rank (their losses stay, on its rows), as columns t, rank and loss."""
    rank, src = table["rank"], table["src"]
    # Each row's worst precedence kept: its rank's best source's (a rank not purged keeps all).
    limit = _per_rank(rank, {r: PRECEDENCE[best] for r, best in purge.items()},
                      otherwise=max(PRECEDENCE.values()))
    go = PRECEDENCE_OF_CODE[src] > limit
    lost = np.flatnonzero(go & (limit == PRECEDENCE[AUTO]) & (src == LOG)
                          & np.isfinite(table["loss"]))
    return ~go, Columns({"t": table["t"][lost], "rank": rank[lost],
                         "loss": table["loss"][lost]}, len(lost))


def put_log_losses(chunk: Columns, losses: list[tuple[float, int, float]]
                   ) -> tuple[Columns, list[tuple[float, int, float]]]:
    """Each log-printed loss (t, rank, loss) onto the automatic probe's row of that rank just
    before it, where that row has none: the loss a script prints belongs to the step it just
    took. Also the losses with no such row in `chunk` (theirs came in an earlier one, or none
    is known)."""
    if not losses:
        return chunk, []
    table = np.array(losses, dtype=np.float64).reshape(-1, 3)  # one conversion, not three
    chunk, unplaced = place_losses(chunk, table[:, 0], table[:, 1].astype(np.int64),
                                   table[:, 2])
    return chunk, [losses[i] for i in unplaced.tolist()]


PLACED_LOSS_COLUMNS = ("rank", "attempt", "after_step", "loss", "t")
"""A placed log line's loss, as a row of these columns: the automatic probe's step of that
rank and attempt it goes on (`after_step`), the loss, and the line's stamp."""
_GROUP_BITS = 31  # rank and attempt, each below 2**31 (the reader's bounds), in one int64


def put_placed_losses(table: Columns, losses: Columns) -> tuple[Columns, np.ndarray]:
    """Each placed loss (PLACED_LOSS_COLUMNS) onto the automatic probe's row of its rank,
    attempt and step, where that row has none (the first of its losses); also the indices
    of the losses whose row is not in `table`."""
    if not len(losses) or not len(table):
        return table, np.arange(len(losses))
    ranks, attempts, wanted_steps = (losses[name].astype(np.int64)
                                     for name in ("rank", "attempt", "after_step"))
    values = losses["loss"]
    auto = np.flatnonzero(table["src"] == AUTO)
    auto_ranks, auto_attempts = table["rank"][auto], table["attempt"][auto]
    if len(auto) and (auto_attempts == attempts[0]).all() and (attempts == attempts[0]).all():
        # One attempt (most sessions): grouped by rank alone, which _by_rank sorts quicker.
        auto_of, losses_of = _by_rank(auto_ranks), _by_rank(ranks)
    else:  # grouped by their (rank, attempt) key
        auto_of = _by_rank((auto_ranks << _GROUP_BITS) | auto_attempts)
        losses_of = _by_rank((ranks << _GROUP_BITS) | attempts)
    row = np.full(len(losses), -1, dtype=np.int64)
    for key, mine in losses_of.items():
        if key not in auto_of:
            continue
        rows = auto[auto_of[key]]
        steps = table["step"][rows]
        if len(steps) > 1 and not bool((steps[1:] >= steps[:-1]).all()):
            order = np.argsort(steps, kind="stable")  # (in time order, steps mostly are)
            rows, steps = rows[order], steps[order]
        wanted = wanted_steps[mine]
        at = np.minimum(np.searchsorted(steps, wanted), len(steps) - 1)
        found = steps[at] == wanted
        row[mine[found]] = rows[at[found]]
    return _first_losses_onto(table, row, np.flatnonzero(row >= 0), values), \
        np.flatnonzero(row < 0)


def place_losses(chunk: Columns, log_t: np.ndarray, log_rank: np.ndarray,
                 values: np.ndarray, *, in_time_order: bool = False
                 ) -> tuple[Columns, np.ndarray]:
    """put_log_losses of losses given as columns; the indices of those not placed.
    `in_time_order`: each rank's losses count in time order (a stable sort of those given),
    as rows of a table in time order do, not in the order given."""
    auto = np.flatnonzero(chunk["src"] == AUTO)
    t = chunk["t"]
    rows_of = _by_rank(chunk["rank"][auto])
    # Each loss's row (-1: none before it): a rank's losses in one search, the rows and the
    # losses of every rank found in one sort each (a cold read places millions). `order`:
    # the losses in the order they count in, rank after rank.
    row = np.full(len(log_t), -1, dtype=np.int64)
    order = []
    for r, mine in _by_rank(log_rank).items():
        times = log_t[mine]
        if in_time_order and len(mine) > 1 and not bool((times[1:] >= times[:-1]).all()):
            mine = mine[np.argsort(times, kind="stable")]
            times = log_t[mine]
        order.append(mine)
        rows = auto[rows_of[r]] if r in rows_of else auto[:0]
        at = np.searchsorted(t[rows], times, side="right") - 1
        row[mine] = np.where(at >= 0, rows[np.maximum(at, 0)] if len(rows) else -1, -1)
    counted = np.concatenate(order) if order else np.zeros(0, dtype=np.int64)
    placed = counted[row[counted] >= 0]  # in the order they count in
    return _first_losses_onto(chunk, row, placed, values), np.flatnonzero(row < 0)


def _first_losses_onto(table: Columns, row: np.ndarray, placed: np.ndarray,
                       values: np.ndarray) -> Columns:
    """`table` with each row that has no loss of its own given the first of its losses:
    loss i (of `values`) goes on row `row[i]`, `placed` holds those with a row, in the order
    they count in."""
    loss = table["loss"].copy()
    first = np.full(len(loss), len(placed))
    np.minimum.at(first, row[placed], np.arange(len(placed)))
    takes = np.flatnonzero((first < len(placed)) & np.isnan(loss))
    loss[takes] = values[placed[first[takes]]]
    return table.with_column("loss", loss)


def _per_rank(ranks: np.ndarray, value_of: dict[int, int], otherwise: int) -> np.ndarray:
    """Each row's value by its rank (`value_of`; `otherwise` for other ranks): looked up in a
    table where the ranks span little (a search of each of millions of rows took 0.07 s)."""
    keys = np.fromiter(sorted(value_of), np.int64, len(value_of))
    values = np.array([value_of[k] for k in keys.tolist()], dtype=np.int64)
    low = min(int(ranks.min()), int(keys[0])) if len(ranks) else 0
    high = max(int(ranks.max()), int(keys[-1])) if len(ranks) else 0
    if high - low < 1 << 20:
        table = np.full(high - low + 1, otherwise, dtype=np.int64)
        table[keys - low] = values
        return table[ranks - low]
    at = np.minimum(np.searchsorted(keys, ranks), len(keys) - 1)
    return np.where(keys[at] == ranks, values[at], otherwise)


def _by_rank(ranks: np.ndarray) -> dict[int, np.ndarray]:
    """Each rank's positions in `ranks`, in order: by one stable sort (by counting where the
    ranks span less than 2**15), not a pass over all of them a rank."""
    if not len(ranks):
        return {}
    low, high = int(ranks.min()), int(ranks.max())
    codes = (ranks - low).astype(np.int16) if high - low < 1 << 15 else ranks
    order = np.argsort(codes, kind="stable")
    ordered = ranks[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(order)]
    return {int(ordered[a]): order[a:b] for a, b in itertools.pairwise(bounds)}
