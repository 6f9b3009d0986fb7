"""A CPU training loop whose DataLoader can be starved on purpose. Knows nothing about neurotui.

Each sample costs COST rounds of a 64x64 matrix product in the DataLoader's worker (COST=0: a
slice of a ready tensor, nearly free); WORKERS worker processes make the batches (1: one core
makes every sample). The model is a small MLP whose step takes some tens of milliseconds on
one thread, so with COST=0 the step dominates, and with a large COST the rank waits for data.
Runs STEPS optimizer steps (the loader cycles), as torchrun runs it or alone.

Its own truth goes to "$TRUTH_FILE.<rank>" when TRUTH_FILE is set (JSON): the seconds each
step waited in `next(loader)` and the seconds of the rest of the step, measured here.
"""

import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STEPS = int(os.environ.get("STEPS", "60"))
BATCH = int(os.environ.get("BATCH", "8"))
COST = int(os.environ.get("COST", "0"))
WORKERS = int(os.environ.get("WORKERS", "1"))
WIDTH = int(os.environ.get("WIDTH", "768"))

torch.manual_seed(0)
torch.set_num_threads(1)


class Samples(Dataset):
    def __init__(self, n: int) -> None:
        self.inputs = torch.randn(n, WIDTH)
        self.targets = torch.randint(0, 10, (n,))
        self.mix = torch.randn(64, 64) / 8

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.inputs[i]
        if COST:
            # Per-sample work a real pipeline would spend decoding and augmenting.
            m = self.mix + x[:64].mean()
            for _ in range(COST):
                m = torch.tanh(m @ self.mix)
            x = x + m.mean()
        return x, self.targets[i]


loader = DataLoader(Samples(BATCH * 64), batch_size=BATCH, shuffle=True,
                    num_workers=WORKERS, persistent_workers=WORKERS > 0)
model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
                      nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()

truth = []
batches = iter(loader)
for _ in range(STEPS):
    started = time.perf_counter()
    try:
        x, y = next(batches)
    except StopIteration:
        batches = iter(loader)
        x, y = next(batches)
    waited = time.perf_counter() - started
    for _ in range(4):  # a few passes: a step of some tens of milliseconds
        loss = loss_fn(model(x.repeat(8, 1)), y.repeat(8))
        optimizer.zero_grad()
        loss.backward()
    optimizer.step()
    truth.append({"data": waited, "rest": time.perf_counter() - started - waited})

if os.environ.get("TRUTH_FILE"):
    with open(f"{os.environ['TRUTH_FILE']}.{os.environ.get('RANK', '0')}", "w") as f:
        json.dump(truth, f)
print(f"{STEPS} steps, {WORKERS} worker(s), cost {COST}", flush=True)
