"""A plain DDP regression on the CPU (gloo) that goes wrong on purpose, for the loss and memory
alerts (tests/e2e/test_loss_memory_alerts.py). Every rank prints `step N loss X`. Knows
nothing about neurotui. Each fault is real, not a printed number:
- SPIKE_AT: rank 0's batch at that step has targets shifted far off (a bad batch): its loss
  is hundreds of times the usual, and training goes on;
- NAN_AT: rank 0's batch at that step holds a NaN: the loss is NaN, the gradients reduced
  across the ranks carry it into every rank's weights, and every loss after it is NaN;
- LEAK_RANK, LEAK_MB: that rank keeps LEAK_MB MiB more of host memory at each step (a list
  of buffers that only grows, each page written so that it is resident)."""

import os
import time

import torch
import torch.distributed as dist
from torch import nn

STEPS = int(os.environ.get("STEPS", "120"))
STEP_SLEEP_S = float(os.environ.get("STEP_SLEEP_S", "0.1"))
SPIKE_AT = int(os.environ.get("SPIKE_AT", "0"))
NAN_AT = int(os.environ.get("NAN_AT", "0"))
LEAK_RANK = int(os.environ.get("LEAK_RANK", "-1"))
LEAK_MB = int(os.environ.get("LEAK_MB", "0"))

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
torch.set_num_threads(1)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
kept: list[bytes] = []
for step in range(1, STEPS + 1):
    x = torch.randn(16, 8)
    target = x.sum(dim=1, keepdim=True) + torch.randn(16, 1)
    if rank == 0 and step == SPIKE_AT:
        target = target + 40.0
    if rank == 0 and step == NAN_AT:
        x[0, 0] = float("nan")
    loss = (model(x) - target).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == LEAK_RANK:
        kept.append(b"\x01" * (LEAK_MB << 20))
    time.sleep(STEP_SLEEP_S)
    print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
