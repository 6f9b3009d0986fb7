"""Where a run is: starting, compiling, warm-up, steady, or how it ended.

Two forms of one rule, side by side: `phase` over whole tables (summary, headless replays of
old versions, tests) and `phase_of` over what a live model keeps (its last step, its last
compile, whether a rank is past warm-up); `phase` ends in `phase_of`, and
tests/unit/metrics/test_metrics_forms.py holds them equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.metrics.common import finite_or_none, has_rows, until

if TYPE_CHECKING:
    import pandas as pd

Phase = Literal["starting", "compiling", "warm-up", "steady", "finished", "crashed", "stopped",
                "ended"]
PHASES: tuple[Phase, ...] = (
    "starting", "compiling", "warm-up", "steady", "finished", "crashed", "stopped", "ended")
_STOP_WORDS = ("stop", "interrupt", "cancel", "user")


def run_is_over(meta: Mapping[str, Any] | None, now: float | None = None) -> bool:
    """True once meta says the run ended (and, in a replay, `now` is past its end)."""
    meta = meta or {}
    ended_at = finite_or_none(meta.get("ended_at"))
    if meta.get("exit") is None and ended_at is None:
        return False
    return ended_at is None or now is None or now >= ended_at


def exit_phase(exit_info: Mapping[str, Any] | None) -> Phase:
    """"finished" (code 0), "stopped" (the user stopped it), "ended" (a job adopted after its
    supervisor died: how it exited is unknown) or "crashed" (anything else).

    A reason mentioning stop/interrupt/cancel/user wins over the exit code, since a graceful
    stop may well exit 0. An end without exit details is "stopped": a crash cannot be shown.
    """
    if not exit_info:
        return "stopped"
    reason = str(exit_info.get("reason") or "").lower()
    if reason == "ended":
        return "ended"
    if any(word in reason for word in _STOP_WORDS):
        return "stopped"
    if exit_info.get("code") == 0 and not exit_info.get("signal"):
        return "finished"
    return "crashed"


def phase_of(meta: Mapping[str, Any] | None, now: float | None, last_step_t: float | None,
             last_compile_t: float | None, past_warmup: bool) -> Phase:
    """The rule. An ended run is classified by meta.exit. A running one is "compiling" while
    its newest compile event (up to `now`) is newer than its newest step, "starting" before
    any step or compile, "warm-up" until a rank of the latest attempt is `warmup_steps` past
    its first step (`past_warmup`), then "steady"."""
    if run_is_over(meta, now):
        return exit_phase((meta or {}).get("exit"))
    if last_step_t is None:
        return "compiling" if last_compile_t is not None else "starting"
    if last_compile_t is not None and last_compile_t > last_step_t:
        return "compiling"
    return "steady" if past_warmup else "warm-up"


def phase(meta: Mapping[str, Any] | None, steps: pd.DataFrame | None,
          compiles: pd.DataFrame | None, now: float | None,
          warmup_steps: int = DEFAULT_WARMUP_STEPS) -> Phase:
    """phase_of from whole tables; only events up to `now` count, so replays show the phase
    at that time. A rank's first step is the first it recorded (time order) in the attempt,
    as in steptime.past_warmup."""
    s = until(steps, now) if has_rows(steps, "t", "step", "attempt", "rank") else None
    c = until(compiles, now) if has_rows(compiles, "t") else None
    last_compile = float(c["t"].max()) if c is not None and len(c) else None
    if s is None or not len(s):
        return phase_of(meta, now, None, last_compile, False)
    latest = s[s["attempt"] == s["attempt"].max()].sort_values(["t", "step"], kind="stable")
    by_rank = latest.groupby("rank")["step"]
    progress = by_rank.max() - by_rank.first()
    return phase_of(meta, now, float(s["t"].max()), last_compile,
                    bool((progress >= int(warmup_steps)).any()))
