"""Accelerator telemetry collectors: Neuron (neuron-monitor, neuron-ls) and NVIDIA.

Each finds its tool on PATH, runs it as an argv list and writes parsed records as session
events. A missing tool is reported once as a `source_status` with what to install; nothing
is invented in its place.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, cast

from neurotui.collect.streaming import StreamingTool
from neurotui.session.writer import EventWriter
from neurotui.sources import neuron_ls, neuron_monitor, nvidia_smi
from neurotui.sources.parse_errors import TelemetryParseError

NVIDIA_FIELDS = ("index", "name", "utilization.gpu", "memory.used", "memory.total", "power.draw")
_MAX_WARNINGS = 20


def neuron_monitor_config(period_s: float = 1.0, tag_filter: str = ".*") -> dict[str, Any]:
    """The documented config (neuron-monitor user guide), limited to this job's runtimes."""
    runtime_metrics = ["neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage",
                       "execution_stats"]
    return {
        "period": f"{period_s:g}s",
        "neuron_runtimes": [{"tag_filter": tag_filter,
                             "metrics": [{"type": m} for m in runtime_metrics]}],
        "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"},
                           {"period": f"{max(period_s, 5):g}s", "type": "neuron_hw_counters"}],
    }


class _Warnings:
    """Parse failures become warnings, a bounded number of them (a broken tool can't flood)."""

    def __init__(self, writer: EventWriter, source: str) -> None:
        self.writer, self.source, self.count = writer, source, 0

    def __call__(self, now: float, message: str) -> None:
        self.count += 1
        if self.count <= _MAX_WARNINGS:
            suffix = " (further parse warnings of this source are not recorded)" \
                if self.count == _MAX_WARNINGS else ""
            self.writer.write("warning", t=now, source=self.source, message=message + suffix)


class NeuronMonitorCollector:
    def __init__(self, exe: str, writer: EventWriter, session_dir: Path,
                 period_s: float = 1.0) -> None:
        config_path = session_dir / "neuron-monitor.json"
        config_path.write_text(json.dumps(neuron_monitor_config(period_s), indent=2))
        self.writer = writer
        self.instance_type: str | None = None
        self._warn = _Warnings(writer, "neuron-monitor")
        self.tool = StreamingTool("neuron-monitor", [exe, "-c", str(config_path)], writer,
                                  self._on_line,
                                  stderr_path=session_dir / "logs" / "neuron-monitor.err")

    def _on_line(self, line: str, now: float) -> None:
        if not line.strip():
            return
        try:
            record = neuron_monitor.parse_monitor_record(line)
        except TelemetryParseError as exc:
            self._warn(now, f"neuron-monitor output not understood: {exc}")
            return
        summary = neuron_monitor.monitor_summary(record)
        self.instance_type = self.instance_type or summary.get("instance_type")
        self.writer.write("neuron", t=now, **summary)

    def poll(self, now: float) -> None:
        self.tool.poll(now)

    def close(self) -> None:
        self.tool.close()


def neuron_ls_snapshot(exe: str, writer: EventWriter, now: float,
                       timeout_s: float = 10.0) -> neuron_ls.NeuronLsReport | None:
    """Which devices exist, which PIDs own which cores, and each device's CPU affinity and NUMA
    node: run once, and when ranks change.

    The JSON form and the table are read and combined (`neuron_ls.combine_reports`, the JSON
    form first): the JSON lists the processes, which the 2.29 default table does not; the
    table alone prints `instance-type:`. The JSON is asked for as Neuron 2.34 and later spell
    it (`--output-format json`), then as before (`--json-output`, gone in 2.34); a flag the
    tool refuses (or whose output is not JSON) falls through to the next, its reason kept in
    `refused`. A neuron-ls that gives neither JSON is read from its table alone; only when
    nothing can be read is the failure recorded."""
    reports: list[neuron_ls.NeuronLsReport] = []
    forms: list[str] = []
    failures: list[str] = []
    refused: dict[str, str] = {}
    attempts = (("json", [exe, "--output-format", "json"]), ("json", [exe, "--json-output"]),
                ("table", [exe]))
    for form, argv in attempts:
        if form in forms:
            continue  # the newer flag gave the JSON: the older one is not asked
        try:
            report, failure = _run_neuron_ls(argv, timeout_s, strict=argv[1:2] == [
                "--output-format"])
        except subprocess.TimeoutExpired as exc:
            # A hung tool would hang again: the supervisor's poll waits for it only once.
            failures.append(f"neuron-ls failed: {exc}")
            break
        if report is not None:
            reports.append(report)
            forms.append(form)
        elif failure is not None:
            failures.append(failure)
            if form == "json":
                refused[" ".join(argv[1:])] = failure
    if not reports:
        writer.write("source_status", t=now, source="neuron-ls", ok=False,
                     message=failures[0] if failures else "neuron-ls printed nothing")
        return None
    report = neuron_ls.combine_reports(*reports)
    writer.write("neuron_devices", t=now, **neuron_devices_event(report), forms=forms,
                 refused=refused)
    return report


def neuron_devices_event(report: neuron_ls.NeuronLsReport) -> dict[str, Any]:
    """The `neuron_devices` event's fields (session/FORMAT.md): each device as parsed, with its
    logical core count; totals that are None where the output does not say."""
    devices = []
    for device in report.devices:
        fields = cast(dict[str, Any], _plain(device))
        fields["logical_core_count"] = device.logical_core_count
        devices.append(fields)
    return {
        "instance_type": report.instance_type,
        "instance_id": report.instance_id,
        "logical_neuroncore_config": report.logical_neuroncore_config,
        "logical_cores": report.total_logical_cores,
        "elided": report.elided,
        "error": report.error,
        "devices": devices,
    }


def _run_neuron_ls(argv: list[str], timeout_s: float, strict: bool = False
                   ) -> tuple[neuron_ls.NeuronLsReport | None, str | None]:
    """One neuron-ls run: its report, or why there is none (a timeout is raised). `strict`
    (a flag older versions do not know): a failed exit is a refusal, and only JSON is taken
    (a tool that ignores the flag prints its table, read on its own turn)."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except OSError as exc:
        return None, f"neuron-ls failed: {exc}"
    text = done.stdout.decode("utf-8", errors="replace")
    err = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    detail = f" ({err[-1][:200]})" if err else ""
    if strict and done.returncode != 0:
        return None, f"neuron-ls exited with {done.returncode}{detail}"
    try:
        parse = neuron_ls.parse_neuron_ls_json if strict else neuron_ls.parse_neuron_ls
        return parse(text), None
    except TelemetryParseError as exc:
        return None, f"neuron-ls output not understood: {exc}{detail}"


class NvidiaCollector:
    """`nvidia-smi --query-gpu ... --format=csv -l 1`: one long-lived process, not one per
    sample. The header line it prints first names the columns, so parsing follows the tool."""

    def __init__(self, exe: str, writer: EventWriter, session_dir: Path,
                 period_s: float = 1.0) -> None:
        self.writer = writer
        self._warn = _Warnings(writer, "nvidia-smi")
        argv = [exe, f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv",
                f"-l={max(1, round(period_s))}"]
        self._header: str | None = None
        self._batch: list[nvidia_smi.GpuSample] = []
        self._batch_t: float | None = None
        self.tool = StreamingTool("nvidia-smi", argv, writer, self._on_line,
                                  stderr_path=session_dir / "logs" / "nvidia-smi.err")

    def _on_line(self, line: str, now: float) -> None:
        if not line.strip():
            return
        if self._header is None or line.split(",", 1)[0].strip() == \
                self._header.split(",", 1)[0].strip():
            self._header = line  # printed at start (and again after a restart)
            return
        try:
            rows = nvidia_smi.parse_query_gpu_csv(f"{self._header}\n{line}")
        except TelemetryParseError as exc:
            self._warn(now, f"nvidia-smi output not understood: {exc}")
            return
        for row in rows:
            # A new round starts when a GPU index of this round comes again (no index
            # column: one GPU, every row is a round).
            if self._batch and (row.index is None
                                or any(g.index == row.index for g in self._batch)):
                self._flush()
            self._batch.append(row)
            self._batch_t = now

    def _flush(self) -> None:
        if self._batch and self._batch_t is not None:
            self.writer.write("gpu", t=self._batch_t, gpus=[{
                "index": g.index, "name": g.name, "util": g.utilization_gpu,
                "mem_used": g.memory_used_bytes, "mem_total": g.memory_total_bytes,
                "power_w": g.power_draw_w} for g in self._batch])
        self._batch = []

    def poll(self, now: float) -> None:
        self.tool.poll(now)
        self._flush()  # a round arrives within one poll; don't hold it back for the next

    def close(self) -> None:
        self.tool.close()


def _plain(obj: object) -> object:
    """Dataclasses to JSON-able dicts (tuples to lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    return obj


def find_tool(name: str) -> str | None:
    return shutil.which(name)
