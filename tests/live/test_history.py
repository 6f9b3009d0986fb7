"""The step-time history's scale: set by the steady steps, compile and warm-up steps apart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from neurotui.live.clock import FixedClock
from neurotui.live.history import RunHistory, StepScale
from neurotui.live.model import DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus

XLA_SAMPLE = Path(__file__).resolve().parents[2] / "sessions" / "sample-xla-cpu"


def steps(h: RunHistory, t0: float, times: list[float], warmup: int = 0) -> float:
    """Steps back to back from `t0` (the first `warmup` of them warm-up); returns the end."""
    dt = np.asarray(times, dtype=float)
    t = t0 + np.cumsum(dt)
    past = np.arange(len(dt)) >= warmup
    h.add(t, dt, np.full(len(dt), 16.0), past)
    return float(t[-1])


def shown(scale: StepScale) -> list[float]:
    return [x for x in scale.shown if math.isfinite(x)]


def test_a_compiled_first_step_does_not_set_the_scale() -> None:
    h = RunHistory(0.0)
    end = steps(h, 0.0, [4.85] + [0.030] * 1000, warmup=10)
    scale = h.series(end).scale
    assert scale is not None
    assert scale.warmup_above == 1 and scale.highest == 4.85
    assert (scale.compile_spans, scale.slow_spans) == (0, 0)
    assert scale.above[4] and sum(scale.above) == 1  # the bucket the step ended in
    assert max(shown(scale)) < 0.031  # the steady band alone sets the axis
    assert all(math.isnan(x) for x in scale.shown[:4])  # the compiled step's 4.85 s
    assert abs(scale.shown[4] - 0.030) < 1e-9  # its bucket's other steps: drawn to scale
    # The series itself still says what happened there (other views draw it their way).
    assert h.series(end).step_time[4] > 0.9  # (the mean of that bucket's six steps)


def test_fast_steps_sharing_a_bucket_with_a_compiled_step_are_drawn_to_scale() -> None:
    h = RunHistory(0.0)
    end = steps(h, 0.0, [0.9] + [0.030] * 200, warmup=10)
    scale = h.series(end).scale
    assert scale is not None and scale.above[0] and scale.warmup_above == 1
    assert abs(scale.shown[0] - 0.030) < 1e-9


def test_a_regression_of_a_few_percent_stays_on_the_scale() -> None:
    h = RunHistory(0.0)
    t = steps(h, 0.0, [0.030] * 1000)
    t = steps(h, t, [0.0306] * 1000)
    end = steps(h, t, [0.039] * 300)  # even 30% slower: a real change, shown to scale
    scale = h.series(end).scale
    assert scale is not None and not scale.apart
    assert max(shown(scale)) > 0.0389


def test_a_slow_span_in_steady_state_is_apart_and_a_compile_event_names_it() -> None:
    h = RunHistory(0.0)
    t = steps(h, 0.0, [0.030] * 1000)  # 30 s
    spike = steps(h, t, [2.0])  # a steady step of 2 s (an evaluation, a recompilation)
    end = steps(h, spike, [0.030] * 1000)
    scale = h.series(end).scale
    assert scale is not None
    assert (scale.warmup_above, scale.compile_spans, scale.slow_spans) == (0, 0, 1)
    assert scale.highest == 2.0 and max(shown(scale)) < 0.031
    compiled = h.series(end, np.array([spike - 1.0])).scale  # during that step
    assert compiled is not None and (compiled.compile_spans, compiled.slow_spans) == (1, 0)
    elsewhere = h.series(end, np.array([5.0])).scale
    assert elsewhere is not None and (elsewhere.compile_spans, elsewhere.slow_spans) == (0, 1)


def test_while_warming_up_the_warm_up_steps_are_the_reference() -> None:
    h = RunHistory(0.0)
    t = steps(h, 0.0, [4.8, 4.8], warmup=10)
    scale = h.series(t).scale
    assert scale is not None and not scale.apart  # nothing faster seen yet: all to scale
    end = steps(h, t, [0.030] * 8, warmup=10)
    later = h.series(end).scale
    assert later is not None and later.warmup_above == 2 and max(shown(later)) < 0.031


def test_the_scale_survives_wider_buckets() -> None:
    h = RunHistory(0.0, max_buckets=8)
    end = steps(h, 0.0, [3.0] + [0.5] * 100, warmup=10)  # 53 s: 8 s buckets
    series = h.series(end)
    assert h.bucket_s == 8.0 and series.scale is not None
    assert series.scale.above[0] and series.scale.warmup_above == 1
    assert max(shown(series.scale)) < 0.51


def test_no_timed_step_no_scale() -> None:
    h = RunHistory(0.0)
    h.add(np.array([0.5]), np.array([math.nan]), np.array([8.0]))
    assert h.series(2.0).scale is None


def test_the_xla_samples_steady_steps_set_its_scale() -> None:
    """The shipped sample: two 4.8 s compiled steps per rank, then ~30 ms steps."""
    meta = json.loads((XLA_SAMPLE / "meta.json").read_text())
    model = DashboardModel(SessionReader(XLA_SAMPLE), FixedClock(meta["ended_at"]),
                           status=lambda: SessionStatus("completed", False), throttle=False)
    history = model.refresh().throughput.history
    assert history is not None and history.scale is not None
    scale = history.scale
    assert scale.warmup_above >= 4 and scale.highest > 4.5  # both ranks' compiled steps
    assert max(shown(scale)) < 0.05  # the axis is the steady steps' (~30 ms)
