"""Thresholds shared by the figures (metrics/), the live model and the supervisor's own
watch: one place, and no pandas needed to read them."""

DEFAULT_WARMUP_STEPS = 10
"""Steps 1..10 of each rank and attempt are warm-up, as in the reference study (11..N)."""
DEFAULT_STALL_FACTOR = 10.0
"""A rank is stalled after this many times its median step time without a step..."""
DEFAULT_MIN_STALL_S = 10.0
"""...and at least this long (log-parsed steps arrive in bursts)."""


def stall_limit_s(median_step_s: float, factor: float = DEFAULT_STALL_FACTOR,
                  min_silence_s: float = DEFAULT_MIN_STALL_S) -> float:
    """Seconds without a step after which a rank counts as stalled: the one rule of the
    batch figures, the live model and the supervisor's stall watch."""
    return max(float(min_silence_s), float(factor) * float(median_step_s))
