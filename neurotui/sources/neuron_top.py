"""Recognise the old text screen of `neuron-top` (Neuron runtime 1.x, 2020).

Today's `neuron-top` is a full-screen interactive TUI with no batch or JSON mode, so its output
cannot be captured or parsed. It is a viewer over the same data `neuron-monitor` streams as JSON
(NeuronCore utilisation and FLOPS, runtime and system vCPU, host/device memory by category,
loaded models), so neurotui gets live data from `neuron-monitor` (see neuron_monitor.py).

This module only reads the plain-text screen the runtime 1.x tool printed, e.g. when pasted into
a bug report: the header counters, the per-device utilisation lines and the model table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from neurotui.sources.parse_errors import TelemetryParseError

SOURCE = "neuron-top"

__all__ = ["NeuronTopDevice", "NeuronTopModel", "NeuronTopScreen", "parse_neuron_top_text"]


@dataclass(frozen=True)
class NeuronTopDevice:
    """One `<bdf> Utilizations: Neuron core0 0.00%, ...` line."""

    bdf: str
    # Utilisation in percent, indexed by the core number printed.
    core_utilization: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class NeuronTopModel:
    """One row of the model table."""

    model_id: int | None
    name: str | None
    uuid: str | None
    node_id: int | None
    subgraph: int | None
    exec_unit: str | None
    host_mem_bytes: int | None
    device_mem_bytes: int | None
    utilization: float | None


@dataclass(frozen=True)
class NeuronTopScreen:
    timestamp: datetime | None
    models_total: int | None
    models_running: int | None
    vncs_tracked: int | None
    devices: tuple[NeuronTopDevice, ...]
    models: tuple[NeuronTopModel, ...]


_TITLE_RE = re.compile(r"^neuron-top\s+-\s+(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_MODELS_RE = re.compile(r"^NN Models:\s*(\d{1,9}) total,\s*(\d{1,9}) running\s*$")
_VNCS_RE = re.compile(r"^Number of VNCs tracked:\s*(\d{1,9})\s*$")
_UTIL_RE = re.compile(r"^(\S+)\s+Utilizations:\s*(.*)$")
_CORE_RE = re.compile(r"Neuron core\s?(\d{1,4})\s+(\d{1,3}(?:\.\d+)?)%")

# Table header text -> field.
_MODEL_COLUMNS = {
    "MODEL ID": "model_id",
    "MODEL NAME": "name",
    "UUID": "uuid",
    "NODE ID": "node_id",
    "SUBGRAPH": "subgraph",
    "EXEC. UNIT": "exec_unit",
    "HOST MEM": "host_mem_bytes",
    "DEVICE MEM": "device_mem_bytes",
    "NEURON CORE %": "utilization",
}
_INT_FIELDS = {"model_id", "node_id", "subgraph", "host_mem_bytes", "device_mem_bytes"}


def parse_neuron_top_text(text: str) -> NeuronTopScreen:
    """Parse one captured runtime-1.x `neuron-top` text screen."""
    timestamp = None
    models_total = models_running = vncs = None
    devices: list[NeuronTopDevice] = []
    models: list[NeuronTopModel] = []
    header: list[str | None] | None = None
    recognised = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _TITLE_RE.match(line):
            try:
                timestamp = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
            except ValueError:
                raise TelemetryParseError(SOURCE, "bad timestamp", line) from None
            recognised = True
        elif m := _MODELS_RE.match(line):
            models_total, models_running = int(m.group(1)), int(m.group(2))
            recognised = True
        elif m := _VNCS_RE.match(line):
            vncs = int(m.group(1))
            recognised = True
        elif m := _UTIL_RE.match(line):
            cores = tuple((int(c), float(u)) for c, u in _CORE_RE.findall(m.group(2)))
            if not cores:
                raise TelemetryParseError(SOURCE, "utilisation line without cores", line)
            devices.append(NeuronTopDevice(m.group(1), cores))
            recognised = True
        elif line.upper().startswith("MODEL ID"):
            names = re.split(r"\s{2,}", line.upper())
            header = [_MODEL_COLUMNS.get(name) for name in names]
            recognised = True
        elif header is not None:
            models.append(_model_row(header, line))
    if not recognised:
        first = next((line for line in text.splitlines() if line.strip()), "")
        raise TelemetryParseError(
            SOURCE, "not a neuron-top text screen" if first else "empty output", first or None
        )
    return NeuronTopScreen(
        timestamp, models_total, models_running, vncs, tuple(devices), tuple(models)
    )


def _model_row(header: list[str | None], line: str) -> NeuronTopModel:
    cells = re.split(r"\s{2,}", line)
    if len(cells) != len(header):
        raise TelemetryParseError(
            SOURCE, f"model row has {len(cells)} columns, header has {len(header)}", line
        )
    values: dict[str, object] = {}
    for name, cell in zip(header, cells, strict=True):
        if name is None:
            continue
        if cell in ("", "NA", "N/A", "-"):
            values[name] = None
        elif name in _INT_FIELDS:
            if not re.fullmatch(r"\d{1,18}", cell):
                raise TelemetryParseError(SOURCE, f"{name} is not an integer", cell)
            values[name] = int(cell)
        elif name == "utilization":
            if not re.fullmatch(r"\d{1,3}(?:\.\d+)?%?", cell):
                raise TelemetryParseError(SOURCE, "utilisation is not a number", cell)
            values[name] = float(cell.rstrip("%"))
        else:
            values[name] = cell
    return NeuronTopModel(
        **{name: values.get(name) for name in NeuronTopModel.__dataclass_fields__}
    )
