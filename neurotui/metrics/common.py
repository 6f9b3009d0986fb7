"""What every figure needs: missing values kept missing, and fast column arithmetic over the
(attempt, rank)-sorted step table.

A table is a pandas DataFrame (compare, export) or the reader's numpy Columns (the live model,
the end-of-run summary: no pandas import); `rows`, `with_columns` and `like` do the little
that differs between the two.

The step-table helpers work on numpy arrays: groupby-diff/transform/cummax and per-rank .loc
assignment took seconds on a 24-hour, 32-rank run (issue #6: compare under 3 s), where
adjacent-row arithmetic takes milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

SORT_KEYS = ["attempt", "rank", "t", "step"]
K = TypeVar("K")


def finite_or_none(value: Any) -> float | None:
    """A finite float, or None for None/NaN/inf/bool/non-numbers: missing stays missing."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def positive(value: Any) -> float | None:
    """A finite float > 0, or None: the inputs that may be divided by or multiplied into money."""
    number = finite_or_none(value)
    return number if number is not None and number > 0 else None


def stacked_by_length(columns: Mapping[K, tuple[np.ndarray, ...]]
                      ) -> Iterator[tuple[list[K], list[np.ndarray]]]:
    """The keys (ranks) whose arrays are alike in length, with each of their arrays stacked
    into one row per key. A statistic of every rank is then one numpy call, not one per rank:
    at 32 ranks a frame's figures were mostly numpy's cost per call. Along a row, a reduction
    gives what it gives on the rank's own array."""
    alike: dict[int, list[K]] = {}
    for key, arrays in columns.items():
        alike.setdefault(len(arrays[0]), []).append(key)
    for keys in alike.values():
        yield keys, [np.stack([columns[k][i] for k in keys])
                     for i in range(len(columns[keys[0]]))]


def has_rows(df: Any, *columns: str) -> bool:
    """`df` (a DataFrame, the live path's Columns, or None) has rows and these columns."""
    return df is not None and len(df) > 0 and all(c in df.columns for c in columns)


def is_frame(df: Any) -> bool:
    return hasattr(df, "iloc")


def rows(df: Any, which: np.ndarray) -> Any:
    """The rows a boolean mask or an index array selects, of a DataFrame or Columns."""
    if is_frame(df):
        return df[which] if which.dtype == bool else df.take(which)
    return df.rows(which)


def with_columns(df: Any, columns: dict[str, np.ndarray]) -> Any:
    """`df` with these columns added (a DataFrame in place, without the copy of
    `df[name] = ndarray`; Columns, being immutable, as a new one)."""
    if is_frame(df):
        for name, values in columns.items():
            df[name] = column(values, df.index)
        return df
    for name, values in columns.items():
        df = df.with_column(name, values)
    return df


def like(df: Any, values: np.ndarray) -> Any:
    """Per-row values as `df`'s kind has them: a Series on its index, or the array."""
    if is_frame(df):
        import pandas as pd

        return pd.Series(values, index=df.index)
    return values


def until(df: pd.DataFrame, now: float | None) -> pd.DataFrame:
    """Rows up to `now` (a replay position); all rows when `now` is None."""
    if now is None or not has_rows(df, "t"):
        return df
    with np.errstate(invalid="ignore"):
        return rows(df, floats(df["t"]) <= now)


def floats(column: pd.Series | np.ndarray) -> np.ndarray:
    """A column (a Series or an array) as float64 values, NaN where missing or not a number."""
    if isinstance(column, np.ndarray):
        if column.dtype.kind in "biuf":
            return column.astype(float, copy=False)
        return np.array([_float_or_nan(x) for x in column], dtype=float)
    import pandas as pd  # a Series came in: pandas is imported already

    if not pd.api.types.is_numeric_dtype(column.dtype):
        column = pd.to_numeric(column, errors="coerce")
    return column.to_numpy(dtype=float, na_value=np.nan)


def _float_or_nan(value: Any) -> float:
    number = finite_or_none(value)
    if number is None and isinstance(value, float):
        return value  # inf and NaN stay as they are, like pd.to_numeric
    return math.nan if number is None else number


def numbers(column: pd.Series) -> np.ndarray:
    """A column of whole numbers (attempt, rank, step): signed integers as they are (never
    missing, and no float copy; unsigned ones would wrap in a difference), else floats."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind == "i":
        return np.asarray(column)
    return floats(column)


def missing(values: np.ndarray) -> np.ndarray:
    return np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), dtype=bool)


def column(values: np.ndarray, index: pd.Index) -> pd.Series:
    """A new column without the copy `df[name] = ndarray` makes (pandas 3): on a long run
    each copy is tens of MB of fresh memory, slow to touch in a new process."""
    import pandas as pd

    return pd.Series(values, index=index, copy=False)


def sort_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """`steps` sorted (stable) by attempt, rank, t, step, as sort_values would, NaN last."""
    keys = [steps[c] for c in SORT_KEYS]
    if not all(isinstance(k.dtype, np.dtype) and k.dtype.kind in "iuf" for k in keys):
        return steps.sort_values(SORT_KEYS, kind="stable")  # nullable or object columns
    attempt, rank, t, step = (np.asarray(k) for k in keys)
    order = _order_of_time_sorted(attempt, rank, t, step)
    if order is None:  # np.lexsort is stable and puts NaN last like sort_values
        order = np.lexsort((step, t, rank, attempt))
    return rows(steps, order)


def _order_of_time_sorted(attempt: np.ndarray, rank: np.ndarray, t: np.ndarray,
                          step: np.ndarray) -> np.ndarray | None:
    """The sort order by attempt, rank, t, step of a table already in (t, step) order (the
    reader's), with integer attempts and ranks: then a stable sort by (attempt, rank) alone
    gives it, and a radix sort of a 16-bit key does that in a tenth of np.lexsort's time.
    None when the table is not like that."""
    if attempt.dtype.kind not in "iu" or rank.dtype.kind not in "iu" or len(t) < 2:
        return None
    with np.errstate(invalid="ignore"):
        later = t[1:] > t[:-1]
        if not (later | ((t[1:] == t[:-1]) & (step[1:] >= step[:-1]))).all():
            return None  # not in time order, a tie out of step order, or a NaN
    low_a, low_r = int(attempt.min()), int(rank.min())
    attempts, ranks = int(attempt.max()) - low_a + 1, int(rank.max()) - low_r + 1
    if attempts * ranks > 1 << 16:
        return None
    # Written straight into 16 bits: no int64 temporaries (fresh memory is slow to touch).
    key = np.empty(len(rank), dtype=np.uint16)
    np.subtract(rank, low_r, out=key, casting="unsafe")
    if attempts > 1:
        high = np.empty_like(key)
        np.subtract(attempt, low_a, out=high, casting="unsafe")
        key += high * np.uint16(ranks)
    return np.argsort(key, kind="stable")


def group_starts(df: pd.DataFrame) -> np.ndarray:
    """True where a row starts a new (attempt, rank) run of the sorted table, and on every
    row whose attempt or rank is missing (groupby leaves those out: they have no group)."""
    attempt, rank = numbers(df["attempt"]), numbers(df["rank"])
    starts = np.ones(len(df), dtype=bool)
    starts[1:] = (attempt[1:] != attempt[:-1]) | (rank[1:] != rank[:-1])  # NaN != NaN
    return starts


def keyed(df: pd.DataFrame) -> np.ndarray:
    """True for rows with both an attempt and a rank (the rows groupby puts in a group)."""
    return ~(missing(numbers(df["attempt"])) | missing(numbers(df["rank"])))


def diff_in_groups(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """values[i] - values[i - 1] within a run (as floats), NaN on each run's first row."""
    out = np.empty(len(values), dtype=float)
    out[0] = np.nan
    np.subtract(values[1:], values[:-1], out=out[1:])
    out[starts] = np.nan
    return out
