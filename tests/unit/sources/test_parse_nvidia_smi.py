"""nvidia-smi parsers: query CSV (with and without units), compute apps, the default table."""

from __future__ import annotations

from datetime import datetime

import pytest

from neurotui.sources.nvidia_smi import (
    ComputeApp,
    NvidiaSmiProcess,
    parse_compute_apps_csv,
    parse_nvidia_smi_table,
    parse_query_gpu_csv,
)
from neurotui.sources.parse_errors import TelemetryParseError
from tests.captures import read_capture as load

MiB = 1024**2


# --- query CSV -------------------------------------------------------------------------------


def test_query_gpu_and_compute_apps_real_capture():
    text = load("nvidia-smi_query-gpu_csv_and_query-compute-apps_real-capture.txt")
    gpu_part, apps_part = text.split("---")
    (gpu,) = parse_query_gpu_csv(gpu_part)
    assert gpu.utilization_gpu == 95.0
    assert gpu.memory_used_bytes == 745 * MiB
    assert gpu.memory_total_bytes == 6144 * MiB
    assert gpu.power_draw_w is None  # not queried: None, not 0
    assert gpu.index is None

    apps = parse_compute_apps_csv(apps_part)
    assert apps == [
        ComputeApp(pid=1580, process_name="/app/llama-server", used_memory_bytes=340 * MiB),
        ComputeApp(pid=1597, process_name="/app/llama-server", used_memory_bytes=394 * MiB),
    ]


def test_query_gpu_with_timestamp():
    rows = parse_query_gpu_csv(load("nvidia-smi_query-gpu_csv_with-timestamp_test-fixture.txt"))
    assert len(rows) == 2
    first, second = rows
    assert first.timestamp == datetime(2026, 8, 17, 10, 0, 0)
    assert first.utilization_gpu == 95.0
    assert first.memory_used_bytes == 7650 * MiB
    assert first.memory_total_bytes == 8188 * MiB
    assert first.temperature_c == 73.0
    assert first.power_draw_w == 81.25
    assert second.timestamp == datetime(2026, 8, 17, 10, 0, 2)
    assert second.power_draw_w == 82.0
    assert second.temperature_c == 74.0


def test_nounits_and_not_available_values():
    text = (
        "index, name, utilization.gpu [%], memory.used [MiB], power.draw [W], fan.speed [%],"
        " clocks.sm [MHz], pstate, some.future.field\n"
        "0, NVIDIA H100 80GB HBM3, 37, 1024, 301.55, [N/A], 1980, P0, whatever\n"
        "1, NVIDIA H100 80GB HBM3, [Not Supported], [N/A], [Unknown Error], 30, 1755, P2, x\n"
    )
    first, second = parse_query_gpu_csv(text)
    assert first.index == 0
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.utilization_gpu == 37.0
    assert first.memory_used_bytes == 1024 * MiB  # unit from the header
    assert first.power_draw_w == 301.55
    assert first.fan_percent is None
    assert first.sm_clock_mhz == 1980.0
    assert first.pstate == "P0"
    assert second.utilization_gpu is None
    assert second.memory_used_bytes is None
    assert second.power_draw_w is None
    assert second.fan_percent == 30.0


def test_noheader_with_fields_and_newer_power_field():
    rows = parse_query_gpu_csv(
        "0, 00000000:18:00.0, 55 %, 123.4 W\n",
        fields=["index", "pci.bus_id", "utilization.gpu", "power.draw.instant"],
    )
    assert rows[0].pci_bus_id == "00000000:18:00.0"
    assert rows[0].utilization_gpu == 55.0
    assert rows[0].power_draw_w == 123.4


def test_header_only_gives_no_rows():
    assert parse_compute_apps_csv("pid, process_name, used_gpu_memory [MiB]\n") == []


def test_compute_apps_name_with_comma_and_gpu_uuid():
    text = (
        "gpu_uuid, pid, process_name, used_memory [MiB]\n"
        "GPU-1a2b, 77, python train.py --tags a,b, 2048 MiB\n"
    )
    (app,) = parse_compute_apps_csv(text)
    assert app.gpu_uuid == "GPU-1a2b"
    assert app.pid == 77
    assert app.process_name == "python train.py --tags a, b"
    assert app.used_memory_bytes == 2048 * MiB


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "hello world\n",
        "utilization.gpu [%], memory.used [MiB]\n95 %\n",  # too few values
        "utilization.gpu [%], memory.used [MiB]\n95 %, 1, 2\n",  # too many, no name column
        "utilization.gpu [%]\nninety-five\n",
        "memory.used [MiB]\n95 %\n",  # a percentage is not memory
        "index\n0.5\n",
        "timestamp\nyesterday\n",
        "Failed to initialize NVML: Driver/library version mismatch\n",
    ],
)
def test_query_gpu_malformed_raises(text):
    with pytest.raises(TelemetryParseError):
        parse_query_gpu_csv(text)


# --- default table ---------------------------------------------------------------------------


def test_default_table_rtx3090():
    text = load("nvidia-smi_default_2x-rtx3090_driver535_real-capture.txt")
    report = parse_nvidia_smi_table(text)
    assert report.smi_version == "535.129.03"
    assert report.driver_version == "535.129.03"
    assert report.cuda_version == "12.2"
    assert report.error is None
    assert len(report.gpus) == 2
    gpu0, gpu1 = report.gpus
    assert gpu0.index == 0
    assert gpu0.name == "NVIDIA GeForce RTX 3090"
    assert gpu0.persistence_mode is True
    assert gpu0.bus_id == "00000000:01:00.0"
    assert gpu0.display_active is True
    assert gpu0.ecc_uncorrected is None
    assert gpu0.fan_percent == 0.0
    assert gpu0.temperature_c == 29.0
    assert gpu0.perf_state == "P8"
    assert gpu0.power_draw_w == 38.0
    assert gpu0.power_cap_w == 350.0
    assert gpu0.memory_used_bytes == 513 * MiB
    assert gpu0.memory_total_bytes == 24576 * MiB
    assert gpu0.utilization_gpu == 0.0
    assert gpu0.compute_mode == "Default"
    assert gpu0.mig_mode is None
    assert gpu1.display_active is False
    assert gpu1.power_draw_w == 17.0
    assert gpu1.power_cap_w == 370.0
    assert gpu1.memory_used_bytes == 12 * MiB

    assert len(report.processes) == 5
    assert report.processes[0] == NvidiaSmiProcess(
        gpu=0, pid=3494, type="G", name="/usr/lib/xorg/Xorg", used_memory_bytes=152 * MiB
    )
    assert report.processes[3].name == "...sion,SpareRendererForSitePerProcess"
    assert report.processes[3].used_memory_bytes == 57 * MiB
    assert report.processes[4].gpu == 1
    assert report.processes[4].used_memory_bytes == 4 * MiB


OLD_LAYOUT = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |
| N/A   34C    P0    41W / 300W |   1999MiB / 16160MiB |     87%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0   N/A  N/A     12345      C   python train.py                  1997MiB |
+-----------------------------------------------------------------------------+
"""


def test_default_table_older_layout_and_ecc():
    report = parse_nvidia_smi_table(OLD_LAYOUT)
    (gpu,) = report.gpus
    assert gpu.name == "Tesla V100-SXM2..."
    assert gpu.ecc_uncorrected == 0
    assert gpu.fan_percent is None
    assert gpu.temperature_c == 34.0
    assert gpu.utilization_gpu == 87.0
    assert gpu.memory_used_bytes == 1999 * MiB
    assert report.processes == (NvidiaSmiProcess(0, 12345, "C", "python train.py", 1997 * MiB),)


def test_no_running_processes():
    text = OLD_LAYOUT.replace(
        "|    0   N/A  N/A     12345      C   python train.py                  1997MiB |",
        "|  No running processes found                                                 |",
    )
    assert parse_nvidia_smi_table(text).processes == ()


def test_driver_failure_message():
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    report = parse_nvidia_smi_table(text)
    assert report.gpus == ()
    assert report.error is not None and report.error.startswith("NVIDIA-SMI has failed")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        OLD_LAYOUT[: OLD_LAYOUT.index("+-------------------------------+---")],  # cut in a block
        OLD_LAYOUT.replace("41W / 300W", "lots of watts"),
        OLD_LAYOUT.replace("   1999MiB / 16160MiB ", "   many / 16160MiB    "),
        OLD_LAYOUT.replace("python train.py                  1997MiB", "x"),
    ],
)
def test_table_malformed_raises(text):
    with pytest.raises(TelemetryParseError):
        parse_nvidia_smi_table(text)
