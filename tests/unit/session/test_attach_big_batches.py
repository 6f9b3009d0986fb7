"""An attach takes a long session in at once: the reader puts a cache the keeper appended to
in time order (reader._in_time_order), and the live model's steps take the whole table in
chunks (StepState.add). Both are shortcuts of a plain way, and must give what it gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui.live import stepstate
from neurotui.live.stepstate import StepState
from neurotui.session.columns import Columns
from neurotui.session.reader import _in_time_order
from tests.unit.session.test_timeline import close, same


def _appended_table(runs: list[list[float]]) -> Columns:
    """Runs of rows each in time order, one after the other (a cache and its appends); each
    row numbered, so that where it went shows."""
    t = np.array([x for run in runs for x in sorted(run)], dtype=float)
    return Columns({"t": t, "row": np.arange(len(t)), "rank": np.arange(len(t)) % 3})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40).map(float), max_size=30), max_size=5),
       st.lists(st.integers(0, 200), max_size=2))
def test_a_table_is_put_in_time_order_as_a_stable_sort_puts_it(
        runs: list[list[float]], missing: list[int]) -> None:
    """Whole-number times: ties between runs, and across the place where a run begins; and
    a time missing here and there (NaN: the sort puts it last)."""
    table = _appended_table(runs)
    for at in missing:
        if at < len(table):
            table["t"][at] = np.nan
    ordered = _in_time_order(table)
    by_sort = np.argsort(table["t"], kind="stable")
    assert ordered.columns == table.columns
    assert len(ordered) == len(table)
    for name in table.columns:
        assert np.array_equal(ordered[name], table[name][by_sort], equal_nan=True), name


def test_a_table_in_order_is_handed_back_as_it_is() -> None:
    table = _appended_table([[1.0, 2.0, 2.0, 5.0]])
    assert _in_time_order(table) is table


def test_only_the_overlap_of_an_append_is_sorted_again() -> None:
    """The rows before the append's earliest time stay where they were."""
    base = [float(x) for x in range(1000)]
    appended = [995.5, 996.5, 1000.0, 1001.0]
    table = _appended_table([base, appended])
    ordered = _in_time_order(table)
    assert np.array_equal(ordered["t"], np.sort(table["t"], kind="stable"))
    assert ordered["row"][:996].tolist() == list(range(996))


def _steps(ranks: int, per_rank: int, seed: int, poll_s: float = 0.0) -> Columns:
    """Steps of `ranks` ranks with jittered step times and some unknown step times, merged
    by time as the reader hands them over; with `poll_s`, each rank's log read that often
    (the lines of a read share its stamp)."""
    rng = np.random.default_rng(seed)
    t, rank, step, samples, dt = [], [], [], [], []
    for r in range(ranks):
        times = 100.0 + r * 0.01 + np.cumsum(rng.uniform(0.05, 0.2, per_rank))
        if poll_s:
            times = np.ceil(times / poll_s) * poll_s
        t.append(times)
        rank.append(np.full(per_rank, r))
        step.append(np.arange(1, per_rank + 1, dtype=float))
        samples.append(np.full(per_rank, 16.0))
        printed = rng.uniform(0.05, 0.2, per_rank)
        printed[rng.random(per_rank) < 0.3] = np.nan
        dt.append(printed)
    order = np.argsort(np.concatenate(t), kind="stable")
    table = {"t": np.concatenate(t), "rank": np.concatenate(rank),
             "step": np.concatenate(step), "samples": np.concatenate(samples),
             "loss": np.linspace(5.0, 1.0, ranks * per_rank), "dt": np.concatenate(dt),
             "attempt": np.zeros(ranks * per_rank, dtype=np.int64)}
    return Columns({name: values[order] for name, values in table.items()})


def _figures(state: StepState) -> dict[str, object]:
    history = state.history
    assert history is not None
    series = history.series(state.last_t)
    return {
        "rows": state.rows, "late": state.late_rows, "last_t": state.last_t,
        "last_loss": state.last_loss, "total_samples": state.total_samples,
        "ranks": {r: {k: v.tolist() for k, v in recent.cols.items()}
                  for r, recent in state.ranks.items()},
        "medians": {r: recent.median_step_time() for r, recent in state.ranks.items()},
        "history": (series.step_time, series.samples_per_s),
        "steady": state.tracker.result([]),
        "rates": state.rank_rates(state.last_t),
    }


@pytest.mark.parametrize("poll_s", [0.0, 0.5])  # 0.5: reads of about 4 lines, cut or not
@pytest.mark.parametrize(("ranks", "per_rank", "chunk", "sliced"), [
    (4, 300, 100, True),  # a node's few ranks: 12 chunks x 4 ranks, time-ordered slices
    (200, 30, 100, False),  # many ranks: 60 chunks x 200 ranks, chunks of whole ranks
])
def test_a_big_batch_in_chunks_gives_the_figures_of_one_batch(
        ranks: int, per_rank: int, chunk: int, sliced: bool, poll_s: float,
        monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _steps(ranks, per_rank, seed=ranks, poll_s=poll_s)
    assert (ranks * -(-len(steps) // chunk) <= stepstate.SLICED_PASSES_MAX) == sliced
    whole = StepState(started_at=99.0, recent=64)
    whole.add(steps, chunk=len(steps))
    chunked = StepState(started_at=99.0, recent=64)
    taken: list[bool] = []  # each chunk: a slice (no copy) or gathered rows
    rows = Columns.rows

    def chunk_rows(table: Columns, which: np.ndarray | slice) -> Columns:
        taken.append(isinstance(which, slice))
        return rows(table, which)

    monkeypatch.setattr(Columns, "rows", chunk_rows)
    chunked.add(steps, chunk=chunk)
    monkeypatch.undo()
    assert len(taken) >= -(-len(steps) // chunk)
    assert all(taken) if sliced else not any(taken)
    a, b = _figures(whole), _figures(chunked)
    # Sums taken in another order: the same to the last bits or so.
    assert close(a.pop("total_samples"), b.pop("total_samples"))
    assert close(a.pop("history"), b.pop("history"))
    assert a.keys() == b.keys()
    for key in a:
        assert same(a[key], b[key]), key
