"""Prints torch-neuronx-style step lines, as the torch-neuronx BERT example does, every
STEP_S seconds, and writes its own wall clock per step to TRUTH_FILE (the test's truth).
Knows nothing about neurotui; needs no torch (torchrun launches it)."""

import json
import os
import time

STEP_S = float(os.environ.get("STEP_S", "0.05"))
STEPS = int(os.environ.get("STEPS", "60"))
BATCH = 16
rank = int(os.environ.get("RANK", "0"))
truth = []
start = time.time()
for step in range(1, STEPS + 1):
    time.sleep(max(0.0, start + step * STEP_S - time.time()))
    now = time.time()
    dt = now - truth[-1] if truth else now - start
    truth.append(now)
    print(f"LOG {time.strftime('%a %b %d %H:%M:%S %Y')} - (0, {step}) step_loss : "
          f"{9.0 - step / 100:.4f}  learning_rate : 1.50e-05  throughput : {BATCH / dt:.2f}",
          flush=True)
with open(f"{os.environ['TRUTH_FILE']}.{rank}", "w") as f:
    json.dump(truth, f)
