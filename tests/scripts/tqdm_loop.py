"""A plain loop with a tqdm progress bar (on stderr, redrawn with carriage returns), a step
every STEP_S seconds, two epochs; writes its own wall clock per step to TRUTH_FILE.
Knows nothing about neurotui."""

import json
import os
import time

from tqdm import tqdm

STEP_S = float(os.environ.get("STEP_S", "0.05"))
PER_EPOCH = int(os.environ.get("PER_EPOCH", "40"))
truth = []
start = time.time()
done = 0
for epoch in range(2):
    for _ in tqdm(range(PER_EPOCH), desc=f"Epoch {epoch}"):
        done += 1
        time.sleep(max(0.0, start + done * STEP_S - time.time()))
        truth.append(time.time())
with open(os.environ["TRUTH_FILE"], "w") as f:
    json.dump(truth, f)
