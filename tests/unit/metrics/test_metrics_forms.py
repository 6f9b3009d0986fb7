"""Each figure's two forms agree: the batch form over the whole step table and the incremental
form over rows taken a few at a time (metrics/__init__ lists the pairs), on random runs handed
over in random pieces, asked at random moments."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui import metrics
from neurotui.metrics.ranks import last_compiles
from tests.strategies import Run, runs

FACTOR, MIN_SILENCE_S = 3.0, 0.5  # small, so that random runs stall


class Incremental:
    """The incremental forms fed as the live model feeds them, keeping every row."""

    def __init__(self) -> None:
        self.clock = metrics.StepClock(metrics.DEFAULT_WARMUP_STEPS)
        self.tracker = metrics.SteadyTracker()
        self.rows: dict[tuple[int, int], list[dict[str, np.ndarray]]] = defaultdict(list)
        self.last_t: float | None = None

    def take(self, new: pd.DataFrame, together: bool = False) -> None:
        """Rank by rank (take, add_group), or every rank of the piece in one pass
        (take_groups, add_groups), as the live model does."""
        if together and len(new):
            ordered = new.sort_values(["attempt", "rank"], kind="stable")
            key = ordered[["attempt", "rank"]].to_numpy(dtype=np.int64)
            firsts = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]).any(axis=1)])
            groups = [(int(a), int(r)) for a, r in key[firsts]]
            cols = self.clock.take_groups(groups, firsts, *(
                ordered[c].to_numpy(dtype=float) for c in ("t", "step", "dt", "samples")))
            self.tracker.add_groups(groups, firsts, cols["t"], cols["past"],
                                    cols["step_time"], cols["samples"])
            ends = np.append(firsts[1:], len(ordered))
            for group, start, end in zip(groups, firsts, ends, strict=True):
                self.rows[group].append({k: v[start:end] for k, v in cols.items()})
        for (attempt, rank), rows in ([] if together else
                                      new.groupby(["attempt", "rank"], sort=False)):
            cols = self.clock.take(int(attempt), int(rank), *(
                rows[c].to_numpy(dtype=float) for c in ("t", "step", "dt", "samples")))
            self.tracker.add_group(int(attempt), int(rank), cols["t"], cols["past"],
                                   cols["step_time"], cols["samples"])
            self.rows[(int(attempt), int(rank))].append(cols)
        if len(new):
            self.last_t = max(self.last_t or -math.inf, float(new["t"].max()))

    def latest(self) -> dict[int, dict[str, np.ndarray]]:
        attempt = max(a for a, _ in self.rows)
        return {r: {k: np.concatenate([c[k] for c in parts]) for k in parts[0]}
                for (a, r), parts in self.rows.items() if a == attempt}


def derived(run: Run, pieces: Incremental) -> pd.DataFrame:
    """The incremental step times, samples covered and warm-up flags as one table."""
    frames = []
    for (attempt, rank), parts in pieces.rows.items():
        cols = {k: np.concatenate([c[k] for c in parts]) for k in parts[0]}
        frames.append(pd.DataFrame({"attempt": attempt, "rank": rank, **cols}))
    return pd.concat(frames).sort_values(["attempt", "rank", "t", "step"], kind="stable",
                                         ignore_index=True)


@settings(max_examples=80, deadline=None)
@given(runs(), st.data())
def test_batch_and_incremental_forms_agree(run: Run, data: st.DataObject) -> None:
    pieces = Incremental()
    together = data.draw(st.booleans())  # every rank of a piece in one pass, or each
    before: dict = {}
    for stage in run.stages:
        taken = run.taken(stage)
        new = taken[~taken.index.isin(run.taken(before).index)] if before else taken
        pieces.take(new, together)
        before = stage
        silence = data.draw(st.floats(0.0, 60.0))
        now = float(taken["t"].max()) + silence if len(taken) else 100.0
        if len(taken):
            _agree(run, taken, pieces, now)

    # Step time, samples covered and warm-up, row by row.
    batch = metrics.with_step_time(run.steps).reset_index(drop=True)
    batch["past"] = metrics.past_warmup(batch, metrics.DEFAULT_WARMUP_STEPS).to_numpy()
    incremental = derived(run, pieces)
    for column in ("t", "step", "step_time", "samples_covered", "past"):
        np.testing.assert_array_equal(incremental[column].to_numpy(),
                                      batch[column].to_numpy(dtype=incremental[column].dtype),
                                      err_msg=column)


def _agree(run: Run, taken: pd.DataFrame, pieces: Incremental, now: float) -> None:
    latest = pieces.latest()
    # The steady state, compile-hit steps left out.
    expected = metrics.steady_state(taken, compiles=run.compiles)
    got = pieces.tracker.result(run.compiles)
    assert (got is None) == (expected is None)
    if expected is not None:
        assert vars(got) == pytest.approx(vars(expected), rel=1e-6)
    # Throughput now.
    per_rank = [(v["t"], v["samples_covered"], v["step_time"], v["samples"])
                for _, v in sorted(latest.items())]
    assert metrics.window_throughput(per_rank, now) == pytest.approx(
        metrics.current_throughput(taken, now))
    # Per-rank medians.
    medians = {r: m for r, v in latest.items()
               if (m := metrics.rank_median(v["step_time"], v["past"])) is not None}
    table = metrics.rank_step_times(taken)
    assert {r: m for r, (m, _) in medians.items()} == pytest.approx(
        table["median_step_s"].to_dict())
    assert {r: n for r, (_, n) in medians.items()} == table["steps"].to_dict()
    # Stalled ranks.
    compiled = last_compiles(((c["t"], c["rank"]) for c in run.compile_events()), now)
    silent = metrics.stalled(now, {r: float(v["t"][-1]) for r, v in latest.items()},
                             {r: m for r, (m, _) in medians.items()}, compiled, FACTOR,
                             MIN_SILENCE_S)
    assert silent == pytest.approx(metrics.stalled_ranks(
        taken, now, FACTOR, MIN_SILENCE_S, compiles=run.compiles))
    # The phase, running and ended.
    past = any(bool(v["past"][-1]) for v in latest.values())
    last_compile = compiled and max(compiled.values())
    for meta in ({}, {"exit": {"code": 0}, "ended_at": now - 1}):
        assert metrics.phase_of(meta, now, pieces.last_t, last_compile or None, past) == \
            metrics.phase(meta, taken, run.compiles, now)


@st.composite
def rank_pieces(draw: st.DrawFn) -> list[dict[tuple[int, int], dict[str, np.ndarray]]]:
    """Rows of a few (attempt, rank) groups, each in time order with stamps shared by
    several rows (reads), steps that mostly rise (some fall, some unknown), cut into pieces
    anywhere: a read may go on into the next piece."""
    groups = draw(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=1,
                           max_size=5, unique=True))
    rows = {}
    for group in groups:
        n = draw(st.integers(1, 30))
        gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.25, 1.0]), min_size=n,
                             max_size=n))
        moves = draw(st.lists(st.sampled_from([1.0, 1.0, 1.0, 2.0, 0.0, -5.0, np.nan]),
                              min_size=n, max_size=n))
        dt = draw(st.lists(st.sampled_from([np.nan, np.nan, 0.05, 0.0]), min_size=n,
                           max_size=n))
        t = 100.0 + np.cumsum(gaps)
        step = 10.0 + np.cumsum(np.nan_to_num(moves, nan=0.0))
        step[np.isnan(moves)] = np.nan
        rows[group] = {"t": t, "step": step, "dt": np.array(dt),
                       "samples": np.full(n, 8.0)}
    pieces = []
    at = dict.fromkeys(groups, 0)
    while any(at[g] < len(rows[g]["t"]) for g in groups):
        piece = {}
        for g in groups:
            if draw(st.booleans()):
                continue  # nothing of this rank in this piece
            take = draw(st.integers(1, 6))
            if at[g] < len(rows[g]["t"]):
                piece[g] = {k: v[at[g]:at[g] + take] for k, v in rows[g].items()}
                at[g] += take
        pieces.append(piece)
    return pieces


@settings(max_examples=150, deadline=None)
@given(rank_pieces())
def test_ranks_taken_together_are_taken_as_each_alone(
        pieces: list[dict[tuple[int, int], dict[str, np.ndarray]]]) -> None:
    """take_groups and add_groups (every rank of a refresh in one pass) give each row, each
    rank's carry, the steady state and each attempt's first steady step exactly as take and
    add_group rank by rank, reads going on across pieces included."""
    each, together = metrics.StepClock(3), metrics.StepClock(3)
    each_tracker, together_tracker = metrics.SteadyTracker(3), metrics.SteadyTracker(3)
    since: dict[int, float] = {}  # each attempt's first step past warm-up, of any rank
    for piece in pieces:
        groups = sorted(piece)
        if not groups:
            continue
        lengths = [len(piece[g]["t"]) for g in groups]
        firsts = np.cumsum([0, *lengths[:-1]])
        joined = {k: np.concatenate([piece[g][k] for g in groups]) for k in piece[groups[0]]}
        got = together.take_groups(groups, firsts, *(joined[k].copy() for k in (
            "t", "step", "dt", "samples")))
        together_tracker.add_groups(groups, firsts, got["t"], got["past"], got["step_time"],
                                    got["samples"])
        for g, start, n in zip(groups, firsts, lengths, strict=True):
            alone = each.take(*g, *(piece[g][k].copy() for k in ("t", "step", "dt", "samples")))
            each_tracker.add_group(*g, alone["t"], alone["past"], alone["step_time"],
                                   alone["samples"])
            for name, values in alone.items():
                np.testing.assert_array_equal(got[name][start:start + n], values,
                                              err_msg=f"{name} of {g}")
            if alone["past"].any():
                first = float(alone["t"][alone["past"]][0])
                since[g[0]] = min(since.get(g[0], first), first)
        assert together.carry.keys() == each.carry.keys()
        for g, carry in each.carry.items():
            np.testing.assert_array_equal(np.array(dataclass_values(together.carry[g])),
                                          np.array(dataclass_values(carry)), err_msg=str(g))
        assert together_tracker.steady_since == each_tracker.steady_since == since
    a, b = together_tracker.result(None), each_tracker.result(None)
    assert (a is None) == (b is None)
    if a is not None:
        assert vars(a) == pytest.approx(vars(b), rel=1e-9, nan_ok=True)


def dataclass_values(carry: object) -> list[float]:
    """A RankCarry's numbers, its read's two flattened in."""
    values = [getattr(carry, f) for f in ("last_t", "last_step", "first_step", "progress")]
    return [*values, *carry.read]  # type: ignore[attr-defined]
