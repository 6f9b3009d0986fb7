"""Property tests: whatever a pipe delivers (truncated, empty, interleaved, garbage), the
telemetry parsers either return a record or raise TelemetryParseError, never anything else."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurotui.sources.neuron_ls import (
    parse_neuron_ls,
    parse_neuron_ls_json,
    parse_neuron_ls_table,
    parse_neuron_ls_topology,
)
from neurotui.sources.neuron_monitor import (
    iter_monitor_records,
    monitor_summary,
    parse_monitor_record,
)
from neurotui.sources.neuron_top import parse_neuron_top_text
from neurotui.sources.nvidia_smi import (
    parse_compute_apps_csv,
    parse_nvidia_smi_table,
    parse_query_gpu_csv,
)
from neurotui.sources.parse_errors import TelemetryParseError
from tests.captures import TELEMETRY_CAPTURES

FIXTURES = TELEMETRY_CAPTURES

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _texts(pattern: str) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob(pattern))]


def _fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


NEURON_LS = _texts("neuron-ls_*")
MONITOR = _texts("neuron-monitor_*")
TOP = _texts("neuron-top_*")
NVIDIA = _texts("nvidia-smi_*")
ALL = NEURON_LS + MONITOR + TOP + NVIDIA


def _monitor_stream(text: str) -> object:
    return [monitor_summary(r) for r in iter_monitor_records(text)]


def _monitor_one(text: str) -> object:
    record = parse_monitor_record(text)
    # A record that parsed must also summarise into strict JSON.
    json.dumps(monitor_summary(record), allow_nan=False)
    return record


# (id, parser, fixtures it is meant for)
PARSERS: list[tuple[str, Callable[[str], object], list[str]]] = [
    ("neuron_ls", parse_neuron_ls, NEURON_LS),
    ("neuron_ls_table", parse_neuron_ls_table, NEURON_LS),
    ("neuron_ls_json", parse_neuron_ls_json, NEURON_LS),
    ("neuron_ls_topology", parse_neuron_ls_topology, NEURON_LS),
    ("monitor_record", _monitor_one, MONITOR),
    ("monitor_stream", _monitor_stream, MONITOR),
    ("neuron_top", parse_neuron_top_text, TOP),
    ("query_gpu_csv", parse_query_gpu_csv, NVIDIA),
    ("compute_apps_csv", parse_compute_apps_csv, NVIDIA),
    ("nvidia_smi_table", parse_nvidia_smi_table, NVIDIA),
]
IDS = [p[0] for p in PARSERS]


def only_parse_errors(parser: Callable[[str], object], text: str) -> None:
    with contextlib.suppress(TelemetryParseError):
        parser(text)


def test_fixture_sets_are_not_empty():
    assert NEURON_LS and MONITOR and TOP and NVIDIA


@pytest.mark.parametrize(("name", "parser", "fixtures"), PARSERS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_truncated_fixture(name, parser, fixtures, data):
    text = data.draw(st.sampled_from(fixtures))
    cut = data.draw(st.integers(0, len(text)))
    only_parse_errors(parser, text[:cut])


@pytest.mark.parametrize(("name", "parser", "fixtures"), PARSERS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_interleaved_lines(name, parser, fixtures, data):
    first = data.draw(st.sampled_from(fixtures)).splitlines()
    second = data.draw(st.sampled_from(ALL)).splitlines()
    picks = data.draw(st.lists(st.booleans(), max_size=len(first) + len(second)))
    out, i, j = [], 0, 0
    for take_first in picks:
        if take_first and i < len(first):
            out.append(first[i])
            i += 1
        elif j < len(second):
            out.append(second[j])
            j += 1
    out += first[i:]
    only_parse_errors(parser, "\n".join(out))


@pytest.mark.parametrize(("name", "parser", "fixtures"), PARSERS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_mutated_lines(name, parser, fixtures, data):
    """Drop, duplicate or corrupt single lines of a real capture."""
    lines = data.draw(st.sampled_from(fixtures)).splitlines() or [""]
    for _ in range(data.draw(st.integers(1, 4))):
        idx = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["drop", "dup", "replace", "insert_char"]))
        if action == "drop" and len(lines) > 1:
            del lines[idx]
        elif action == "dup":
            lines.insert(idx, lines[idx])
        elif action == "replace":
            lines[idx] = data.draw(st.text(max_size=40))
        else:
            line = lines[idx]
            pos = data.draw(st.integers(0, len(line)))
            char = data.draw(st.sampled_from([*'|+-,:"{}[]0 9.%\t', "NA", "…", "\x00"]))
            lines[idx] = line[:pos] + char + line[pos:]
    only_parse_errors(parser, "\n".join(lines))


@pytest.mark.parametrize(("name", "parser", "fixtures"), PARSERS, ids=IDS)
@SETTINGS
@given(text=st.text(max_size=300))
def test_garbage_text(name, parser, fixtures, text):
    only_parse_errors(parser, text)


@pytest.mark.parametrize(("name", "parser", "fixtures"), PARSERS, ids=IDS)
def test_empty_and_blank(name, parser, fixtures):
    for text in ("", "\n", "   \n\t\n"):
        if name == "monitor_stream":
            assert parser(text) == []  # an empty stream is just no records yet
            continue
        with pytest.raises(TelemetryParseError):
            parser(text)


# --- structured garbage for the JSON parsers: right keys, wrong shapes -----------------------

MONITOR_KEYS = [
    "neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info", "pid",
    "neuron_runtime_tag", "address", "error", "report", "neuroncore_counters", "period",
    "neuroncores_in_use", "neuroncore_utilization", "flops", "effective_flops", "v3d",
    "memory_used", "neuron_runtime_used_bytes", "host", "neuron_device", "usage_breakdown",
    "neuroncore_memory_usage", "loaded_models", "subgraphs", "memory_used_bytes",
    "neuroncore_index", "is_running", "model_id", "neuron_runtime_vcpu_usage", "vcpu_usage",
    "user", "system", "execution_stats", "error_summary", "execution_summary", "latency_stats",
    "total_latency", "device_latency", "memory_info", "memory_total_bytes", "average_usage",
    "usage_data", "neuron_hw_counters", "neuron_devices", "mem_ecc_corrected",
    "instance_type", "neuron_device_count", "0", "1",
]  # fmt: skip
LS_KEYS = [
    "neuron_device", "bdf", "connected_to", "nc_count", "memory_size", "neuroncore_ids",
    "neuron_processes", "pid", "command", "neuron_runtime_version", "numa_node",
    "cpu_affinity", "logical_neuroncore_config", "neuron_devices",
]  # fmt: skip

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.sampled_from([10**400, -(10**400), 2**63, 1e300])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10)
)


def json_values(keys: list[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        LEAVES,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.sampled_from(keys) | st.text(max_size=5), inner, max_size=5)
        ),
        max_leaves=25,
    )


def _dumps(value: Any) -> str:
    return json.dumps(value)  # NaN/Infinity are written as bare words, as a buggy tool might


@SETTINGS
@given(value=json_values(MONITOR_KEYS))
def test_monitor_random_json_shapes(value):
    only_parse_errors(_monitor_one, _dumps(value))


@SETTINGS
@given(value=json_values(LS_KEYS))
def test_neuron_ls_random_json_shapes(value):
    only_parse_errors(parse_neuron_ls_json, _dumps(value))
    only_parse_errors(parse_neuron_ls_json, _dumps([value]))


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out += _paths(child, (*prefix, i))
    return out


def _replace(node: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, head: _replace(node[head], rest, value)}
    copy = list(node)
    copy[head] = _replace(node[head], rest, value)
    return copy


MONITOR_RECORD = _fixture_json(
    "neuron-monitor_trn1.2xlarge_first-record_no-runtime_real-capture_all-smi.ndjson"
)
LS_JSON = _fixture_json("neuron-ls_trn1.2xlarge_json_idle_real-capture_all-smi.json")
SAMPLE_RUNTIME = {
    "pid": 5,
    "error": "",
    "report": {
        "neuroncore_counters": {"neuroncores_in_use": {"0": {"neuroncore_utilization": 3.5}}},
        "memory_used": {
            "neuron_runtime_used_bytes": {
                "host": 1,
                "neuron_device": 2,
                "usage_breakdown": {"neuroncore_memory_usage": {"0": {"tensors": 4}}},
            },
            "loaded_models": [{"subgraphs": {"sg": {"memory_used_bytes": {"host": 1}}}}],
        },
        "execution_stats": {"error_summary": {"generic": 1}, "latency_stats": {}},
    },
}


@SETTINGS
@given(data=st.data())
def test_monitor_real_record_with_one_value_replaced(data):
    base = {**MONITOR_RECORD, "neuron_runtime_data": [SAMPLE_RUNTIME]}
    path = data.draw(st.sampled_from(_paths(base)))
    value = data.draw(json_values(MONITOR_KEYS))
    mutated = _replace(base, path, value)
    try:
        record = parse_monitor_record(_dumps(mutated))
    except TelemetryParseError:
        return
    summary = monitor_summary(record)
    json.dumps(summary, allow_nan=False)
    for core in summary["cores"]:
        assert core["util"] is None or math.isfinite(core["util"])


@SETTINGS
@given(data=st.data())
def test_neuron_ls_real_json_with_one_value_replaced(data):
    path = data.draw(st.sampled_from(_paths(LS_JSON)))
    value = data.draw(json_values(LS_KEYS))
    only_parse_errors(parse_neuron_ls, json.dumps(_replace(LS_JSON, path, value), indent=4))


# --- defects found by hand --------------------------------------------------------------------


def _runtime_with_vcpu(pid: int, user: str) -> str:
    return (
        f'{{"pid": {pid}, "report": {{"neuron_runtime_vcpu_usage": '
        f'{{"vcpu_usage": {{"user": {user}, "system": {user}}}}}}}}}'
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1e999"], None),  # overflows to inf while parsing: no usable value
        (["1.7e308", "1.7e308"], None),  # each finite, but the summary's sum overflows
        (["-1.7e308", "-1.7e308"], None),
        (["1e999", "2.5"], 2.5),
        (["1.5", "2.5"], 4.0),
    ],
)
def test_monitor_summary_never_returns_infinity(values, expected):
    """The summary promises strict JSON; a sum over runtimes could return inf."""
    runtimes = ", ".join(_runtime_with_vcpu(i, v) for i, v in enumerate(values))
    record = parse_monitor_record(f'{{"neuron_runtime_data": [{runtimes}]}}')
    summary = monitor_summary(record)
    json.dumps(summary, allow_nan=False)
    assert summary["vcpu_user"] == expected
    assert summary["vcpu_system"] == expected
