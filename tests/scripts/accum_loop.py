"""A plain CPU PyTorch training loop with gradient accumulation, as torchrun runs it (gloo DDP,
or a single process without torchrun): ACCUM micro-batches of BATCH per optimizer step, for
EPOCHS epochs, each ending with a partial batch and a short accumulation window that still
steps the optimizer. Knows nothing about neurotui.

Its own truth goes to "$TRUTH_FILE.<rank>" (JSON): per optimizer step, the wall clock right
after `optimizer.step()` returned and the samples the loop fed since the previous step."""

import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH = int(os.environ.get("BATCH", "8"))
ACCUM = int(os.environ.get("ACCUM", "4"))
FULL_STEPS = int(os.environ.get("FULL_STEPS", "12"))  # full optimizer steps per epoch
EPOCHS = int(os.environ.get("EPOCHS", "2"))
WIDTH = int(os.environ.get("WIDTH", "256"))
TAIL = 2 * BATCH + 5  # per rank and epoch: two full micro-batches and a partial one of 5

distributed = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0
world = dist.get_world_size() if distributed else 1
torch.manual_seed(0)
torch.set_num_threads(1)

per_rank = FULL_STEPS * ACCUM * BATCH + TAIL
inputs = torch.randn(per_rank * world, WIDTH)
targets = torch.randint(0, 10, (per_rank * world,))
dataset = TensorDataset(inputs, targets)
sampler = DistributedSampler(dataset, shuffle=True, seed=0) if distributed else None
loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, shuffle=sampler is None,
                    num_workers=0)

model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
                      nn.Linear(WIDTH, 10))
if distributed:
    model = nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

truth = []
fed = 0
for epoch in range(EPOCHS):
    if sampler is not None:
        sampler.set_epoch(epoch)
    micro = 0
    for i, (x, y) in enumerate(loader):
        fed += len(x)
        micro += 1
        last = i == len(loader) - 1
        stepping = micro == ACCUM or last
        sync = model.no_sync() if distributed and not stepping else contextlib.nullcontext()
        with sync:
            loss = loss_fn(model(x), y) / ACCUM
            loss.backward()
        if stepping:
            optimizer.step()
            truth.append({"t": time.time(), "samples": fed})
            optimizer.zero_grad(set_to_none=True)
            fed = micro = 0

with open(f"{os.environ['TRUTH_FILE']}.{rank}", "w") as f:
    json.dump(truth, f)
print(f"rank {rank}: {len(truth)} optimizer steps, {sum(s['samples'] for s in truth)} samples",
      flush=True)
if distributed:
    dist.destroy_process_group()
