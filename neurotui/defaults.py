"""Thresholds shared by the batch figures (metrics.py), the live model and the supervisor's
own watch: one place, and no pandas needed to read them."""

DEFAULT_WARMUP_STEPS = 10
"""Steps 1..10 of each rank and attempt are warm-up, as in the reference study (11..N)."""
DEFAULT_STALL_FACTOR = 10.0
"""A rank is stalled after this many times its median step time without a step..."""
DEFAULT_MIN_STALL_S = 10.0
"""...and at least this long (log-parsed steps arrive in bursts)."""
