"""Which source of a rank's steps wins: the one table the session reader (stepsources.py), the
supervisor's stall watch and its log follower all read (no numpy here: the supervisor imports
it).

A rank's steps may come from three sources: the script's own `neurotui.probe` calls, the
automatic probe, and its log lines. Only the best one's steps count, so a script that both
calls the probe and prints its steps is not counted twice.
"""

from __future__ import annotations

STEP_SOURCES = ("probe", "log", "auto")
"""Where a step row came from (the `src` codes, in this order: codes are cached, so a new source
is appended): the script's own `neurotui.probe` calls, its log lines, the automatic probe."""
PROBE, LOG, AUTO = range(3)
PRECEDENCE = {PROBE: 0, AUTO: 1, LOG: 2}
"""Of a rank's steps, only the best source's are kept: the explicit probe, then the automatic
one, then log lines (whose losses are still kept on the automatic probe's rows)."""
PRECEDENCE_OF_NAME = {STEP_SOURCES[code]: order for code, order in PRECEDENCE.items()}
"""PRECEDENCE by the sources' names (a record's `src`): lower, the better source."""
KEEPS_LOG_LOSSES = frozenset({AUTO})
"""Better sources whose rows take the losses of their rank's log lines (the automatic probe
times a step but knows no loss; the script's own probe calls give theirs)."""


def log_steps_wanted(best: int) -> bool:
    """Whether the log step lines of a rank whose best source is `best` are worth recording:
    they are its steps, or they carry the losses `best`'s rows take."""
    return PRECEDENCE[best] >= PRECEDENCE[LOG] or best in KEEPS_LOG_LOSSES
