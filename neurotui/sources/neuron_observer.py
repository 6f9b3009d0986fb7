"""Parse a Neuron Prometheus `/metrics` page into the summary `neuron_monitor` records.

Where `neuron-monitor` cannot be run by us (a Kubernetes node whose DaemonSet already runs it,
a container without the tools), its numbers are often still served over HTTP in the Prometheus
text format by `neuron-monitor | neuron-monitor-prometheus.py` (the exporter the Neuron tools
ship, also behind the EKS neuron-monitor DaemonSet). This module reads that page.

The names, labels and units below are the exporter's, as its source writes them and as a real
capture shows (tests/fixtures/telemetry/, SOURCES.md there says where it came from):

- `neuroncore_utilization_ratio{runtime_tag, neuroncore}`: neuron-monitor's percent / 100.
- `neuroncore_memory_usage_<kind>{runtime_tag, neuroncore}`: device bytes by kind.
- `neuron_runtime_memory_used_bytes{runtime_tag, memory_location=host|neuron_device}`.
- `neuron_runtime_vcpu_usage_ratio{runtime_tag, usage_type=user|system}`: percent / 100.
- `execution_status_total` / `execution_errors_total{runtime_tag, status_type|error_type}`,
  `hardware_ecc_events_total{neuron_device_index, event_type}`: Counters that add every
  report's count, so totals since the exporter started, not per period.
- `execution_latency_seconds{runtime_tag, percentile}`: the last report's total latency.
- `system_memory_{total,used}_bytes`, `instance_info{instance_type, instance_id, ...}`,
  `neuron_hardware_info{neuron_device_count, neuroncore_per_device_count, ...}`.

Neuron Observer (SDK 2.33 beta) serves its own `/metrics` under other names
(`neuron.{scope}.{name}` in its reference); no public capture of it was found, so its names are
not guessed here: a page without any of the names above gives a summary of Nones whose
`errors` says which families the page had.

`parse_metrics()` raises TelemetryParseError for a page that is not Prometheus text.
`observer_summary()` is pure: counts per scrape come from the difference with the previous
page, so the first page has them as None (its totals are kept in `exporter_totals`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from neurotui.sources.neuron_monitor import MEMORY_KINDS
from neurotui.sources.parse_errors import TelemetryParseError
from neurotui.sources.summing import add_counts, add_known, highest_percentiles, sum_known

SOURCE = "neuron /metrics"

__all__ = ["SOURCE", "MetricsPage", "Sample", "observer_summary", "parse_metrics"]

# Families this module reads; a page with none of them is not a Neuron page we understand.
_CORE_UTIL = "neuroncore_utilization_ratio"
_CORE_MEM = "neuroncore_memory_usage_"
_RT_MEM = "neuron_runtime_memory_used_bytes"
_RT_VCPU = "neuron_runtime_vcpu_usage_ratio"
_STATUS = "execution_status_total"
_ERRORS = "execution_errors_total"
_LATENCY = "execution_latency_seconds"
_ECC = "hardware_ecc_events_total"
_SYS_MEM_TOTAL = "system_memory_total_bytes"
_SYS_MEM_USED = "system_memory_used_bytes"
_INSTANCE = "instance_info"
_HARDWARE = "neuron_hardware_info"
KNOWN = frozenset(
    {_CORE_UTIL, _RT_MEM, _RT_VCPU, _STATUS, _ERRORS, _LATENCY, _ECC, _SYS_MEM_TOTAL,
     _SYS_MEM_USED, _INSTANCE, _HARDWARE} | {_CORE_MEM + kind for kind in MEMORY_KINDS}
)
_ECC_KINDS = {
    "mem_ecc_corrected": "mem_corrected",
    "mem_ecc_uncorrected": "mem_uncorrected",
    "sram_ecc_corrected": "sram_corrected",
    "sram_ecc_uncorrected": "sram_uncorrected",
}


@dataclass(frozen=True)
class Sample:
    """One line of the page: its labels and value (None where the page says NaN or ±Inf)."""

    labels: Mapping[str, str]
    value: float | None


@dataclass(frozen=True)
class MetricsPage:
    """A parsed page: samples by their full name (`execution_errors_total`, not the family's
    `execution_errors`), in page order, and the family names the page declared."""

    samples: Mapping[str, tuple[Sample, ...]]
    families: tuple[str, ...]

    def get(self, name: str) -> tuple[Sample, ...]:
        return self.samples.get(name, ())


def parse_metrics(text: str) -> MetricsPage:
    """Prometheus text exposition (version 0.0.4) to a MetricsPage.

    Raises TelemetryParseError for text that is not in that format (an HTML error page, JSON,
    a cut-off line); an empty page is valid and has no samples.
    """
    if "\x00" in text:
        # prometheus_client reads a NUL inside a label value as part of it; no exporter writes one.
        raise TelemetryParseError(SOURCE, "page has NUL bytes: not Prometheus text")
    samples: dict[str, list[Sample]] = {}
    families: list[str] = []
    try:
        for family in text_string_to_metric_families(text):
            families.append(family.name)
            for s in family.samples:
                samples.setdefault(s.name, []).append(Sample(dict(s.labels), _finite(s.value)))
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        # prometheus_client raises ValueError for most bad lines; the others guard against a
        # line shape it does not check, so that a page never crashes the collector.
        raise TelemetryParseError(SOURCE, f"not Prometheus text: {exc}", _bad_line(text)) from exc
    return MetricsPage({k: tuple(v) for k, v in samples.items()}, tuple(families))


def observer_summary(
    page: MetricsPage, previous: MetricsPage | None = None, period_s: float | None = None
) -> dict[str, Any]:
    """The page as `neuron_monitor.monitor_summary()` shapes a record, plus `exporter_totals`
    and `source`.

    Counts (`exec_*`, `ecc*`) are what the counters grew since `previous` (a counter that went
    down was reset: its whole value is the growth, as Prometheus' increase() reads it); None
    without a previous page. `period_s` is the time between the two pages, recorded as each
    runtime's `exec_period`. Figures the exporter does not serve (FLOPs, the physical split,
    host memory by kind, device type, core version, LNC, device latency) are None.
    """
    tags = _runtime_tags(page)
    pid_of = {tag: _pid(tag) for tag in tags}

    cores: dict[tuple[str, int], dict[str, Any]] = {}

    def core_entry(s: Sample) -> dict[str, Any] | None:
        tag, core = s.labels.get("runtime_tag"), _int_label(s.labels.get("neuroncore"))
        if tag is None or core is None:
            return None
        return cores.setdefault((tag, core), {
            "core": core, "pid": pid_of.get(tag), "util": None, "flops": None,
            "effective_flops": None, "mem_device": None, "mem_by_kind": None, "physical": None,
        })

    for s in page.get(_CORE_UTIL):
        entry = core_entry(s)
        if entry is not None:
            entry["util"] = None if s.value is None else s.value * 100.0
    device_by_kind: dict[str, int] | None = None
    for kind in MEMORY_KINDS:
        for s in page.get(_CORE_MEM + kind):
            entry = core_entry(s)
            value = _bytes(s.value)
            if entry is None or value is None:
                continue
            entry["mem_by_kind"] = {**(entry["mem_by_kind"] or {}), kind: value}
            entry["mem_device"] = (entry["mem_device"] or 0) + value
            device_by_kind = add_counts(device_by_kind, {kind: value})
    core_list = sorted(cores.values(), key=lambda c: (
        c["core"], c["pid"] if c["pid"] is not None else -1))

    host_used = device_used = None
    for s in page.get(_RT_MEM):
        where = s.labels.get("memory_location")
        if where == "host":
            host_used = add_known(host_used, _bytes(s.value))
        elif where == "neuron_device":
            device_used = add_known(device_used, _bytes(s.value))

    vcpu: dict[str, float | None] = {"user": None, "system": None}
    for s in page.get(_RT_VCPU):
        kind = s.labels.get("usage_type")
        if kind in vcpu and s.value is not None:
            vcpu[kind] = add_known(vcpu[kind], s.value * 100.0)

    status_now = _by_runtime(page.get(_STATUS), "status_type")
    errors_now = _by_runtime(page.get(_ERRORS), "error_type")
    status = errors = None
    if previous is not None:
        status = _growth(status_now, _by_runtime(previous.get(_STATUS), "status_type"))
        errors = _growth(errors_now, _by_runtime(previous.get(_ERRORS), "error_type"))
    latency_by_tag: dict[str, dict[str, float]] = {}
    for s in page.get(_LATENCY):
        tag, pct = s.labels.get("runtime_tag"), s.labels.get("percentile")
        if tag is not None and pct is not None and s.value is not None:
            latency_by_tag.setdefault(tag, {})[pct] = s.value

    runtimes = []
    exec_by_status = exec_errors_by_type = latency = None
    completed = exec_errors = None
    for tag in tags:
        own_status = status.get(tag) if status is not None else None
        own_errors = errors.get(tag) if errors is not None else None
        own_latency = ({"total_latency": latency_by_tag[tag]} if tag in latency_by_tag
                       else None)
        if own_status is None and own_errors is None and own_latency is None:
            continue
        if own_status:
            exec_by_status = add_counts(exec_by_status, own_status)
            completed = add_known(completed, own_status.get("completed"))
        if own_errors:
            exec_errors_by_type = add_counts(exec_errors_by_type, own_errors)
            exec_errors = add_known(exec_errors, sum(own_errors.values()))
        if own_latency is not None:
            latency = highest_percentiles(latency, own_latency)
        runtimes.append({
            "pid": pid_of[tag], "tag": tag,
            "exec_period": period_s if previous is not None else None,
            "exec_by_status": own_status or None, "exec_errors_by_type": own_errors or None,
            "latency": own_latency,
        })

    ecc_now = _ecc_by_device(page)
    ecc = ecc_devices = None
    if previous is not None and ecc_now:
        grown = _growth({str(d): v for d, v in ecc_now.items()},
                        {str(d): v for d, v in _ecc_by_device(previous).items()})
        ecc_devices = [{"device": int(d), **{k: grown[d].get(k) for k in _ECC_KINDS.values()}}
                       for d in sorted(grown, key=int)]
        ecc = {k: sum_known(dev[k] for dev in ecc_devices) for k in _ECC_KINDS.values()}

    instance = _first_labels(page, _INSTANCE)
    hardware = _first_labels(page, _HARDWARE)
    found = [name for name in page.samples if name in KNOWN]
    problems = [] if found else [_nothing_known(page)]
    return {
        "instance_type": (instance.get("instance_type") or None) if instance else None,
        "instance_id": (instance.get("instance_id") or None) if instance else None,
        "device_type": None,
        "device_count": _int_label(hardware.get("neuron_device_count")) if hardware else None,
        "cores_per_device": (_int_label(hardware.get("neuroncore_per_device_count"))
                             if hardware else None),
        "neuroncore_version": None,
        "logical_neuroncore_config": None,
        "pids": [pid_of[tag] for tag in tags],
        "cores": core_list,
        "host_mem_used": host_used,
        "device_mem_used": device_used,
        "device_mem_by_kind": device_by_kind,
        "host_mem_by_kind": None,
        "vcpu_user": vcpu["user"],
        "vcpu_system": vcpu["system"],
        "exec_completed": completed,
        "exec_errors": exec_errors,
        "exec_errors_by_type": exec_errors_by_type,
        "exec_by_status": exec_by_status,
        "latency": latency,
        "exec_runtimes": runtimes,
        # The exporter's system vCPU split is not neuron-monitor's (its user adds nice, its
        # system adds io_wait, irq and soft_irq): not passed off as the same figure.
        "system_vcpu_user": None,
        "system_vcpu_system": None,
        "system_mem_used": _bytes(_first_value(page, _SYS_MEM_USED)),
        "system_mem_total": _bytes(_first_value(page, _SYS_MEM_TOTAL)),
        "ecc": ecc,
        "ecc_devices": ecc_devices,
        "errors": problems,
        "exporter_totals": {
            "exec_by_status": _merge_runtimes(status_now) or None,
            "exec_errors_by_type": _merge_runtimes(errors_now) or None,
            "ecc": ({k: sum_known(_count(dev.get(k)) for dev in ecc_now.values())
                     for k in _ECC_KINDS.values()} if ecc_now else None),
        },
        "source": SOURCE,
    }


# --------------------------------------------------------------------------------------------
# Helpers


def _runtime_tags(page: MetricsPage) -> list[str]:
    """Every runtime the page names, in first-seen order. The exporter keeps an exited
    runtime's series until no runtime is left, so a tag here may be gone."""
    seen: dict[str, None] = {}
    for name in sorted(KNOWN):
        for s in page.get(name):
            tag = s.labels.get("runtime_tag")
            if tag is not None:
                seen.setdefault(tag, None)
    return sorted(seen, key=lambda t: (_pid(t) is None, _pid(t) or 0, t))


def _pid(tag: str) -> int | None:
    """The runtime tag is the process's PID unless NEURON_PROCESS_TAG named it otherwise."""
    return _int_label(tag)


def _int_label(value: str | None) -> int | None:
    if value is None or not (value.isascii() and value.isdigit() and len(value) <= 18):
        return None
    return int(value)


def _by_runtime(samples: Iterable[Sample], kind_label: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for s in samples:
        tag, kind = s.labels.get("runtime_tag"), s.labels.get(kind_label)
        if tag is not None and kind is not None and s.value is not None:
            out.setdefault(tag, {})[kind] = s.value
    return out


def _ecc_by_device(page: MetricsPage) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for s in page.get(_ECC):
        device = _int_label(s.labels.get("neuron_device_index"))
        kind = _ECC_KINDS.get(s.labels.get("event_type") or "")
        if device is not None and kind is not None and s.value is not None:
            out.setdefault(device, {})[kind] = s.value
    return out


def _growth(now: Mapping[str, Mapping[str, float]], before: Mapping[str, Mapping[str, float]]
            ) -> dict[str, dict[str, int]]:
    """How much each counter grew; a series the earlier page lacked started since (from 0)."""
    out: dict[str, dict[str, int]] = {}
    for key, counts in now.items():
        prior = before.get(key, {})
        grown = {}
        for kind, value in counts.items():
            base = prior.get(kind, 0.0)
            delta = value - base if value >= base else value  # went down: reset, count anew
            if math.isfinite(delta) and delta == int(delta):
                grown[kind] = int(delta)
        out[key] = grown
    return out


def _merge_runtimes(by_runtime: Mapping[str, Mapping[str, float]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in by_runtime.values():
        for kind, value in counts.items():
            count = _count(value)
            if count is not None:
                total[kind] = total.get(kind, 0) + count
    return total


def _count(value: float | None) -> int | None:
    """Counters come as floats (`4.0`); a fraction or a negative means it is not a count."""
    if value is None or value < 0 or value != int(value):
        return None
    return int(value)


def _first_labels(page: MetricsPage, name: str) -> Mapping[str, str] | None:
    samples = page.get(name)
    return samples[0].labels if samples else None


def _first_value(page: MetricsPage, name: str) -> float | None:
    samples = page.get(name)
    return samples[0].value if samples else None


def _bytes(value: float | None) -> int | None:
    """Byte counts come as floats (`1.88901012e+08`), like every count."""
    return _count(value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _nothing_known(page: MetricsPage) -> str:
    if not page.families:
        return f"{SOURCE}: the page has no metrics"
    shown = ", ".join(page.families[:8]) + (", ..." if len(page.families) > 8 else "")
    return (f"{SOURCE}: none of neuron-monitor-prometheus' metrics in the page "
            f"({len(page.families)} families: {shown})")


def _bad_line(text: str) -> str | None:
    """The first line that is neither a comment nor `name[{labels}] value`, for the message."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        head, _, tail = stripped.rpartition(" ")
        try:
            float(tail)
        except ValueError:
            return stripped
        if not head:
            return stripped
    return None

