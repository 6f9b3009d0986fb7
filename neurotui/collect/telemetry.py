"""Which telemetry sources this machine has, and running them together from the supervisor."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurotui.collect.accelerators import (
    NeuronMonitorCollector,
    NvidiaCollector,
    find_tool,
    neuron_ls_snapshot,
)
from neurotui.session import neurontally
from neurotui.session.writer import EventWriter

if TYPE_CHECKING:
    from neurotui.collect.observer import ObserverCollector

NO_NEURON = "neuron-monitor not found: install aws-neuronx-tools"
NO_NVIDIA = "nvidia-smi not found"
class _TallyingWriter:
    """The collectors' writer: each `neuron` sample it writes is added to the run's tally."""

    def __init__(self, writer: EventWriter, tally: neurontally.NeuronTally) -> None:
        self._writer, self._tally = writer, tally

    def write(self, kind: str, t: float | None = None, **fields: Any) -> None:
        self._writer.write(kind, t=t, **fields)
        if kind == "neuron":
            self._tally.add({"t": t, **fields})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


class Telemetry:
    """Accelerator collectors for the supervisor; host telemetry is sampled beside them."""

    def __init__(self, session_dir: Path, writer: EventWriter, now: float,
                 on_instance_type: Callable[[str, str], None] | None = None,
                 metrics_url: str | None = None) -> None:
        """`metrics_url`: a Prometheus /metrics page of Neuron metrics (`run
        --neuron-metrics-url`), scraped where neuron-monitor is absent."""
        self.session_dir = session_dir
        # The neuron samples added up as they are written, for compare (neurontally.py); an
        # adopting supervisor goes on from the last one's file.
        self.neuron_tally = neurontally.load(session_dir) or neurontally.NeuronTally()
        self._tally_saved: tuple[int, float] = (self.neuron_tally.samples, now)
        writer = _TallyingWriter(writer, self.neuron_tally)  # type: ignore[assignment]
        self.writer = writer
        self.on_instance_type = on_instance_type
        self.instance_type: str | None = None
        self._neuron_ls = find_tool("neuron-ls")
        self._rank_pids: frozenset[int] = frozenset()
        self.monitor: NeuronMonitorCollector | None = None
        self.observer: ObserverCollector | None = None
        self.nvidia: NvidiaCollector | None = None
        monitor_exe = find_tool("neuron-monitor")
        if metrics_url:
            # Only a run with a URL loads the scraper (urllib, prometheus_client's parser).
            from neurotui.collect.observer import SOURCE as METRICS_URL_SOURCE
            from neurotui.collect.observer import BadMetricsURL, ObserverCollector, redact
        if monitor_exe:
            self.monitor = NeuronMonitorCollector(monitor_exe, writer, session_dir)
            if metrics_url:
                writer.write("warning", t=now, source=METRICS_URL_SOURCE,
                             message=f"{redact(metrics_url)} not scraped: neuron-monitor runs "
                                     "here and is read instead")
        elif metrics_url:
            try:
                self.observer = ObserverCollector(metrics_url, writer)
            except BadMetricsURL as exc:  # `run` checked it; a hand-edited meta.json may not
                writer.write("source_status", t=now, source=METRICS_URL_SOURCE, ok=False,
                             message=str(exc))
        if self.monitor is None and self.observer is None and \
                (smi := find_tool("nvidia-smi")) is not None:
            self.nvidia = NvidiaCollector(smi, writer, session_dir)
        # With Neuron metrics from the URL, neuron-monitor's absence is no news.
        if self.monitor is None and self.observer is None and self.nvidia is None:
            message = (f"no accelerator telemetry: {NO_NEURON}, and {NO_NVIDIA}; "
                       "showing host metrics only")
            writer.write("source_status", t=now, source="accelerator", ok=False,
                         message=message)
        elif self.monitor is None and self.observer is None:
            writer.write("source_status", t=now, source="neuron-monitor", ok=False,
                         message=f"{NO_NEURON}; showing NVIDIA and host metrics")
        if self._neuron_ls:
            self._snapshot(now)

    def poll(self, now: float, rank_pids: frozenset[int]) -> None:
        for collector in (self.monitor, self.observer, self.nvidia):
            if collector is not None:
                collector.poll(now)
        if self.monitor is not None and self.monitor.instance_type:
            self._found_instance(self.monitor.instance_type, "neuron-monitor")
        if self.observer is not None and self.observer.instance_type:
            self._found_instance(self.observer.instance_type, "neuron /metrics")
        if self._neuron_ls and rank_pids != self._rank_pids:
            # Which process owns which NeuronCores changes when ranks start or restart.
            self._rank_pids = rank_pids
            self._snapshot(now)
        saved, at = self._tally_saved
        if self.neuron_tally.samples != saved and now - at >= neurontally.TALLY_EVERY_S:
            self._save_tally(now)

    def close(self) -> None:
        for collector in (self.monitor, self.observer, self.nvidia):
            if collector is not None:
                with contextlib.suppress(Exception):
                    collector.close()
        if self.neuron_tally.samples != self._tally_saved[0]:
            self._save_tally(self._tally_saved[1])

    def _save_tally(self, now: float) -> None:
        # After the writer's flush: the file never counts a sample events.jsonl lacks.
        self.writer.flush()
        neurontally.save(self.session_dir, self.neuron_tally)
        self._tally_saved = (self.neuron_tally.samples, now)

    def _snapshot(self, now: float) -> None:
        assert self._neuron_ls is not None
        report = neuron_ls_snapshot(self._neuron_ls, self.writer, now)
        if report is not None and report.instance_type:
            self._found_instance(report.instance_type, "neuron-ls")

    def _found_instance(self, instance_type: str, source: str) -> None:
        if self.instance_type is None:
            self.instance_type = instance_type
            if self.on_instance_type is not None:
                self.on_instance_type(instance_type, source)
