"""The figures: throughput, step times, phase and cost, as pure functions of the session.

Inputs are what the session reader produces (see neurotui/session/FORMAT.md):

- steps: one row per rank per step, columns t, rank, step, samples, loss, dt, src, attempt;
- compiles: compile events, columns t, rank (may be null), what;
- meta: the meta.json dict (started_at, ended_at, exit, config).

No I/O and no clocks: "now" is always a parameter, so the same code serves a live run and a
replay at any point in time. Every figure that cannot be known (no price, no steps, a zero or
NaN input) is None, never a made-up number and never a ZeroDivisionError.

Each figure is defined once, in the module named for it. Where the live model needs it kept
up as rows arrive, the incremental form sits beside the batch form and both use one rule;
tests/unit/metrics/test_metrics_forms.py holds each pair equal on random runs in random pieces:

- steptime: step time and warm-up (`with_step_time`, `past_warmup` | `StepClock`);
- steady: the steady state (`steady_state` | `SteadyTracker`);
- throughput: samples/s now (`current_throughput` | `window_throughput`), over time, totals;
- ranks: per-rank medians, stragglers, stalled ranks (`rank_step_times`, `stalled_ranks` |
  `rank_median`, `stalled`);
- phases: where the run is (`phase` | `phase_of`);
- cost: money, samples per dollar, projections; sources: where the steps come from;
- breakdown: where a step's time goes, per step phase (`step_breakdown`,
  `breakdown_history` | `BreakdownTracker`; held equal in tests/unit/metrics/test_breakdown.py), and
  each phase's steady median for compare (`steady_phase_medians`).

May import: numpy, pandas, neurotui.defaults. Nothing else of neurotui imports into here.
"""

from neurotui.defaults import DEFAULT_MIN_STALL_S, DEFAULT_STALL_FACTOR, DEFAULT_WARMUP_STEPS
from neurotui.metrics.common import finite_or_none
from neurotui.metrics.cost import (
    Projection,
    all_in_samples_per_dollar,
    cost_per_million_samples,
    cost_so_far,
    per_epoch,
    project_remaining,
    project_to_step,
    relative_price_performance,
    samples_per_dollar,
)
from neurotui.metrics.phases import PHASES, Phase, exit_phase, phase, phase_of, run_is_over
from neurotui.metrics.ranks import (
    DEFAULT_STRAGGLER_THRESHOLD,
    find_stragglers,
    median_steps,
    rank_median,
    rank_step_times,
    stalled,
    stalled_ranks,
)
from neurotui.metrics.sources import (
    SAMPLES_FROM_NAMES,
    STEP_SOURCE_NAMES,
    step_sources,
    steps_sources,
)
from neurotui.metrics.steady import (
    SteadyState,
    SteadyTracker,
    compile_hits,
    steady_state,
    steady_step_time_without_data,
    steady_steps,
)
from neurotui.metrics.steptime import StepClock, past_warmup, with_step_time
from neurotui.metrics.throughput import (
    DEFAULT_BUCKET_S,
    DEFAULT_WINDOW_S,
    current_throughput,
    latest_step,
    throughput_series,
    total_rate,
    total_samples,
    window_rates,
    window_throughput,
)

__all__ = [
    "DEFAULT_BUCKET_S",
    "DEFAULT_MIN_STALL_S",
    "DEFAULT_STALL_FACTOR",
    "DEFAULT_STRAGGLER_THRESHOLD",
    "DEFAULT_WARMUP_STEPS",
    "DEFAULT_WINDOW_S",
    "PHASES",
    "SAMPLES_FROM_NAMES",
    "STEP_SOURCE_NAMES",
    "Phase",
    "Projection",
    "SteadyState",
    "SteadyTracker",
    "StepClock",
    "all_in_samples_per_dollar",
    "compile_hits",
    "cost_per_million_samples",
    "cost_so_far",
    "current_throughput",
    "exit_phase",
    "find_stragglers",
    "finite_or_none",
    "latest_step",
    "median_steps",
    "past_warmup",
    "per_epoch",
    "phase",
    "phase_of",
    "project_remaining",
    "project_to_step",
    "rank_median",
    "rank_step_times",
    "relative_price_performance",
    "run_is_over",
    "samples_per_dollar",
    "stalled",
    "stalled_ranks",
    "steady_state",
    "steady_step_time_without_data",
    "steady_steps",
    "step_sources",
    "steps_sources",
    "throughput_series",
    "total_rate",
    "total_samples",
    "window_rates",
    "window_throughput",
    "with_step_time",
]
