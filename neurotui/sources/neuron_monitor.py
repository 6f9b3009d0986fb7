"""Parse `neuron-monitor` reports: one JSON object per line (NDJSON) on its stdout.

Each report has `neuron_runtime_data` (one entry per process using the Neuron runtime, each
with metric groups such as `neuroncore_counters`, `memory_used`, `neuron_runtime_vcpu_usage`,
`execution_stats`), `system_data` (`vcpu_usage`, `memory_info`, `neuron_hw_counters`),
`instance_info` and `neuron_hardware_info`. Any of these can be missing: the first record often
has no runtime yet, a record taken while a process exits carries only its `error`, and a host
without a reachable driver reports `neuron_devices: null`. Every metric group has an `error`
string; non-empty ones are collected in `MonitorRecord.errors` so a collector can show them.

Cores are logical NeuronCores as the SDK counts them (since 2.21; on trn2 with LNC=2 one
logical core is two physical ones, whose own utilisation comes in the core's `v3d` block and is
kept as `CoreCounters.physical`). Missing values are None (never 0); unknown keys are ignored so
that newer SDKs (e.g. `neuron_k8s_info`) do not break parsing, except unknown integer memory
categories of a core, which are kept. Malformed input raises TelemetryParseError.
`monitor_summary()` flattens a record into a small JSON-serialisable dict for the session's
event stream.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from neurotui.sources.parse_errors import TelemetryParseError
from neurotui.sources.summing import add_counts, add_known, highest_percentiles, sum_known

SOURCE = "neuron-monitor"

__all__ = [
    "MEMORY_KINDS",
    "CoreCounters",
    "CoreMemory",
    "ExecutionStats",
    "HardwareInfo",
    "HostMemory",
    "HwCounters",
    "InstanceInfo",
    "LoadedModel",
    "MonitorRecord",
    "RuntimeMemory",
    "RuntimeReport",
    "SystemData",
    "VcpuUsage",
    "iter_monitor_records",
    "monitor_summary",
    "parse_monitor_record",
]

Number = float | int

# Device memory categories of `neuroncore_memory_usage`, as neuron-monitor names them.
MEMORY_KINDS = ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors")


@dataclass(frozen=True)
class CoreCounters:
    """`neuroncore_counters.neuroncores_in_use[core]`: utilisation in percent (0-100)."""

    core: int
    utilization: float | None
    flops: Number | None = None
    effective_flops: Number | None = None
    # trn2 (`v3d`): utilisation of each physical core behind this logical core, by name.
    physical: tuple[tuple[str, float | None], ...] = ()


@dataclass(frozen=True)
class CoreMemory:
    """Device memory one NeuronCore holds for one runtime, by category, in bytes."""

    core: int
    constants: int | None = None
    model_code: int | None = None
    model_shared_scratchpad: int | None = None
    runtime_memory: int | None = None
    tensors: int | None = None
    # Integer categories a newer runtime reports that this parser does not name, kept as
    # (name, bytes) so a new kind is recorded rather than dropped.
    other: tuple[tuple[str, int], ...] = ()

    def by_kind(self) -> dict[str, int]:
        """Bytes by category as the report names them; categories it lacks are left out."""
        named = {name: getattr(self, name) for name in MEMORY_KINDS}
        out = {name: value for name, value in named.items() if value is not None}
        out.update(self.other)
        return out

    @property
    def total(self) -> int | None:
        present = list(self.by_kind().values())
        return sum(present) if present else None


@dataclass(frozen=True)
class HostMemory:
    """Host memory a runtime holds, by category, in bytes."""

    application_memory: int | None = None
    constants: int | None = None
    dma_buffers: int | None = None
    tensors: int | None = None


@dataclass(frozen=True)
class LoadedModel:
    """One entry of `memory_used.loaded_models` (memory summed over its subgraphs)."""

    name: str | None
    uuid: str | None
    model_id: int | None
    is_running: bool | None
    host_bytes: int | None
    device_bytes: int | None
    neuroncores: tuple[int, ...] = ()


@dataclass(frozen=True)
class RuntimeMemory:
    """`memory_used` of one runtime."""

    host_bytes: int | None
    device_bytes: int | None
    host: HostMemory | None = None
    cores: tuple[CoreMemory, ...] = ()
    loaded_models: tuple[LoadedModel, ...] = ()


@dataclass(frozen=True)
class ExecutionStats:
    """`execution_stats` of one runtime: counts over the last period, latencies in seconds."""

    period: float | None
    execution_summary: dict[str, int] = field(default_factory=dict)
    error_summary: dict[str, int] = field(default_factory=dict)
    total_latency: dict[str, float | None] = field(default_factory=dict)
    device_latency: dict[str, float | None] = field(default_factory=dict)

    @property
    def completed(self) -> int | None:
        return self.execution_summary.get("completed")

    @property
    def errors_total(self) -> int | None:
        """Sum of all error categories; None when the report has no error summary."""
        return sum(self.error_summary.values()) if self.error_summary else None


@dataclass(frozen=True)
class RuntimeReport:
    """One `neuron_runtime_data` entry: a process using the Neuron runtime."""

    pid: int | None
    tag: str | None
    address: str | None
    # The entry's own `error` (e.g. the process exited); None when empty.
    error: str | None
    core_counters_period: float | None = None
    cores: tuple[CoreCounters, ...] = ()
    memory: RuntimeMemory | None = None
    vcpu_user: float | None = None
    vcpu_system: float | None = None
    execution: ExecutionStats | None = None


@dataclass(frozen=True)
class VcpuUsage:
    """CPU time split in percent, for the average or one vCPU."""

    user: float | None = None
    nice: float | None = None
    system: float | None = None
    idle: float | None = None
    io_wait: float | None = None
    irq: float | None = None
    soft_irq: float | None = None


@dataclass(frozen=True)
class HwCounters:
    """ECC event counters of one Neuron device (`neuron_hw_counters.neuron_devices`)."""

    device: int | None
    mem_ecc_corrected: int | None = None
    mem_ecc_uncorrected: int | None = None
    sram_ecc_corrected: int | None = None
    sram_ecc_uncorrected: int | None = None


@dataclass(frozen=True)
class SystemData:
    """`system_data`: host memory, host vCPU and device hardware counters."""

    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    vcpu_average: VcpuUsage | None = None
    vcpu_per_cpu: tuple[tuple[int, VcpuUsage], ...] = ()
    context_switch_count: int | None = None
    # None when the group is absent or reports `neuron_devices: null` (no driver).
    hw_counters: tuple[HwCounters, ...] | None = None


@dataclass(frozen=True)
class InstanceInfo:
    instance_name: str | None = None
    instance_id: str | None = None
    instance_type: str | None = None
    availability_zone: str | None = None
    availability_zone_id: str | None = None
    region: str | None = None
    ami_id: str | None = None
    subnet_id: str | None = None


@dataclass(frozen=True)
class HardwareInfo:
    device_type: str | None = None
    device_version: str | None = None
    neuroncore_version: str | None = None
    device_count: int | None = None
    device_memory_bytes: int | None = None
    cores_per_device: int | None = None
    logical_neuroncore_config: int | None = None


@dataclass(frozen=True)
class MonitorRecord:
    """One neuron-monitor report."""

    runtimes: tuple[RuntimeReport, ...] = ()
    system: SystemData | None = None
    instance: InstanceInfo | None = None
    hardware: HardwareInfo | None = None
    # Every non-empty `error` in the report, prefixed with where it came from.
    errors: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# Parsing

_TOP_KEYS = ("neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info")


def parse_monitor_record(line: str) -> MonitorRecord:
    """Parse one report (one NDJSON line; a pretty-printed object is accepted too)."""
    text = line.strip()
    if not text:
        raise TelemetryParseError(SOURCE, "empty line")
    try:
        data = json.loads(text, parse_constant=_nan_to_none)
    except (ValueError, RecursionError) as exc:
        raise TelemetryParseError(SOURCE, f"invalid JSON: {exc}", text) from None
    if not isinstance(data, dict):
        raise TelemetryParseError(SOURCE, f"report is a JSON {type(data).__name__}, not an object")
    if not any(key in data for key in _TOP_KEYS):
        raise TelemetryParseError(
            SOURCE, "not a neuron-monitor report (no known top-level key)", text
        )
    return _record(data)


def iter_monitor_records(
    lines: Iterable[str] | str, *, skip_malformed: bool = False
) -> Iterator[MonitorRecord]:
    """Parse an NDJSON stream; blank lines are skipped. With `skip_malformed`, lines that do not
    parse are dropped (a pipe read mid-line, a stray log line) instead of raising."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    for line in lines:
        if not line.strip():
            continue
        try:
            yield parse_monitor_record(line)
        except TelemetryParseError:
            if not skip_malformed:
                raise


def _nan_to_none(_name: str) -> None:
    return None


def _record(data: dict[str, Any]) -> MonitorRecord:
    errors: list[str] = []
    runtimes_raw = _opt_list(data.get("neuron_runtime_data"), "neuron_runtime_data")
    runtimes = tuple(_runtime(entry, errors) for entry in runtimes_raw or ())
    system = None
    if data.get("system_data") is not None:
        system = _system(_dict(data["system_data"], "system_data"), errors)
    instance = None
    if data.get("instance_info") is not None:
        info = _dict(data["instance_info"], "instance_info")
        _collect_error(info, "instance_info", errors)
        instance = InstanceInfo(
            instance_name=_str(info.get("instance_name"), "instance_name"),
            instance_id=_str(info.get("instance_id"), "instance_id"),
            instance_type=_str(info.get("instance_type"), "instance_type"),
            availability_zone=_str(info.get("instance_availability_zone"), "availability_zone"),
            availability_zone_id=_str(
                info.get("instance_availability_zone_id"), "availability_zone_id"
            ),
            region=_str(info.get("instance_region"), "instance_region"),
            ami_id=_str(info.get("ami_id"), "ami_id"),
            subnet_id=_str(info.get("subnet_id"), "subnet_id"),
        )
    hardware = None
    if data.get("neuron_hardware_info") is not None:
        hw = _dict(data["neuron_hardware_info"], "neuron_hardware_info")
        _collect_error(hw, "neuron_hardware_info", errors)
        hardware = HardwareInfo(
            device_type=_str(hw.get("neuron_device_type"), "neuron_device_type"),
            device_version=_str(hw.get("neuron_device_version"), "neuron_device_version"),
            neuroncore_version=_str(hw.get("neuroncore_version"), "neuroncore_version"),
            device_count=_int(hw.get("neuron_device_count"), "neuron_device_count"),
            device_memory_bytes=_int(
                hw.get("neuron_device_memory_size"), "neuron_device_memory_size"
            ),
            cores_per_device=_int(
                hw.get("neuroncore_per_device_count"), "neuroncore_per_device_count"
            ),
            logical_neuroncore_config=_int(
                hw.get("logical_neuroncore_config"), "logical_neuroncore_config"
            ),
        )
    return MonitorRecord(runtimes, system, instance, hardware, tuple(errors))


def _runtime(entry: object, errors: list[str]) -> RuntimeReport:
    rt = _dict(entry, "neuron_runtime_data entry")
    pid = _int(rt.get("pid"), "pid")
    tag_raw = rt.get("neuron_runtime_tag")
    tag = (
        str(tag_raw)
        if isinstance(tag_raw, int) and not isinstance(tag_raw, bool)
        else _str(tag_raw, "neuron_runtime_tag")
    )
    where = f"runtime {pid}" if pid is not None else "runtime"
    error = _error_text(rt.get("error"), where)
    if error is not None:
        errors.append(f"{where}: {error}")
    report = _opt_dict(rt.get("report"), "report") or {}

    period = None
    cores: tuple[CoreCounters, ...] = ()
    if report.get("neuroncore_counters") is not None:
        nc = _dict(report["neuroncore_counters"], "neuroncore_counters")
        _collect_error(nc, f"{where} neuroncore_counters", errors)
        period = _float(nc.get("period"), "period")
        cores = tuple(
            _core_counters(key, value)
            for key, value in (
                _opt_dict(nc.get("neuroncores_in_use"), "neuroncores_in_use") or {}
            ).items()
        )
        cores = tuple(sorted(cores, key=lambda c: c.core))

    memory = None
    if report.get("memory_used") is not None:
        mem = _dict(report["memory_used"], "memory_used")
        _collect_error(mem, f"{where} memory_used", errors)
        memory = _runtime_memory(mem)

    vcpu_user = vcpu_system = None
    if report.get("neuron_runtime_vcpu_usage") is not None:
        vc = _dict(report["neuron_runtime_vcpu_usage"], "neuron_runtime_vcpu_usage")
        _collect_error(vc, f"{where} neuron_runtime_vcpu_usage", errors)
        usage = _opt_dict(vc.get("vcpu_usage"), "vcpu_usage") or {}
        vcpu_user = _float(usage.get("user"), "vcpu_usage.user")
        vcpu_system = _float(usage.get("system"), "vcpu_usage.system")

    execution = None
    if report.get("execution_stats") is not None:
        ex = _dict(report["execution_stats"], "execution_stats")
        _collect_error(ex, f"{where} execution_stats", errors)
        execution = _execution(ex)

    return RuntimeReport(
        pid=pid,
        tag=tag,
        address=_str(rt.get("address"), "address") or None,
        error=error,
        core_counters_period=period,
        cores=cores,
        memory=memory,
        vcpu_user=vcpu_user,
        vcpu_system=vcpu_system,
        execution=execution,
    )


def _core_counters(key: str, value: object) -> CoreCounters:
    core = _index(key, "neuroncores_in_use")
    counters = _dict(value, f"neuroncores_in_use[{key}]")
    physical: list[tuple[str, float | None]] = []
    v3d = _opt_dict(counters.get("v3d"), "v3d")
    for name, sub in (v3d or {}).items():
        sub_dict = _dict(sub, f"v3d[{name}]")
        physical.append((name, _float(sub_dict.get("neuroncore_utilization"), "v3d utilization")))
    return CoreCounters(
        core=core,
        utilization=_float(counters.get("neuroncore_utilization"), "neuroncore_utilization"),
        flops=_number(counters.get("flops"), "flops"),
        effective_flops=_number(counters.get("effective_flops"), "effective_flops"),
        physical=tuple(physical),
    )


def _runtime_memory(mem: dict[str, Any]) -> RuntimeMemory:
    used = _opt_dict(mem.get("neuron_runtime_used_bytes"), "neuron_runtime_used_bytes") or {}
    breakdown = _opt_dict(used.get("usage_breakdown"), "usage_breakdown") or {}
    host = None
    host_raw = _opt_dict(breakdown.get("host"), "usage_breakdown.host")
    if host_raw is not None:
        host = HostMemory(
            application_memory=_int(host_raw.get("application_memory"), "application_memory"),
            constants=_int(host_raw.get("constants"), "constants"),
            dma_buffers=_int(host_raw.get("dma_buffers"), "dma_buffers"),
            tensors=_int(host_raw.get("tensors"), "tensors"),
        )
    per_core = _opt_dict(breakdown.get("neuroncore_memory_usage"), "neuroncore_memory_usage") or {}
    cores = []
    for key, value in per_core.items():
        entry = _dict(value, f"neuroncore_memory_usage[{key}]")
        named = {kind: _int(entry.get(kind), kind) for kind in MEMORY_KINDS}
        other = tuple(
            (kind, amount)
            for kind, amount in entry.items()
            if kind not in MEMORY_KINDS and type(amount) is int
        )
        cores.append(CoreMemory(core=_index(key, "neuroncore_memory_usage"), **named, other=other))
    models = tuple(
        _loaded_model(m) for m in _opt_list(mem.get("loaded_models"), "loaded_models") or ()
    )
    return RuntimeMemory(
        host_bytes=_int(used.get("host"), "neuron_runtime_used_bytes.host"),
        device_bytes=_int(used.get("neuron_device"), "neuron_runtime_used_bytes.neuron_device"),
        host=host,
        cores=tuple(sorted(cores, key=lambda c: c.core)),
        loaded_models=models,
    )


def _loaded_model(value: object) -> LoadedModel:
    model = _dict(value, "loaded_models entry")
    running = model.get("is_running")
    if running is not None and not isinstance(running, bool):
        raise TelemetryParseError(SOURCE, "is_running is not a boolean", repr(running))
    host_total: int | None = None
    device_total: int | None = None
    cores: set[int] = set()
    for name, sub in (_opt_dict(model.get("subgraphs"), "subgraphs") or {}).items():
        sg = _dict(sub, f"subgraph {name}")
        used = _opt_dict(sg.get("memory_used_bytes"), "memory_used_bytes") or {}
        host = _int(used.get("host"), "subgraph host bytes")
        device = _int(used.get("neuron_device"), "subgraph device bytes")
        if host is not None:
            host_total = (host_total or 0) + host
        if device is not None:
            device_total = (device_total or 0) + device
        core = _int(sg.get("neuroncore_index"), "neuroncore_index")
        if core is not None:
            cores.add(core)
    return LoadedModel(
        name=_str(model.get("name"), "model name"),
        uuid=_str(model.get("uuid"), "model uuid"),
        model_id=_int(model.get("model_id"), "model_id"),
        is_running=running,
        host_bytes=host_total,
        device_bytes=device_total,
        neuroncores=tuple(sorted(cores)),
    )


def _execution(ex: dict[str, Any]) -> ExecutionStats:
    def counts(key: str) -> dict[str, int]:
        raw = _opt_dict(ex.get(key), key) or {}
        out = {}
        for name, value in raw.items():
            number = _int(value, f"{key}.{name}")
            if number is not None:
                out[name] = number
        return out

    latency = _opt_dict(ex.get("latency_stats"), "latency_stats") or {}

    def percentiles(key: str) -> dict[str, float | None]:
        raw = _opt_dict(latency.get(key), key) or {}
        return {name: _float(value, f"{key}.{name}") for name, value in raw.items()}

    return ExecutionStats(
        period=_float(ex.get("period"), "period"),
        execution_summary=counts("execution_summary"),
        error_summary=counts("error_summary"),
        total_latency=percentiles("total_latency"),
        device_latency=percentiles("device_latency"),
    )


def _system(sd: dict[str, Any], errors: list[str]) -> SystemData:
    values: dict[str, Any] = {}
    if sd.get("memory_info") is not None:
        mi = _dict(sd["memory_info"], "memory_info")
        _collect_error(mi, "system memory_info", errors)
        for key in (
            "memory_total_bytes",
            "memory_used_bytes",
            "swap_total_bytes",
            "swap_used_bytes",
        ):
            values[key] = _int(mi.get(key), key)
    if sd.get("vcpu_usage") is not None:
        vc = _dict(sd["vcpu_usage"], "vcpu_usage")
        _collect_error(vc, "system vcpu_usage", errors)
        avg = _opt_dict(vc.get("average_usage"), "average_usage")
        values["vcpu_average"] = None if avg is None else _vcpu(avg)
        per_cpu = _opt_dict(vc.get("usage_data"), "usage_data") or {}
        values["vcpu_per_cpu"] = tuple(
            sorted(
                (
                    (_index(k, "usage_data"), _vcpu(_dict(v, f"usage_data[{k}]")))
                    for k, v in per_cpu.items()
                ),
                key=lambda item: item[0],
            )
        )
        values["context_switch_count"] = _int(
            vc.get("context_switch_count"), "context_switch_count"
        )
    if sd.get("neuron_hw_counters") is not None:
        hc = _dict(sd["neuron_hw_counters"], "neuron_hw_counters")
        _collect_error(hc, "system neuron_hw_counters", errors)
        devices = _opt_list(hc.get("neuron_devices"), "neuron_devices")
        if devices is not None:
            values["hw_counters"] = tuple(_hw(d) for d in devices)
    return SystemData(**values)


def _vcpu(raw: dict[str, Any]) -> VcpuUsage:
    return VcpuUsage(
        **{name: _float(raw.get(name), f"vcpu {name}") for name in VcpuUsage.__dataclass_fields__}
    )


def _hw(value: object) -> HwCounters:
    dev = _dict(value, "neuron_devices entry")
    return HwCounters(
        device=_int(dev.get("neuron_device_index"), "neuron_device_index"),
        mem_ecc_corrected=_int(dev.get("mem_ecc_corrected"), "mem_ecc_corrected"),
        mem_ecc_uncorrected=_int(dev.get("mem_ecc_uncorrected"), "mem_ecc_uncorrected"),
        sram_ecc_corrected=_int(dev.get("sram_ecc_corrected"), "sram_ecc_corrected"),
        sram_ecc_uncorrected=_int(dev.get("sram_ecc_uncorrected"), "sram_ecc_uncorrected"),
    )


# --------------------------------------------------------------------------------------------
# Value helpers: strict about types, since a wrong type means this is not what we think it is.


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TelemetryParseError(
            SOURCE, f"{where} is a {type(value).__name__}, expected an object"
        )
    return value


def _opt_dict(value: object, where: str) -> dict[str, Any] | None:
    return None if value is None else _dict(value, where)


def _opt_list(value: object, where: str) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise TelemetryParseError(SOURCE, f"{where} is a {type(value).__name__}, expected a list")
    return value


def _number(value: object, where: str) -> Number | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TelemetryParseError(SOURCE, f"{where} is not a number", repr(value))
    if isinstance(value, float) and not math.isfinite(value):
        return None  # 1e999 overflows to inf: no usable value, and not JSON-serialisable
    return value


def _float(value: object, where: str) -> float | None:
    number = _number(value, where)
    if number is None:
        return None
    try:
        return float(number)
    except OverflowError:  # an integer beyond float range: no usable value
        return None


def _int(value: object, where: str) -> int | None:
    number = _number(value, where)
    if number is None:
        return None
    if isinstance(number, float):
        if not number.is_integer():
            raise TelemetryParseError(SOURCE, f"{where} is not an integer", repr(value))
        return int(number)
    return number


def _str(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TelemetryParseError(SOURCE, f"{where} is not a string", repr(value))
    return value


def _index(key: str, where: str) -> int:
    if not (key.isascii() and key.isdigit() and len(key) <= 9):
        raise TelemetryParseError(SOURCE, f"{where} key is not an index", key)
    return int(key)


def _error_text(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TelemetryParseError(SOURCE, f"{where} error is not a string", repr(value))
    return value.strip() or None


def _collect_error(group: dict[str, Any], where: str, errors: list[str]) -> None:
    text = _error_text(group.get("error"), where)
    if text is not None:
        errors.append(f"{where}: {text}")


# --------------------------------------------------------------------------------------------
# Summary


def monitor_summary(record: MonitorRecord) -> dict[str, Any]:
    """Flatten a record into a small JSON-serialisable dict for a session event.

    `cores` has one entry per (runtime, logical NeuronCore); byte counts and counts of
    executions and errors are summed over runtimes; keys whose data the record lacks are None,
    so "no data" never reads as "idle". Latency percentiles cannot be merged across runtimes:
    each runtime's are in `exec_runtimes`, and `latency` holds, per percentile, the highest any
    runtime reported (with one runtime, exactly its own).
    """
    cores: list[dict[str, Any]] = []
    host_used: int | None = None
    device_used: int | None = None
    vcpu_user: float | None = None
    vcpu_system: float | None = None
    completed: int | None = None
    exec_errors: int | None = None
    device_by_kind: dict[str, int] | None = None
    host_by_kind: dict[str, int] | None = None
    errors_by_type: dict[str, int] | None = None
    exec_by_status: dict[str, int] | None = None
    latency: dict[str, dict[str, float]] | None = None
    runtimes: list[dict[str, Any]] = []
    for rt in record.runtimes:
        mem_by_core = {m.core: m for m in rt.memory.cores} if rt.memory else {}
        seen = set()
        for c in rt.cores:
            seen.add(c.core)
            cores.append(_core_entry(c.core, rt.pid, c, mem_by_core.get(c.core)))
        for core, mem in mem_by_core.items():
            if core not in seen:
                cores.append(_core_entry(core, rt.pid, None, mem))
        if rt.memory:
            host_used = add_known(host_used, rt.memory.host_bytes)
            device_used = add_known(device_used, rt.memory.device_bytes)
            for mem in rt.memory.cores:
                device_by_kind = add_counts(device_by_kind, mem.by_kind())
            if rt.memory.host is not None:
                host_by_kind = add_counts(host_by_kind, _host_by_kind(rt.memory.host))
        vcpu_user = add_known(vcpu_user, rt.vcpu_user)
        vcpu_system = add_known(vcpu_system, rt.vcpu_system)
        ex = rt.execution
        if ex:
            completed = add_known(completed, ex.completed)
            exec_errors = add_known(exec_errors, ex.errors_total)
            if ex.error_summary:
                errors_by_type = add_counts(errors_by_type, ex.error_summary)
            if ex.execution_summary:
                exec_by_status = add_counts(exec_by_status, ex.execution_summary)
            own = _latency(ex)
            if own is not None:
                latency = highest_percentiles(latency, own)
            runtimes.append(
                {
                    "pid": rt.pid,
                    "tag": rt.tag,
                    "exec_period": ex.period,
                    "exec_by_status": dict(ex.execution_summary) or None,
                    "exec_errors_by_type": dict(ex.error_summary) or None,
                    "latency": own,
                }
            )
    cores.sort(key=lambda c: (c["core"], c["pid"] if c["pid"] is not None else -1))

    system = record.system
    avg = system.vcpu_average if system else None
    hw = system.hw_counters if system else None
    ecc = ecc_devices = None
    if hw is not None:
        ecc = {
            "mem_corrected": sum_known(h.mem_ecc_corrected for h in hw),
            "mem_uncorrected": sum_known(h.mem_ecc_uncorrected for h in hw),
            "sram_corrected": sum_known(h.sram_ecc_corrected for h in hw),
            "sram_uncorrected": sum_known(h.sram_ecc_uncorrected for h in hw),
        }
        ecc_devices = [
            {
                "device": h.device,
                "mem_corrected": h.mem_ecc_corrected,
                "mem_uncorrected": h.mem_ecc_uncorrected,
                "sram_corrected": h.sram_ecc_corrected,
                "sram_uncorrected": h.sram_ecc_uncorrected,
            }
            for h in hw
        ]
    instance = record.instance
    hardware = record.hardware
    return {
        "instance_type": (instance.instance_type or None) if instance else None,
        "instance_id": (instance.instance_id or None) if instance else None,
        "device_type": hardware.device_type if hardware else None,
        "device_count": hardware.device_count if hardware else None,
        "cores_per_device": hardware.cores_per_device if hardware else None,
        "neuroncore_version": hardware.neuroncore_version if hardware else None,
        "logical_neuroncore_config": hardware.logical_neuroncore_config if hardware else None,
        "pids": [rt.pid for rt in record.runtimes],
        "cores": cores,
        "host_mem_used": host_used,
        "device_mem_used": device_used,
        "device_mem_by_kind": device_by_kind,
        "host_mem_by_kind": host_by_kind,
        # Each runtime's share is finite, but their sum can overflow (two 1.7e308s).
        "vcpu_user": _finite(vcpu_user),
        "vcpu_system": _finite(vcpu_system),
        "exec_completed": completed,
        "exec_errors": exec_errors,
        "exec_errors_by_type": errors_by_type,
        "exec_by_status": exec_by_status,
        "latency": latency,
        "exec_runtimes": runtimes,
        "system_vcpu_user": avg.user if avg else None,
        "system_vcpu_system": avg.system if avg else None,
        "system_mem_used": system.memory_used_bytes if system else None,
        "system_mem_total": system.memory_total_bytes if system else None,
        "ecc": ecc,
        "ecc_devices": ecc_devices,
        "errors": list(record.errors),
    }


def _core_entry(
    core: int, pid: int | None, counters: CoreCounters | None, mem: CoreMemory | None
) -> dict[str, Any]:
    """One logical core of one runtime. `physical`: the physical cores behind it (trn2's
    `v3d`) with their utilisation, or None where the report shows no split."""
    physical = None
    if counters is not None and counters.physical:
        physical = [{"name": name, "util": util} for name, util in counters.physical]
    by_kind = mem.by_kind() if mem else None
    return {
        "core": core,
        "pid": pid,
        "util": counters.utilization if counters else None,
        "flops": counters.flops if counters else None,
        "effective_flops": counters.effective_flops if counters else None,
        "mem_device": mem.total if mem else None,
        "mem_by_kind": by_kind or None,
        "physical": physical,
    }


def _host_by_kind(host: HostMemory) -> dict[str, int]:
    fields = dataclasses.asdict(host)
    return {name: value for name, value in fields.items() if value is not None}


def _latency(ex: ExecutionStats) -> dict[str, dict[str, float]] | None:
    """`{"total_latency": {"p50": s, ...}, "device_latency": {...}}`, seconds; percentiles the
    report lacks (or gave as NaN) are left out, and so is an empty kind."""
    out = {}
    for kind, values in (("total_latency", ex.total_latency),
                         ("device_latency", ex.device_latency)):
        known = {p: v for p, v in values.items() if v is not None}
        if known:
            out[kind] = known
    return out or None




def _finite(value: float | None) -> float | None:
    """None for a sum that overflowed: JSON has no infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value

