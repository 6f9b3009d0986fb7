"""Where a run's step figures come from, in words (probe.step(), the automatic probe, log
lines; and how their samples were known)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from neurotui.metrics.common import is_frame

if TYPE_CHECKING:
    import pandas as pd


STEP_SOURCE_NAMES = {"probe": "probe.step()", "auto": "automatic probe", "log": "log lines"}
SAMPLES_FROM_NAMES = {"throughput": "printed throughput",
                      "samples_per_step": "step rate x --samples-per-step"}


def step_sources(sources: set[str], probe_info: list[dict[str, Any]] | None = None,
                 samples_from: set[str] | None = None) -> str | None:
    """Where the step figures come from, in words ("automatic probe (host-side, xla)"), or
    None before any step. `sources` are the steps' `src` values, `probe_info` the automatic
    probe's records (what it timed, on which device), `samples_from` how their samples were
    known (SessionReader.samples_from): printed throughput and --samples-per-step are said."""
    names = [STEP_SOURCE_NAMES[s] for s in ("probe", "auto", "log") if s in sources]
    if not names:
        return None
    devices = sorted({str(r.get("device")) for r in probe_info or ()
                      if r.get("what") == "armed" and r.get("device") in ("xla", "cuda")})
    if "auto" in sources and devices:
        names[names.index(STEP_SOURCE_NAMES["auto"])] += f" (host-side, {', '.join(devices)})"
    said = [SAMPLES_FROM_NAMES[k] for k in SAMPLES_FROM_NAMES if k in (samples_from or ())]
    return " + ".join(names) + (f"; samples from {' and '.join(said)}" if said else "")


def steps_sources(steps: pd.DataFrame, names: Sequence[str] = ()) -> set[str]:
    """The `src` values of a step table (probe, auto, log), for step_sources; `names`: what
    integer codes stand for (the reader's Columns keep `src` as codes)."""
    if not len(steps):
        return set()
    if is_frame(steps):
        return {str(value) for value in np.unique(np.asarray(steps["src"]).astype(str))}
    codes = steps["src"]
    if codes.dtype.kind in "iu":  # (counted: np.unique sorts, at every frame of the live model)
        return {str(names[code]) for code in np.flatnonzero(np.bincount(codes))}
    return {str(value) for value in np.unique(codes)}
