"""The Trn1-vs-Inf2 study's training script, as the study describes it (timm ViT
on random images, Adam, MpDeviceLoader, perf_counter around the step body), scaled down
only in model size and step count so that it runs on two CPU cores through torch-xla
(PJRT_DEVICE=CPU). Nothing in it knows about neurotui: it prints no step, only
`average step time: <seconds>` per rank at the end.

    PJRT_DEVICE=CPU torchrun --nproc_per_node=2 study_vit_xla.py
"""

import os
import time

os.environ["XLA_USE_BF16"] = "1"

import torch
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_backend  # noqa: F401
from timm.models.vision_transformer import VisionTransformer

BATCH = 16
WORKERS = 2
IMG = 32  # the study: 224 (ViT-B/16 defaults); scaled down for two CPU cores
LAST_STEP = int(os.environ.get("STUDY_STEPS", "60"))  # the study: 500
FIRST_TIMED = 11


class RandomImages(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, index):
        return torch.rand(3, IMG, IMG), torch.randint(0, 1000, ()).item()


def main():
    torch.distributed.init_process_group("xla")
    device = xm.xla_device()
    model = VisionTransformer(img_size=IMG, patch_size=8, embed_dim=64, depth=2,
                              num_heads=2).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(RandomImages(), batch_size=BATCH,
                                         num_workers=WORKERS)
    device_loader = pl.MpDeviceLoader(loader, device)
    total = 0.0
    for step, (inputs, targets) in enumerate(device_loader, start=1):
        start = time.perf_counter()
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        xm.optimizer_step(optimizer)
        if step >= FIRST_TIMED:
            total += time.perf_counter() - start
        if step >= LAST_STEP:
            break
    print(f"average step time: {total / (LAST_STEP - FIRST_TIMED + 1)}", flush=True)


if __name__ == "__main__":
    main()
