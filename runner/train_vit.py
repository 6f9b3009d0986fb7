"""Reference workload: a timm VisionTransformer classifier on random images, under torchrun.

The toy model of the Trn1-vs-Inf2 study: ViT-B/16 on 3x224x224 random images, 1000 classes,
Adam, cross-entropy, batch 16 per worker. Launch with `torchrun --nproc_per_node=N`.

Device (`--device auto|cpu|cuda|neuron|xla`):
- `neuron`: TorchNeuron, the native PyTorch backend of Trainium (trn2, trn3; Neuron 2.33+):
  device `neuron`, eager, DDP through the backend TorchNeuron registers for its device;
- `xla`: the XLA-based torch-neuronx (trn1, inf2; Neuron 2.31 and earlier), or the CPU with
  PJRT_DEVICE=CPU; `cuda` (nccl); `cpu` (gloo).
`--device auto`: XLA when PJRT_DEVICE is set; else the accelerator torch.accelerator names
(cuda, or neuron where TorchNeuron is installed); else XLA where only the XLA torch-neuronx
is importable; else the CPU. A plain CPU box is never silently switched to XLA.

`--compile` compiles the model with torch.compile: backend `neuron` on TorchNeuron, inductor
elsewhere (the CPU, CUDA). The XLA path compiles its lazy graphs through neuronx-cc already and
refuses it. neurotui's automatic probe records each compile and recompile.

Honest step timing. Each step is timed from the previous completed step to the moment this
step's results exist on the host:
- CPU: the step runs synchronously; `loss.item()` returns when it is done.
- CUDA: `loss.item()` synchronises the stream, so the time includes the kernels.
- XLA: execution is lazy. Timing around the Python step would measure graph *building*. The
  step is instead timed in an `xm.add_step_closure`, which torch-xla runs at the step barrier
  (`mark_step`, issued by MpDeviceLoader) after the graph ran; reading `loss.item()` there
  returns device data. The first steps include graph compilation (neuronx-cc on Neuron), which
  shows up as long first steps followed by steady ones.
Phase timings (data, forward, backward, optimizer) are reported only on the CPU, where host
timers measure the work itself; on CUDA and XLA only the data wait is honest without syncs.
With several CPU ranks, `data` lasts until every rank has its batch (they meet at a barrier):
a step cannot start before the slowest rank's input is ready, and without the barrier a rank
starved of input would show as the other ranks' gradient all-reduce wait in `backward`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

try:
    from neurotui import probe
except ImportError:  # the runner works without neurotui installed
    probe = None  # type: ignore[assignment]


@dataclass(frozen=True)
class ModelSize:
    patch: int
    dim: int
    depth: int
    heads: int


MODEL_SIZES = {
    "vit-b16": ModelSize(16, 768, 12, 12),   # the study's ViT-B/16
    "vit-s16": ModelSize(16, 384, 12, 6),
    "vit-tiny": ModelSize(8, 64, 2, 2),      # ~0.2 s/step on 2 CPU cores at 32px
    "vit-micro": ModelSize(8, 32, 1, 2),
}


AUGMENT_SCALE = 4
"""Heavy augmentation works on images this many times larger, as a real pipeline decodes and
crops a full-size photo before resizing it to the model's input."""
AUGMENT_BLURS = 6


def heavy_augment(image: torch.Tensor, seed: int) -> torch.Tensor:
    """Real CPU work per sample, as a heavy augmentation pipeline does: upscale, rotate by a
    random angle, several Gaussian blurs, a colour jitter, resize back. Deterministic per
    `seed` (the sample's index)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    size = image.shape[-1]
    x = F.interpolate(image[None], scale_factor=AUGMENT_SCALE, mode="bicubic",
                      align_corners=False)
    angle = (torch.rand((), generator=g) - 0.5) * (math.pi / 3)
    cos, sin = torch.cos(angle), torch.sin(angle)
    theta = torch.stack([torch.stack([cos, -sin, torch.zeros(())]),
                         torch.stack([sin, cos, torch.zeros(())])])[None]
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    for _ in range(AUGMENT_BLURS):
        sigma = 1.0 + 2.0 * float(torch.rand((), generator=g))
        radius = 7
        taps = torch.arange(-radius, radius + 1, dtype=x.dtype)
        kernel = torch.exp(-(taps**2) / (2 * sigma**2))
        kernel = kernel / kernel.sum()
        channels = x.shape[1]
        x = F.conv2d(x, kernel.view(1, 1, 1, -1).repeat(channels, 1, 1, 1),
                     padding=(0, radius), groups=channels)
        x = F.conv2d(x, kernel.view(1, 1, -1, 1).repeat(channels, 1, 1, 1),
                     padding=(radius, 0), groups=channels)
    brightness = 0.8 + 0.4 * torch.rand((), generator=g)
    contrast = 0.8 + 0.4 * torch.rand((), generator=g)
    mean = x.mean()
    x = (x - mean) * contrast + mean * brightness
    return F.interpolate(x, size=(size, size), mode="area")[0]


class RandomImages(Dataset):
    """Deterministic random images: a fixed pool, indexed, so data loading stays cheap, unless
    `augment` is "heavy" (heavy_augment per sample: the input pipeline becomes the work)."""

    def __init__(self, length: int, image_size: int, classes: int, pool: int = 64,
                 augment: str = "none") -> None:
        g = torch.Generator().manual_seed(0)
        self.length = length
        self.augment = augment
        self.images = torch.randn(pool, 3, image_size, image_size, generator=g)
        self.labels = torch.randint(0, classes, (length,), generator=g)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[i % len(self.images)]
        if self.augment == "heavy":
            image = heavy_augment(image, i)
        return image, self.labels[i]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(MODEL_SIZES), default="vit-b16")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=16, help="per worker")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument("--augment", choices=["none", "heavy"], default="none",
                   help="heavy: real CPU work per sample (upscale, rotate, Gaussian blurs, "
                        "resize) in the DataLoader; with --workers 1 the input pipeline "
                        "starves the ranks, as in the study's first runs")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--device", choices=["auto", "cpu", "cuda", "neuron", "xla"],
                   default="auto", help="see the module docstring (default auto)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (backend neuron on TorchNeuron, inductor "
                        "elsewhere; not with --device xla)")
    p.add_argument("--bf16", action="store_true", help="bfloat16 (the study used XLA_USE_BF16=1)")
    p.add_argument("--fail-at-step", type=int, default=None,
                   help="exit with code 3 at this step on the rank given by --fail-rank (tests)")
    p.add_argument("--fail-rank", type=int, default=0)
    return p.parse_args(argv)


def pick_device(choice: str) -> str:
    if choice != "auto":
        return choice
    if os.environ.get("PJRT_DEVICE"):
        return "xla"
    found = _accelerator()
    if found in ("cuda", "neuron"):
        return found
    try:
        import torch_neuronx  # noqa: F401  (TorchNeuron registers `neuron` as it loads)
    except ImportError:
        return "cpu"
    # Loaded: TorchNeuron names its device now; the XLA library does not.
    return "neuron" if _accelerator() == "neuron" else "xla"


def _accelerator() -> str | None:
    """The device type torch.accelerator names, where one is there to use (torch 2.6+;
    before it, CUDA's availability). A CUDA build of torch on a box without a GPU names
    `cuda` unless asked whether it is available."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "current_accelerator"):
        if not accelerator.is_available():
            return None
        current = accelerator.current_accelerator()
        return None if current is None else str(current.type)
    return "cuda" if torch.cuda.is_available() else None


def compile_backend(device_kind: str) -> str:
    """torch.compile's backend for the device: TorchNeuron's own, inductor elsewhere."""
    if device_kind == "xla":
        raise ValueError("--compile is not for --device xla: the XLA path compiles its lazy "
                         "graphs through neuronx-cc already; TorchNeuron (--device neuron) "
                         "takes torch.compile")
    return "neuron" if device_kind == "neuron" else "inductor"


def dist_backend(device_kind: str) -> str:
    """The process group's backend: the one registered for the device where torch says it
    (TorchNeuron's for `neuron`), else nccl for CUDA and gloo for the CPU."""
    default_for = getattr(dist, "get_default_backend_for_device", None)
    if device_kind not in ("cpu", "cuda") and default_for is not None:
        return str(default_for(device_kind))
    return "nccl" if device_kind == "cuda" else "gloo"


def build_model(args: argparse.Namespace) -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    size = MODEL_SIZES[args.model]
    return VisionTransformer(img_size=args.image_size, patch_size=size.patch,
                             embed_dim=size.dim, depth=size.depth, num_heads=size.heads,
                             num_classes=args.classes)


class StepReporter:
    """Prints the runner's step line and feeds the probe, from completed-step timestamps."""

    def __init__(self, rank: int, samples: int) -> None:
        self.rank = rank
        self.samples = samples
        self.last = time.perf_counter()

    def done(self, step: int, loss: float, phases: dict[str, float] | None = None) -> None:
        now = time.perf_counter()
        dt, self.last = now - self.last, now
        if probe is not None:
            probe.step(self.samples, loss if math.isfinite(loss) else float("nan"),
                       step=step, dt=dt, phases=phases)
        print(f"neurotui-runner step={step} rank={self.rank} samples={self.samples} "
              f"loss={loss:.4f} dt={dt:.4f}", flush=True)


def maybe_fail(args: argparse.Namespace, rank: int, step: int) -> None:
    if args.fail_at_step is not None and step == args.fail_at_step and rank == args.fail_rank:
        print(f"runner: failing on purpose at step {step} on rank {rank}", file=sys.stderr,
              flush=True)
        sys.exit(3)


def train_eager(args: argparse.Namespace, device_kind: str) -> None:
    dist.init_process_group(dist_backend(device_kind))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    on_accelerator = device_kind in ("cuda", "neuron")
    device = torch.device(f"{device_kind}:{local_rank}" if on_accelerator else "cpu")
    if device_kind == "cuda":
        torch.cuda.set_device(device)
    elif on_accelerator:
        torch.accelerator.set_device_index(local_rank)
    model = torch.nn.parallel.DistributedDataParallel(
        build_model(args).to(device), device_ids=[local_rank] if on_accelerator else None)
    if args.compile:
        model = torch.compile(model, backend=compile_backend(device_kind))  # type: ignore[assignment]
    loader = make_loader(args, rank, world)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    reporter = StepReporter(rank, args.batch_size)
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16)
    data_start = time.perf_counter()
    for step, (images, labels) in enumerate(loader, start=1):
        images, labels = images.to(device, non_blocking=True), labels.to(device)
        if device_kind == "cpu" and world > 1:
            dist.barrier()  # `data`: until every rank has its batch (module docstring)
        t_data = time.perf_counter()
        with autocast:
            loss = loss_fn(model(images), labels)
        t_fwd = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t_bwd = time.perf_counter()
        optimizer.step()
        loss_value = loss.item()  # the sync point: the step's work is done when this returns
        t_end = time.perf_counter()
        phases = {"data": t_data - data_start}
        if device_kind == "cpu":
            phases.update(forward=t_fwd - t_data, backward=t_bwd - t_fwd, optimizer=t_end - t_bwd)
        reporter.done(step, loss_value, phases)
        maybe_fail(args, rank, step)
        if step >= args.steps:
            break
        data_start = time.perf_counter()
    dist.destroy_process_group()


def train_xla(args: argparse.Namespace) -> None:
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.parallel_loader as pl
    import torch_xla.distributed.xla_backend  # registers the 'xla' backend

    dist.init_process_group("xla", init_method="xla://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch_xla.device()
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    model = build_model(args).to(device=device, dtype=dtype)
    loader = pl.MpDeviceLoader(make_loader(args, rank, world), device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    reporter = StepReporter(rank, args.batch_size)

    def on_step_done(step: int, loss: torch.Tensor) -> None:
        # Runs at the step barrier, after the graph executed: see the module docstring.
        reporter.done(step, float(loss.item()))
        maybe_fail(args, rank, step)

    for step, (images, labels) in enumerate(loader, start=1):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(images.to(dtype)), labels)
        loss.backward()
        xm.optimizer_step(optimizer)  # all-reduces gradients across ranks, then steps
        xm.add_step_closure(on_step_done, args=(step, loss))
        if step >= args.steps:
            break
    xm.mark_step()  # flush the last step's closure
    xm.wait_device_ops()


def make_loader(args: argparse.Namespace, rank: int, world: int) -> DataLoader:
    length = args.steps * args.batch_size * world
    dataset = RandomImages(length, args.image_size, args.classes, augment=args.augment)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    return DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                      num_workers=args.workers, drop_last=True,
                      persistent_workers=args.workers > 0)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device_kind = pick_device(args.device)
    if args.compile:
        try:
            compile_backend(device_kind)  # refused before any rank builds a model
        except ValueError as exc:
            sys.exit(f"runner: {exc}")
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        print(f"runner: model={args.model} image={args.image_size} batch={args.batch_size} "
              f"workers={args.workers} steps={args.steps} device={device_kind} bf16={args.bf16}"
              f" augment={args.augment} compile={args.compile}", flush=True)
    torch.manual_seed(0)
    if device_kind == "xla":
        train_xla(args)
    else:
        train_eager(args, device_kind)
    if rank == 0:
        print("runner: done", flush=True)


if __name__ == "__main__":
    main()
