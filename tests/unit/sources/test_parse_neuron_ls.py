"""neuron-ls parsers against every captured generation of its output."""

from __future__ import annotations

import pytest

from neurotui.sources.neuron_ls import (
    NeuronProcess,
    combine_reports,
    parse_cpu_list,
    parse_neuron_ls,
    parse_neuron_ls_json,
    parse_neuron_ls_table,
    parse_neuron_ls_topology,
)
from neurotui.sources.parse_errors import TelemetryParseError
from tests.captures import read_capture as load

GiB = 1024**3


# --- inf1 (SDK 2.8 docs): multi-process rows, NA cells ---------------------------------------


def test_inf1_default_multi_process_rows_and_na():
    report = parse_neuron_ls(load("neuron-ls_inf1.6xlarge_default_docs-2.8.txt"))
    assert report.instance_type is None and report.instance_id is None
    assert [d.index for d in report.devices] == [0, 1, 2, 3]
    dev0 = report.devices[0]
    assert dev0.neuron_cores == 4
    assert dev0.memory_bytes == 8 * GiB
    assert dev0.connected_devices == (1,)
    assert dev0.bdf == "0000:00:1c.0"
    assert [p.pid for p in dev0.processes] == [23518, 23531]
    assert dev0.processes[1].command == "neuron-app02 infer --input-data-direc..."
    assert dev0.processes[1].runtime_version == "2.0.0"
    assert report.devices[1].connected_devices == (2, 0)
    # Device 3: PID/COMMAND/RUNTIME VERSION all NA -> no process, not a process of zeros.
    assert report.devices[3].processes == ()
    assert report.pids == (23518, 23531, 23595, 23608)
    assert report.total_cores == 16


def test_inf1_show_all_procs():
    report = parse_neuron_ls(load("neuron-ls_inf1.6xlarge_show-all-procs_docs-2.8.txt"))
    dev0 = report.devices[0]
    assert [p.pid for p in dev0.processes] == [23518, 23531, 23764, 23829]
    assert dev0.processes[2] == NeuronProcess(23764, "neuron-monitor", None)
    assert dev0.processes[3].command == "neuron-ls --show-all-procs"
    assert [p.pid for p in report.devices[3].processes] == [23764, 23829]
    assert report.pids == (23518, 23531, 23595, 23608, 23764, 23829)


def test_inf1_wide_keeps_long_command():
    report = parse_neuron_ls(load("neuron-ls_inf1.6xlarge_wide_docs-2.8.txt"))
    assert report.devices[2].processes[0].command == (
        "neuron-app02 infer --input-data-directory ~/my_input_data --inference-count 5..."
    )
    assert report.devices[2].processes[0].pid == 23608


# --- old formats -----------------------------------------------------------------------------


def test_runtime_1x_era_runtime_columns():
    report = parse_neuron_ls(load("neuron-ls_inf1.6xlarge_runtime1.x-era_docs-2020.txt"))
    assert len(report.devices) == 4
    for dev in report.devices:
        assert dev.neuron_cores == 4
        assert dev.memory_bytes == 8 * GiB
        assert dev.processes == (NeuronProcess(12410, None, None, None),)
    assert report.devices[2].connected_devices == (3, 1)
    assert report.devices[3].bdf == "0000:00:1f.0"
    assert report.pids == (12410,)


def test_2019_format_logical_id_and_memory_channels():
    report = parse_neuron_ls(load("neuron-ls_inf1.xlarge_2019-format_docs.txt"))
    assert len(report.devices) == 1
    dev = report.devices[0]
    assert dev.index == 0
    assert dev.neuron_cores == 4
    assert dev.bdf == "0000:00:1f.0"
    assert dev.memory_bytes == 2 * 4096 * 1024**2  # two 4096 MB channels
    assert dev.connected_devices is None
    assert dev.processes == ()


# --- single-device instances, instance-type / instance-id lines ------------------------------


def test_trn1_2xlarge_real_capture_without_connected_devices():
    text = load("neuron-ls_trn1.2xlarge_idle_real-capture_gnosia93-xla-torch.txt")
    report = parse_neuron_ls(text)
    assert report.instance_type == "trn1.2xlarge"
    assert report.instance_id == "i-0a07d4c92c2670ba7"
    assert len(report.devices) == 1
    dev = report.devices[0]
    assert (dev.index, dev.neuron_cores, dev.memory_bytes) == (0, 2, 32 * GiB)
    assert dev.bdf == "0000:00:1e.0"
    assert dev.connected_devices is None  # no such column: unknown, not "no links"
    assert dev.processes == ()
    assert report.error is None


def test_inf2_eks_docs_example():
    report = parse_neuron_ls(load("neuron-ls_inf2.xlarge_idle_eks-docs-example.txt"))
    assert report.instance_type == "inf2.xlarge"
    assert report.instance_id == "..."  # the doc elided it; kept verbatim
    assert report.devices[0].neuron_cores == 2
    assert report.devices[0].memory_bytes == 32 * GiB
    assert report.devices[0].bdf == "00:1f.0"


# --- trn1.32xlarge real capture with collapsed spaces ----------------------------------------


def test_data_on_eks_collapsed_spaces():
    report = parse_neuron_ls(load("neuron-ls_trn1.32xlarge_with-pids_real-capture_data-on-eks.txt"))
    assert report.instance_type == "trn1.32xlarge"
    assert report.instance_id == "i-04b476a6a0e686980"
    assert len(report.devices) == 16
    assert report.total_cores == 32
    dev14 = report.devices[14]
    assert dev14.index == 14
    assert dev14.connected_devices == (10, 13, 2, 15)
    assert dev14.bdf == "a0:1e.0"
    assert dev14.memory_bytes == 32 * GiB
    assert dev14.processes == (
        NeuronProcess(109459, "python3 -m torch_neuronx.distributed....", "2.15.11"),
    )
    assert report.devices[15].bdf == "a0:1b.0"
    assert report.pids == (109459,)


# --- trn2 generations ------------------------------------------------------------------------


def test_trn2_2_29_core_ids_cpu_affinity_numa():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_default_docs-2.29.txt"))
    assert report.instance_type == "trn2n.48xlarge"
    assert report.instance_id == "i-aabbccdd123456789"
    assert report.logical_neuroncore_config == 2
    assert len(report.devices) == 16
    dev4 = report.devices[4]
    assert dev4.core_ids == (16, 17, 18, 19)
    assert dev4.memory_bytes == 96 * GiB
    assert dev4.connected_devices == (0, 7, 8, 5)
    assert dev4.bdf == "0000:6f:00.0"
    assert dev4.cpu_affinity == "0-47,96-143"
    assert dev4.numa_node == 0
    assert report.devices[15].core_ids == (60, 61, 62, 63)
    assert report.devices[15].numa_node == 1


# The 2.29 capture's two CPU AFFINITY values, written out as the CPU ids they name.
NUMA0_CPUS = (*range(0, 48), *range(96, 144))
NUMA1_CPUS = (*range(48, 96), *range(144, 192))
# Devices the 2.29 capture prints on NUMA node 1 (the rest are on node 0).
NUMA1_DEVICES = {0, 1, 2, 3, 12, 13, 14, 15}


def test_trn2_2_29_64_logical_cores_and_each_devices_affinity():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_default_docs-2.29.txt"))
    assert report.logical_neuroncore_config == 2
    assert len(report.devices) == 16
    assert report.total_logical_cores == 64
    assert report.logical_core_ids == tuple(range(64))
    for dev in report.devices:
        assert dev.logical_core_count == 4
        assert dev.core_ids == tuple(range(4 * dev.index, 4 * dev.index + 4))
        on_node1 = dev.index in NUMA1_DEVICES
        assert dev.numa_node == (1 if on_node1 else 0)
        assert dev.cpu_affinity == ("48-95,144-191" if on_node1 else "0-47,96-143")
        assert dev.affinity_cpus == (NUMA1_CPUS if on_node1 else NUMA0_CPUS)
    assert len(report.devices[0].affinity_cpus or ()) == 96


def test_trn2_2_21_counts_logical_not_physical_cores():
    report = parse_neuron_ls(
        load("neuron-ls_trn2n.48xlarge_default_docs-2.21-logical-nc-column.txt")
    )
    assert report.total_cores == 128  # NEURON CORES: physical in this beta
    assert report.total_logical_cores == 64  # LOGICAL NC
    assert report.logical_core_ids is None  # no NEURON CORE IDS column
    assert report.logical_neuroncore_config is None  # no header line in this beta
    assert all(d.cpu_affinity is None and d.affinity_cpus is None for d in report.devices)


@pytest.mark.parametrize(
    "name",
    [
        "neuron-ls_trn2n.48xlarge_default_docs-2.22.txt",
        "neuron-ls_trn2n.48xlarge_wide_docs-2.29.txt",
        "neuron-ls_trn2n.48xlarge_show-all-procs_docs-2.29.txt",
        "neuron-ls_trn2n.48xlarge_topology_docs-2.29.txt",
    ],
)
def test_trn2_tables_without_affinity_columns(name):
    report = parse_neuron_ls(load(name))
    assert report.logical_neuroncore_config == 2
    assert report.total_logical_cores == 64
    assert report.logical_core_ids is None
    for dev in report.devices:
        assert (dev.cpu_affinity, dev.affinity_cpus, dev.numa_node) == (None, None, None)


@pytest.mark.parametrize(
    "name",
    [
        "neuron-ls_inf1.6xlarge_default_docs-2.8.txt",
        "neuron-ls_inf1.xlarge_2019-format_docs.txt",
        "neuron-ls_inf1.6xlarge_runtime1.x-era_docs-2020.txt",
        "neuron-ls_trn1.2xlarge_idle_real-capture_gnosia93-xla-torch.txt",
        "neuron-ls_trn1.32xlarge_with-pids_real-capture_data-on-eks.txt",
        "neuron-ls_inf2.xlarge_idle_eks-docs-example.txt",
    ],
)
def test_older_formats_have_no_lnc_or_affinity(name):
    report = parse_neuron_ls(load(name))
    assert report.logical_neuroncore_config is None
    assert report.devices
    for dev in report.devices:
        assert dev.logical_core_count == dev.neuron_cores
        assert (dev.cpu_affinity, dev.affinity_cpus, dev.numa_node) == (None, None, None)
    assert report.total_logical_cores == report.total_cores


def test_trn2_2_22_default():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_default_docs-2.22.txt"))
    assert report.logical_neuroncore_config == 2
    assert [d.bdf for d in report.devices[:3]] == ["cc:00.0", "b5:00.0", "b6:00.0"]
    assert report.devices[9].connected_devices == (5, 8, 13, 10)
    assert report.devices[0].core_ids is None


def test_trn2_2_21_logical_nc_column():
    report = parse_neuron_ls(
        load("neuron-ls_trn2n.48xlarge_default_docs-2.21-logical-nc-column.txt")
    )
    assert report.instance_type is None
    assert len(report.devices) == 16
    assert all(d.neuron_cores == 8 and d.logical_cores == 4 for d in report.devices)
    assert report.devices[11].connected_devices == (7, 10, 15, 8)


def test_trn2_show_all_procs_two_rows_per_device():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_show-all-procs_docs-2.29.txt"))
    assert len(report.devices) == 16
    for dev in report.devices:
        assert [p.pid for p in dev.processes] == [268911, 269192]
    last = report.devices[15].processes
    assert last[0].command == "neuron-bench exec --run-as-cc-neff --..."
    assert last[0].runtime_version == "2.0.0"
    assert last[1].runtime_version is None
    assert report.pids == (268911, 269192)


def test_trn2_wide():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_wide_docs-2.29.txt"))
    assert report.devices[7].bdf == "6e:00.0"
    assert (
        report.devices[7]
        .processes[0]
        .command.startswith(
            "neuron-bench exec --run-as-cc-neff --warmup none --fixed-instance-count 64"
        )
    )
    assert report.pids == (268911,)


# --- JSON ------------------------------------------------------------------------------------


def test_json_trn1_2xlarge_real_capture():
    text = load("neuron-ls_trn1.2xlarge_json_idle_real-capture_all-smi.json")
    report = parse_neuron_ls_json(text)
    assert parse_neuron_ls(text) == report
    assert report.elided is False
    assert len(report.devices) == 1
    dev = report.devices[0]
    assert dev.index == 0
    assert dev.bdf == "0000:00:1e.0"
    assert dev.cpu_affinity == "0-7"
    assert dev.affinity_cpus == tuple(range(8))
    assert dev.numa_node is None  # "-1": unknown
    assert dev.connected_devices is None  # null
    assert dev.neuron_cores == 2
    assert dev.memory_bytes == 34359738368
    assert dev.core_ids == (0, 1)
    assert dev.processes == ()


@pytest.mark.parametrize(
    "name",
    [
        "neuron-ls_trn2n.48xlarge_json_docs-2.22_elided.txt",
        "neuron-ls_trn2n.48xlarge_json_docs-2.29_elided.txt",
    ],
)
def test_json_doc_elision_keeps_listed_devices(name):
    report = parse_neuron_ls(load(name))
    assert report.elided is True
    assert [d.index for d in report.devices] == [0, 15]
    assert report.logical_neuroncore_config == 2
    assert report.devices[0].connected_devices == (12, 3, 4, 1)
    assert report.device(15).bdf == "f7:00.0"
    assert report.device(15).memory_bytes == 103079215104
    assert report.device(15).processes == (
        NeuronProcess(113985, "neuron-bench exec --run-as-cc-neff --...", "2.0.0"),
    )


def test_json_2_29_affinity_cpus_and_elided_totals():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_json_docs-2.29_elided.txt"))
    assert report.device(0).affinity_cpus == NUMA1_CPUS
    assert report.device(15).affinity_cpus == NUMA1_CPUS
    assert report.device(15).numa_node == 1
    # Devices 1 to 14 are elided: no totals that would count only two devices.
    assert report.total_logical_cores is None and report.logical_core_ids is None


def test_json_2_22_has_no_affinity():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_json_docs-2.22_elided.txt"))
    dev = report.device(0)
    assert (dev.cpu_affinity, dev.affinity_cpus, dev.numa_node, dev.core_ids) == (
        None, None, None, None)
    assert dev.logical_core_count == 4


def test_json_and_table_combined():
    """What the collector records on trn2: the JSON form's devices and processes, the table's
    instance type and the devices the doc's JSON example elides."""
    json_report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_json_docs-2.29_elided.txt"))
    table = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_default_docs-2.29.txt"))
    both = combine_reports(json_report, table)
    assert both.instance_type == "trn2n.48xlarge"
    assert both.elided is False
    assert [d.index for d in both.devices] == list(range(16))
    assert both.total_logical_cores == 64
    assert both.logical_core_ids == tuple(range(64))
    # Device 0: the JSON form's fields first, so its processes and its short BDF.
    assert both.device(0).bdf == "cc:00.0"
    assert both.device(0).processes == json_report.device(0).processes
    assert both.device(0).processes[0].pid == 113985
    # Device 5 only the table lists: its process list is the table's (no PID column: none).
    assert both.device(5) == table.device(5)
    assert both.device(5).affinity_cpus == NUMA0_CPUS and both.device(5).numa_node == 0
    # A JSON form without affinity is filled in from the table that has it.
    old_json = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_json_docs-2.22_elided.txt"))
    filled = combine_reports(old_json, table).device(15)
    assert filled.affinity_cpus == NUMA1_CPUS and filled.core_ids == (60, 61, 62, 63)
    assert combine_reports(json_report).elided is True
    with pytest.raises(ValueError):
        combine_reports()


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-7", tuple(range(8))), ("5", (5,)), ("0,2,4-6", (0, 2, 4, 5, 6)),
     (" 3 - 4 , 1", (1, 3, 4))],
)
def test_cpu_list(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "a-b", "7-3", "1,,2", "0-1-2", "-1"])
def test_cpu_list_malformed_raises(text):
    with pytest.raises(TelemetryParseError):
        parse_cpu_list(text)


def test_json_2_29_has_core_ids_and_numa():
    report = parse_neuron_ls(load("neuron-ls_trn2n.48xlarge_json_docs-2.29_elided.txt"))
    assert report.device(15).core_ids == (60, 61, 62, 63)
    assert report.device(0).numa_node == 1
    assert report.device(7) is None  # elided
    assert report.devices[0].cpu_affinity == "48-95,144-191"


def test_json_with_process_null_runtime_version():
    text = (
        '[{"neuron_device": 3, "nc_count": 2, "memory_size": 1024, "connected_to": [2],'
        ' "neuron_processes": [{"pid": 7, "command": "python x.py",'
        ' "neuron_runtime_version": "NA"}], "future_field": {"x": 1}}]'
    )
    report = parse_neuron_ls_json(text)
    assert report.devices[0].processes == (NeuronProcess(7, "python x.py", None),)
    assert report.devices[0].connected_devices == (2,)
    assert report.devices[0].bdf is None


@pytest.mark.parametrize(
    "text",
    [
        "[",
        '[{"neuron_device": 0,',
        '[{"nc_count": 2}]',  # no device index
        '[{"neuron_device": "zero"}]',
        '[{"neuron_device": 0, "connected_to": "1, 2"}]',
        '[{"neuron_device": 0, "neuron_processes": [1]}]',
        '{"something": "else"}',
        "[1, 2]",
        "[NaN]",
    ],
)
def test_json_malformed_raises(text):
    with pytest.raises(TelemetryParseError):
        parse_neuron_ls_json(text)


# --- topology --------------------------------------------------------------------------------


def test_topology_inf1():
    topo = parse_neuron_ls_topology(load("neuron-ls_inf1.6xlarge_topology_docs-2.8.txt"))
    assert topo.device_ids == (0, 1, 2, 3)
    assert topo.links == ((0, 1), (1, 2), (2, 3))
    assert topo.grid == ((0, 1, 2, 3),)
    # The table part is an ordinary neuron-ls table with short BDFs.
    report = parse_neuron_ls(load("neuron-ls_inf1.6xlarge_topology_docs-2.8.txt"))
    assert report.devices[1].bdf == "00:1d.0"


@pytest.mark.parametrize(
    "name",
    [
        "neuron-ls_trn1.32xlarge_topology_docs-2.8.txt",
        "neuron-ls_trn2n.48xlarge_topology_docs-2.29.txt",
    ],
)
def test_topology_4x4_torus(name):
    topo = parse_neuron_ls_topology(load(name))
    assert topo.device_ids == tuple(range(16))
    assert len(topo.links) == 32  # 16 devices x 4 links / 2
    assert (0, 12) in topo.links and (0, 3) in topo.links and (11, 15) in topo.links
    assert topo.grid == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))


def test_topology_from_diagram_only():
    text = "Neuron Device Topology\n\n  [ 0 ]◄––►[ 1 ]◄––►[ 2 ]\n"
    topo = parse_neuron_ls_topology(text)
    assert topo.device_ids == (0, 1, 2)
    assert topo.links == ((0, 1), (1, 2))


def test_topology_without_anything_raises():
    with pytest.raises(TelemetryParseError):
        parse_neuron_ls_topology("hello\n")


# --- errors ----------------------------------------------------------------------------------


def test_driver_error_gives_no_devices_and_message():
    report = parse_neuron_ls(load("neuron-ls_error_no-device_real-capture_issue-633.txt"))
    assert report.devices == ()
    assert report.error is not None
    assert report.error.startswith("Failed to discover neuron devices: Unable to read device")
    assert "aws-neuronx-dkms" in report.error


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "bash: neuron-ls: command not found",
        "+------+\n| NEURON |\n",  # header never closed
        "+--------+\n| NEURON |\n| DEVICE |\n+--------+\n| 0      |\n",  # body not closed
        "+--------+\n| NEURON |\n| DEVICE |\n+--------+\n| 0    \n+--------+\n",  # cut row
        "+-----+\n| FOO |\n+-----+\n| 1   |\n+-----+\n",  # no device column
        "+--------+--------+\n| NEURON | NEURON |\n| DEVICE | CORES  |\n+--------+--------+\n"
        "| 0      | four   |\n+--------+--------+\n",
        "+--------+--------+\n| NEURON | NEURON |\n| DEVICE | MEMORY |\n+--------+--------+\n"
        "| 0      | 8 parsecs |\n+--------+--------+\n",
        "+--------+--------+\n| NEURON | NEURON |\n| DEVICE | CORES  |\n+--------+--------+\n"
        "|        | 4      |\n+--------+--------+\n",  # continuation row first
        "+--------+--------+\n| NEURON | NEURON |\n| DEVICE | CORES  |\n+--------+--------+\n"
        "| 0      | 4      | 5 |\n+--------+--------+\n",  # extra cell, no COMMAND to absorb it
    ],
)
def test_table_malformed_raises(text):
    with pytest.raises(TelemetryParseError):
        parse_neuron_ls(text)


def test_pipe_inside_command_is_glued_back():
    text = (
        "+--------+-------+---------+\n"
        "| NEURON |  PID  | COMMAND |\n"
        "| DEVICE |       |         |\n"
        "+--------+-------+---------+\n"
        "| 0      | 42    | sh -c a | b |\n"
        "+--------+-------+---------+\n"
    )
    report = parse_neuron_ls_table(text)
    assert report.devices[0].processes == (NeuronProcess(42, "sh -c a | b", None),)
    assert report.devices[0].neuron_cores is None  # column absent -> None, not 0
    assert report.total_cores is None


def test_unknown_columns_are_ignored():
    text = (
        "+--------+--------+----------+\n"
        "| NEURON | NEURON |  SHINY   |\n"
        "| DEVICE | CORES  | NEW COL  |\n"
        "+--------+--------+----------+\n"
        "| 0      | 2      | whatever |\n"
        "+--------+--------+----------+\n"
    )
    report = parse_neuron_ls(text)
    assert report.devices[0].neuron_cores == 2
