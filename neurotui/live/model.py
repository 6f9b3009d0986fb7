"""What the dashboard shows, computed from the session reader: no Textual in here.

`DashboardModel.refresh()` takes in what the session files gained since the last call and
returns a `DashboardState`: frozen, comparable values that the widgets only render. It runs in
a worker thread, so the UI never waits on file I/O. It works on numpy columns and never
imports pandas (a third of a second and 70 MB of a new dashboard process).

Cost is kept flat however long the run: steps are taken in incrementally into bounded numpy
state (stepstate.py: the last steps of each rank, running totals, a bucketed whole-run history,
the steady-state tracker), and what still grows with the run (the steady-state quantiles) is
refreshed under a CPU budget (budget.py). The reader hands its steps over as they come
(take_steps) and keeps none: a long run's whole step table would be most of the dashboard's
memory. A replay's TimelineView hands over its steps up to the cursor the same way, so live
and replay share every line of this model.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from neurotui import metrics
from neurotui.live import alerts as rules
from neurotui.live.budget import Budget
from neurotui.live.clock import Clock
from neurotui.live.cpuheat import NO_MARKS, CpuHeatHistory, CpuHistory, CpuMarks, cpu_marks
from neurotui.live.history import HistorySeries
from neurotui.live.neuron import NeuronState, neuron_state
from neurotui.live.nodes import NodesState, nodes_state
from neurotui.live.stepstate import RECENT, StepState
from neurotui.metrics import finite_or_none as _num
from neurotui.metrics.breakdown import (
    NO_PHASES_NOTE,
    BreakdownHistory,
    Growth,
    PhaseSplit,
    StepBreakdown,
)
from neurotui.metrics.compiles import compile_spans, compiling_now
from neurotui.session.columns import Columns
from neurotui.session.jobreader import JobReader
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus, session_status

if TYPE_CHECKING:
    from neurotui.session.timeline import TimelineView

TELEMETRY_HISTORY = 40
"""Telemetry samples the reader keeps per kind: the alerts look 30 s back, the panels show the
last sample; the sparklines keep their own longer history of per-sample means."""
SPARK_HISTORY = 600
STATUS_EVERY_S = 5.0
ALERTS_EVERY_S = 5.0
STEADY_GROWTH = 0.005
"""Once steady, the steady state is worked out again when its steps grew by this share (and
at the run's end): over a day's million steps its quantiles take tens of milliseconds, and
half a percent more steps cannot move them visibly. Its age is shown beside it."""
BIG_BATCH_ROWS = 50_000
"""A batch of steps this big (attaching to a long run) is worth handing its memory back."""


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
    compiling: str | None = None
    """While a compile runs: 'compiling: torch.compile, rank 0, 12 s so far'."""


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
    source: str | None = None
    """Where the step figures come from ("automatic probe (host-side, xla)")."""
    breakdown: BreakdownState | None = None
    """The step breakdown, whose one line the panel shows when phases are recorded."""
    dataset_size: float | None = None
    """Samples in an epoch (the run's --dataset-size), or None when not given."""
    epoch: metrics.Projection | None = None
    """One epoch's time and cost at the steady rate (once steady, with a dataset size)."""
    epochs_done: float | None = None


@dataclass(frozen=True)
class CoreRow:
    label: str
    util: float | None
    mem_used: float | None
    mem_total: float | None
    extra: str = ""
    flops_util: float | None = None
    """A NeuronCore's FLOPs over its peak (a fraction); None: unknown (neuron.flops_note)."""
    physical: tuple[tuple[str, float | None], ...] = ()
    """trn2's physical cores behind this logical one, with their utilisation."""


@dataclass(frozen=True)
class AcceleratorState:
    kind: str | None  # "neuron", "gpu" or None
    cores: tuple[CoreRow, ...]
    util_history: tuple[float, ...]
    note: str | None
    age_s: float | None
    neuron: NeuronState | None = None
    """Neuron's figures beyond utilisation (live/neuron.py): logical cores, LNC, FLOPs
    utilisation, memory by kind, errors, latency, ECC."""


@dataclass(frozen=True)
class HostState:
    cpu: tuple[float, ...]
    cpu_history: tuple[float, ...]
    mem_used: float | None
    mem_total: float | None
    load: tuple[float, ...] | None
    note: str | None
    age_s: float | None
    heat: CpuHistory | None = None
    """Every CPU over the last samples (the heat map); None before the first sample."""
    marks: CpuMarks = NO_MARKS
    """The CPUs the ranks and DataLoader workers last ran on (latest process sample)."""


@dataclass(frozen=True)
class ProcRow:
    pid: int
    depth: int
    name: str
    role: str
    cpu: float | None
    rss: float | None
    cpu_num: int | None = None
    """The CPU it last ran on; None when not recorded (sessions from before it was)."""


@dataclass(frozen=True)
class ProcsState:
    rows: tuple[ProcRow, ...]
    total_cpu: float | None
    total_rss: float | None
    note: str | None
    age_s: float | None
    ended: bool = False


@dataclass(frozen=True)
class BreakdownState:
    """Where a step's time goes (metrics/breakdown.py): the job's and each rank's split of
    its recent steady steps, the job's shares over time, the phase that grew."""

    job: PhaseSplit | None
    ranks: tuple[PhaseSplit, ...]
    history: BreakdownHistory | None
    grew: Growth | None
    """The job's phase that grew against its steady baseline (job.grew)."""
    note: str | None
    """Why there is no split: no phases recorded (and how to add them), or not steady yet."""
    source: str | None = None
    """What the phases are: the script's own, or the automatic probe's data wait and rest."""


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
    breakdown: BreakdownState | None = None
    nodes: NodesState | None = None
    """A job of many nodes: a row per node (the host, accelerator and process panels then
    show the node in focus, `nodes.focus`). None: a run of one node."""


class _SeriesMeans:
    """Per-sample means of a telemetry series (mean CPU, mean core utilisation), computed
    once per sample: the reader keeps the last few hundred samples and only appends."""

    def __init__(self, mean: Callable[[Mapping[str, Any]], float]) -> None:
        self.mean = mean
        self._values: deque[tuple[float, float]] = deque(maxlen=SPARK_HISTORY)

    def update(self, series: Sequence[Mapping[str, Any]]) -> tuple[float, ...]:
        if series and self._values and float(series[-1].get("t", math.inf)) < \
                self._values[-1][0]:
            self._values.clear()  # the series went back in time (a replay seeking back)
        last = self._values[-1][0] if self._values else -math.inf
        fresh = []
        for event in reversed(series):
            t = float(event.get("t", -math.inf))
            if t <= last:
                break
            fresh.append((t, self.mean(event)))
        self._values.extend(reversed(fresh))
        return tuple(v for _, v in self._values)


class DashboardModel:
    """Live (or replayed) view of one session; call `refresh()` from one thread only."""

    def __init__(self, reader: SessionReader | TimelineView | JobReader, clock: Clock, *,
                 status: Callable[[], SessionStatus] | None = None,
                 recent: int = RECENT, throttle: bool = True,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """`throttle=False` computes everything on every refresh (tests, exports): figures
        are then a pure function of the files and the clock. `monotonic` times the budgets
        (tests pass their own)."""
        self.reader = reader
        self.clock = clock
        self._status_fn = status or (reader.status if isinstance(reader, JobReader)
                                     else lambda: session_status(reader.dir))
        self._status: SessionStatus | None = None
        self._status_at = -math.inf
        self.recent = recent
        self._steps_budget = Budget(0.01, monotonic=monotonic, enabled=throttle)
        self._steady_budget = Budget(0.005, monotonic=monotonic, enabled=throttle)
        # Alerts judge trends over tens of seconds: every few seconds is enough.
        self._alerts_budget = Budget(0.01, ALERTS_EVERY_S, monotonic, enabled=throttle)
        self._alerts: tuple[rules.Alert, ...] = ()
        self._alerts_phase = ""
        self._util_means = {k: _SeriesMeans(rules.mean_util) for k in ("neuron", "gpu")}
        self._cpu_means = _SeriesMeans(rules.mean_cpu)
        self._cpu_heat = CpuHeatHistory()
        self._steady: metrics.SteadyState | None = None
        self._steady_dirty = True
        self._steady_at = 0.0
        self._phases_tail: Columns | None = None
        self._breakdown_of: object = None
        """The tracker the breakdown kept was worked out from (a new one after a reset)."""
        self._breakdown_key: tuple[int, int] | None = None
        self._breakdown: StepBreakdown = StepBreakdown(None, ())
        self._compiles_n = -1
        self._compiles = Columns()
        self.steps = self._new_steps()
        self.resets = 0
        self._unfetched = True
        """The reader read something since the steps were last fetched."""
        self.fetched_table = False
        """True when the last refresh freed a big block (the reader's old step table, or a
        big batch of steps handed over): the moment to hand freed memory back (memory.py)."""

    def _new_steps(self) -> StepState:
        self._steady_dirty = True
        self._steady_rows = 0  # taken in anew (a replay went back): worked out anew
        return StepState(_num(self.reader.meta.get("started_at")), self.recent)

    # -- refresh -------------------------------------------------------------------------
    def read(self) -> None:
        """Read what the session gained, its steps to be taken in at the next refresh: for a
        follower that looks for alerts more often than it works the figures out."""
        self._unfetched |= self.reader.poll() > 0

    def refresh(self, *, all_steps: bool = False) -> DashboardState:
        """The figures now. `all_steps`: from every step the reader holds, not only those the
        budget let in (a follower that works them out every few seconds, as headless does,
        must not print figures a budget's wait old)."""
        added = self.reader.poll()
        now = self.clock.now()
        self.fetched_table = False
        self._unfetched |= added > 0
        # Rows read but not fetched are fetched when the budget allows even if nothing came
        # since (the last lines of a run that just ended), and at once when the run is over:
        # its figures must stand complete, not short of the steps deferred last.
        over = metrics.run_is_over(self.reader.meta, now)
        if (self._unfetched or not self.steps.rows) and \
                (over or all_steps or self._steps_budget.due()):
            started = self._steps_budget.start()
            self._unfetched = False
            before = self.steps.rows
            self.fetched_table = self._take_new_steps() >= BIG_BATCH_ROWS
            self._steady_dirty |= self.steps.rows != before
            self._steps_budget.spent(started)
        reader = self.reader
        if self._steady_dirty and (over or (self._steady_budget.due()  # the end: complete
                                            and self._steady_grew())):
            started = self._steady_budget.start()
            self._steady = self.steps.tracker.result(self._compile_table())
            self._steady_dirty = False
            self._steady_at = now
            self._steady_rows = self.steps.rows
            self._steady_budget.spent(started)
        meta = reader.meta
        status = self._session_status(now, metrics.run_is_over(meta, now))
        ended_at = _num(meta.get("ended_at"))
        view_now = min(now, ended_at) if ended_at is not None else now
        compiles = list(reader.events.get("compile", ()))
        phase = self.steps.phase(meta, compiles, now)
        running = not metrics.run_is_over(meta, now) and status.running
        medians = self.steps.rank_medians()
        stragglers = set(metrics.find_stragglers({r: m for r, (m, _) in medians.items()}))
        silent = self.steps.stalled(view_now, medians, compiles) if running else {}
        throughput = self._throughput(view_now, medians, stragglers, silent, meta)
        header = self._header(now, view_now, meta, phase, status, running, throughput)
        host, accel, procs = self._host(now), self._accelerator(now), self._procs(now)
        if not running:  # old samples are expected once the job is gone: no staleness flag
            host, accel = replace(host, age_s=None), replace(accel, age_s=None)
            procs = replace(procs, age_s=None, ended=True)
        breakdown = self._step_breakdown(view_now)  # before the alerts: starvation reads it
        if self._alerts_budget.due() or phase != self._alerts_phase:
            started = self._alerts_budget.start()
            found = self._judge(view_now, phase, compiles, silent, medians, breakdown.job)
            self._alerts = tuple(a for a in found if a is not None)
            self._alerts_phase = phase
            self._alerts_budget.spent(started)
        problems = reader.problems.summary()
        alerts = self._alerts + ((rules.unreadable(problems),) if problems else ())
        nodes = (nodes_state(reader, self.steps, medians, view_now)
                 if isinstance(reader, JobReader) else None)
        return DashboardState(now=now, header=header,
                              throughput=replace(throughput, breakdown=breakdown),
                              accelerator=accel, host=host, procs=procs, alerts=alerts,
                              ranks=tuple(sorted(self.steps.ranks)), problems=problems,
                              breakdown=breakdown, nodes=nodes)

    def _steady_grew(self) -> bool:
        return not self._steady_budget.enabled or self._steady is None or \
            self.steps.rows >= self._steady_rows * (1.0 + STEADY_GROWTH)

    def _take_new_steps(self) -> int:
        """The steps the reader took in since the last call; returns how many."""
        taken = self.reader.take_steps()
        if taken is None:
            # Rows already counted are gone: a live reader dropped a rank's log rows once its
            # probe took over (once per such rank, early in a run), or a replay went back in
            # time. The figures cannot forget rows, so they start over from a fresh reader.
            self.resets += 1
            self.reader = self.reader.reopened()
            self.steps = self._new_steps()
            self._phases_tail = None
            self._compiles_n = -1
            taken = self.reader.take_steps()
            if taken is None:  # a new reader has handed nothing out yet: cannot happen
                return 0
        for batch in taken.batches():  # (a job: a batch per node)
            self.steps.add(batch.steps, phases=batch.phases, late_losses=batch.late_losses)
            if len(batch.phases):
                tail = batch.phases if self._phases_tail is None else Columns.concat(
                    [self._phases_tail, batch.phases])
                # A copy: a slice would keep a first batch's whole phase table alive.
                self._phases_tail = tail.tail(self.recent * 4)
        return taken.rows

    def _session_status(self, now: float, over: bool) -> SessionStatus:
        """Asked every few seconds (it checks processes); at once when meta says it ended."""
        if self._status is None or now - self._status_at >= STATUS_EVERY_S \
                or now < self._status_at or (over and self._status.running):
            self._status = self._status_fn()
            self._status_at = now
        return self._status

    def _compile_table(self) -> Columns:
        """The compile events' times and ranks (NaN: of no rank), as metrics.compile_hits
        takes them."""
        events = self.reader.events.get("compile", ())
        if len(events) != self._compiles_n:
            self._compiles = Columns.of_records(events, ("t", "rank"))
            self._compiles_n = len(events)
        return self._compiles

    # -- panels --------------------------------------------------------------------------
    def _header(self, now: float, view_now: float, meta: Mapping[str, Any], phase: str,
                status: SessionStatus, running: bool, tp: ThroughputState) -> HeaderState:
        started = _num(meta.get("started_at"))
        elapsed = (view_now - started) if started is not None else math.nan
        price_info = meta.get("price") or {}
        price = _num(price_info.get("usd_per_hour"))
        instance = (meta.get("instance") or {}).get("type")
        # Why there is no price is the throughput panel's (spd_note, by its samples/$):
        # the header marks only that there is none.
        # The region the price is published for: another region's figure is another price.
        bits = [str(price_info.get(k)) for k in ("source", "as_of") if price_info.get(k)]
        if price_info.get("price_region"):
            bits.insert(1, f"{price_info['price_region']} price")
        price_note = ", ".join(bits) if price is not None else ""
        cost = metrics.cost_so_far(price, started, now, _num(meta.get("ended_at")))
        step = self.steps.latest_step()
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
                if proj is not None:  # (no price: no projected cost, the header marks it)
                    eta, projected = proj.remaining_s, proj.total_usd
        session = str(meta.get("id") or meta.get("name") or self.reader.dir.name)
        if isinstance(self.reader, JobReader):  # the job's name, nodes and their instances
            nodes = len(self.reader.parts)
            session = f"job {self.reader.job_id}, {nodes} node{'s' if nodes > 1 else ''}"
            instance = f"{nodes} x {instance}" if instance else None
        return HeaderState(
            session=session, instance=str(instance) if instance else None, price_per_hour=price,
            price_note=price_note, elapsed_s=elapsed, cost_usd=cost, phase=phase,
            status=status.state, status_detail=status.detail, running=running,
            step=step, step_target=target, eta_s=eta, projected_usd=projected,
            projection_note=note,
            compiling=self._compiling(view_now) if phase == "compiling" else None)

    def _compiling(self, now: float) -> str | None:
        """What is compiling at `now`, and for how long so far (metrics/compiles.py)."""
        span = compiling_now(compile_spans(self.reader.events.get("compile", ())), now)
        if span is None:
            return None
        rank = "rank ?" if span.rank is None else f"rank {span.rank}"
        return f"compiling: {span.source}, {rank}, {now - span.start:.0f} s so far"

    def _throughput(self, view_now: float, medians: Mapping[int, tuple[float, int]],
                    stragglers: set[int], silent: Mapping[int, float],
                    meta: Mapping[str, Any]) -> ThroughputState:
        steps = self.steps
        price = _num((meta.get("price") or {}).get("usd_per_hour"))
        now_sps = steps.throughput(view_now)
        steady = self._steady
        started = _num(meta.get("started_at"))
        cost = metrics.cost_so_far(price, started, view_now, _num(meta.get("ended_at")))
        size = _num((meta.get("config") or {}).get("dataset_size"))
        size = size if size is not None and size > 0 else None
        latest = steps.latest()
        rows = tuple(RankRow(rank, median, n, latest[rank].last_step, rank in stragglers,
                             silent.get(rank))
                     for rank, (median, n) in medians.items())
        history = (steps.history.series(view_now, self._compile_table().floats("t"))
                   if steps.history is not None else None)
        return ThroughputState(
            now_sps=now_sps, steady=steady,
            steady_age_s=max(0.0, view_now - self._steady_at) if steady is not None else 0.0,
            history=history, ranks=rows,
            spd_now=metrics.samples_per_dollar(now_sps, price),
            spd_steady=metrics.samples_per_dollar(steady.samples_per_s if steady else None,
                                                  price),
            spd_all_in=metrics.all_in_samples_per_dollar(steps.total_samples, cost),
            spd_note="" if price is not None else price_reason(meta),
            total_samples=steps.total_samples, last_loss=steps.last_loss,
            note=None if steps.ranks else "no step recorded yet",
            dataset_size=size, epoch=metrics.per_epoch(
                size, steady.samples_per_s if steady else None, price),
            epochs_done=steps.total_samples / size if size else None,
            source=metrics.step_sources(steps.sources,
                                        list(self.reader.events.get("probe_info", ())),
                                        self.reader.samples_from))

    def _step_breakdown(self, view_now: float) -> BreakdownState:
        tracker = self.steps.breakdown
        compiles = self._compile_table()
        # Worked out again only when steps or compile events came (a quiet or paused view
        # costs nothing); the history moves with the clock, and is cheap (a few buckets).
        key = (tracker.version, self._compiles_n)
        if tracker is not self._breakdown_of or key != self._breakdown_key:
            self._breakdown = tracker.result(compiles)
            self._breakdown_of, self._breakdown_key = tracker, key
        found = self._breakdown
        note = None
        if found.job is None:
            note = ("no step recorded yet" if not self.steps.ranks else NO_PHASES_NOTE
                    if not tracker.names else
                    f"phases recorded: the step breakdown starts after warm-up (each "
                    f"rank's first {self.steps.warmup_steps} steps are left out)")
        source = None
        if tracker.names:
            source = ("automatic probe: data = waiting for the DataLoader, step = the rest"
                      if self.steps.sources == {"auto"} else "the script's probe.step phases")
        return BreakdownState(found.job, found.ranks, tracker.history(view_now),
                              found.job.grew if found.job is not None else None, note, source)

    def _accelerator(self, now: float) -> AcceleratorState:
        events = self.reader.events
        kind = rules.accelerator_kind(events)
        if kind is None:
            return AcceleratorState(None, (), (), _no_accelerator_note(events), None)
        series = events[kind]
        last = series[-1]
        neuron = None
        if kind == "neuron":
            neuron = neuron_state(series, events.get("neuron_devices", ()), self.reader.meta)
            cores = tuple(CoreRow(f"nc{c.core}", c.util, c.mem_device, None,
                                  f"pid {c.pid}" if c.pid is not None else "",
                                  c.flops_util, c.physical)
                          for c in neuron.cores)
        else:
            cores = tuple(CoreRow(f"gpu{g.get('index')}", _num(g.get("util")),
                                  _num(g.get("mem_used")), _num(g.get("mem_total")),
                                  f"{g['power_w']:.0f}W" if _num(g.get("power_w")) is not None
                                  else "")
                          for g in last.get("gpus") or ())
        history = self._util_means[kind].update(series)
        age = now - float(last["t"])
        note = None if cores else f"{kind} telemetry has no device in its last sample"
        return AcceleratorState(kind, cores, history, note, age, neuron)

    def _host(self, now: float) -> HostState:
        series = self.reader.events.get("host")
        if not series:
            return HostState((), (), None, None, None, "no host telemetry recorded yet", None)
        last = series[-1]
        cpu = tuple(float(x) for x in last.get("cpu") or () if _num(x) is not None)
        history = self._cpu_means.update(series)
        load = last.get("load")
        return HostState(cpu, history, _num(last.get("mem_used")), _num(last.get("mem_total")),
                         tuple(float(x) for x in load) if isinstance(load, list) else None,
                         None, now - float(last["t"]), heat=self._cpu_heat.update(series),
                         marks=cpu_marks(self.reader.last("procs")))

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

    def _judge(self, now: float, phase: str, compiles: list[Mapping[str, Any]],
                silent: Mapping[int, float], medians: Mapping[int, tuple[float, int]],
                data_wait: PhaseSplit | None = None) -> list[rules.Alert | None]:
        events = self.reader.events
        accel_kind = "neuron" if events.get("neuron") else "gpu"
        steady_since = self.steps.tracker.steady_since.get(self.steps.latest_attempt)
        recent = self.steps.steady_recent()
        procs = self.reader.last("procs")
        last_steps = {r: v.last_step for r, v in self.steps.latest().items()}
        found = [
            rules.exited(self.reader.meta, events.get("proc_exit", []), phase),
            rules.stalled(silent, {r: m for r, (m, _) in medians.items()}, last_steps),
            rules.cpu_bound_input(events.get("host", ()), events.get(accel_kind, ()), procs,
                                  now, phase),
            rules.input_starvation(events.get("procs", ()), events.get("host", ()),
                                   events.get(accel_kind, ()), data_wait, now, phase),
            rules.numa_placement(events.get("procs", ()), self.reader.last("neuron_devices"),
                                 now, phase),
            rules.execution_errors(events.get("neuron", ()), now),
            rules.ecc_errors(events.get("neuron", ()), now),
            rules.recompilation(compiles, procs if phase == "steady" else None, recent,
                                steady_since, now),
            rules.step_variance(recent, self._compile_table(), self._phases_tail),
            rules.restarts(events.get("restart", [])),
            rules.probe_notes(events.get("probe_info", ())),
            rules.profiles_taken(events.get("profile", ()), now),
            _warnings(events.get("warning", [])),
            rules.lost_data([r for r in events.get("lost", ()) if float(r["t"]) <= now]),
        ]
        keys = {a.key for a in found if a is not None}
        if "input-starved" in keys:
            # One cause, told once: the starvation alert names the busy workers and the data
            # wait, which say more than the host's busy CPUs alone.
            found = [a for a in found if a is None or a.key != "cpu-bound-input"]
            keys.discard("cpu-bound-input")
        # What the supervisor recorded, unless this model raised the same alert itself.
        return found + [a for a in rules.recorded(events.get("alert", ()), now)
                        if a.key not in keys]


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
        cpu_num = p.get("cpu_num")
        out.append(ProcRow(pid, depth, str(p.get("name") or "?"), str(p.get("role") or "?"),
                           _num(p.get("cpu")), _num(p.get("rss")),
                           cpu_num if isinstance(cpu_num, int) and cpu_num >= 0 else None))
        stack.extend((c, depth + 1) for c in reversed(children.get(pid, [])))
    return out


def price_reason(meta: Mapping[str, Any]) -> str:
    """Why a session has no price, without the "no price: " its note starts with."""
    price_info = meta.get("price") or {}
    instance = (meta.get("instance") or {}).get("type")
    note = str(price_info.get("note") or (
        "instance type unknown" if not instance else f"no price known for {instance}"))
    return note.removeprefix("no price: ")


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


def _int(value: Any) -> int | None:
    number = _num(value)
    return None if number is None else int(number)
