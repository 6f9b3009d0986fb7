"""Which telemetry sources this machine has, and running them together from the supervisor."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from neurotui.collect.accelerators import (
    NeuronMonitorCollector,
    NvidiaCollector,
    find_tool,
    neuron_ls_snapshot,
)
from neurotui.session.writer import EventWriter

NO_NEURON = "neuron-monitor not found: install aws-neuronx-tools"
NO_NVIDIA = "nvidia-smi not found"


class Telemetry:
    """Accelerator collectors for the supervisor; host telemetry is sampled beside them."""

    def __init__(self, session_dir: Path, writer: EventWriter, now: float,
                 on_instance_type: Callable[[str, str], None] | None = None) -> None:
        self.writer = writer
        self.on_instance_type = on_instance_type
        self.instance_type: str | None = None
        self._neuron_ls = find_tool("neuron-ls")
        self._rank_pids: frozenset[int] = frozenset()
        self.monitor: NeuronMonitorCollector | None = None
        self.nvidia: NvidiaCollector | None = None
        monitor_exe = find_tool("neuron-monitor")
        if monitor_exe:
            self.monitor = NeuronMonitorCollector(monitor_exe, writer, session_dir)
        elif (smi := find_tool("nvidia-smi")) is not None:
            self.nvidia = NvidiaCollector(smi, writer, session_dir)
        if self.monitor is None and self.nvidia is None:
            message = (f"no accelerator telemetry: {NO_NEURON}, and {NO_NVIDIA}; "
                       "showing host metrics only")
            writer.write("source_status", t=now, source="accelerator", ok=False,
                         message=message)
        elif self.monitor is None:
            writer.write("source_status", t=now, source="neuron-monitor", ok=False,
                         message=f"{NO_NEURON}; showing NVIDIA and host metrics")
        if self._neuron_ls:
            self._snapshot(now)

    def poll(self, now: float, rank_pids: frozenset[int]) -> None:
        for collector in (self.monitor, self.nvidia):
            if collector is not None:
                collector.poll(now)
        if self.monitor is not None and self.monitor.instance_type:
            self._found_instance(self.monitor.instance_type, "neuron-monitor")
        if self._neuron_ls and rank_pids != self._rank_pids:
            # Which process owns which NeuronCores changes when ranks start or restart.
            self._rank_pids = rank_pids
            self._snapshot(now)

    def close(self) -> None:
        for collector in (self.monitor, self.nvidia):
            if collector is not None:
                with contextlib.suppress(Exception):
                    collector.close()

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
