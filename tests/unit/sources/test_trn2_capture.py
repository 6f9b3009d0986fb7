"""The trn2 stand-in's neuron-monitor record: the SDK 2.30 doc fragments made JSON by program.

The record must hold the fragments' content and nothing else: these tests check the repair of
each defect the fragments have, and that every number in the record is printed in them.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.standins import tool_captures as replay

FRAGMENTS = sorted(replay.FIXTURES.glob(replay.TRN2_FRAGMENT.format("*")))


def fragment(name: str) -> str:
    return (replay.FIXTURES / replay.TRN2_FRAGMENT.format(name)).read_text()


@pytest.mark.parametrize("path", FRAGMENTS, ids=lambda p: p.name)
def test_every_2_30_fragment_becomes_json(path):
    text = path.read_text()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # as the guide prints it: not JSON
    assert isinstance(json.loads(replay.doc_fragment_json(text)), dict)


def test_unbalanced_memory_used_is_closed_by_indentation():
    group = json.loads(replay.doc_fragment_json(fragment("memory_used")))["memory_used"]
    # `loaded_models` sits beside `neuron_runtime_used_bytes`, as in the real trn1 capture.
    assert sorted(group) == ["error", "loaded_models", "neuron_runtime_used_bytes", "period"]
    used = group["neuron_runtime_used_bytes"]
    assert sorted(used["usage_breakdown"]["neuroncore_memory_usage"]) == ["0", "1"]
    (model,) = group["loaded_models"]  # the `...` after it is dropped
    assert model["subgraphs"]["sg_00"]["neuron_device_index"] == 12


def test_unbalanced_k8s_info_is_closed_by_indentation():
    info = json.loads(replay.doc_fragment_json(fragment("neuron_k8s_info")))["neuron_k8s_info"]
    assert sorted(info) == ["error", "neuroncores_k8s_info", "neurondevices_k8s_info", "period"]
    assert sorted(info["neuroncores_k8s_info"]) == ["0", "1"]
    assert info["neurondevices_k8s_info"]["0"]["container_name"] == ["c0"]


def test_comments_and_comma_for_colon():
    generic = json.loads(replay.doc_fragment_json(fragment("metric_group-generic")))
    assert generic == {"metric_group": {"period": 1.015, "error": ""}}
    runtime = json.loads(replay.doc_fragment_json(fragment("toplevel-structure")))
    entry = runtime["neuron_runtime_data"][0]
    assert entry["neuron_runtime_tag"] == "my_app_1"
    assert entry["report"] == {"neuroncore_counters": {}, "execution_stats": {},
                               "memory_used": {}, "neuron_runtime_vcpu_usage": {}}


def test_repair_keeps_strings_that_look_like_syntax():
    text = '"g": {\n  "a": "x // y, [...]",\n  "b": "...",\n  ...\n}'
    assert json.loads(replay.doc_fragment_json(text)) == {"g": {"a": "x // y, [...]", "b": "..."}}


def _numbers(value: object) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [float(value)]
    return []


def test_the_record_has_only_the_fragments_numbers_and_groups():
    record = replay.monitor_record_from_doc_fragments()
    printed = {float(n) for path in FRAGMENTS
               for n in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", path.read_text())}
    numbers = _numbers(record)
    assert len(numbers) > 100
    assert [n for n in numbers if n not in printed] == []
    # Every group of the skeleton is filled; none is left empty.
    report = record["neuron_runtime_data"][0]["report"]
    assert all(report[g] for g in report) and all(record["system_data"][g]
                                                   for g in record["system_data"])
    for group in ("instance_info", "neuron_hardware_info", "neuron_k8s_info"):
        assert record[group]
    cores = report["neuroncore_counters"]["neuroncores_in_use"]
    assert sorted(cores) == ["0", "1"]
