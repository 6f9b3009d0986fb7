"""Random training runs for property tests: step tables as the session reader gives them, the
pieces a live reader hands them over in, and the compile events beside them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from hypothesis import strategies as st

COLUMNS = ["t", "rank", "step", "samples", "loss", "dt", "src", "attempt"]


@dataclass(frozen=True)
class Run:
    steps: pd.DataFrame
    """Every row, in the reader's order (time, then step)."""
    stages: list[dict[tuple[int, int], int]]
    """How many rows of each (attempt, rank) a live reader had read at each poll: files grow
    unevenly, so rows of one rank land after rows of another already seen."""
    compiles: pd.DataFrame
    """Compile events of no rank (the compiler's own lines) and of one rank (its log)."""

    def taken(self, stage: dict[tuple[int, int], int]) -> pd.DataFrame:
        """The rows read by `stage`, in the reader's order."""
        position = self.steps.groupby(["attempt", "rank"]).cumcount()
        keys = list(zip(self.steps["attempt"], self.steps["rank"], strict=True))
        limit = pd.Series([stage.get(k, 0) for k in keys], index=self.steps.index)
        return self.steps[position < limit]

    def compile_events(self) -> list[dict]:
        """The compile events as the reader's event lists hold them."""
        return [{"t": float(t), "rank": None if pd.isna(r) else int(r)}
                for t, r in zip(self.compiles["t"], self.compiles["rank"], strict=True)]


@st.composite
def runs(draw: st.DrawFn, attempts: int = 2) -> Run:
    """1-3 ranks, then perhaps a restart (attempt 1, after attempt 0 ends). Each rank logs
    every step or every 5th, with or without its own step time (dt), with or without its
    samples, its step counter may start again each epoch, and its lines may be read at polls
    (several sharing a stamp)."""
    rows = []
    t0 = 100.0
    for attempt in range(draw(st.integers(1, attempts))):
        ranks = draw(st.integers(1, 3))
        first_step = draw(st.sampled_from([1, 1, 300]))  # 300: resumed from a checkpoint
        end = t0
        for rank in range(ranks):
            t = t0 + rank * 0.01
            n_steps = draw(st.integers(1, 40))
            every = draw(st.sampled_from([1, 1, 5]))  # log lines every k steps
            report_dt = draw(st.booleans())
            samples = draw(st.sampled_from([16.0, 16.0, math.nan]))
            # >0: a per-epoch step number, starting again at 0 each epoch (resumed mid-epoch:
            # later steps go below the first one recorded)
            epoch = draw(st.sampled_from([0, 0, 7]))
            # >0: its log is read this often, and the lines of a read share its stamp
            poll = draw(st.sampled_from([0.0, 0.0, 0.5, 3.0]))
            for k in range(n_steps):
                dt = draw(st.floats(0.05, 2.0))
                t += dt * every
                step = first_step + every * k
                if epoch:
                    step %= epoch * every
                stamp = math.ceil(t / poll) * poll if poll else t
                rows.append({"t": round(stamp, 4), "rank": rank, "step": step,
                             "samples": samples, "loss": 1.0,
                             "dt": dt if report_dt else math.nan, "src": "probe",
                             "attempt": attempt})
            end = max(end, t)
        t0 = round(end + draw(st.floats(0.5, 20.0)), 4)
    df = pd.DataFrame(rows, columns=COLUMNS).sort_values(["t", "step"], kind="stable",
                                                         ignore_index=True)
    sizes = df.groupby(["attempt", "rank"]).size().to_dict()
    # A reader takes a read's rows (one stamp) together: the supervisor writes them at once.
    cuts = {k: [n for n in range(len(t) + 1) if n in (0, len(t)) or t[n - 1] != t[n]]
            for k, t in df.groupby(["attempt", "rank"])["t"].agg(list).items()}
    stages = []
    seen = dict.fromkeys(sizes, 0)
    for _ in range(draw(st.integers(0, 4))):
        seen = {k: draw(st.sampled_from([n for n in cuts[k] if n >= seen[k]]))
                for k in sizes}
        stages.append(dict(seen))
    stages.append(sizes)
    times = draw(st.lists(st.floats(100, float(df["t"].max()) + 5), max_size=3))
    ranks = sorted({r for _, r in sizes})
    compiles = pd.DataFrame({"t": times, "rank": [
        draw(st.sampled_from([None, *ranks])) for _ in times]}, dtype=object)
    return Run(df, stages, compiles)
