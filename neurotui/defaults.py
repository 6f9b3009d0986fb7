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

DEFAULT_LOSS_SPIKE_FACTOR = 3.0
"""A loss above this many times the median of its rank's recent losses is a spike..."""
DEFAULT_LOSS_SPIKE_WINDOW = 50
"""...of its last this many (finite) losses, past warm-up, once it has at least..."""
DEFAULT_LOSS_SPIKE_MIN_HISTORY = 20
"""...this many of them (a median of a few losses says little)."""

DEFAULT_CREEP_WINDOW_S = 600.0
"""Memory creep is judged over a rank's last this many seconds of resident memory..."""
DEFAULT_CREEP_MIN_MB_PER_MIN = 5.0
"""...growing at least this fast (Theil-Sen slope, MB/min) over the window and its last half
(warm-up growth that levels off stops counting within half a window)..."""
DEFAULT_CREEP_MIN_GROWTH_MB = 50.0
"""...by at least this much in all over the window..."""
DEFAULT_CREEP_MIN_TAU = 0.6
"""...steadily: Kendall's tau of time and memory at least this (1: every sample above the
ones before it; noise around a level is near 0)."""
