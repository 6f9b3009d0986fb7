"""A job that floods its stdout: FLOOD_MB_S megabytes a second of ordinary lines for FLOOD_S
seconds, with a step line (`step N loss X`) every STEP_S seconds among them. Knows nothing
about neurotui. Its own truth goes to $TRUTH_FILE (JSON), written just before it exits: the
wall clock of each step line's write, the bytes it wrote and the time it ended."""

import json
import os
import time

RATE = float(os.environ.get("FLOOD_MB_S", "50")) * 1e6
SECONDS = float(os.environ.get("FLOOD_S", "15"))
STEP_S = float(os.environ.get("STEP_S", "0.1"))

LINE = 100
# Lines of LINE bytes, holding none of the words a step line has; every write ends a line.
FILLER = b"".join(
    (b"flood %06d: activations mean 0.%04d std 1.%04d max %d.%02d (debug dump of a tensor)"
     % (i, i * 37 % 10000, i * 91 % 10000, i % 9, i % 97)).ljust(LINE - 1, b".") + b"\n"
    for i in range(1 << 12))
WRITE = (64 << 10) // LINE * LINE  # the filler goes out in writes of about 64 KiB


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


steps: list[float] = []
written = 0
start = time.time()
step = 0
while time.time() < start + SECONDS:
    step += 1
    write_all(b"step %d loss %.4f\n" % (step, 1.0 / step))
    steps.append(time.time())
    # The filler of this step, then a sleep until the next: the rate is held step by step.
    due = int(RATE * STEP_S) // LINE * LINE
    written += due
    offset = (step * 7919) % (len(FILLER) // LINE - WRITE // LINE) * LINE
    while due > 0:
        chunk = FILLER[offset:offset + min(WRITE, due)]
        write_all(chunk)
        due -= len(chunk)
    time.sleep(max(0.0, start + step * STEP_S - time.time()))

end = time.time()
with open(os.environ["TRUTH_FILE"], "w") as f:
    json.dump({"steps": steps, "filler_bytes": written, "end": end}, f)
