"""A plain CPU loop under torchrun that prints its loss right after each `optimizer.step()`,
as most hand-written loops do (`step N loss X`): a line written within microseconds of the
step it belongs to. Knows nothing about neurotui.

Its truth goes to "$TRUTH_FILE.<RANK>" (JSON): each step's loss, as printed."""

import json
import os
import time

import torch
from torch import nn

STEPS = int(os.environ.get("STEPS", "60"))
STEP_SLEEP_S = float(os.environ.get("STEP_SLEEP_S", "0.02"))

torch.manual_seed(int(os.environ.get("RANK", "0")))
torch.set_num_threads(1)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
printed = []
for step in range(1, STEPS + 1):
    x = torch.randn(16, 8)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    time.sleep(STEP_SLEEP_S)
    optimizer.step()
    printed.append(f"{loss.item():.4f}")
    print(f"step {step} loss {printed[-1]}", flush=True)
with open(f"{os.environ['TRUTH_FILE']}.{os.environ['RANK']}", "w") as f:
    json.dump({"losses": printed}, f)
