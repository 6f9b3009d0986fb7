"""The memory creep watch's rule (Theil-Sen slope, steadiness, a growth that levels off) and
its reading of `procs` rows, with a real process's RANK."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from neurotui.session import layout
from neurotui.session.writer import EventWriter
from neurotui.supervisor.memwatch import MemoryCreepWatch, judge, kendall_tau, theil_sen

MIB = 1 << 20
WINDOW_S = 600.0


def _series(rss_at: Callable[[float], float], seconds: float = WINDOW_S,
            seed: int = 1) -> list[tuple[float, float]]:
    """A sample a second, with the noise of a real process's resident memory (a few MiB)."""
    noise = random.Random(seed)
    return [(float(t), rss_at(t) + noise.uniform(-3, 3) * MIB) for t in range(int(seconds) + 1)]


def test_the_slopes_are_robust_to_a_drop() -> None:
    points = [(float(t), 2.0 * t) for t in range(20)]
    assert theil_sen(points) == 2.0
    assert kendall_tau(points) == 1.0
    points[10] = (10.0, -500.0)  # one garbage collection's drop
    assert theil_sen(points) == 2.0
    assert kendall_tau(points) > 0.8


def test_a_steady_leak_creeps_at_its_rate() -> None:
    found = judge(_series(lambda t: 1000 * MIB + 20 * MIB * t / 60), WINDOW_S)
    assert found is not None
    rate, recent, growth, tau = found
    assert 19 < rate < 21 and 19 < recent < 21
    assert 190 < growth < 210
    assert tau > 0.9


def test_noise_around_a_level_does_not_creep() -> None:
    assert judge(_series(lambda t: 1000 * MIB), WINDOW_S) is None


def test_warm_up_growth_that_levels_off_does_not_creep() -> None:
    # 400 MiB over the first 4 minutes, then flat: steady growth over the window as a whole,
    # none in its last half.
    found = judge(_series(lambda t: 1000 * MIB + min(t, 240) / 240 * 400 * MIB), WINDOW_S)
    assert found is None


def test_slow_growth_or_too_little_of_it_does_not_creep() -> None:
    assert judge(_series(lambda t: 1000 * MIB + 2 * MIB * t / 60), WINDOW_S) is None  # 2 MiB/min
    assert judge(_series(lambda t: 1000 * MIB + 20 * MIB * t / 60, seconds=100),
                 WINDOW_S) is None  # not a window's worth yet


def test_a_sawtooth_is_not_steady() -> None:
    # A cache filled and emptied every 100 s: it grows fast, then falls back.
    found = judge(_series(lambda t: 1000 * MIB + (t % 100) * 4 * MIB), WINDOW_S,
                  min_mb_per_min=1.0)
    assert found is None


def test_the_watch_names_the_rank_and_the_time_left() -> None:
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            env={**os.environ, "RANK": "3"})
    try:
        watch = MemoryCreepWatch(window_s=60.0)
        healthy = rank.pid + 1_000_000  # (a pid no process has: its rank is unknown)
        for t in range(61):
            rows = [{"pid": rank.pid, "role": "rank", "rss": 500 * MIB + t * MIB},
                    {"pid": healthy, "role": "rank", "rss": 500 * MIB + math.sin(t) * MIB},
                    {"pid": 1, "role": "launcher", "rss": 10 * MIB + t * MIB}]
            watch.add(float(t), rows, {"mem_used": 6000 * MIB, "mem_total": 8000 * MIB})
        raised = watch.alert(60.0)
        assert raised is not None
        assert raised.title == "host memory creeping up on rank 3"
        assert raised.evidence[0].startswith(f"rank 3 (pid {rank.pid}): resident 560 MiB, "
                                             "growing 60.0 MiB/min over the last 1 min")
        assert raised.evidence[-1] == ("the host's 2,000 MiB free would be used up in 33 min "
                                       "at 60.0 MiB/min")
        # The rank exits (its pid is no longer in the rows): forgotten, no alert.
        watch.add(66.0, [{"pid": healthy, "role": "rank", "rss": 500 * MIB}])
        assert watch.alert(66.0) is None
    finally:
        rank.kill()
        rank.wait()


def test_device_memory_creeps_by_the_same_rule(tmp_path: Path) -> None:
    """`neuron` and `gpu` records as the collectors write them (EventWriter, events.jsonl):
    a NeuronCore whose runtime's memory grows names its rank; a GPU that fills says when it
    will be full; the flat ones are not named."""
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            env={**os.environ, "RANK": "5"})
    try:
        writer = EventWriter(tmp_path / layout.EVENTS)
        watch = MemoryCreepWatch(window_s=60.0)
        for t in range(61):
            writer.write("neuron", t=float(t), cores=[
                {"core": 2, "pid": rank.pid, "util": 50.0, "mem_device": 900 * MIB + t * MIB},
                {"core": 3, "pid": rank.pid + 1_000_000, "util": 50.0, "mem_device": 900 * MIB},
                {"core": 4, "pid": None, "util": None, "mem_device": None}])
            writer.write("gpu", t=float(t), gpus=[
                {"index": 0, "name": "x", "util": 90, "mem_used": 4000 * MIB + 2 * t * MIB,
                 "mem_total": 16000 * MIB, "power_w": 300},
                {"index": 1, "name": "x", "util": 90, "mem_used": 4000 * MIB,
                 "mem_total": 16000 * MIB, "power_w": 300}])
            writer.write_plain("host", t=float(t), cpu=[1.0], mem_used=1, mem_total=2, load=None)
            if t % 20 == 0:  # read on as it is written, a few records at a time
                writer.flush()
                watch.read_devices(tmp_path)
        writer.flush()
        writer.close()
        watch.read_devices(tmp_path)
        assert watch.alert(60.0) is None  # no rank's host memory was given
        raised = watch.device_alert(60.0)
        assert raised is not None
        assert raised.title == "device memory creeping up on GPU 0, NeuronCore 2"
        assert raised.evidence[0].startswith("GPU 0: 4,120 MiB in use, growing 120.0 MiB/min")
        assert raised.evidence[0].endswith("its 11,880 MiB free would be used up in 99 min")
        assert raised.evidence[1].startswith(f"NeuronCore 2 (rank 5, pid {rank.pid}): 960 MiB "
                                             "in use, growing 60.0 MiB/min")
        watch.close()
    finally:
        rank.kill()
        rank.wait()


def test_growth_before_the_steady_steps_is_not_kept() -> None:
    """Memory grows while the ranks warm up (imports, the model built, graphs compiled), then
    levels off: with samples kept only from the steady steps on, a short window is not fooled
    by it; a leak in the steady steps is still told."""
    watch = MemoryCreepWatch(window_s=10.0)
    pid = 4_000_000  # (no such process: its rank is unknown)
    for t in range(30):
        steady = t >= 12  # warm-up: 30 MiB a second for 12 s, flat after
        rss = 300 * MIB + min(t, 12) * 30 * MIB + math.sin(t) * MIB
        watch.add(float(t), [{"pid": pid, "role": "rank", "rss": rss}], steady=steady)
        assert watch.alert(float(t)) is None, t
    for t in range(30, 45):  # then a leak: 20 MiB a second
        rss = 660 * MIB + (t - 30) * 20 * MIB
        watch.add(float(t), [{"pid": pid, "role": "rank", "rss": rss}])
    raised = watch.alert(45.0)
    assert raised is not None and raised.title == f"host memory creeping up on pid {pid}"
