"""neuron-monitor NDJSON parser against real captures and the valid parts of the doc examples."""

from __future__ import annotations

import ast
import json
import re

import pytest

from neurotui.sources.neuron_monitor import (
    CoreCounters,
    CoreMemory,
    HwCounters,
    VcpuUsage,
    iter_monitor_records,
    monitor_summary,
    parse_monitor_record,
)
from neurotui.sources.parse_errors import TelemetryParseError
from tests.captures import read_capture as load
from tests.standins.tool_captures import monitor_record_from_doc_fragments


def wandb_report_line() -> str:
    """The wandb fixture is `MOCK_DATA = [ {...},` (a Python literal, first element only)."""
    text = load(
        "neuron-monitor_trn1.2xlarge_full-report_2022_wandb-test-fixture_python-dict_first-element.py.txt"
    )
    literal = text.split("=", 1)[1].strip().rstrip(",") + "]"
    return json.dumps(ast.literal_eval(literal)[0])


def fragment_object(name: str) -> dict:
    """A doc fragment `"key": {...}` (maybe with a trailing comma, maybe with a `[...]` elision
    after the last entry) as a one-key dict."""
    text = load(name).strip().rstrip(",")
    text = re.sub(r",\s*\[\.\.\.\]", "", text)
    return json.loads("{" + text + "}")


def as_runtime_line(group: dict, pid: int = 4242) -> str:
    return json.dumps({"neuron_runtime_data": [{"pid": pid, "error": "", "report": group}]})


def roundtrip(summary: dict) -> dict:
    return json.loads(json.dumps(summary, allow_nan=False))


# --- real captures ---------------------------------------------------------------------------


def test_first_record_without_runtime_all_smi():
    text = load("neuron-monitor_trn1.2xlarge_first-record_no-runtime_real-capture_all-smi.ndjson")
    record = parse_monitor_record(text)
    assert record.runtimes == ()
    assert record.system is not None
    assert record.system.memory_total_bytes == 33110204416
    assert record.system.memory_used_bytes == 1284890624
    assert record.system.vcpu_average is None  # group absent
    assert record.system.hw_counters is None
    assert record.instance is not None
    assert record.instance.instance_type == "trn1.2xlarge"
    assert record.instance.instance_id == "i-0421ea5496c852415"
    assert record.instance.region == "us-west-2"
    assert record.hardware is not None
    assert record.hardware.device_type == "trainium"
    assert record.hardware.neuroncore_version == "v2"
    assert record.hardware.device_count == 1
    assert record.hardware.cores_per_device == 2
    assert record.hardware.device_memory_bytes == 34359738368
    assert record.hardware.logical_neuroncore_config == 1
    assert record.errors == ()

    summary = roundtrip(monitor_summary(record))
    assert summary["instance_type"] == "trn1.2xlarge"
    assert summary["cores"] == []
    assert summary["host_mem_used"] is None  # no runtime: unknown, not 0
    assert summary["vcpu_user"] is None
    assert summary["system_mem_used"] == 1284890624
    assert summary["ecc"] is None
    assert summary["errors"] == []


def test_full_report_wandb_fixture():
    record = parse_monitor_record(wandb_report_line())
    assert len(record.runtimes) == 1
    rt = record.runtimes[0]
    assert rt.pid == 1337
    assert rt.tag == "1337"
    assert rt.error is None
    assert rt.core_counters_period == 0.999163146
    assert rt.cores == (
        CoreCounters(core=0, utilization=1.3631567613356375),
        CoreCounters(core=1, utilization=0.0),
    )
    assert rt.cores[0].flops is None  # not reported in 2022
    assert rt.vcpu_user == 19.26
    assert rt.vcpu_system == 3.95

    mem = rt.memory
    assert mem is not None
    assert mem.host_bytes == 610705408
    assert mem.device_bytes == 102298328
    assert mem.host is not None
    assert mem.host.application_memory == 609656832
    assert mem.host.dma_buffers == 1048576
    assert mem.cores[0] == CoreMemory(0, 196608, 101125344, 0, 0, 943608)
    assert mem.cores[0].total == 196608 + 101125344 + 943608
    assert mem.cores[1].model_code == 32768
    assert len(mem.loaded_models) == 2
    model = mem.loaded_models[0]
    assert model.model_id == 10002
    assert model.uuid == "2b28572e7dd811edb0250e0372b2eb59"
    assert model.is_running is False
    assert model.host_bytes == 20608
    assert model.device_bytes == 151936
    assert model.neuroncores == (0,)
    assert model.name is not None
    assert model.name.endswith("2c7ac994-4ded-40d3-bcca-e21b63234c5c/MODU")

    ex = rt.execution
    assert ex is not None
    assert ex.completed == 260
    assert ex.error_summary["generic"] == 23654
    assert ex.errors_total == 23654
    assert ex.total_latency["p50"] == 0.000095367431640625
    assert ex.device_latency["p99"] == 0.00013184547424316406

    sys = record.system
    assert sys is not None
    assert sys.memory_total_bytes == 33117732864
    assert sys.memory_used_bytes == 11233579008
    assert sys.swap_total_bytes == 0
    assert sys.vcpu_average == VcpuUsage(16.99, 0, 2.94, 80.08, 0, 0, 0)
    assert len(sys.vcpu_per_cpu) == 8
    assert sys.vcpu_per_cpu[1] == (1, VcpuUsage(20.62, 0, 2.06, 77.32, 0, 0, 0))
    assert sys.context_switch_count == 84801
    assert sys.hw_counters == (HwCounters(0, 0, 0, 0, 0),)

    assert record.instance is not None
    assert record.instance.instance_id == "i-01db7a16f4c054239"
    assert record.instance.instance_name == ""
    assert record.hardware is not None
    assert record.hardware.device_count == 1
    assert record.hardware.device_type is None  # not in this older report
    assert record.errors == ()

    summary = roundtrip(monitor_summary(record))
    assert summary["instance_type"] == "trn1.2xlarge"
    assert summary["pids"] == [1337]
    assert summary["cores"] == [
        {
            "core": 0,
            "pid": 1337,
            "util": 1.3631567613356375,
            "flops": None,
            "effective_flops": None,
            "mem_device": 196608 + 101125344 + 943608,
            "mem_by_kind": {
                "constants": 196608,
                "model_code": 101125344,
                "model_shared_scratchpad": 0,
                "runtime_memory": 0,
                "tensors": 943608,
            },
            "physical": None,  # trn1: no physical split
        },
        {
            "core": 1,
            "pid": 1337,
            "util": 0.0,
            "flops": None,
            "effective_flops": None,
            "mem_device": 32768,
            "mem_by_kind": {
                "constants": 0,
                "model_code": 32768,
                "model_shared_scratchpad": 0,
                "runtime_memory": 0,
                "tensors": 0,
            },
            "physical": None,
        },
    ]
    assert summary["host_mem_used"] == 610705408
    assert summary["device_mem_used"] == 102298328
    assert summary["vcpu_user"] == 19.26
    assert summary["exec_completed"] == 260
    assert summary["exec_errors"] == 23654
    assert summary["system_vcpu_user"] == 16.99
    assert summary["system_mem_total"] == 33117732864
    assert summary["ecc"] == {
        "mem_corrected": 0,
        "mem_uncorrected": 0,
        "sram_corrected": 0,
        "sram_uncorrected": 0,
    }
    assert summary["ecc_devices"] == [
        {
            "device": 0,
            "mem_corrected": 0,
            "mem_uncorrected": 0,
            "sram_corrected": 0,
            "sram_uncorrected": 0,
        }
    ]
    # Memory by kind summed over the two cores; host memory by kind as reported.
    assert summary["device_mem_by_kind"] == {
        "constants": 196608,
        "model_code": 101125344 + 32768,
        "model_shared_scratchpad": 0,
        "runtime_memory": 0,
        "tensors": 943608,
    }
    assert summary["host_mem_by_kind"] == {
        "application_memory": 609656832,
        "constants": 0,
        "dma_buffers": 1048576,
        "tensors": 0,
    }
    # The real capture's 23654 generic errors, by type; latency percentiles as reported.
    assert summary["exec_errors_by_type"] == {
        "generic": 23654,
        "numerical": 0,
        "transient": 0,
        "model": 0,
        "runtime": 0,
        "hardware": 0,
    }
    assert summary["exec_by_status"]["completed"] == 260
    assert summary["exec_by_status"]["timed_out"] == 0
    assert summary["latency"]["total_latency"]["p50"] == 0.000095367431640625
    assert summary["latency"]["total_latency"]["p99"] == 0.00013184547424316406
    assert summary["latency"]["device_latency"]["p100"] == 0.00014853477478027344
    assert set(summary["latency"]["total_latency"]) == {"p0", "p1", "p25", "p50", "p75", "p99",
                                                        "p100"}
    (runtime,) = summary["exec_runtimes"]
    assert runtime["pid"] == 1337 and runtime["tag"] == "1337"
    assert runtime["exec_period"] == 0.99915655
    assert runtime["latency"] == summary["latency"]
    assert summary["neuroncore_version"] is None  # this 2022 report does not say


def test_issue_633_truncated_line_raises_and_stream_can_skip_it():
    text = load("neuron-monitor_inf1_no-device_compact_real-capture_issue-633_TRUNCATED.txt")
    with pytest.raises(TelemetryParseError):
        parse_monitor_record(text)
    good = load("neuron-monitor_trn1.2xlarge_first-record_no-runtime_real-capture_all-smi.ndjson")
    stream = good + "\n\n" + text
    with pytest.raises(TelemetryParseError):
        list(iter_monitor_records(stream))
    records = list(iter_monitor_records(stream, skip_malformed=True))
    assert len(records) == 1
    assert records[0].instance is not None
    assert records[0].instance.instance_type == "trn1.2xlarge"


def test_issue_633_complete_prefix_null_hw_devices():
    """The part of the truncated capture before `vcpu_usage`, closed: no driver, so
    `neuron_devices` is null and `neuron_runtime_data` is empty."""
    text = load("neuron-monitor_inf1_no-device_compact_real-capture_issue-633_TRUNCATED.txt")
    line = text[: text.index(',"vcpu_usage"')] + "}}"
    record = parse_monitor_record(line)
    assert record.runtimes == ()
    assert record.system is not None
    assert record.system.memory_total_bytes == 16299401216
    assert record.system.memory_used_bytes == 6843494400
    assert record.system.hw_counters is None
    assert monitor_summary(record)["ecc"] is None


def test_effective_flops_snippets():
    text = load(
        "neuron-monitor_neuroncore_counters_effective_flops_compact_real-capture_snippets.txt"
    )
    lines = [line.strip() for line in text.splitlines() if line.startswith('"neuroncore_counters"')]
    assert len(lines) == 2
    cores = []
    for line in lines:
        closed = line + "}" * (line.count("{") - line.count("}"))
        group = json.loads("{" + closed + "}")
        record = parse_monitor_record(as_runtime_line(group))
        cores.append(record.runtimes[0].cores[0])
    assert cores[0].utilization == 99.38037580375642
    assert cores[0].effective_flops == 34776185139834
    assert cores[0].flops is None
    assert cores[1].utilization == 100.0
    assert cores[1].effective_flops == 34553733110090
    summary = monitor_summary(record)
    assert summary["cores"][0]["effective_flops"] == 34553733110090
    assert summary["cores"][0]["mem_device"] is None


# --- doc fragments that contain a valid sub-object -------------------------------------------


def test_doc_neuroncore_counters_2_20_flops():
    group = fragment_object("neuron-monitor_docs-2.20-trn1-era_fragment_neuroncore_counters.txt")
    record = parse_monitor_record(as_runtime_line(group))
    cores = record.runtimes[0].cores
    assert [c.core for c in cores] == [0, 1, 2, 3]
    assert cores[2].utilization == 42.03
    assert cores[2].flops == 1234567891031
    assert cores[2].physical == ()


def test_doc_neuroncore_counters_2_30_v3d():
    group = fragment_object("neuron-monitor_docs-2.30_fragment_neuroncore_counters.txt")
    record = parse_monitor_record(as_runtime_line(group))
    core1 = record.runtimes[0].cores[1]
    assert core1.utilization == 42.02
    assert core1.flops == 1234567891021
    assert core1.physical == (("nc_v3.2", 21.02), ("nc_v3.3", 63.02))


def test_doc_execution_stats():
    group = fragment_object("neuron-monitor_docs-2.30_fragment_execution_stats.txt")
    record = parse_monitor_record(as_runtime_line(group))
    ex = record.runtimes[0].execution
    assert ex is not None
    assert ex.period == 1.030613214
    assert ex.completed == 123
    assert ex.errors_total == 0
    assert ex.total_latency["p100"] == 0.01100013
    assert ex.device_latency["p0"] == 0.01000001


def test_doc_runtime_vcpu_usage():
    group = fragment_object("neuron-monitor_docs-2.30_fragment_neuron_runtime_vcpu_usage.txt")
    rt = parse_monitor_record(as_runtime_line(group)).runtimes[0]
    assert (rt.vcpu_user, rt.vcpu_system) == (42.01, 12.34)


def test_doc_system_groups():
    system = {}
    for name in (
        "neuron-monitor_docs-2.30_fragment_memory_info.txt",
        "neuron-monitor_docs-2.30_fragment_neuron_hw_counters.txt",
        "neuron-monitor_docs-2.30_fragment_vcpu_usage.txt",
    ):
        system.update(fragment_object(name))
    record = parse_monitor_record(json.dumps({"system_data": system}))
    sd = record.system
    assert sd is not None
    assert sd.memory_total_bytes == 49345835008
    assert sd.memory_used_bytes == 16042344448
    assert sd.hw_counters == (HwCounters(0, 0, 0, 0, 0),)
    assert sd.vcpu_average is not None
    assert sd.vcpu_average.user == 32.77
    assert sd.vcpu_average.idle == 39.36
    assert sd.vcpu_per_cpu[1][1].user == 56.84
    assert sd.context_switch_count == 123456
    summary = monitor_summary(record)
    assert summary["system_vcpu_user"] == 32.77
    assert summary["system_vcpu_system"] == 22.87


def test_doc_2_30_whole_record_summary():
    """The SDK 2.30 guide's fragments made one report (the trn2 stand-in's record): per logical
    core flops, the physical split and memory by kind; errors by type, p50/p99, ECC."""
    record = parse_monitor_record(json.dumps(monitor_record_from_doc_fragments()))
    assert record.errors == ()
    summary = roundtrip(monitor_summary(record))
    assert summary["instance_type"] == "trn2n.48xlarge"
    assert summary["device_type"] == "trainium2"
    assert summary["neuroncore_version"] == "v3d"
    assert summary["logical_neuroncore_config"] == 2
    assert summary["device_count"] == 16 and summary["cores_per_device"] == 4
    assert summary["pids"] == [0]  # as the guide's skeleton writes it
    # The two logical cores the fragments show, nothing invented for the other 62.
    assert [c["core"] for c in summary["cores"]] == [0, 1]
    core0, core1 = summary["cores"]
    assert (core0["util"], core0["flops"]) == (42.01, 1234567891011)
    assert (core1["util"], core1["flops"]) == (42.02, 1234567891021)
    assert core0["effective_flops"] is None  # not in the 2.30 fragment
    assert core0["physical"] == [
        {"name": "nc_v3.0", "util": 21.01},
        {"name": "nc_v3.1", "util": 63.01},
    ]
    assert core1["physical"] == [
        {"name": "nc_v3.2", "util": 21.02},
        {"name": "nc_v3.3", "util": 63.02},
    ]
    per_core = {
        "constants": 193986816,
        "model_code": 176285056,
        "model_shared_scratchpad": 0,
        "runtime_memory": 0,
        "tensors": 20971520,
    }
    assert core0["mem_by_kind"] == per_core and core1["mem_by_kind"] == per_core
    assert core0["mem_device"] == 193986816 + 176285056 + 20971520
    assert summary["device_mem_by_kind"] == {kind: 2 * n for kind, n in per_core.items()}
    assert summary["device_mem_used"] == 12519788544  # the runtime's own total
    assert summary["host_mem_by_kind"] == {
        "application_memory": 6996594688,
        "constants": 0,
        "dma_buffers": 1048576,
        "tensors": 0,
    }
    assert summary["exec_errors_by_type"] == {
        "generic": 0,
        "numerical": 0,
        "transient": 0,
        "model": 0,
        "runtime": 0,
        "hardware": 0,
    }
    assert summary["exec_errors"] == 0
    assert summary["exec_by_status"]["completed"] == 123
    assert summary["exec_by_status"]["failed_to_queue"] == 0
    latency = summary["latency"]
    assert latency["total_latency"]["p50"] == 0.01100008
    assert latency["total_latency"]["p99"] == 0.01100012
    assert latency["device_latency"]["p50"] == 0.01000008
    assert latency["device_latency"]["p99"] == 0.01000012
    assert sorted(latency["total_latency"]) == ["p0", "p1", "p100", "p25", "p50", "p75", "p99"]
    assert summary["exec_runtimes"] == [
        {
            "pid": 0,
            "tag": "my_app_1",
            "exec_period": 1.030613214,
            "exec_by_status": summary["exec_by_status"],
            "exec_errors_by_type": summary["exec_errors_by_type"],
            "latency": latency,
        }
    ]
    assert summary["ecc"] == {
        "mem_corrected": 0,
        "mem_uncorrected": 0,
        "sram_corrected": 0,
        "sram_uncorrected": 0,
    }
    assert [d["device"] for d in summary["ecc_devices"]] == [0]


def test_summary_sums_errors_and_takes_each_runtimes_worst_latency():
    def runtime(pid: int, generic: int, p99: float, p50: float | None) -> dict:
        latency = {"p99": p99} if p50 is None else {"p50": p50, "p99": p99}
        return {
            "pid": pid,
            "report": {
                "execution_stats": {
                    "error_summary": {"generic": generic, "hardware": 1},
                    "execution_summary": {"completed": 10},
                    "latency_stats": {"total_latency": latency},
                }
            },
        }

    record = parse_monitor_record(
        json.dumps({"neuron_runtime_data": [runtime(1, 3, 0.5, 0.25), runtime(2, 4, 0.75, None)]})
    )
    summary = roundtrip(monitor_summary(record))
    assert summary["exec_errors_by_type"] == {"generic": 7, "hardware": 2}
    assert summary["exec_errors"] == 9
    assert summary["exec_by_status"] == {"completed": 20}
    # Percentiles are not summed: each is the highest any runtime reported.
    assert summary["latency"] == {"total_latency": {"p50": 0.25, "p99": 0.75}}
    assert [r["latency"] for r in summary["exec_runtimes"]] == [
        {"total_latency": {"p50": 0.25, "p99": 0.5}},
        {"total_latency": {"p99": 0.75}},
    ]


def test_ecc_per_device_and_new_memory_kinds_kept():
    line = json.dumps(
        {
            "neuron_runtime_data": [
                {
                    "pid": 5,
                    "report": {
                        "memory_used": {
                            "neuron_runtime_used_bytes": {
                                "usage_breakdown": {
                                    "neuroncore_memory_usage": {
                                        "2": {"tensors": 8, "a_future_kind": 3, "label": "x"}
                                    }
                                }
                            }
                        }
                    },
                }
            ],
            "system_data": {
                "neuron_hw_counters": {
                    "neuron_devices": [
                        {"neuron_device_index": 0, "mem_ecc_corrected": 2},
                        {"neuron_device_index": 1, "mem_ecc_corrected": 1,
                         "sram_ecc_uncorrected": 4},
                    ]
                }
            },
        }
    )
    summary = roundtrip(monitor_summary(parse_monitor_record(line)))
    assert summary["cores"][0]["mem_by_kind"] == {"tensors": 8, "a_future_kind": 3}
    assert summary["cores"][0]["mem_device"] == 11
    assert summary["device_mem_by_kind"] == {"tensors": 8, "a_future_kind": 3}
    assert summary["ecc"] == {
        "mem_corrected": 3,
        "mem_uncorrected": None,
        "sram_corrected": None,
        "sram_uncorrected": 4,
    }
    assert summary["ecc_devices"][1] == {
        "device": 1,
        "mem_corrected": 1,
        "mem_uncorrected": None,
        "sram_corrected": None,
        "sram_uncorrected": 4,
    }


@pytest.mark.parametrize(
    ("info", "hardware", "device_type", "instance_type", "cores_per_device", "lnc"),
    [
        (
            "neuron-monitor_docs-2.30_fragment_instance_info.txt",
            "neuron-monitor_docs-2.30_fragment_neuron_hardware_info.txt",
            "trainium2",
            "trn2n.48xlarge",
            4,
            2,
        ),
        (
            "neuron-monitor_docs-2.20-trn1-era_fragment_instance_info.txt",
            "neuron-monitor_docs-2.20-trn1-era_fragment_neuron_hardware_info.txt",
            "trainium",
            "inf1.xlarge",
            2,
            None,
        ),
    ],
)
def test_doc_instance_and_hardware_info(
    info, hardware, device_type, instance_type, cores_per_device, lnc
):
    data = {**fragment_object(info), **fragment_object(hardware)}
    record = parse_monitor_record(json.dumps(data))
    assert record.instance is not None and record.hardware is not None
    assert record.instance.instance_type == instance_type
    assert record.instance.ami_id == "ami-0011223344556677b"
    assert record.hardware.device_type == device_type
    assert record.hardware.device_count == 16
    assert record.hardware.cores_per_device == cores_per_device
    assert record.hardware.logical_neuroncore_config == lnc
    summary = monitor_summary(record)
    assert summary["device_type"] == device_type
    assert summary["instance_type"] == instance_type


@pytest.mark.parametrize(
    "name",
    [
        # `"neuron_runtime_tag", "my_app_1"` and `[...]` placeholders: not JSON.
        "neuron-monitor_docs-2.30_fragment_toplevel-structure.txt",
        "neuron-monitor_docs-2.20-trn1-era_fragment_toplevel-structure.txt",
        # `//` comments.
        "neuron-monitor_docs-2.30_fragment_metric_group-generic.txt",
        # A bare `"key": {...}` is not a JSON document.
        "neuron-monitor_docs-2.30_fragment_memory_used.txt",
        # Valid JSON, but the configuration file, not a report.
        "neuron-monitor_config_docs-2.30.json",
    ],
)
def test_doc_fragments_that_are_not_reports_raise(name):
    with pytest.raises(TelemetryParseError):
        parse_monitor_record(load(name))


# --- exits, errors, partial records ----------------------------------------------------------


def test_exited_process_errors_are_collected():
    line = json.dumps(
        {
            "neuron_runtime_data": [
                {"pid": 99, "error": "process 99 has exited", "report": {}},
                {
                    "pid": 100,
                    "error": "",
                    "report": {
                        "neuroncore_counters": {
                            "period": 1.0,
                            "neuroncores_in_use": {},
                            "error": "failed to read counters",
                        }
                    },
                },
            ],
            "system_data": {"memory_info": {"error": "no /proc/meminfo"}},
        }
    )
    record = parse_monitor_record(line)
    assert record.runtimes[0].error == "process 99 has exited"
    assert record.runtimes[0].cores == ()
    assert record.runtimes[0].memory is None
    assert record.runtimes[1].error is None
    assert record.errors == (
        "runtime 99: process 99 has exited",
        "runtime 100 neuroncore_counters: failed to read counters",
        "system memory_info: no /proc/meminfo",
    )
    assert record.system is not None
    assert record.system.memory_total_bytes is None
    summary = roundtrip(monitor_summary(record))
    assert summary["errors"] == list(record.errors)
    assert summary["pids"] == [99, 100]
    assert summary["system_mem_used"] is None


def test_two_runtimes_same_core_and_unknown_fields():
    def rt(pid, util):
        return {
            "pid": pid,
            "future_key": [1, 2, 3],
            "report": {
                "neuroncore_counters": {
                    "neuroncores_in_use": {"0": {"neuroncore_utilization": util, "new": 1}}
                },
                "memory_used": {"neuron_runtime_used_bytes": {"host": 10, "neuron_device": 20}},
                "brand_new_group": {"x": 1},
            },
        }

    record = parse_monitor_record(json.dumps({"neuron_runtime_data": [rt(2, 50), rt(1, 25.5)]}))
    summary = roundtrip(monitor_summary(record))
    got = [(c["core"], c["pid"], c["util"]) for c in summary["cores"]]
    assert got == [(0, 1, 25.5), (0, 2, 50.0)]
    assert summary["host_mem_used"] == 20
    assert summary["device_mem_used"] == 40
    assert summary["vcpu_user"] is None


def test_memory_for_core_without_counters_still_listed():
    group = {
        "memory_used": {
            "neuron_runtime_used_bytes": {
                "usage_breakdown": {"neuroncore_memory_usage": {"3": {"tensors": 5}}}
            }
        }
    }
    summary = monitor_summary(parse_monitor_record(as_runtime_line(group, pid=7)))
    assert summary["cores"] == [
        {
            "core": 3,
            "pid": 7,
            "util": None,
            "flops": None,
            "effective_flops": None,
            "mem_device": 5,
            "mem_by_kind": {"tensors": 5},
            "physical": None,
        }
    ]
    # No execution_stats group: no errors or latency, not zeros.
    assert summary["exec_errors_by_type"] is None and summary["latency"] is None
    assert summary["exec_runtimes"] == []


def test_nan_and_overflow_become_none():
    line = (
        '{"neuron_runtime_data":[{"pid":1,"report":{"neuroncore_counters":{"neuroncores_in_use":'
        '{"0":{"neuroncore_utilization":NaN,"flops":1e999}}}}}]}'
    )
    record = parse_monitor_record(line)
    assert record.runtimes[0].cores[0].utilization is None
    assert record.runtimes[0].cores[0].flops is None
    json.dumps(monitor_summary(record), allow_nan=False)

    huge = {"vcpu_usage": {"user": 10**400}}
    record = parse_monitor_record(as_runtime_line({"neuron_runtime_vcpu_usage": huge}))
    assert record.runtimes[0].vcpu_user is None


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "not json",
        "[]",
        "42",
        '"neuron_runtime_data"',
        "{}",
        '{"unrelated": 1}',
        '{"neuron_runtime_data": {}}',
        '{"neuron_runtime_data": [1]}',
        '{"neuron_runtime_data": [{"pid": "one"}]}',
        '{"neuron_runtime_data": [{"pid": 1, "error": 5}]}',
        '{"neuron_runtime_data": [{"pid": 1, "report": []}]}',
        '{"neuron_runtime_data": [{"report": {"neuroncore_counters": {"neuroncores_in_use":'
        ' {"zero": {}}}}}]}',
        '{"neuron_runtime_data": [{"report": {"neuroncore_counters": {"neuroncores_in_use":'
        ' {"0": {"neuroncore_utilization": "12%"}}}}}]}',
        '{"neuron_runtime_data": [{"report": {"neuroncore_counters": {"neuroncores_in_use":'
        ' {"0": {"neuroncore_utilization": true}}}}}]}',
        '{"system_data": {"memory_info": {"memory_used_bytes": 1.5}}}',
        '{"system_data": {"neuron_hw_counters": {"neuron_devices": {}}}}',
        '{"instance_info": "trn1"}',
        '{"neuron_runtime_data": [], "system_data": {"memory_info": {"period": 0.1',
    ],
)
def test_malformed_raises(line):
    with pytest.raises(TelemetryParseError):
        parse_monitor_record(line)


def test_stream_of_records():
    good = load("neuron-monitor_trn1.2xlarge_first-record_no-runtime_real-capture_all-smi.ndjson")
    stream = "\n".join([good, "", wandb_report_line(), good])
    records = list(iter_monitor_records(stream))
    assert [len(r.runtimes) for r in records] == [0, 1, 0]
    assert list(iter_monitor_records(iter(stream.splitlines()))) == records
