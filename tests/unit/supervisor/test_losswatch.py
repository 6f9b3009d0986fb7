"""The loss watch's rules (non-finite loss, spike), and its reading of the records as the
session's writers write them (EventWriter's events.jsonl, probe.step()'s file)."""

from __future__ import annotations

import math
from pathlib import Path

from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.session import layout
from neurotui.session.writer import EventWriter
from neurotui.supervisor.losswatch import LossWatch


def _steady(watch: LossWatch, rank: int, steps: range, loss: float = 2.0) -> None:
    for step in steps:
        # A loss that wanders a little about its level, as a real one does.
        watch.add(rank, step, loss * (1 + 0.05 * math.sin(step)))


def test_a_nan_loss_names_its_first_step_and_rank(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path)
    _steady(watch, 0, range(1, 40))
    _steady(watch, 1, range(1, 45))
    assert watch.alerts() == (None, None)
    watch.add(1, 45, None, nonfinite="nan")
    watch.add(1, 46, None, nonfinite="nan")
    watch.add(0, 47, None, nonfinite="inf")
    nonfinite, spike = watch.alerts()
    assert spike is None
    assert nonfinite is not None and nonfinite.severity == "error"
    assert nonfinite.title == "loss turned nan at step 45 on rank 1 (ranks 0, 1 in all)"
    assert nonfinite.evidence[0].startswith("rank 1: loss nan at step 45 (a log line); "
                                            "the last finite loss: ")
    assert "at step 44" in nonfinite.evidence[0]
    assert nonfinite.evidence[1].startswith("rank 0: loss inf at step 47")


def test_a_nan_stays_told_when_the_loss_comes_back(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path)
    watch.add(0, 3, None, nonfinite="nan")
    _steady(watch, 0, range(4, 30))
    nonfinite, _ = watch.alerts()
    assert nonfinite is not None and "no finite loss before it" in nonfinite.evidence[0]


def test_a_spike_past_warm_up_is_told_and_ends_a_window_later(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path, spike_factor=3.0, window=50, min_history=20)
    _steady(watch, 0, range(1, 61))
    watch.add(0, 61, 9.0)  # 4.5x a median of about 2
    _, spike = watch.alerts()
    assert spike is not None and spike.severity == "warning"
    assert spike.title == "loss spike on rank 0: above 3x the recent median"
    assert spike.evidence[0].startswith("rank 0: loss 9 at step 61 = 4.")
    assert "of its last 50 losses" in spike.evidence[0]
    _steady(watch, 0, range(62, 110))
    assert watch.alerts()[1] is not None  # 48 steps on: still within the window
    _steady(watch, 0, range(110, 112))
    assert watch.alerts() == (None, None)


def test_a_noisy_loss_near_zero_is_not_told_at_each_swing(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path, spike_factor=3.0, window=50, min_history=20)
    swings = [0.001, 0.0012, 0.0009, 0.0011, 0.001, 0.004]  # every sixth: 4x the median
    for step in range(11, 200):
        watch.add(0, step, swings[step % 6])
    assert watch.spikes == []  # each swing is no higher than the window's swings before it
    watch.add(0, 200, 0.05)  # a real spike: 50x the median, 12x the swings
    assert [spike.step for spike in watch.spikes] == [200]


def test_no_spike_below_the_factor_in_warm_up_or_on_little_history(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path, spike_factor=3.0, window=50, min_history=20)
    watch.add(0, 1, 100.0)  # warm-up: losses fall fast from a high start
    _steady(watch, 0, range(2, DEFAULT_WARMUP_STEPS + 1))
    watch.add(0, DEFAULT_WARMUP_STEPS + 1, 50.0)  # no history past warm-up yet
    _steady(watch, 0, range(DEFAULT_WARMUP_STEPS + 2, 80))
    watch.add(0, 80, 5.5)  # 2.75x: below the factor
    assert watch.alerts() == (None, None)
    watch.add(0, 81, 6.5)  # 3.25x
    assert watch.alerts()[1] is not None


def test_a_negative_median_has_no_times(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path)
    _steady(watch, 0, range(1, 80), loss=-2.0)
    watch.add(0, 80, 50.0)
    assert watch.alerts() == (None, None)


def test_a_restart_starts_the_history_again(tmp_path: Path) -> None:
    watch = LossWatch(tmp_path)
    _steady(watch, 0, range(1, 60))
    watch.add(0, 60, 30.0)
    assert watch.alerts()[1] is not None
    watch.new_attempt(1)
    assert watch.alerts()[1] is None


def test_it_reads_the_records_the_writers_write(tmp_path: Path) -> None:
    """events.jsonl as EventWriter writes a log step (a NaN as null + nonfinite), and a
    probe.step() file's lines; other records and a torn line are passed over."""
    writer = EventWriter(tmp_path / layout.EVENTS)
    for step in range(1, 40):
        writer.write("step", rank=0, step=step, samples=8, loss=1.5, dt=None, phases=None,
                     src="log", attempt=0)
    writer.write("host", cpu=[1.0], mem_used=1, mem_total=2, load=None)
    writer.write("warning", source="x", message='a "loss": 5 said in a message')
    writer.write("step", rank=0, step=40, samples=8, loss=float("nan"), dt=None, phases=None,
                 src="log", attempt=0)
    writer.flush()
    writer.close()
    layout.probe_path(tmp_path, 1).parent.mkdir()
    lines = [f'{{"t":{step}.0,"kind":"step","rank":1,"step":{step},"samples":8,'
             f'"loss":2.0,"dt":0.1,"phases":null,"src":"probe","attempt":0}}\n'
             for step in range(1, 60)]
    lines.append('{"t":60.0,"kind":"step","rank":1,"step":60,"samples":8,"loss":12.0,'
                 '"dt":0.1,"phases":null,"src":"probe","attempt":0}\n')
    layout.probe_path(tmp_path, 1).write_text("".join(lines) + '{"t":61.0,"kind":"st')
    watch = LossWatch(tmp_path)
    watch.read()
    nonfinite, spike = watch.alerts()
    assert nonfinite is not None
    assert nonfinite.title == "loss turned nan at step 40 on rank 0"
    assert "the last finite loss: 1.5 at step 39" in nonfinite.evidence[0]
    assert spike is not None and spike.title == "loss spike on rank 1: above 3x the recent median"
    assert "(probe.step())" in spike.evidence[0]
    watch.read()  # read on from where it stopped: nothing is counted twice
    assert len(watch.spikes) == 1
    watch.close()


def test_an_adopting_supervisor_reads_on_from_the_end(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path / layout.EVENTS)
    writer.write("step", rank=0, step=5, samples=8, loss=float("inf"), dt=None, phases=None,
                 src="log", attempt=0)
    writer.flush()
    watch = LossWatch(tmp_path)
    watch.skip_history()
    watch.read()
    assert watch.alerts() == (None, None)
    writer.write("step", rank=0, step=6, samples=8, loss=float("-inf"), dt=None, phases=None,
                 src="log", attempt=0)
    writer.flush()
    writer.close()
    watch.read()
    nonfinite, _ = watch.alerts()
    assert nonfinite is not None and nonfinite.title == "loss turned -inf at step 6 on rank 0"
    watch.close()


def test_the_median_of_the_window_is_the_median_of_its_last_losses(tmp_path: Path) -> None:
    """The sorted window kept by bisect against statistics.median of the last losses."""
    import random
    import statistics

    watch = LossWatch(tmp_path, spike_factor=1.5, window=7, min_history=3)
    noise = random.Random(5)
    kept: list[float] = []
    for step in range(DEFAULT_WARMUP_STEPS + 1, 400):
        loss = noise.choice([1.0, 2.0, 2.0, 3.0]) * noise.uniform(0.5, 1.5)
        spikes = len(watch.spikes)
        watch.add(0, step, loss)
        window = kept[-7:]
        expected = (len(window) >= 3 and loss > 1.5 * statistics.median(window)
                    and loss > max(window))
        assert (len(watch.spikes) > spikes) == expected, (step, window, loss)
        if expected:
            assert watch.spikes[-1].median == statistics.median(window)
        kept.append(loss)
    watch.add(0, 400, float("inf"))  # a float a caller passed, not a record: told as inf
    assert watch.alerts()[0] is not None
