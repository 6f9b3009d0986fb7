"""The run's steps, taken in incrementally and kept in bounded numpy state.

The dashboard must follow a 32-rank run at 10 steps/s per rank for days within a few percent
of one core. Re-running the pandas metrics over the whole step table every second cannot do
that, so this module keeps, per rank, the last `recent` steps (numpy arrays) plus running
totals, a bucketed whole-run history (history.py) and the steady-state tracker (steady.py).
Every figure follows the definitions in neurotui.metrics, and the tests check them against
those functions; where a figure is limited to the recent steps, its label says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from neurotui import metrics
from neurotui.live.history import RunHistory
from neurotui.live.steady import SteadyTracker

RECENT = 256
"""Steps kept per rank (25 s at 10 steps/s, all of a slow run's recent past)."""
_FIELDS = ("t", "step", "step_time", "samples", "samples_covered", "past")


@dataclass
class RankRecent:
    """One rank's latest attempt: its last steps, and what the next step is measured from."""

    attempt: int
    cols: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["t"]) if self.cols else 0

    def extend(self, new: Mapping[str, np.ndarray], keep: int) -> None:
        if not self.cols:
            self.cols = {k: np.asarray(new[k])[-keep:].copy() for k in _FIELDS}
        else:
            self.cols = {k: np.concatenate([self.cols[k], new[k]])[-keep:] for k in _FIELDS}

    @property
    def last_t(self) -> float:
        return float(self.cols["t"][-1])

    @property
    def last_step(self) -> int:
        return int(self.cols["step"][-1])

    def median_step_time(self) -> tuple[float, int] | None:
        """As metrics.rank_step_times: steady steps, or all timed ones before steady."""
        times = self.cols["step_time"]
        known = np.isfinite(times)
        steady = known & self.cols["past"].astype(bool)
        use = times[steady] if steady.any() else times[known]
        return (float(np.median(use)), len(use)) if len(use) else None


class StepState:
    def __init__(self, started_at: float | None, recent: int = RECENT,
                 warmup_steps: int = metrics.DEFAULT_WARMUP_STEPS) -> None:
        self.started_at = started_at
        self.recent = recent
        self.warmup_steps = warmup_steps
        self.history: RunHistory | None = (
            RunHistory(started_at) if started_at is not None else None)
        self.tracker = SteadyTracker(warmup_steps)
        self.total_samples = 0.0
        self.rows = 0
        self.late_rows = 0
        """Rows handed to `add` that were not after their rank's last row (left out)."""
        self.ranks: dict[int, RankRecent] = {}
        self.latest_attempt = -1
        self.last_t = -math.inf
        self.last_loss: float | None = None
        self.sources: set[str] = set()
        """The `src` of the rows taken (probe, auto, log): where the figures come from."""
        # (attempt, rank) -> (last t, last step, first step, progress): the carry.
        self._carry: dict[tuple[int, int], tuple[float, float, int, int]] = {}

    # -- taking rows in ------------------------------------------------------------------
    def add(self, new: pd.DataFrame, chunk: int = 100_000) -> None:
        """Take in rows handed over only once each (SessionReader.take_steps), in time order.

        The reader merges several files by time, so rows of one rank may come later than rows
        already taken of other ranks: new rows are found per rank, as those after the rank's
        last row taken, not by position. A row not after its own rank's last row (a clock that
        went back) cannot be placed any more: it is left out and counted in `late_rows`.
        """
        if not len(new):
            return
        fresh = self._new_rows(new) if self._carry else new
        self.late_rows += len(new) - len(fresh)
        for start in range(0, len(fresh), chunk):
            self._ingest(fresh.iloc[start:start + chunk])
        self.rows += len(fresh)

    def _new_rows(self, df: pd.DataFrame) -> pd.DataFrame:
        """Rows after their rank's last row taken."""
        t = df["t"].to_numpy(dtype=float)
        step = df["step"].to_numpy(dtype=float)
        rank = df["rank"].to_numpy(dtype=np.int64)
        attempt = df["attempt"].to_numpy(dtype=np.int64)
        new = np.ones(len(df), dtype=bool)
        for (a, r), (last_t, last_step, _, _) in self._carry.items():
            mine = (rank == r) & (attempt == a)
            if mine.any():
                new[mine] = (t[mine] > last_t) | ((t[mine] == last_t) & (step[mine] > last_step))
        return df[new]

    def _ingest(self, df: pd.DataFrame) -> None:
        t = df["t"].to_numpy(dtype=float)
        rank = df["rank"].to_numpy(dtype=np.int64)
        attempt = df["attempt"].to_numpy(dtype=np.int64)
        step = df["step"].to_numpy(dtype=float)
        samples = df["samples"].to_numpy(dtype=float)
        dt = df["dt"].to_numpy(dtype=float) if "dt" in df else np.full(len(df), np.nan)
        loss = df["loss"].to_numpy(dtype=float) if "loss" in df else np.full(len(df), np.nan)
        if "src" in df:
            self.sources.update(str(s) for s in pd.unique(df["src"]))
        known_loss = np.flatnonzero(np.isfinite(loss))
        if len(known_loss):
            self.last_loss = float(loss[known_loss[-1]])
        self.last_t = max(self.last_t, float(np.nanmax(t)))
        if self.history is None:
            self.history = RunHistory(float(np.nanmin(t)))
        # Stable sort by (attempt, rank) keeps each rank's rows in time order.
        order = np.lexsort((rank, attempt))
        keys = np.stack([attempt[order], rank[order]], axis=1)
        cuts = np.flatnonzero(np.any(np.diff(keys, axis=0) != 0, axis=1)) + 1
        all_t, all_st, all_sc = [], [], []
        for idx in np.split(order, cuts):
            a, r = int(attempt[idx[0]]), int(rank[idx[0]])
            cols = self._derive(a, r, t[idx], step[idx], dt[idx], samples[idx])
            all_t.append(cols["t"])
            all_st.append(cols["step_time"])
            all_sc.append(cols["samples_covered"])
            self.tracker.add_group(a, r, cols["t"], cols["past"], cols["step_time"],
                                   cols["samples"])
            self._remember(a, r, cols)
        t_cat, sc = np.concatenate(all_t), np.concatenate(all_sc)
        self.history.add(t_cat, np.concatenate(all_st), sc)
        self.total_samples += float(np.nansum(sc))

    def _derive(self, attempt: int, rank: int, t: np.ndarray, step: np.ndarray,
                dt: np.ndarray, samples: np.ndarray) -> dict[str, np.ndarray]:
        """metrics.with_step_time for one rank's new rows, continued from its last row."""
        prev = self._carry.get((attempt, rank))
        prev_t, prev_step = (prev[0], prev[1]) if prev else (np.nan, np.nan)
        pt = np.concatenate([[prev_t], t[:-1]])
        ps = np.concatenate([[prev_step], step[:-1]])
        with np.errstate(invalid="ignore", divide="ignore"):
            elapsed, advanced = t - pt, step - ps
            rising = advanced > 0
            derived = np.where(rising & (elapsed > 0), elapsed / advanced, np.nan)
            reported = np.isfinite(dt) & (dt > 0)
        step_time = np.where(reported, dt, derived)
        covered = np.where(rising, advanced, 1.0)
        # Warm-up as in metrics._past_warmup: steps past the rank's first in this attempt.
        first = int(min(prev[2], step.min())) if prev else int(step.min())
        progress = np.maximum.accumulate(np.maximum(step - first, prev[3] if prev else 0))
        self._carry[(attempt, rank)] = (float(t[-1]), float(step[-1]), first,
                                        int(progress[-1]))
        return {"t": t, "step": step, "step_time": step_time, "samples": samples,
                "samples_covered": samples * covered,
                "past": progress >= self.warmup_steps}

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

    def reached_steady(self) -> bool:
        """A rank of the latest attempt is `warmup_steps` past its first step."""
        return any(bool(v.cols["past"][-1]) for v in self.latest().values() if len(v))

    def throughput(self, now: float, window_s: float = metrics.DEFAULT_WINDOW_S
                   ) -> float | None:
        """metrics.current_throughput over the kept steps (the window is 30 s; at most the
        last `recent` steps of a rank count, which still gives its rate)."""
        if not self.ranks:
            return None
        total = 0.0
        counted = unknown = 0
        for mine in self.latest().values():
            t = mine.cols["t"]
            inside = (t > now - window_s) & (t <= now)
            if not inside.any():
                continue
            counted += 1
            tw = t[inside]
            covered = mine.cols["samples_covered"][inside]
            if np.isnan(covered).all():
                unknown += 1
                continue
            if len(tw) >= 2:
                typical = float(np.median(np.diff(tw)))
                span = max(tw[-1] - tw[0], (now - tw[0]) - typical)
                if span > 0:
                    total += float(np.nansum(covered[1:])) / span
            else:
                step_time = mine.cols["step_time"][inside][0]
                per_step = mine.cols["samples"][inside][0]
                if np.isfinite(step_time) and step_time > 0 and np.isfinite(per_step):
                    total += float(per_step) / max(float(step_time), now - float(tw[0]))
        return None if unknown and unknown == counted else total

    def rank_medians(self) -> dict[int, tuple[float, int]]:
        out = {}
        for rank, mine in sorted(self.latest().items()):
            med = mine.median_step_time()
            if med is not None:
                out[rank] = med
        return out

    def stalled(self, now: float, medians: Mapping[int, tuple[float, int]],
                compiles: list[Mapping[str, Any]],
                factor: float = metrics.DEFAULT_STALL_FACTOR,
                min_silence_s: float = metrics.DEFAULT_MIN_STALL_S) -> dict[int, float]:
        """As metrics.stalled_ranks: silent ranks -> seconds; a compile restarts the clock."""
        any_rank = max((float(c["t"]) for c in compiles
                        if c.get("rank") is None and float(c["t"]) <= now), default=-math.inf)
        out = {}
        for rank, mine in self.latest().items():
            if rank not in medians:
                continue
            own = max((float(c["t"]) for c in compiles
                       if c.get("rank") == rank and float(c["t"]) <= now), default=-math.inf)
            seen = max(mine.last_t, own, any_rank)
            silence = now - seen
            if silence > max(min_silence_s, factor * medians[rank][0]):
                out[rank] = silence
        return out

    def steady_recent(self) -> dict[int, dict[str, np.ndarray]]:
        """Per rank of the latest attempt, its kept steady steps with a known step time."""
        out = {}
        for rank, mine in self.latest().items():
            keep = mine.cols["past"].astype(bool) & np.isfinite(mine.cols["step_time"])
            if keep.any():
                out[rank] = {k: mine.cols[k][keep] for k in ("t", "step", "step_time")}
        return out

