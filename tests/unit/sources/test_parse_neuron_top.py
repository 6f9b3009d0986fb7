"""The runtime 1.x text screen of neuron-top (the only neuron-top output that is text)."""

from __future__ import annotations

from datetime import datetime

import pytest

import neurotui.sources.neuron_top as neuron_top
from neurotui.sources.neuron_top import NeuronTopModel, parse_neuron_top_text
from neurotui.sources.parse_errors import TelemetryParseError
from tests.captures import read_capture as load


def test_runtime_1x_text_screen():
    screen = parse_neuron_top_text(load("neuron-top_inf1_runtime1.x-era-text_docs-2020.txt"))
    assert screen.timestamp == datetime(2020, 2, 12, 23, 3, 15)
    assert (screen.models_total, screen.models_running) == (2, 2)
    assert screen.vncs_tracked == 16
    assert [d.bdf for d in screen.devices] == ["0000:00:1c.0", "0000:00:1e.0"]
    assert screen.devices[1].core_utilization == ((0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0))
    assert screen.models[0] == NeuronTopModel(
        model_id=10018,
        name="1.0.6801.0-/home/ubuntu/benchmarking/compiler_workdir/rn50",
        uuid="d12cf238420d11ea8e270afe835c0a32",
        node_id=3,
        subgraph=0,
        exec_unit="0000:00:1e.0:0",
        host_mem_bytes=33554816,
        device_mem_bytes=135290880,
        utilization=0.0,
    )
    assert screen.models[1].model_id == 10017
    assert screen.models[1].exec_unit == "0000:00:1c.0:0"


def test_nonzero_utilisation():
    text = (
        "neuron-top - 2020-02-12 23:03:15\n"
        "0000:00:1c.0 Utilizations: Neuron core0 12.50%, Neuron core1 100.00%,\n"
    )
    screen = parse_neuron_top_text(text)
    assert screen.devices[0].core_utilization == ((0, 12.5), (1, 100.0))
    assert screen.models == ()
    assert screen.models_total is None  # line absent: unknown


def test_docstring_points_to_neuron_monitor():
    assert "neuron-monitor" in (neuron_top.__doc__ or "")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "some random text\n",
        "neuron-top - 2020-13-45 99:99:99\n",
        "0000:00:1c.0 Utilizations: nothing here\n",
        "Model ID   Model Name   UUID\n10018   only-two-cells\n",
        "Model ID   Host Mem\nabc   12\n",
    ],
)
def test_malformed_raises(text):
    with pytest.raises(TelemetryParseError):
        parse_neuron_top_text(text)
