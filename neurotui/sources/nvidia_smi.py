"""Parse `nvidia-smi` output.

Preferred input is the stable machine format, `--query-gpu=... --format=csv` and
`--query-compute-apps=... --format=csv`. Columns are taken from the header (`utilization.gpu
[%]`), never by position, and values may or may not carry units (`95 %` vs `95` with
`nounits`); `[N/A]`, `[Not Supported]` and other bracketed notes become None. Without a header
(`noheader`) pass the field list you queried. The default human table is also read, for the
per-GPU utilisation/memory/power and the process list, since that is what people paste.

Memory is reported in bytes (nvidia-smi's MiB are binary), power in watts, temperature in °C,
utilisation in percent. Missing values are None, never 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from neurotui.sources.parse_errors import TelemetryParseError

SOURCE = "nvidia-smi"

__all__ = [
    "ComputeApp",
    "GpuSample",
    "NvidiaSmiGpu",
    "NvidiaSmiProcess",
    "NvidiaSmiReport",
    "parse_compute_apps_csv",
    "parse_nvidia_smi_table",
    "parse_query_gpu_csv",
]


@dataclass(frozen=True)
class GpuSample:
    """One row of `--query-gpu`."""

    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    timestamp: datetime | None = None
    utilization_gpu: float | None = None
    utilization_memory: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    fan_percent: float | None = None
    pstate: str | None = None
    driver_version: str | None = None


@dataclass(frozen=True)
class ComputeApp:
    """One row of `--query-compute-apps`."""

    pid: int | None = None
    process_name: str | None = None
    used_memory_bytes: int | None = None
    gpu_uuid: str | None = None
    gpu_bus_id: str | None = None
    gpu_name: str | None = None


# --------------------------------------------------------------------------------------------
# CSV (--format=csv[,nounits][,noheader])

_NA = {"", "N/A", "NA"}

# query field -> (GpuSample attribute, kind). Several spellings map to one attribute; the first
# one present in the header wins.
_GPU_FIELDS: dict[str, tuple[str, str]] = {
    "timestamp": ("timestamp", "time"),
    "index": ("index", "int"),
    "name": ("name", "str"),
    "gpu_name": ("name", "str"),
    "uuid": ("uuid", "str"),
    "gpu_uuid": ("uuid", "str"),
    "pci.bus_id": ("pci_bus_id", "str"),
    "gpu_bus_id": ("pci_bus_id", "str"),
    "driver_version": ("driver_version", "str"),
    "utilization.gpu": ("utilization_gpu", "float"),
    "utilization.memory": ("utilization_memory", "float"),
    "memory.used": ("memory_used_bytes", "mem"),
    "memory.total": ("memory_total_bytes", "mem"),
    "memory.free": ("memory_free_bytes", "mem"),
    "temperature.gpu": ("temperature_c", "float"),
    "power.draw": ("power_draw_w", "float"),
    "power.draw.instant": ("power_draw_w", "float"),
    "power.draw.average": ("power_draw_w", "float"),
    "power.limit": ("power_limit_w", "float"),
    "enforced.power.limit": ("power_limit_w", "float"),
    "clocks.sm": ("sm_clock_mhz", "float"),
    "clocks.current.sm": ("sm_clock_mhz", "float"),
    "fan.speed": ("fan_percent", "float"),
    "pstate": ("pstate", "str"),
}

_APP_FIELDS: dict[str, tuple[str, str]] = {
    "pid": ("pid", "int"),
    "process_name": ("process_name", "str"),
    "name": ("process_name", "str"),
    "used_gpu_memory": ("used_memory_bytes", "mem"),
    "used_memory": ("used_memory_bytes", "mem"),
    "gpu_uuid": ("gpu_uuid", "str"),
    "gpu_bus_id": ("gpu_bus_id", "str"),
    "gpu_name": ("gpu_name", "str"),
}

_FREE_TEXT = {"name", "process_name", "gpu_name"}  # may contain commas
_HEADER_RE = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(?:\[([^\]]*)\])?\s*$")
_VALUE_RE = re.compile(r"^([-+]?\d{1,15}(?:\.\d{1,15})?)\s*([A-Za-z%]+)?$")
_MEM_UNITS = {"B": 0, "KIB": 1, "KB": 1, "MIB": 2, "MB": 2, "GIB": 3, "GB": 3, "TIB": 4, "TB": 4}



def parse_query_gpu_csv(text: str, fields: Sequence[str] | None = None) -> list[GpuSample]:
    """Parse `nvidia-smi --query-gpu=... --format=csv[,nounits]` (one sample per row; a
    `-l`/`-lms` loop gives several rows per GPU). With `noheader`, pass `fields`."""
    return [GpuSample(**row) for row in _parse_csv(text, fields, _GPU_FIELDS)]


def parse_compute_apps_csv(text: str, fields: Sequence[str] | None = None) -> list[ComputeApp]:
    """Parse `nvidia-smi --query-compute-apps=... --format=csv[,nounits]`."""
    return [ComputeApp(**row) for row in _parse_csv(text, fields, _APP_FIELDS)]


def _parse_csv(
    text: str, fields: Sequence[str] | None, known: dict[str, tuple[str, str]]
) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise TelemetryParseError(SOURCE, "empty output")
        columns = [_header_cell(cell) for cell in lines[0].split(",")]
        lines = lines[1:]
    else:
        columns = [_header_cell(cell) for cell in fields]
    if not any(name in known for name, _ in columns):
        raise TelemetryParseError(
            SOURCE, "no known query field in the CSV header", ",".join(n for n, _ in columns)
        )
    free_text = next((i for i, (name, _) in enumerate(columns) if name in _FREE_TEXT), None)

    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(columns):
            extra = len(cells) - len(columns)
            if extra < 0 or free_text is None:
                raise TelemetryParseError(
                    SOURCE, f"row has {len(cells)} values, header has {len(columns)}", line
                )
            merged = ", ".join(cells[free_text : free_text + extra + 1])
            cells = [*cells[:free_text], merged, *cells[free_text + extra + 1 :]]
        row: dict[str, Any] = {}
        for (name, unit), cell in zip(columns, cells, strict=True):
            if name not in known:
                continue
            attr, kind = known[name]
            if attr in row:
                continue
            row[attr] = _value(cell, kind, unit, name)
        rows.append(row)
    return rows


def _header_cell(cell: str) -> tuple[str, str | None]:
    m = _HEADER_RE.match(cell)
    if not m:
        raise TelemetryParseError(SOURCE, "unreadable CSV header field", cell)
    return m.group(1).lower(), m.group(2)


def _value(cell: str, kind: str, header_unit: str | None, name: str) -> Any:
    if cell in _NA or (cell.startswith("[") and cell.endswith("]")):
        return None  # [N/A], [Not Supported], [Unknown Error], ...
    if kind == "str":
        return cell
    if kind == "time":
        for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
            try:
                return datetime.strptime(cell, fmt)
            except ValueError:
                continue
        raise TelemetryParseError(SOURCE, f"{name} is not a timestamp", cell)
    m = _VALUE_RE.match(cell)
    if not m:
        raise TelemetryParseError(SOURCE, f"{name} is not a number", cell)
    number, unit = m.group(1), m.group(2) or header_unit
    if kind == "int":
        if "." in number:
            raise TelemetryParseError(SOURCE, f"{name} is not an integer", cell)
        return int(number)
    if kind == "mem":
        return _to_bytes(float(number), unit or "MiB", name, cell)
    return float(number)


def _to_bytes(number: float, unit: str, name: str, cell: str) -> int:
    power = _MEM_UNITS.get(unit.strip().upper())
    if power is None:
        raise TelemetryParseError(SOURCE, f"{name} has an unknown memory unit", cell)
    return int(number * 1024**power)


# --------------------------------------------------------------------------------------------
# Default table


@dataclass(frozen=True)
class NvidiaSmiGpu:
    """One GPU block of the default `nvidia-smi` table."""

    index: int
    name: str | None
    persistence_mode: bool | None
    bus_id: str | None
    display_active: bool | None
    ecc_uncorrected: int | None
    fan_percent: float | None
    temperature_c: float | None
    perf_state: str | None
    power_draw_w: float | None
    power_cap_w: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    utilization_gpu: float | None
    compute_mode: str | None
    mig_mode: str | None = None


@dataclass(frozen=True)
class NvidiaSmiProcess:
    """One row of the table's Processes section."""

    gpu: int
    pid: int
    type: str | None
    name: str | None
    used_memory_bytes: int | None
    gpu_instance: str | None = None
    compute_instance: str | None = None


@dataclass(frozen=True)
class NvidiaSmiReport:
    smi_version: str | None
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[NvidiaSmiGpu, ...]
    processes: tuple[NvidiaSmiProcess, ...]
    # nvidia-smi's own failure message ("NVIDIA-SMI has failed ...", "No devices were found").
    error: str | None = None


_VERSION_RE = re.compile(
    r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?"
)
_GPU_RULE_RE = re.compile(r"^\|=+\+=+\+=+\|$")
_PROC_RULE_RE = re.compile(r"^\|=+\|$")
_BORDER_RE = re.compile(r"^\+[-+]+\+$")
_FAILURE_RE = re.compile(r"^(NVIDIA-SMI has failed.*|No devices were found.*)$")
_L0_NAME_RE = re.compile(r"^(\d{1,4})\s+(.*?)\s+(On|Off|N/A)$")
_L0_BUS_RE = re.compile(r"^(\S+)\s+(On|Off|N/A)$")
_L1_STATE_RE = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)$")
_PAIR_RE = re.compile(r"^(\S+)\s*/\s*(\S+)$")
_UTIL_RE = re.compile(r"^(\S+)\s+(.*)$")
_PROC_MIG_RE = re.compile(r"^(\d{1,4})\s+(\S+)\s+(\S+)\s+(\d{1,10})\s+(\S+)\s+(.+?)\s+(\S+)$")
_PROC_RE = re.compile(r"^(\d{1,4})\s+(\d{1,10})\s+(\S+)\s+(.+?)\s+(\S+)$")
_QUANTITY_RE = re.compile(r"^(\d{1,15}(?:\.\d{1,15})?)\s*([A-Za-z%]*)$")


def parse_nvidia_smi_table(text: str) -> NvidiaSmiReport:
    """Parse the default `nvidia-smi` screen (GPU blocks of 2 lines, or 3 with `MIG M.`)."""
    lines = [line.strip() for line in text.splitlines()]
    smi = driver = cuda = None
    for line in lines:
        if m := _VERSION_RE.search(line):
            smi, driver, cuda = m.group(1), m.group(2), m.group(3)
            break
    failure = next((m.group(1) for line in lines if (m := _FAILURE_RE.match(line))), None)
    start = next((i for i, line in enumerate(lines) if _GPU_RULE_RE.match(line)), None)
    if start is None:
        if failure is not None:
            return NvidiaSmiReport(smi, driver, cuda, (), (), error=failure)
        first = next((line for line in lines if line), "")
        raise TelemetryParseError(
            SOURCE, "no GPU table found" if first else "empty output", first or None
        )

    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    closed = False
    for line in lines[start + 1 :]:
        if _BORDER_RE.match(line):
            if current:
                blocks.append(current)
            current = []
            closed = True
        elif line.startswith("|") and line.endswith("|") and len(line) > 1:
            cells = [cell.strip() for cell in line[1:-1].split("|")]
            if len(cells) != 3:
                raise TelemetryParseError(SOURCE, "GPU table row does not have 3 cells", line)
            current.append(cells)
            closed = False
        else:
            break
    if current or not closed:
        raise TelemetryParseError(SOURCE, "GPU table is not closed by a border (truncated?)")
    gpus = tuple(_gpu_block(block) for block in blocks)
    processes = _processes(lines)
    return NvidiaSmiReport(smi, driver, cuda, gpus, processes, error=failure)


def _gpu_block(block: list[list[str]]) -> NvidiaSmiGpu:
    if len(block) < 2:
        raise TelemetryParseError(SOURCE, "GPU block has fewer than 2 lines", " | ".join(block[0]))
    (c00, c01, c02), (c10, c11, c12) = block[0], block[1]
    m0 = _L0_NAME_RE.match(c00)
    m1 = _L0_BUS_RE.match(c01)
    m2 = _L1_STATE_RE.match(c10)
    m3 = _PAIR_RE.match(c11)
    m4 = _UTIL_RE.match(c12)
    if not (m0 and m1 and m2 and m3 and m4):
        raise TelemetryParseError(SOURCE, "unreadable GPU block", " | ".join(block[0] + block[1]))
    mig = block[2][2] if len(block) > 2 else None
    return NvidiaSmiGpu(
        index=int(m0.group(1)),
        name=m0.group(2) or None,
        persistence_mode=_on_off(m0.group(3)),
        bus_id=m1.group(1),
        display_active=_on_off(m1.group(2)),
        ecc_uncorrected=int(c02) if c02.isascii() and c02.isdigit() and len(c02) < 16 else None,
        fan_percent=_quantity(m2.group(1), "fan"),
        temperature_c=_quantity(m2.group(2), "temperature"),
        perf_state=None if m2.group(3) in _NA else m2.group(3),
        power_draw_w=_quantity(m2.group(4), "power"),
        power_cap_w=_quantity(m2.group(5), "power cap"),
        memory_used_bytes=_table_mem(m3.group(1)),
        memory_total_bytes=_table_mem(m3.group(2)),
        utilization_gpu=_quantity(m4.group(1), "GPU-Util"),
        compute_mode=m4.group(2).strip() or None,
        mig_mode=None if mig is None or mig in _NA else mig,
    )


def _processes(lines: list[str]) -> tuple[NvidiaSmiProcess, ...]:
    title = next((i for i, line in enumerate(lines) if "Processes:" in line), None)
    if title is None:
        return ()
    rule = next((i for i in range(title + 1, len(lines)) if _PROC_RULE_RE.match(lines[i])), None)
    if rule is None:
        return ()
    has_mig = any(re.search(r"\bGI\b", lines[i]) for i in range(title, rule))
    out = []
    for line in lines[rule + 1 :]:
        if not (line.startswith("|") and line.endswith("|") and len(line) > 1):
            break
        row = line[1:-1].strip()
        if not row or row.lower().startswith("no running processes"):
            continue
        if has_mig and (m := _PROC_MIG_RE.match(row)):
            gpu, gi, ci, pid, kind, name, mem = m.groups()
        elif not has_mig and (m := _PROC_RE.match(row)):
            gpu, pid, kind, name, mem = m.groups()
            gi = ci = None
        else:
            raise TelemetryParseError(SOURCE, "unreadable process row", row)
        out.append(
            NvidiaSmiProcess(
                gpu=int(gpu),
                pid=int(pid),
                type=kind,
                name=name,
                used_memory_bytes=_table_mem(mem),
                gpu_instance=None if gi is None or gi in _NA else gi,
                compute_instance=None if ci is None or ci in _NA else ci,
            )
        )
    return tuple(out)


def _on_off(value: str) -> bool | None:
    return {"On": True, "Off": False}.get(value)


def _quantity(value: str, name: str) -> float | None:
    if value in _NA or value in ("ERR!", "Unknown"):
        return None
    m = _QUANTITY_RE.match(value)
    if not m:
        raise TelemetryParseError(SOURCE, f"unreadable {name}", value)
    return float(m.group(1))


def _table_mem(value: str) -> int | None:
    if value in _NA:
        return None
    m = _QUANTITY_RE.match(value)
    if not m:
        raise TelemetryParseError(SOURCE, "unreadable memory amount", value)
    return _to_bytes(float(m.group(1)), m.group(2) or "MiB", "memory", value)
