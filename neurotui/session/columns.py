"""Equal-length numpy columns: the little of a DataFrame that following a run needs.

The dashboard, `attach` and the cache work on these, so none of them imports pandas (a third
of a second and 70 MB in a new process, more than the dashboard's whole budget). The batch
figures of summary, compare and export still want DataFrames: `to_frame` makes one, importing
pandas there and only there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


class Columns:
    """A table as named 1-D arrays of one length. `len()` is the number of rows; rows are
    taken with `rows(mask | indices | slice)`, which copies only what numpy's indexing copies
    (a slice is a view)."""

    __slots__ = ("_data", "_length")

    def __init__(self, data: Mapping[str, np.ndarray] | None = None,
                 length: int | None = None) -> None:
        self._data = {name: np.asarray(values) for name, values in (data or {}).items()}
        lengths = {len(v) for v in self._data.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self._length = lengths.pop() if lengths else int(length or 0)

    @classmethod
    def of(cls, table: Columns | Mapping[str, Any] | pd.DataFrame) -> Columns:
        """Columns of a Columns (itself), a mapping of sequences, or a DataFrame (its
        categorical columns as their values, e.g. `src` as 'probe', 'log', 'auto')."""
        if isinstance(table, Columns):
            return table
        if hasattr(table, "iloc"):  # a DataFrame: no pandas import needed to read one
            out = {}
            for name in table.columns:
                column = table[name]
                if hasattr(column, "cat"):
                    column = column.astype(object)
                out[str(name)] = column.to_numpy()
            return cls(out, len(table))
        return cls({name: np.asarray(values) for name, values in table.items()})

    @classmethod
    def of_records(cls, records: Iterable[Mapping[str, Any]], names: Sequence[str]) -> Columns:
        """Float columns of these fields of event records (a compile's t and rank): NaN where
        a record has none or not a number, as pandas' to_numeric(errors="coerce")."""
        records = list(records)
        return cls({name: np.array([_as_float(r.get(name)) for r in records], dtype=float)
                    for name in names}, len(records))

    @classmethod
    def concat(cls, parts: Sequence[Columns]) -> Columns:
        """Rows of `parts` one after the other; a column missing from a part is NaN there."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        names = list(dict.fromkeys(name for p in parts for name in p.columns))
        return cls({name: np.concatenate([p.get(name) for p in parts]) for name in names})

    # -- reading -------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._length

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __repr__(self) -> str:
        return f"Columns({self._length} rows: {', '.join(self._data)})"

    @property
    def columns(self) -> list[str]:
        """The column names (as a DataFrame's `columns`)."""
        return list(self._data)

    def get(self, name: str) -> np.ndarray:
        """The column, or NaN on every row where this table has no such column."""
        values = self._data.get(name)
        return np.full(self._length, np.nan) if values is None else values

    def floats(self, name: str) -> np.ndarray:
        """The column as float64 (NaN where missing), without a copy where it already is."""
        return np.asarray(self.get(name), dtype=float)

    def items(self) -> Iterable[tuple[str, np.ndarray]]:
        return self._data.items()

    # -- new tables ----------------------------------------------------------------------
    def rows(self, which: np.ndarray | slice) -> Columns:
        """The rows a boolean mask, an index array or a slice selects."""
        if isinstance(which, slice):
            start, stop, step = which.indices(self._length)
            length = len(range(start, stop, step))
        else:
            which = np.asarray(which)
            length = int(which.sum()) if which.dtype == bool else len(which)
        return Columns({name: values[which] for name, values in self._data.items()}, length)

    def tail(self, n: int) -> Columns:
        """A copy of the last `n` rows: a view would keep the whole table alive."""
        return Columns({name: values[-n:].copy() if n else values[:0]
                        for name, values in self._data.items()}, min(n, self._length))

    def with_column(self, name: str, values: np.ndarray) -> Columns:
        return Columns({**self._data, name: values}, self._length)

    def to_frame(self, categories: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
        """A DataFrame sharing these arrays; `categories`: integer code columns to make
        categorical with those names (the steps' `src`)."""
        import pandas as pd

        data: dict[str, Any] = dict(self._data)
        for name, names in (categories or {}).items():
            if name in data:
                data[name] = pd.Categorical.from_codes(data[name], list(names))
        return pd.DataFrame(data, index=pd.RangeIndex(self._length), copy=False)


def _as_float(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def distinct_ints(values: np.ndarray) -> np.ndarray:
    """np.unique of integers, sorted: by counting where their range is small (ranks, rank x
    source pairs), which is several times faster than numpy's hashing on the 100 k rows of a
    node's part that an attach to a job takes in 64 times over."""
    values = np.asarray(values)
    if not len(values) or values.dtype.kind not in "iu":
        return np.unique(values)
    low, high = int(values.min()), int(values.max())
    if high - low >= 1 << 20:
        return np.unique(values)
    return (np.flatnonzero(np.bincount(values - low)) + low).astype(values.dtype)
