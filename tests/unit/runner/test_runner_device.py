"""runner/train_vit.py's --device and --compile: the choice of device, torch.compile backend
and process group backend, and the refusal of --compile on the XLA path (the real runner)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from runner import presets, train_vit


def test_auto_is_the_cpu_on_a_box_without_an_accelerator(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    if torch.accelerator.is_available():
        pytest.fail("this test describes a machine without an accelerator (CI's CPU box)")
    assert train_vit.pick_device("auto") == "cpu"


def test_auto_is_xla_when_pjrt_device_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    assert train_vit.pick_device("auto") == "xla"
    assert train_vit.pick_device("neuron") == "neuron"  # an explicit choice stands


def test_each_device_gets_its_compile_and_process_group_backend() -> None:
    assert train_vit.compile_backend("cpu") == "inductor"
    assert train_vit.compile_backend("cuda") == "inductor"
    assert train_vit.compile_backend("neuron") == "neuron"
    with pytest.raises(ValueError, match="XLA path compiles"):
        train_vit.compile_backend("xla")
    assert train_vit.dist_backend("cpu") == "gloo"
    assert train_vit.dist_backend("cuda") == "nccl"


def test_device_and_compile_flags_parse() -> None:
    args = train_vit.parse_args(["--device", "neuron", "--compile"])
    assert args.device == "neuron" and args.compile
    assert not train_vit.parse_args([]).compile


def test_compile_on_the_xla_path_is_refused_before_training() -> None:
    result = subprocess.run([sys.executable, str(presets.TRAIN_VIT), "--device", "xla",
                             "--compile", "--steps", "1"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    assert "--compile is not for --device xla" in result.stderr


def test_the_compile_presets() -> None:
    cpu = presets.PRESETS["vit-tiny-cpu-compile"]
    assert "--compile" in cpu.runner_args and cpu.runner_args[
        cpu.runner_args.index("--device") + 1] == "cpu"
    trn2 = presets.PRESETS["vit-b16-trn2-torchneuron"]
    assert {"--compile", "neuron"} <= set(trn2.runner_args)
