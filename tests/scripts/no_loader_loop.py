"""A loop that makes its data in the loop (no DataLoader) and steps an optimizer STEPS times,
on the CPU. Knows nothing about neurotui. Its own truth goes to "$TRUTH_FILE.<rank>" (JSON):
the wall clock after each optimizer step."""

import json
import os
import time

import torch
from torch import nn

STEPS = int(os.environ.get("STEPS", "15"))

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
truth = []
for _ in range(STEPS):
    x = torch.randn(16, 8)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    truth.append(time.time())

with open(f"{os.environ['TRUTH_FILE']}.{os.environ.get('RANK', '0')}", "w") as f:
    json.dump(truth, f)
print(f"{STEPS} steps", flush=True)
