"""A plain loop that records each step's loss through neurotui.probe (and prints nothing):
its loss turns NaN at NAN_AT, as a diverged model's does, and stays NaN."""

import math
import os
import time

from neurotui import probe

STEPS = int(os.environ.get("STEPS", "60"))
NAN_AT = int(os.environ.get("NAN_AT", "40"))
for step in range(1, STEPS + 1):
    time.sleep(0.05)
    loss = float("nan") if step >= NAN_AT else 2.0 + 0.1 * math.sin(step)
    probe.step(samples=8, loss=loss)
