"""What the dashboard shows, computed from the session reader: no Textual in here.

`DashboardModel.refresh()` takes in what the session files gained since the last call and
returns a `DashboardState`: frozen, comparable values that the widgets only render. It runs in
a worker thread, so the UI never waits on file I/O or pandas.

Cost is kept flat however long the run: steps are taken in incrementally (only the rows
appended since the last call), the "now" figures are computed on a bounded recent window (the
last `recent_rows` steps of each rank), the whole-run history is bucketed (history.py), and the
few whole-run views that must see every step (steady state) run under a CPU budget (budget.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from neurotui import metrics
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus, session_status
from neurotui.ui import alerts as rules
from neurotui.ui.budget import Budget
from neurotui.ui.clock import Clock
from neurotui.ui.history import HistorySeries, RunHistory

RECENT_ROWS = 512
"""Steps kept per rank for the "now" views (51 s at 10 steps/s; all of a slow run's recent)."""
TELEMETRY_HISTORY = 300
"""Telemetry samples kept by the reader per kind (5 minutes at 1 Hz): bounds memory."""
INGEST_CHUNK = 100_000
STATUS_EVERY_S = 5.0
STALE_TELEMETRY_S = 10.0
PHASES_MAX_ROWS = 200_000
"""Above this many steps the reader's per-step phase rows are too costly to gather each time."""


@dataclass(frozen=True)
class HeaderState:
    session: str
    instance: str | None
    price_per_hour: float | None
    price_note: str
    elapsed_s: float
    cost_usd: float | None
    phase: str
    status: str
    status_detail: str
    running: bool
    step: int | None
    step_target: int | None
    eta_s: float | None
    projected_usd: float | None
    projection_note: str


@dataclass(frozen=True)
class RankRow:
    rank: int
    median_s: float
    steps: int
    last_step: int | None
    straggler: bool
    silent_s: float | None


@dataclass(frozen=True)
class ThroughputState:
    now_sps: float | None
    steady: metrics.SteadyState | None
    steady_age_s: float
    history: HistorySeries | None
    ranks: tuple[RankRow, ...]
    spd_now: float | None
    spd_steady: float | None
    spd_all_in: float | None
    spd_note: str
    total_samples: float
    last_loss: float | None
    note: str | None


@dataclass(frozen=True)
class CoreRow:
    label: str
    util: float | None
    mem_used: float | None
    mem_total: float | None
    extra: str = ""


@dataclass(frozen=True)
class AcceleratorState:
    kind: str | None  # "neuron", "gpu" or None
    cores: tuple[CoreRow, ...]
    util_history: tuple[float, ...]
    note: str | None
    age_s: float | None


@dataclass(frozen=True)
class HostState:
    cpu: tuple[float, ...]
    cpu_history: tuple[float, ...]
    mem_used: float | None
    mem_total: float | None
    load: tuple[float, ...] | None
    note: str | None
    age_s: float | None


@dataclass(frozen=True)
class ProcRow:
    pid: int
    depth: int
    name: str
    role: str
    cpu: float | None
    rss: float | None


@dataclass(frozen=True)
class ProcsState:
    rows: tuple[ProcRow, ...]
    total_cpu: float | None
    total_rss: float | None
    note: str | None
    age_s: float | None


@dataclass(frozen=True)
class DashboardState:
    now: float
    header: HeaderState
    throughput: ThroughputState
    accelerator: AcceleratorState
    host: HostState
    procs: ProcsState
    alerts: tuple[rules.Alert, ...]
    ranks: tuple[int, ...]
    problems: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


class DashboardModel:
    """Live (or replayed) view of one session; call `refresh()` from one thread only."""

    def __init__(self, reader: SessionReader, clock: Clock, *,
                 status: Callable[[], SessionStatus] | None = None,
                 recent_rows: int = RECENT_ROWS,
                 monotonic: Callable[[], float] | None = None) -> None:
        self.reader = reader
        self.clock = clock
        self._status_fn = status or (lambda: session_status(reader.dir))
        self._status: SessionStatus | None = None
        self._status_at = -math.inf
        self.recent_rows = recent_rows
        budget_args = {} if monotonic is None else {"monotonic": monotonic}
        self._steps_budget = Budget(0.02, **budget_args)
        self._steady_budget = Budget(0.01, **budget_args)
        self._reset_steps()
        self._steady: metrics.SteadyState | None = None
        self._steady_at = 0.0
        self._phases_tail: pd.DataFrame | None = None
        self._compiles_n = -1
        self._compiles = pd.DataFrame()

    # -- steps, incrementally ------------------------------------------------------------
    def _reset_steps(self) -> None:
        started = self.reader.meta.get("started_at")
        self._history: RunHistory | None = (
            RunHistory(float(started)) if isinstance(started, (int, float)) else None)
        self._seen = 0
        self._boundary: tuple[float, int, int] | None = None
        self._carry = pd.DataFrame()
        self._recent = pd.DataFrame()
        self._total_samples = 0.0
        self._first_step: dict[tuple[int, int], int] = {}
        self._steady_since: dict[int, float] = {}

    def _take_steps(self, df: pd.DataFrame) -> None:
        n = len(df)
        if n < self._seen or (self._seen and _boundary(df, self._seen - 1) != self._boundary):
            # The reader re-sorted (late lines) or dropped log rows for a probed rank: rare,
            # so start over rather than patch.
            self._reset_steps()
        if n == self._seen:
            return
        for start in range(self._seen, n, INGEST_CHUNK):
            self._ingest(df.iloc[start:min(n, start + INGEST_CHUNK)])
        self._seen = n
        self._boundary = _boundary(df, n - 1)

    def _ingest(self, new: pd.DataFrame) -> None:
        if self._history is None:
            self._history = RunHistory(float(new["t"].iloc[0]))
        frame = pd.concat([self._carry, new.assign(_new=True)], ignore_index=True)
        frame["_new"] = frame["_new"].fillna(False).astype(bool)
        derived = metrics.with_step_time(frame)
        fresh = derived[derived["_new"]]
        self._history.add(fresh["t"].to_numpy(), fresh["step_time"].to_numpy(),
                          fresh["samples_covered"].to_numpy())
        self._total_samples += float(fresh["samples_covered"].fillna(0.0).sum())
        self._note_steady_since(fresh)
        # The last row of each rank: the next chunk's first step time is measured from it.
        self._carry = derived.groupby(["attempt", "rank"], sort=False).tail(1)[
            list(new.columns)].assign(_new=False)
        recent = pd.concat([self._recent, new], ignore_index=True) if len(self._recent) \
            else new.copy()
        self._recent = recent.groupby("rank", sort=False).tail(self.recent_rows) \
            .reset_index(drop=True)

    def _note_steady_since(self, rows: pd.DataFrame) -> None:
        """When each attempt reached steady state: a rank `warmup` steps past its first."""
        for (attempt, rank), mine in rows.groupby(["attempt", "rank"], sort=False):
            key = (int(attempt), int(rank))
            first = self._first_step.setdefault(key, int(mine["step"].min()))
            done = mine[mine["step"] - first >= metrics.DEFAULT_WARMUP_STEPS]
            if len(done):
                t = float(done["t"].min())
                self._steady_since[key[0]] = min(self._steady_since.get(key[0], t), t)

    # -- refresh -------------------------------------------------------------------------
    def refresh(self) -> DashboardState:
        reader = self.reader
        added = reader.poll()
        now = self.clock.now()
        if (added or not self._seen) and self._steps_budget.due():
            started = self._steps_budget.start()
            full = reader.steps()
            self._take_steps(full)
            self._steps_budget.spent(started)
            if self._steady_budget.due() and len(full):
                started = self._steady_budget.start()
                self._steady = metrics.steady_state(full, compiles=self._compile_frame())
                if len(full) <= PHASES_MAX_ROWS:
                    phases = reader.phases()
                    self._phases_tail = phases.tail(self.recent_rows * 4) if len(phases) \
                        else None
                self._steady_at = now
                self._steady_budget.spent(started)
        meta = reader.meta
        status = self._session_status(now)
        ended_at = _num(meta.get("ended_at"))
        view_now = min(now, ended_at) if ended_at is not None else now
        compiles = self._compile_frame()
        recent = self._recent
        phase = metrics.phase(meta, recent, compiles, now)
        running = metrics.run_is_over(meta, now) is False and status.running

        per_rank = metrics.rank_step_times(recent) if len(recent) else pd.DataFrame()
        stragglers = set(metrics.find_stragglers(per_rank)) if len(per_rank) else set()
        silent = metrics.stalled_ranks(recent, view_now, compiles=compiles) \
            if running and len(recent) else {}
        throughput = self._throughput(view_now, per_rank, stragglers, silent, meta)
        header = self._header(now, view_now, meta, phase, status, throughput)
        host, accel, procs = self._host(now), self._accelerator(now), self._procs(now)
        alert_list = self._alerts(view_now, phase, compiles, silent, per_rank)
        ranks = tuple(sorted(int(r) for r in recent["rank"].unique())) if len(recent) else ()
        return DashboardState(now=now, header=header, throughput=throughput,
                              accelerator=accel, host=host, procs=procs,
                              alerts=tuple(a for a in alert_list if a is not None),
                              ranks=ranks, problems=reader.problems.summary())

    def _session_status(self, now: float) -> SessionStatus:
        if self._status is None or now - self._status_at >= STATUS_EVERY_S \
                or now < self._status_at:
            self._status = self._status_fn()
            self._status_at = now
        return self._status

    def _compile_frame(self) -> pd.DataFrame:
        events = self.reader.events.get("compile", ())
        if len(events) != self._compiles_n:
            self._compiles = self.reader.frame("compile")
            self._compiles_n = len(events)
        return self._compiles

    # -- panels --------------------------------------------------------------------------
    def _header(self, now: float, view_now: float, meta: Mapping[str, Any], phase: str,
                status: SessionStatus, tp: ThroughputState) -> HeaderState:
        started = _num(meta.get("started_at"))
        elapsed = (view_now - started) if started is not None else math.nan
        price_info = meta.get("price") or {}
        price = _num(price_info.get("usd_per_hour"))
        instance = (meta.get("instance") or {}).get("type")
        if price is not None:
            bits = [str(price_info.get(k)) for k in ("source", "as_of") if price_info.get(k)]
            price_note = ", ".join(bits)
        else:
            price_note = str(price_info.get("note") or (
                "no price: instance type unknown" if not instance else
                f"no price known for {instance}"))
        cost = metrics.cost_so_far(price, started, now, _num(meta.get("ended_at")))
        step = metrics.latest_step(self._recent) if len(self._recent) else None
        target = _int((meta.get("config") or {}).get("step_target"))
        eta = projected = None
        note = ""
        if target is not None:
            steady = tp.steady
            if phase not in ("warm-up", "steady"):
                note = "ETA after warm-up" if phase in ("starting", "compiling") else ""
            elif steady is None:
                note = "ETA once steady"
            else:
                proj = metrics.project_to_step(step, target, steady.step_time_median, price,
                                               cost, view_now)
                if proj is not None:
                    eta, projected = proj.remaining_s, proj.total_usd
                    if projected is None:
                        note = "no price"
        return HeaderState(
            session=str(meta.get("id") or meta.get("name") or self.reader.dir.name),
            instance=str(instance) if instance else None, price_per_hour=price,
            price_note=price_note, elapsed_s=elapsed, cost_usd=cost, phase=phase,
            status=status.state, status_detail=status.detail, running=status.running,
            step=step, step_target=target, eta_s=eta, projected_usd=projected,
            projection_note=note)

    def _throughput(self, view_now: float, per_rank: pd.DataFrame, stragglers: set[int],
                    silent: Mapping[int, float], meta: Mapping[str, Any]) -> ThroughputState:
        recent = self._recent
        price = _num((meta.get("price") or {}).get("usd_per_hour"))
        now_sps = metrics.current_throughput(recent, view_now) if len(recent) else None
        steady = self._steady
        started = _num(meta.get("started_at"))
        cost = metrics.cost_so_far(price, started, view_now, _num(meta.get("ended_at")))
        rows = []
        if len(recent):
            last = recent[recent["attempt"] == recent["attempt"].max()]
            last_steps = last.groupby("rank")["step"].max()
            for rank, row in per_rank.iterrows():
                rows.append(RankRow(int(rank), float(row["median_step_s"]), int(row["steps"]),
                                    _int(last_steps.get(rank)), int(rank) in stragglers,
                                    silent.get(int(rank))))
        loss = None
        if len(recent) and "loss" in recent:
            known = recent["loss"].dropna()
            loss = float(known.iloc[-1]) if len(known) else None
        history = self._history.series(view_now) if self._history is not None else None
        note = None if len(recent) else "no step recorded yet"
        spd_note = "" if price is not None else "no price"
        return ThroughputState(
            now_sps=now_sps, steady=steady, steady_age_s=max(0.0, view_now - self._steady_at)
            if steady is not None else 0.0, history=history, ranks=tuple(rows),
            spd_now=metrics.samples_per_dollar(now_sps, price),
            spd_steady=metrics.samples_per_dollar(steady.samples_per_s if steady else None,
                                                  price),
            spd_all_in=metrics.all_in_samples_per_dollar(self._total_samples, cost),
            spd_note=spd_note, total_samples=self._total_samples, last_loss=loss, note=note)

    def _accelerator(self, now: float) -> AcceleratorState:
        events = self.reader.events
        latest = [(e[-1]["t"], kind) for kind in ("neuron", "gpu") if (e := events.get(kind))]
        if not latest:
            return AcceleratorState(None, (), (), _no_accelerator_note(events), None)
        _, kind = max(latest)
        series = events[kind]
        last = series[-1]
        if kind == "neuron":
            cores = tuple(CoreRow(f"nc{c.get('core')}", _num(c.get("util")),
                                  _num(c.get("mem_device")), None,
                                  f"pid {c['pid']}" if c.get("pid") is not None else "")
                          for c in last.get("cores") or ())
        else:
            cores = tuple(CoreRow(f"gpu{g.get('index')}", _num(g.get("util")),
                                  _num(g.get("mem_used")), _num(g.get("mem_total")),
                                  f"{g['power_w']:.0f}W" if _num(g.get("power_w")) is not None
                                  else "")
                          for g in last.get("gpus") or ())
        history = tuple(float(np.mean(u)) if (u := rules.accelerator_utils(e)) else math.nan
                        for e in list(series)[-TELEMETRY_HISTORY:])
        age = now - float(last["t"])
        note = None if cores else f"{kind} telemetry has no device in its last sample"
        return AcceleratorState(kind, cores, history, note, age)

    def _host(self, now: float) -> HostState:
        series = self.reader.events.get("host")
        if not series:
            return HostState((), (), None, None, None, "no host telemetry recorded yet", None)
        last = series[-1]
        cpu = tuple(float(x) for x in last.get("cpu") or () if _num(x) is not None)
        history = tuple(float(np.mean(c)) if (c := e.get("cpu")) else math.nan
                        for e in list(series)[-TELEMETRY_HISTORY:])
        load = last.get("load")
        return HostState(cpu, history, _num(last.get("mem_used")), _num(last.get("mem_total")),
                         tuple(float(x) for x in load) if isinstance(load, list) else None,
                         None, now - float(last["t"]))

    def _procs(self, now: float) -> ProcsState:
        last = self.reader.last("procs")
        if last is None:
            return ProcsState((), None, None, "no process sample recorded yet", None)
        procs = [p for p in last.get("procs") or () if isinstance(p.get("pid"), int)]
        rows = tuple(process_tree(procs))
        cpus = [c for p in procs if (c := _num(p.get("cpu"))) is not None]
        rss = [r for p in procs if (r := _num(p.get("rss"))) is not None]
        note = None if procs else "the job has no live process"
        return ProcsState(rows, sum(cpus) if cpus else None, sum(rss) if rss else None, note,
                          now - float(last["t"]))

    def _alerts(self, now: float, phase: str, compiles: pd.DataFrame,
                silent: Mapping[int, float], per_rank: pd.DataFrame) -> list[rules.Alert | None]:
        events = self.reader.events
        accel_kind = "neuron" if events.get("neuron") else "gpu"
        steady_rows = metrics.steady_steps(self._recent) if len(self._recent) else \
            pd.DataFrame(columns=["t", "rank", "step", "step_time"])
        steady_since = None
        if len(self._recent):
            steady_since = self._steady_since.get(int(self._recent["attempt"].max()))
        medians = {int(r): float(v) for r, v in per_rank.get("median_step_s", {}).items()} \
            if len(per_rank) else {}
        last_steps = {int(r): int(s) for r, s in
                      self._recent.groupby("rank")["step"].max().items()} \
            if len(self._recent) else {}
        quiet = steady_rows
        if len(compiles) and len(steady_rows):
            quiet = metrics.steady_steps(self._recent, compiles=compiles)
        return [
            rules.exited(self.reader.meta, events.get("proc_exit", []), phase),
            rules.stalled(silent, medians, last_steps),
            rules.cpu_bound_input(list(events.get("host", ())),
                                  list(events.get(accel_kind, ())), self.reader.last("procs"),
                                  now, phase),
            rules.recompilation(list(events.get("compile", ())), self.reader.last("procs")
                                if phase == "steady" else None, steady_rows, steady_since, now),
            rules.step_variance(quiet, self._phases_tail),
            rules.restarts(events.get("restart", [])),
            _warnings(events.get("warning", [])),
        ]


def process_tree(procs: list[Mapping[str, Any]]) -> list[ProcRow]:
    """Depth-first order, children by pid; processes whose parent is not in the job are roots."""
    by_pid = {p["pid"]: p for p in procs}
    children: dict[int, list[int]] = {}
    roots = []
    for pid, p in sorted(by_pid.items()):
        parent = p.get("ppid")
        if parent in by_pid and parent != pid:
            children.setdefault(parent, []).append(pid)
        else:
            roots.append(pid)
    out: list[ProcRow] = []
    stack = [(pid, 0) for pid in reversed(roots)]
    seen: set[int] = set()
    while stack:
        pid, depth = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        p = by_pid[pid]
        out.append(ProcRow(pid, depth, str(p.get("name") or "?"), str(p.get("role") or "?"),
                           _num(p.get("cpu")), _num(p.get("rss"))))
        stack.extend((c, depth + 1) for c in reversed(children.get(pid, [])))
    return out


def _no_accelerator_note(events: Mapping[str, Any]) -> str:
    failing: dict[str, str] = {}
    for e in events.get("source_status", ()):
        source = str(e.get("source"))
        if e.get("ok"):
            failing.pop(source, None)
        else:
            failing[source] = str(e.get("message") or "failing")
    if not failing:
        return "no accelerator telemetry: no accelerator source reported in this session"
    messages = list(dict.fromkeys(failing.values()))
    if len(messages) == 1 and messages[0].startswith("no accelerator telemetry"):
        return messages[0]
    return "no accelerator telemetry: " + "; ".join(messages)


def _warnings(events: list[Mapping[str, Any]]) -> rules.Alert | None:
    if not events:
        return None
    shown = tuple(f"{e.get('source')}: {e.get('message')}" for e in events[-3:])
    return rules.Alert("warnings", "info", f"{len(events)} recorded warning(s)", shown)


def _boundary(df: pd.DataFrame, i: int) -> tuple[float, int, int]:
    return (float(df["t"].iat[i]), int(df["rank"].iat[i]), int(df["step"].iat[i]))


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    number = _num(value)
    return None if number is None else int(number)
