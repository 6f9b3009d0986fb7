"""A plain script that prints a long line per step and records each step through
neurotui.probe: enough output to fill a small disk. Writes how many steps it completed to
TRUTH_FILE (the test's truth: the job itself never noticed the full disk)."""

import os
import sys
import time

from neurotui import probe

STEP_S = float(os.environ.get("STEP_S", "0.02"))
STEPS = int(os.environ.get("STEPS", "500"))
# With CACHE_HIT_EVERY=N, a torch-neuronx compile-cache hit line every N steps too: a record
# the supervisor writes for every one (what a job loading its graphs from the cache prints).
CACHE_HIT_EVERY = int(os.environ.get("CACHE_HIT_EVERY", "0"))
start = time.time()
done = 0
for step in range(1, STEPS + 1):
    time.sleep(max(0.0, start + step * STEP_S - time.time()))
    print(f"step {step}/{STEPS} | loss {9.0 - step / 1000:.4f} | " + "x" * 400, flush=True)
    print(f"warning-like chatter on stderr for step {step}", file=sys.stderr, flush=True)
    if CACHE_HIT_EVERY and step % CACHE_HIT_EVERY == 0:
        print(f"2026-01-01 00:00:00.000000: INFO ||NEURON_CC_WRAPPER||: Using a cached neff at "
              f"/var/tmp/neuron-compile-cache/MODULE_{step}/model.neff. Exiting with a "
              "successfully compiled graph.", flush=True)
    probe.step(samples=16)
    done = step
with open(os.environ["TRUTH_FILE"], "w") as f:
    f.write(str(done))
