"""A PyTorch Lightning run of a tiny MLP on synthetic in-memory data, on the CPU, one process,
with gradient accumulation. Knows nothing about neurotui.

Its own truth goes to "$TRUTH_FILE.<rank>" (JSON): the Trainer's global step, the batch, the
accumulation, the epochs, per epoch the samples of every batch training_step saw, and the wall
clock at the end of each batch whose optimizer step raised the global step."""

import json
import os
import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCH = int(os.environ.get("BATCH", "8"))
ACCUM = int(os.environ.get("ACCUM", "2"))
EPOCHS = int(os.environ.get("EPOCHS", "2"))
ROWS = int(os.environ.get("ROWS", "100"))  # 12 full batches of 8 and one of 4 per epoch


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
        self.seen: list[list[int]] = []  # per epoch, the samples of each batch
        self.step_times: list[float] = []

    def on_train_epoch_start(self) -> None:
        self.seen.append([])

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.seen[-1].append(len(x))
        return nn.functional.cross_entropy(self.net(x), y)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.trainer.global_step > len(self.step_times):  # the optimizer just stepped
            self.step_times.append(time.time())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(ROWS, 32), torch.randint(0, 4, (ROWS,)))
loader = DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=0)
model = Tiny()
trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=EPOCHS,
                    accumulate_grad_batches=ACCUM, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False,
                    num_sanity_val_steps=0)
trainer.fit(model, loader)

rank = int(os.environ.get("RANK", "0"))
with open(f"{os.environ['TRUTH_FILE']}.{rank}", "w") as f:
    json.dump({"global_step": trainer.global_step, "batch": BATCH, "accum": ACCUM,
               "epochs": EPOCHS, "seen": model.seen, "step_times": model.step_times}, f)
print(f"global_step {trainer.global_step}, {sum(map(sum, model.seen))} samples", flush=True)
