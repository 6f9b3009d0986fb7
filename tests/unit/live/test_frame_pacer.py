"""FramePacer: frames at the interval while cheap, spaced to hold the CPU share when not."""

from __future__ import annotations

import pytest

from neurotui.live.budget import FramePacer


def pacer_on(costs: list[float]) -> FramePacer:
    """A pacer whose process has spent `costs` CPU seconds in turn before each frame's end."""
    clock = iter([0.0, *[sum(costs[:i + 1]) for i in range(len(costs))]])
    return FramePacer(0.025, cpu_time=lambda: next(clock))


def test_cheap_frames_keep_the_interval_and_dear_ones_hold_the_share() -> None:
    pacer = pacer_on([0.01, 0.02, 0.1, 0.05])
    assert pacer.next_in(2.0) == 2.0  # the first frame's end: nothing measured yet
    assert pacer.next_in(2.0) == 2.0  # 10 ms: 0.5% at 2 s
    assert pacer.next_in(2.0) == 2.0  # 20 ms: 1%
    assert pacer.next_in(2.0) == pytest.approx(4.0)  # 100 ms: 2.5% only every 4 s
    assert pacer.next_in(2.0) == 2.0  # 50 ms: exactly 2.5% at 2 s


def test_a_first_read_does_not_count_and_the_spacing_is_bounded() -> None:
    pacer = pacer_on([3.0, 3.0])
    pacer.next_in(2.0)
    assert pacer.next_in(2.0, count=False) == 2.0  # an attach's first read of a long run
    assert pacer.next_in(2.0) == 10.0  # at most 5 intervals apart, however dear
