"""A plain torch.compile training loop (no neurotui code): a tiny model compiled with the
default backend (inductor on the CPU), its batch size changing once, at step CHANGE_AT.

The change makes TorchDynamo recompile once (its guard on the batch size fails); a run under
`neurotui run` must record that recompile with its reason. Arguments: steps (default 60),
step of the change (default 30), `--no-compile` (the same loop eagerly), `--extra-recompile-rank R`
(that rank changes its batch size once more, near the end: one recompile more than the others).
"""

from __future__ import annotations

import argparse
import os

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--change-at", type=int, default=30)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--extra-recompile-rank", type=int, default=None)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    forward = model if args.no_compile else torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loaders = {size: DataLoader(data, batch_size=size, drop_last=True) for size in (4, 8, 1)}
    batches = {size: iter(loader) for size, loader in loaders.items()}
    for step in range(1, args.steps + 1):
        size = 4 if step <= args.change_at else 8  # one shape change: a recompile
        if args.extra_recompile_rank == rank and step > args.steps - 5:
            # A batch of one: a size the dynamic graph does not cover (0 and 1 are
            # specialised), so this rank compiles once more than the others.
            size = 1
        x, y = next(batches[size], (None, None))
        if x is None:  # that loader's epoch is over: the next one
            batches[size] = iter(loaders[size])
            x, y = next(batches[size])
        loss = torch.nn.functional.mse_loss(forward(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
