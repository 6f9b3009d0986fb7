"""A plain DDP loop on the CPU (gloo), as scripts people run across nodes look: every rank
prints `step N loss X` with no rank in it (torchrun files each rank's output by its LOCAL
rank). Knows nothing about neurotui. Its truth goes to "$TRUTH_FILE.<RANK>" (JSON): its global
rank, its local rank and the wall clock after each optimizer step."""

import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn

STEPS = int(os.environ.get("STEPS", "40"))
STEP_SLEEP_S = float(os.environ.get("STEP_SLEEP_S", "0.05"))  # a step's length, on 2 cores

dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
truth = []
for step in range(1, STEPS + 1):
    x = torch.randn(16, 8)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(STEP_SLEEP_S)
    truth.append(time.time())
    print(f"step {step} loss {loss.item():.4f}", flush=True)
with open(f"{os.environ['TRUTH_FILE']}.{os.environ['RANK']}", "w") as f:
    json.dump({"rank": int(os.environ["RANK"]), "local_rank": int(os.environ["LOCAL_RANK"]),
               "steps": truth}, f)
dist.destroy_process_group()
