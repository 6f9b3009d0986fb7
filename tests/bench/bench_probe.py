"""Cost of one probe.step() call: target a few microseconds (it sits in the training loop)."""

from __future__ import annotations

import os
import statistics
import tempfile
import timeit

from neurotui import probe


def per_call_us(fn, calls: int = 100_000, repeats: int = 7) -> tuple[float, float]:
    times = [timeit.timeit(fn, number=calls) / calls * 1e6 for _ in range(repeats)]
    return statistics.median(times), min(times)


def main() -> None:
    os.environ.pop("NEUROTUI_SESSION", None)
    probe._reset_for_tests()
    off = per_call_us(lambda: probe.step(16, 0.5))
    with tempfile.TemporaryDirectory() as session:
        os.environ["NEUROTUI_SESSION"] = session
        probe._reset_for_tests()
        on = per_call_us(lambda: probe.step(16, 0.5))
        probe._reset_for_tests()
        phases = {"data": 0.01, "forward": 0.02, "backward": 0.03, "optimizer": 0.01}
        with_phases = per_call_us(lambda: probe.step(16, 0.5, phases=phases))
        probe._reset_for_tests()
    print("probe.step() per call (median / best of 7 x 100k calls):")
    print(f"  outside neurotui (no-op):   {off[0]:6.2f} us / {off[1]:6.2f} us")
    print(f"  in a session:               {on[0]:6.2f} us / {on[1]:6.2f} us")
    print(f"  in a session, with phases:  {with_phases[0]:6.2f} us / {with_phases[1]:6.2f} us")


if __name__ == "__main__":
    main()
