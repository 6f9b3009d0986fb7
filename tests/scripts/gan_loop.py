"""A GAN-style loop on the CPU: each iteration takes one batch of "real" data from a DataLoader
and steps two optimizers, the discriminator's then the generator's. Knows nothing about
neurotui. Its own truth goes to "$TRUTH_FILE.<rank>" (JSON): per iteration, the wall clock
after the discriminator's step and the real samples taken."""

import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCH = int(os.environ.get("BATCH", "16"))
EPOCHS = int(os.environ.get("EPOCHS", "2"))
ROWS = int(os.environ.get("ROWS", "152"))  # 9 full batches of 16 and one of 8 per epoch
LATENT, DIM = 8, 16

torch.manual_seed(0)
torch.set_num_threads(1)
real = DataLoader(TensorDataset(torch.randn(ROWS, DIM) + 2.0), batch_size=BATCH, shuffle=True)
gen = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, DIM))
disc = nn.Sequential(nn.Linear(DIM, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_g = torch.optim.RMSprop(gen.parameters(), lr=2e-4)
bce = nn.BCEWithLogitsLoss()

truth = []
for _ in range(EPOCHS):
    for (x,) in real:
        n = len(x)
        fake = gen(torch.randn(n, LATENT))
        loss_d = bce(disc(x), torch.ones(n, 1)) + bce(disc(fake.detach()), torch.zeros(n, 1))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        truth.append({"t": time.time(), "samples": n})
        loss_g = bce(disc(fake), torch.ones(n, 1))
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()

with open(f"{os.environ['TRUTH_FILE']}.{os.environ.get('RANK', '0')}", "w") as f:
    json.dump(truth, f)
print(f"{len(truth)} iterations", flush=True)
