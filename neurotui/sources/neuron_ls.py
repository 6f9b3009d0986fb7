"""Parse `neuron-ls` output: the box table (every generation since 2019), `--json-output` and
`--topology`.

The table is read by header text, never by position or fixed width: columns come and go between
SDK releases (CONNECTED DEVICES is absent on single-device instances, LOGICAL NC existed for one
beta, CPU AFFINITY / NUMA NODE arrived in 2.29, runtime 1.x had RUNTIME ADDRESS/PID/VERSION), and
some pasted captures have their runs of spaces collapsed so cell widths no longer match the
`+---+` borders. Rows are therefore split on `|`, and a device whose processes span several rows
is rebuilt from its continuation rows (the ones with an empty NEURON DEVICE cell).

Cells that say `NA` (or are empty) become None. Memory sizes are bytes (neuron-ls prints binary
units: "32 GB" is 32 GiB, which is exactly the `memory_size` the JSON form reports).

Cores are counted as the SDK counts them. Since SDK 2.22 NEURON CORES (`nc_count`) and NEURON
CORE IDS (`neuroncore_ids`) are logical NeuronCores: on trn2 the default
`logical-neuroncore-config: 2` makes one logical core of two physical ones, so a trn2 device shows
4 cores. The 2.21 beta printed the physical count (8) under NEURON CORES and the logical one
under LOGICAL NC; before LNC existed every core was its own logical core. `NeuronDevice
.logical_core_count` follows these rules. No neuron-ls version prints the NeuronCore version
(neuron-monitor's `neuron_hardware_info` does).

CPU AFFINITY (`cpu_affinity`) is kept as printed and as the CPU ids it names (`affinity_cpus`,
from a Linux cpulist such as `48-95,144-191`); NUMA NODE is None where the tool says -1.
`combine_reports` joins what `--json-output` and the table said about the same devices: the
table alone prints the instance type, only the JSON form lists processes on 2.29's default
output.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from neurotui.sources.parse_errors import TelemetryParseError

SOURCE = "neuron-ls"

__all__ = [
    "NeuronDevice",
    "NeuronLsReport",
    "NeuronProcess",
    "NeuronTopology",
    "combine_reports",
    "parse_cpu_list",
    "parse_neuron_ls",
    "parse_neuron_ls_json",
    "parse_neuron_ls_table",
    "parse_neuron_ls_topology",
]


@dataclass(frozen=True)
class NeuronProcess:
    """A process holding a Neuron device (one table row, or one `neuron_processes` entry)."""

    pid: int | None
    command: str | None
    runtime_version: str | None
    # Runtime 1.x (neuron-rtd) era only: the RUNTIME ADDRESS column.
    address: str | None = None


@dataclass(frozen=True)
class NeuronDevice:
    """One Neuron device. Fields the given output format does not show are None."""

    index: int
    neuron_cores: int | None
    memory_bytes: int | None
    # None: the output has no such column/field; (): the tool says no connections.
    connected_devices: tuple[int, ...] | None
    bdf: str | None
    processes: tuple[NeuronProcess, ...] = ()
    core_ids: tuple[int, ...] | None = None
    # SDK 2.21 beta "LOGICAL NC" column: logical cores on this device.
    logical_cores: int | None = None
    # CPU AFFINITY as printed ("48-95,144-191"), and the CPU ids it names.
    cpu_affinity: str | None = None
    # None when unknown (the JSON form says "-1" on instances without NUMA information).
    numa_node: int | None = None
    affinity_cpus: tuple[int, ...] | None = None

    @property
    def logical_core_count(self) -> int | None:
        """Logical NeuronCores on this device: the 2.21 beta's LOGICAL NC column where shown
        (its NEURON CORES was the physical count), else NEURON CORES (logical since 2.22, and
        the same thing before LNC existed)."""
        return self.logical_cores if self.logical_cores is not None else self.neuron_cores


@dataclass(frozen=True)
class NeuronLsReport:
    """Everything one `neuron-ls` invocation told us."""

    instance_type: str | None
    instance_id: str | None
    devices: tuple[NeuronDevice, ...]
    logical_neuroncore_config: int | None = None
    # The tool's own error message (e.g. the driver is not loaded); devices is then empty.
    error: str | None = None
    # True when the input was a documentation example with `...` lines standing for elided
    # devices: the devices listed are real but the list is incomplete.
    elided: bool = False

    def device(self, index: int) -> NeuronDevice | None:
        """The device with this NEURON DEVICE index (positions differ from indexes when a doc
        example elides devices)."""
        return next((d for d in self.devices if d.index == index), None)

    @property
    def pids(self) -> tuple[int, ...]:
        """Distinct PIDs holding any device, sorted (a torchrun job shows up once)."""
        found = {p.pid for d in self.devices for p in d.processes if p.pid is not None}
        return tuple(sorted(found))

    @property
    def total_cores(self) -> int | None:
        """Sum of NeuronCores over all devices; None if any device does not say."""
        return _total(d.neuron_cores for d in self.devices)

    @property
    def total_logical_cores(self) -> int | None:
        """Logical NeuronCores over all devices (64 on a trn2.48xlarge with LNC=2); None if any
        device does not say or the list is a doc example's elided one."""
        return None if self.elided else _total(d.logical_core_count for d in self.devices)

    @property
    def logical_core_ids(self) -> tuple[int, ...] | None:
        """Every device's logical core ids in device order; None unless every device lists
        them (SDK 2.29's NEURON CORE IDS / `neuroncore_ids`)."""
        if self.elided or not self.devices or any(d.core_ids is None for d in self.devices):
            return None
        return tuple(i for d in self.devices for i in d.core_ids or ())


@dataclass(frozen=True)
class NeuronTopology:
    """Device interconnect from `neuron-ls --topology`."""

    device_ids: tuple[int, ...]
    # Undirected links as sorted (low, high) pairs, sorted.
    links: tuple[tuple[int, int], ...]
    # The diagram's rows of device ids as drawn (empty when the output had no diagram).
    grid: tuple[tuple[int, ...], ...] = ()


def _total(counts: Iterable[int | None]) -> int | None:
    values = list(counts)
    if not values or any(c is None for c in values):
        return None
    return sum(c for c in values if c is not None)


# --------------------------------------------------------------------------------------------
# Entry point


def parse_neuron_ls(text: str) -> NeuronLsReport:
    """Parse any `neuron-ls` output: the table, `--json-output`, or the tool's error banner."""
    lines = text.splitlines()
    if any(_BORDER_RE.match(line.strip()) for line in lines):
        return parse_neuron_ls_table(text)
    if _json_candidates(lines):
        return parse_neuron_ls_json(text)
    return parse_neuron_ls_table(text)


# --------------------------------------------------------------------------------------------
# Table


_BORDER_RE = re.compile(r"^\+(?:[-=]+\+)+$")
_META_RE = re.compile(r"^([a-z][a-z0-9_-]*)\s*:\s*(.*?)\s*$")
# Go logrus text output, as neuron-ls prints it on a fatal error:
#   FATA[0000] Failed to discover neuron devices     error="Unable to read device ..."
_LOGRUS_RE = re.compile(
    r'^(?:FATA|ERRO|PANI)\[\d+\]\s+(?P<msg>.*?)\s*(?:\berror="(?P<err>.*)")?\s*$'
)
_LOGFMT_RE = re.compile(
    r'^level=(?:fatal|error|panic)\s+msg="(?P<msg>[^"]*)"(?:.*\berror="(?P<err>[^"]*)")?'
)

# Header text (rows joined, whitespace collapsed, upper case) -> canonical column.
_COLUMNS = {
    "NEURON DEVICE": "device",
    "LOGICAL ID": "device",  # 2019 format
    "NEURON CORES": "cores",
    "LOGICAL NC": "logical_cores",
    "NEURON CORE IDS": "core_ids",
    "NEURON MEMORY": "memory",
    "CONNECTED DEVICES": "connected",
    "PCI BDF": "bdf",
    "PID": "pid",
    "RUNTIME PID": "pid",
    "COMMAND": "command",
    "RUNTIME VERSION": "runtime_version",
    "RUNTIME ADDRESS": "address",
    "CPU AFFINITY": "cpu_affinity",
    "NUMA NODE": "numa_node",
}
_MEMORY_CHANNEL_PREFIX = "MEMORY CHANNEL"  # 2019 format: one column per channel, summed

_NA = {"", "NA", "N/A", "-"}


def parse_neuron_ls_table(text: str) -> NeuronLsReport:
    """Parse the default / `--wide` / `--show-all-procs` / `--topology` table output."""
    lines = [line.strip() for line in text.splitlines()]
    meta: dict[str, str] = {}
    errors: list[str] = []
    start = None
    for idx, line in enumerate(lines):
        if _BORDER_RE.match(line):
            start = idx
            break
        err = _error_line(line)
        if err is not None:
            errors.append(err)
            continue
        m = _META_RE.match(line)
        if m:
            meta.setdefault(m.group(1).lower(), m.group(2))

    error = "; ".join(errors) if errors else None
    instance_type = _opt_text(meta.get("instance-type"))
    instance_id = _opt_text(meta.get("instance-id"))
    lnc = _opt_int(meta.get("logical-neuroncore-config"), "logical-neuroncore-config")

    if start is None:
        if error is not None:
            return NeuronLsReport(instance_type, instance_id, (), lnc, error=error)
        first = next((line for line in lines if line), "")
        if not first:
            raise TelemetryParseError(SOURCE, "empty output")
        raise TelemetryParseError(SOURCE, "no device table found", first)

    header_rows, body = _split_table(lines, start)
    columns = _header_columns(header_rows)
    devices = _devices_from_rows(columns, body)
    return NeuronLsReport(instance_type, instance_id, tuple(devices), lnc, error=error)


def _error_line(line: str) -> str | None:
    m = _LOGRUS_RE.match(line) or _LOGFMT_RE.match(line)
    if not m:
        return None
    msg = m.group("msg").strip()
    err = (m.group("err") or "").strip()
    if msg and err:
        return f"{msg}: {err}"
    return msg or err or line


def _split_table(lines: list[str], start: int) -> tuple[list[list[str]], list[list[str] | None]]:
    """Return the header rows and the body rows (None marks an interior border)."""
    header: list[list[str]] = []
    body: list[list[str] | None] = []
    in_body = False
    closed = False
    for line in lines[start + 1 :]:
        if _BORDER_RE.match(line):
            if not in_body:
                if not header:
                    raise TelemetryParseError(SOURCE, "table has no header row", line)
                in_body = True
            else:
                body.append(None)
            closed = True
            continue
        if line.startswith("|"):
            if not line.endswith("|") or len(line) < 2:
                raise TelemetryParseError(SOURCE, "unterminated table row (truncated?)", line)
            # Body cells stay unstripped until a `|` inside COMMAND has been glued back.
            cells = line[1:-1].split("|")
            (body if in_body else header).append(cells)
            closed = False
            continue
        break
    if not in_body:
        raise TelemetryParseError(SOURCE, "table header is not closed (truncated?)")
    if not closed:
        raise TelemetryParseError(SOURCE, "table is not closed by a border (truncated?)")
    return header, body


def _header_columns(header_rows: list[list[str]]) -> list[str | None]:
    width = len(header_rows[0])
    if any(len(row) != width for row in header_rows):
        raise TelemetryParseError(SOURCE, "header rows have different numbers of cells")
    columns: list[str | None] = []
    for col in range(width):
        name = " ".join(" ".join(row[col] for row in header_rows).split()).upper()
        if name.startswith(_MEMORY_CHANNEL_PREFIX):
            columns.append("memory_channel")
        else:
            columns.append(_COLUMNS.get(name))  # unknown columns: None, ignored
    if "device" not in columns:
        raise TelemetryParseError(SOURCE, "no NEURON DEVICE column in the table header")
    return columns


def _devices_from_rows(
    columns: list[str | None], body: list[list[str] | None]
) -> list[NeuronDevice]:
    width = len(columns)
    command_col = columns.index("command") if "command" in columns else None
    groups: list[list[dict[str, str]]] = []
    for cells in body:
        if cells is None:
            continue
        if len(cells) != width:
            cells = _fit_cells(cells, width, command_col)
        cells = [cell.strip() for cell in cells]
        row: dict[str, str] = {}
        for name, cell in zip(columns, cells, strict=True):
            if name is None:
                continue
            if name == "memory_channel" and name in row:
                row[name] = f"{row[name]}+{cell}"
            else:
                row[name] = cell
        if row.get("device", ""):
            groups.append([row])
        elif groups:
            groups[-1].append(row)
        else:
            raise TelemetryParseError(
                SOURCE, "continuation row before any device row", "|".join(cells)
            )
    return [_device_from_group(group) for group in groups]


def _fit_cells(cells: list[str], width: int, command_col: int | None) -> list[str]:
    """A `|` inside a COMMAND cell splits it; glue the pieces back together."""
    extra = len(cells) - width
    if extra > 0 and command_col is not None:
        merged = "|".join(cells[command_col : command_col + extra + 1])
        return [*cells[:command_col], merged, *cells[command_col + extra + 1 :]]
    raise TelemetryParseError(
        SOURCE, f"row has {len(cells)} cells, header has {width}", "|".join(cells)
    )


def _device_from_group(group: list[dict[str, str]]) -> NeuronDevice:
    first = group[0]
    index = _opt_int(first["device"], "NEURON DEVICE")
    if index is None:
        raise TelemetryParseError(SOURCE, "device index is NA", first["device"])
    processes = []
    for row in group:
        proc = NeuronProcess(
            pid=_opt_int(row.get("pid"), "PID"),
            command=_opt_text(row.get("command")),
            runtime_version=_opt_text(row.get("runtime_version")),
            address=_opt_text(row.get("address")),
        )
        if proc.pid is not None or proc.command is not None:
            processes.append(proc)
    if "memory" in first:
        memory = _opt_size(first["memory"])
    elif "memory_channel" in first:
        channels = [_opt_size(part) for part in first["memory_channel"].split("+")]
        memory = None if any(c is None for c in channels) else sum(c or 0 for c in channels)
    else:
        memory = None
    connected = None
    if "connected" in first:
        connected = _int_list(first["connected"], "CONNECTED DEVICES")
    core_ids = None
    if "core_ids" in first and first["core_ids"] not in _NA:
        core_ids = _id_ranges(first["core_ids"])
    numa = _opt_int(first.get("numa_node"), "NUMA NODE")
    affinity = _opt_text(first.get("cpu_affinity"))
    return NeuronDevice(
        index=index,
        neuron_cores=_opt_int(first.get("cores"), "NEURON CORES"),
        memory_bytes=memory,
        connected_devices=connected,
        bdf=_opt_text(first.get("bdf")),
        processes=tuple(processes),
        core_ids=core_ids,
        logical_cores=_opt_int(first.get("logical_cores"), "LOGICAL NC"),
        cpu_affinity=affinity,
        numa_node=None if numa is None or numa < 0 else numa,
        affinity_cpus=None if affinity is None else parse_cpu_list(affinity),
    )


# --------------------------------------------------------------------------------------------
# JSON


_ELISION_RE = re.compile(r"^\s*(?:\.\.\.|…),?\s*$")


def parse_neuron_ls_json(text: str) -> NeuronLsReport:
    """Parse `neuron-ls --json-output` (`-j`), or `--output-format json` (Neuron 2.34+).

    The older form is an array of devices. The newer one adds top-level instance and
    UltraServer fields (AWS's announcement); no capture of it is public yet, so an object is
    read for what it names plainly: its list of devices (`neuron_devices` or `devices`, or its
    only list of objects) and `instance_type` / `instance_id` where they are strings.

    A leading shell prompt line is skipped. Documentation examples replace devices with a
    bare `...` line; those lines are dropped, the remaining devices are returned and the report
    is marked `elided=True`. Anything else that is not valid JSON raises TelemetryParseError.
    """
    lines = text.splitlines()
    candidates = _json_candidates(lines)
    if not candidates:
        first = next((line for line in lines if line.strip()), "")
        raise TelemetryParseError(
            SOURCE, "no JSON array in output" if first else "empty output", first or None
        )
    elided = False
    data: object = None
    first_error: TelemetryParseError | None = None
    for start in candidates:
        body = lines[start:]
        try:
            data = _loads("\n".join(body))
        except TelemetryParseError as exc:
            kept = [line for line in body if not _ELISION_RE.match(line)]
            if len(kept) == len(body):
                first_error = first_error or exc
                continue
            try:
                data = _loads("\n".join(kept))
            except TelemetryParseError as exc2:
                first_error = first_error or exc2
                continue
            elided = True
        first_error = None
        break
    if first_error is not None:
        raise first_error

    instance_type = instance_id = None
    if isinstance(data, dict):
        instance_type = _top_level_text(data, "instance_type")
        instance_id = _top_level_text(data, "instance_id")
        data = _device_list(data)
    if not isinstance(data, list):
        raise TelemetryParseError(
            SOURCE, f"expected a JSON array of devices, got a {type(data).__name__}"
        )
    lnc = None
    devices = []
    for entry in data:
        device, device_lnc = _device_from_json(entry)
        devices.append(device)
        if lnc is None:
            lnc = device_lnc
    # The older JSON form has no instance-type/instance-id lines.
    return NeuronLsReport(instance_type, instance_id, tuple(devices), lnc, elided=elided)


def _top_level_text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key, data.get(key.replace("_", "-")))
    return value if isinstance(value, str) and value else None


def _device_list(data: dict[str, Any]) -> object:
    """An object form's devices: the list under `neuron_devices` or `devices`, or its only
    list of objects; the object itself where none (refused by the caller, as before)."""
    for key in ("neuron_devices", "devices"):
        if isinstance(data.get(key), list):
            return data[key]
    lists = [v for v in data.values()
             if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
    return lists[0] if len(lists) == 1 else data


def _json_candidates(lines: list[str]) -> list[int]:
    """Line numbers where a JSON document may start (few: a prompt like `[root@h]#` also
    starts with a bracket)."""
    found = []
    for idx, line in enumerate(lines):
        stripped = line.strip()
        if stripped[:1] in ("[", "{"):
            found.append(idx)
            if len(found) >= 4:
                break
    return found


def _loads(text: str) -> object:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        if isinstance(exc, TelemetryParseError):
            raise
        raise TelemetryParseError(SOURCE, f"invalid JSON: {exc}") from None


def _reject_constant(name: str) -> object:
    raise TelemetryParseError(SOURCE, f"invalid JSON constant {name}")


def _device_from_json(entry: object) -> tuple[NeuronDevice, int | None]:
    if not isinstance(entry, dict):
        raise TelemetryParseError(
            SOURCE, f"device entry is a {type(entry).__name__}, not an object"
        )
    index = _json_opt_int(entry.get("neuron_device"), "neuron_device")
    if index is None:
        raise TelemetryParseError(SOURCE, "device entry has no neuron_device index")
    connected_raw = entry.get("connected_to")
    connected = None
    if connected_raw is not None:
        connected = tuple(_json_int_items(connected_raw, "connected_to"))
    core_ids_raw = entry.get("neuroncore_ids")
    core_ids = (
        None if core_ids_raw is None else tuple(_json_int_items(core_ids_raw, "neuroncore_ids"))
    )
    procs_raw = entry.get("neuron_processes")
    processes = []
    if procs_raw is not None:
        if not isinstance(procs_raw, list):
            raise TelemetryParseError(SOURCE, "neuron_processes is not a list")
        for proc in procs_raw:
            if not isinstance(proc, dict):
                raise TelemetryParseError(SOURCE, "neuron_processes entry is not an object")
            processes.append(
                NeuronProcess(
                    pid=_json_opt_int(proc.get("pid"), "pid"),
                    command=_json_opt_str(proc.get("command"), "command"),
                    runtime_version=_opt_text(
                        _json_opt_str(proc.get("neuron_runtime_version"), "neuron_runtime_version")
                    ),
                )
            )
    numa = _json_opt_int(entry.get("numa_node"), "numa_node")
    affinity = _opt_text(_json_opt_str(entry.get("cpu_affinity"), "cpu_affinity"))
    device = NeuronDevice(
        index=index,
        neuron_cores=_json_opt_int(entry.get("nc_count"), "nc_count"),
        memory_bytes=_json_opt_int(entry.get("memory_size"), "memory_size"),
        connected_devices=connected,
        bdf=_json_opt_str(entry.get("bdf"), "bdf"),
        processes=tuple(processes),
        core_ids=core_ids,
        cpu_affinity=affinity,
        numa_node=None if numa is None or numa < 0 else numa,
        affinity_cpus=None if affinity is None else parse_cpu_list(affinity),
    )
    lnc = _json_opt_int(entry.get("logical_neuroncore_config"), "logical_neuroncore_config")
    return device, lnc


def _json_opt_int(value: object, field: str) -> int | None:
    """JSON ints; numeric strings too (neuron-ls prints numa_node as "1")."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TelemetryParseError(SOURCE, f"{field} is a boolean, expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return _opt_int(value, field)
    raise TelemetryParseError(SOURCE, f"{field} is not an integer", repr(value))


def _json_opt_str(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TelemetryParseError(SOURCE, f"{field} is not a string", repr(value))
    return value


def _json_int_items(value: object, field: str) -> Iterable[int]:
    if not isinstance(value, list):
        raise TelemetryParseError(SOURCE, f"{field} is not a list", repr(value))
    out = []
    for item in value:
        number = _json_opt_int(item, field)
        if number is None:
            raise TelemetryParseError(SOURCE, f"{field} contains null")
        out.append(number)
    return out


# --------------------------------------------------------------------------------------------
# Both forms


def combine_reports(*reports: NeuronLsReport) -> NeuronLsReport:
    """One report from several outputs of the same neuron-ls (`--json-output`, then the table):
    each device's fields come from the first report that gives them, its processes from the
    first report that lists the device; devices listed by any report are kept, by index. The
    result is elided only if every report was (one complete list makes the union complete)."""
    if not reports:
        raise ValueError("combine_reports needs at least one report")
    by_index: dict[int, NeuronDevice] = {}
    for report in reports:
        for device in report.devices:
            known = by_index.get(device.index)
            by_index[device.index] = device if known is None else _fill(known, device)
    errors = [r.error for r in reports if r.error]
    return NeuronLsReport(
        instance_type=_first(r.instance_type for r in reports),
        instance_id=_first(r.instance_id for r in reports),
        devices=tuple(by_index[i] for i in sorted(by_index)),
        logical_neuroncore_config=_first(r.logical_neuroncore_config for r in reports),
        error="; ".join(dict.fromkeys(errors)) if errors else None,
        elided=all(r.elided for r in reports),
    )


def _fill(known: NeuronDevice, other: NeuronDevice) -> NeuronDevice:
    """`known` with its None fields taken from `other` (processes stay `known`'s)."""
    changes = {
        f.name: getattr(other, f.name)
        for f in dataclasses.fields(known)
        if getattr(known, f.name) is None and getattr(other, f.name) is not None
    }
    return dataclasses.replace(known, **changes) if changes else known


def _first(values: Iterable[object]) -> Any:
    return next((v for v in values if v is not None), None)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """A Linux cpulist ("0-47,96-143", "5", "0,2,4-7") as sorted distinct CPU ids."""
    return tuple(sorted(set(_expand_ranges(text, "CPU", 65536))))


# --------------------------------------------------------------------------------------------
# Topology


_TOPOLOGY_TITLE = "Neuron Device Topology"
_NODE_RE = re.compile(r"\[\s*(\d+)\s*\]")
_HLINK_RE = re.compile(r"\[\s*(\d+)\s*\]\s*◄[-–—]+►\s*(?=\[\s*(\d+)\s*\])")


def parse_neuron_ls_topology(text: str) -> NeuronTopology:
    """Parse `neuron-ls --topology`: links come from the table's CONNECTED DEVICES column
    (authoritative); the ASCII diagram gives the grid, and the horizontal links when there is
    no table."""
    lines = text.splitlines()
    report = None
    if any(_BORDER_RE.match(line.strip()) for line in lines):
        report = parse_neuron_ls_table(text)

    grid: list[tuple[int, ...]] = []
    diagram_links: set[tuple[int, int]] = set()
    title = next((i for i, line in enumerate(lines) if line.strip() == _TOPOLOGY_TITLE), None)
    if title is not None:
        for line in lines[title + 1 :]:
            try:
                nodes = tuple(int(n) for n in _NODE_RE.findall(line))
                pairs = [(int(a), int(b)) for a, b in _HLINK_RE.findall(line)]
            except ValueError:
                raise TelemetryParseError(
                    SOURCE, "bad device id in topology diagram", line
                ) from None
            if nodes:
                grid.append(nodes)
            diagram_links.update((min(a, b), max(a, b)) for a, b in pairs)

    if report is not None:
        ids = tuple(d.index for d in report.devices)
        links: set[tuple[int, int]] = set()
        for device in report.devices:
            for other in device.connected_devices or ():
                if other != device.index:
                    links.add((min(device.index, other), max(device.index, other)))
        if not any(d.connected_devices is not None for d in report.devices):
            links = diagram_links
    elif grid:
        ids = tuple(sorted({n for row in grid for n in row}))
        links = diagram_links
    else:
        raise TelemetryParseError(SOURCE, "no topology table or diagram found")
    return NeuronTopology(ids, tuple(sorted(links)), tuple(grid))


# --------------------------------------------------------------------------------------------
# Cell helpers


_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?$", re.IGNORECASE)
_UNIT_POWER = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4}


def _opt_text(cell: str | None) -> str | None:
    if cell is None:
        return None
    cell = cell.strip()
    return None if cell.upper() in _NA else cell


def _opt_int(cell: str | None, field: str) -> int | None:
    text = _opt_text(cell)
    if text is None:
        return None
    if not re.fullmatch(r"-?\d{1,18}", text):
        raise TelemetryParseError(SOURCE, f"{field} is not an integer", text)
    return int(text)


def _opt_size(cell: str) -> int | None:
    text = _opt_text(cell)
    if text is None:
        return None
    m = _SIZE_RE.match(text)
    if not m or len(m.group(1)) > 18:
        raise TelemetryParseError(SOURCE, "unreadable memory size", text)
    unit = (m.group(2) or "B").upper().replace("IB", "B")
    return int(float(m.group(1)) * 1024 ** _UNIT_POWER[unit])


def _int_list(cell: str, field: str) -> tuple[int, ...]:
    text = _opt_text(cell)
    if text is None:
        return ()
    out = []
    for part in text.split(","):
        number = _opt_int(part, field)
        if number is None:
            raise TelemetryParseError(SOURCE, f"empty item in {field}", text)
        out.append(number)
    return tuple(out)


def _id_ranges(text: str) -> tuple[int, ...]:
    """ "0-3" or "0,2,4-5" -> the ids."""
    return tuple(_expand_ranges(text, "NeuronCore id", 4096))


def _expand_ranges(text: str, what: str, max_span: int) -> list[int]:
    """ "0-3,8" -> [0, 1, 2, 3, 8], in order; TelemetryParseError naming `what` for a part
    that is not a number or a range, or a range wider than `max_span`."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9})\s*)?", part)
        if not m:
            raise TelemetryParseError(SOURCE, f"unreadable {what} list", text)
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) else low
        if high < low or high - low > max_span:
            raise TelemetryParseError(SOURCE, f"bad {what} range", text)
        out.extend(range(low, high + 1))
    return out
