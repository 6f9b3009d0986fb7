"""Named runs for `neurotui run --preset NAME`: the runner with settings known to fit a machine."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

TRAIN_VIT = Path(__file__).resolve().with_name("train_vit.py")


@dataclass(frozen=True)
class Preset:
    description: str
    nproc: int
    runner_args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    step_target: int | None = None

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={self.nproc}",
                str(TRAIN_VIT), *self.runner_args]


def _steps(args: tuple[str, ...]) -> int | None:
    return int(args[args.index("--steps") + 1]) if "--steps" in args else None


def _preset(description: str, nproc: int, *args: str, env: dict[str, str] | None = None) -> Preset:
    return Preset(description, nproc, args, env or {}, _steps(args))


PRESETS: dict[str, Preset] = {
    "vit-tiny-cpu": _preset(
        "tiny ViT (32px, dim 64, depth 2), 600 steps on 2 CPU ranks with gloo (~30 s on 2 cores)",
        2, "--model", "vit-tiny", "--image-size", "32", "--batch-size", "16", "--workers", "1",
        "--steps", "600", "--device", "cpu"),
    "vit-tiny-cpu-starved": _preset(
        "the tiny CPU run with its DataLoader starved on purpose (1 worker, heavy "
        "augmentation): the step breakdown (key b) shows data loading as the largest share",
        2, "--model", "vit-tiny", "--image-size", "32", "--batch-size", "16", "--workers", "1",
        "--augment", "heavy", "--steps", "200", "--device", "cpu"),
    "vit-tiny-xla-cpu": _preset(
        "the same run through torch-xla on the CPU (PJRT_DEVICE=CPU): the Neuron code path",
        2, "--model", "vit-tiny", "--image-size", "32", "--batch-size", "16", "--workers", "1",
        "--steps", "600", "--device", "xla", env={"PJRT_DEVICE": "CPU"}),
    "vit-b16-neuron-2core": _preset(
        "the study's run: ViT-B/16, 224px, batch 16 per NeuronCore, 2 cores (trn1.2xlarge, "
        "inf2.xlarge, inf2.8xlarge) through the XLA torch-neuronx (Neuron 2.31 and "
        "earlier), bf16", 2, "--model", "vit-b16", "--image-size", "224",
        "--batch-size", "16", "--workers", "4", "--steps", "500", "--device", "xla", "--bf16"),
    "vit-tiny-cpu-compile": _preset(
        "the tiny CPU run compiled with torch.compile (inductor), 2 ranks with gloo: the "
        "compile shows before the first step, its seconds and cost in compare (~1-2 min on "
        "2 cores, most of it compiling)",
        2, "--model", "vit-tiny", "--image-size", "32", "--batch-size", "16", "--workers", "0",
        "--steps", "100", "--device", "cpu", "--compile"),
    "vit-b16-trn2-torchneuron": _preset(
        "ViT-B/16, 224px, batch 16 per logical NeuronCore on a trn2.3xlarge (4 logical cores "
        "at LNC=2) through TorchNeuron (Neuron 2.33+, device neuron), torch.compile with the "
        "neuron backend, bf16", 4, "--model", "vit-b16", "--image-size", "224",
        "--batch-size", "16", "--workers", "4", "--steps", "500", "--device", "neuron",
        "--compile", "--bf16"),
    "vit-b16-gpu": _preset(
        "ViT-B/16, 224px, batch 16 on one GPU (nccl)", 1, "--model", "vit-b16",
        "--image-size", "224", "--batch-size", "16", "--workers", "4", "--steps", "500",
        "--device", "cuda"),
}
