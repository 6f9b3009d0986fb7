"""The dashboard's state as Prometheus metric families, computed when scraped.

Every figure comes from the live model's DashboardState (the same numbers the dashboard and
the headless lines show); a figure the state does not know (no price, no telemetry, not yet
steady) is left out of the exposition, never written as 0. Every sample carries the labels
job, node and instance_type ("" while the instance is unknown); per-rank, per-device and
per-CPU figures add rank, device or cpu.
"""

from __future__ import annotations

import socket
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from neurotui.live.model import DashboardModel, DashboardState
from neurotui.session.jobs import job_of, node_of

PREFIX = "neurotui_"
STALE_S = 30.0
"""Telemetry older than this, while the job runs, is left out: a source that stopped
reporting must not look like a device stuck at its last value (the dashboard marks it stale)."""
BASE_LABELS = ("job", "node", "instance_type")


def labels_of(meta: Mapping[str, Any]) -> dict[str, str]:
    """job: the id of the job of many nodes the run is part of (meta.json's `job`: {id,
    node, ...}), else the session's name; node: the node's name recorded there, else the
    host that recorded the session, else this host."""
    instance = (meta.get("instance") or {}).get("type")
    return {"job": job_of(meta) or str(meta.get("id") or meta.get("name") or ""),
            "node": node_of(meta) or str(meta.get("host") or socket.gethostname()),
            "instance_type": str(instance or "")}


class _Families:
    """Builds the families of one scrape, each sample with the base labels."""

    def __init__(self, base: Mapping[str, str]) -> None:
        self.base = dict(base)
        self.out: list[Metric] = []

    def gauge(self, name: str, doc: str, value: float | None) -> None:
        self.gauges(name, doc, (), [((), value)])

    def gauges(self, name: str, doc: str, extra: tuple[str, ...],
               samples: Iterable[tuple[tuple[str, ...], float | None]]) -> None:
        family = GaugeMetricFamily(PREFIX + name, doc, labels=(*self.base, *extra))
        self._fill(family, samples)

    def counter(self, name: str, doc: str, value: float | None) -> None:
        family = CounterMetricFamily(PREFIX + name, doc, labels=tuple(self.base))
        self._fill(family, [((), value)])

    def _fill(self, family: GaugeMetricFamily | CounterMetricFamily,
              samples: Iterable[tuple[tuple[str, ...], float | None]]) -> None:
        for extra, value in samples:
            if value is not None:  # unknown: absent, never 0
                family.add_metric([*self.base.values(), *extra], float(value))
        if family.samples:
            self.out.append(family)


def families(state: DashboardState, meta: Mapping[str, Any]) -> list[Metric]:
    """The metric families of one dashboard state (pure: the collector's whole mapping)."""
    f = _Families(labels_of(meta))
    header, tp = state.header, state.throughput
    f.gauge("running", "1 while the job runs, 0 once it ended", 1.0 if header.running else 0.0)
    f.gauge("step", "latest step recorded by any rank", header.step)
    f.gauges("step_seconds", "median time of each rank's recent steps past warm-up",
             ("rank",), [((str(r.rank),), r.median_s) for r in tp.ranks])
    steady = tp.steady
    f.gauge("steady_step_seconds", "median step time over all ranks' steady steps",
            steady.step_time_median if steady else None)
    f.gauge("samples_per_second", "the job's samples per second over the last 30 s",
            tp.now_sps)
    f.gauge("steady_samples_per_second", "the job's steady-state samples per second",
            steady.samples_per_s if steady else None)
    f.counter("samples", "samples the job has processed", tp.total_samples
              if tp.ranks else None)
    f.gauge("price_usd_per_hour", "the instance's price", header.price_per_hour)
    f.gauge("cost_usd", "what the run has cost so far (price x time since start)",
            header.cost_usd)
    f.gauge("samples_per_dollar", "samples per dollar at the last 30 s rate", tp.spd_now)
    f.gauge("steady_samples_per_dollar", "samples per dollar at the steady rate",
            tp.spd_steady)
    accel = state.accelerator
    if accel.kind is not None and not _stale(accel.age_s):
        f.gauges("accelerator_utilization_percent",
                 "busy share of each NeuronCore (nc<N>) or GPU (gpu<N>)", ("device", "kind"),
                 [((c.label, accel.kind), c.util) for c in accel.cores])
        f.gauges("accelerator_memory_used_bytes", "device memory in use on each core or GPU",
                 ("device", "kind"), [((c.label, accel.kind), c.mem_used) for c in accel.cores])
    host = state.host
    if host.cpu and not _stale(host.age_s):
        f.gauges("host_cpu_percent", "busy share of each host CPU", ("cpu",),
                 [((str(i),), v) for i, v in enumerate(host.cpu)])
        f.gauge("host_memory_used_bytes", "host memory in use", host.mem_used)
        f.gauge("host_memory_total_bytes", "host memory", host.mem_total)
    return f.out


def _stale(age_s: float | None) -> bool:
    return age_s is not None and age_s > STALE_S


class SessionCollector(Collector):
    """Refreshes the model at each scrape (prometheus_client calls `collect` on a request
    thread; scrapes at once take turns: the model is refreshed from one thread at a time)."""

    def __init__(self, model: DashboardModel) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._told = False

    def describe(self) -> Iterable[Metric]:
        return ()  # (not collected at registration: the session is read when scraped)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            try:
                state = self.model.refresh()
                found = families(state, self.model.reader.meta)
            except Exception:
                # The scrape fails (HTTP 500: the target is down in Prometheus); the cause
                # is printed once, not at every scrape.
                if not self._told:
                    self._told = True
                    traceback.print_exc(file=sys.stderr)
                raise
        yield from found
