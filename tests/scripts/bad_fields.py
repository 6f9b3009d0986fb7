"""Step lines with a bad field (tests/unit/session/test_bad_fields.py): a plain script's
`step N loss X throughput T samples/s` whose throughput is negative at step 5, and our
runner's line (rank 1) whose samples are negative at step 6. Each step is to be recorded
without the bad field."""

from __future__ import annotations

import time

for step in range(1, 9):
    throughput = "-3.2" if step == 5 else "12.5"
    samples = "-16" if step == 6 else "16"
    print(f"step {step} loss 0.{step} throughput {throughput} samples/s", flush=True)
    print(f"neurotui-runner step={step} rank=1 samples={samples} loss=0.{step}", flush=True)
    time.sleep(0.05)
