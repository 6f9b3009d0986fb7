"""A Hugging Face `transformers` Trainer run of a tiny, randomly initialised GPT-2 built from a
config (nothing downloaded: no weights, no tokenizer) on a synthetic in-memory dataset, on the
CPU; under torchrun it trains data-parallel (gloo). Knows nothing about neurotui.

Its own truth goes to "$TRUTH_FILE.<rank>" (JSON): the Trainer's global step, the per-device
batch, the gradient accumulation steps, the epochs, the samples this rank's loader holds per
epoch, the wall clock at each optimizer step (from a TrainerCallback's on_step_end) and the
losses the Trainer logged (and printed, on rank 0), by step."""

import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# torch-xla is installed beside torch here: without this, accelerate picks XLA over gloo.
os.environ.setdefault("USE_TORCH_XLA", "0")

import torch
from torch.utils.data import Dataset
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

BATCH = int(os.environ.get("BATCH", "4"))
ACCUM = int(os.environ.get("ACCUM", "2"))
EPOCHS = int(os.environ.get("EPOCHS", "2"))
ROWS = int(os.environ.get("ROWS", "96"))  # in the whole dataset (all ranks)
SEQ = 16
VOCAB = 64


class Synthetic(Dataset):
    """Random token ids, the same on every rank: the Trainer's sampler splits them."""

    def __init__(self, rows: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (rows, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Clock(TrainerCallback):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.time())


torch.manual_seed(0)
torch.set_num_threads(1)
config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=1, n_head=2)
model = GPT2LMHeadModel(config)
args = TrainingArguments(
    output_dir=os.environ.get("OUTPUT_DIR", "hf-out"),
    per_device_train_batch_size=BATCH,
    gradient_accumulation_steps=ACCUM,
    num_train_epochs=EPOCHS,
    learning_rate=1e-3,
    logging_steps=5,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
    ddp_backend="gloo" if "WORLD_SIZE" in os.environ else None,  # torchrun or one process
    dataloader_num_workers=0,
    disable_tqdm=True,
    seed=0,
)
clock = Clock()
trainer = Trainer(model=model, args=args, train_dataset=Synthetic(ROWS), callbacks=[clock])
trainer.train()

rank = int(os.environ.get("RANK", "0"))
loader = trainer.get_train_dataloader()
per_epoch = sum(len(b["input_ids"]) for b in loader)  # this rank's samples in one epoch
with open(f"{os.environ['TRUTH_FILE']}.{rank}", "w") as f:
    json.dump({"global_step": trainer.state.global_step, "batch": BATCH, "accum": ACCUM,
               "epochs": EPOCHS, "samples_per_epoch": per_epoch,
               "world": args.world_size, "step_times": clock.times,
               "logged_losses": {str(entry["step"]): entry["loss"]
                                 for entry in trainer.state.log_history if "loss" in entry}}, f)
print(f"rank {rank}: global_step {trainer.state.global_step}", flush=True)
