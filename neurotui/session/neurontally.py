"""A run's `neuron` samples added up as they are recorded: what `compare` needs of them (the
NeuronCores' FLOPs and execution errors) without reading them all again.

A day of neuron-monitor samples at 1 Hz is 86,400 records of a few KiB, and a job of 64
nodes has 64 of those: parsing them all made `compare JOB` take 13 s instead of 2. The
supervisor adds each sample here as it writes it (numbers only: which peak a FLOP rate is
held against is compare's business, live/neuron.py) and keeps the sums in
`neuron_tally.json` every TALLY_EVERY_S and at the end. `compare` starts from that file and
reads only the samples recorded after it, when the file agrees with the session's events:
its count of samples, and the time of the last one it took (see `tally_of`), or else reads
them all, as before.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.jsonfile import SMALL_FILE_MAX_BYTES, read_json_file, restore_nonfinite
from neurotui.session.writer import write_json_atomic

TALLY_EVERY_S = 30.0
FORMAT = 1

PeakKey = tuple[str | None, int | None]
"""(NeuronCore version, LNC) in force at a sample: which peak its FLOP rate is held against."""


def finite(value: Any) -> float | None:
    """A finite float, or None for None/NaN/inf/bool/non-numbers (as metrics.finite_or_none,
    without loading numpy into the supervisor)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def core_flops(core: Mapping[str, Any]) -> float | None:
    """The core's FLOP rate (operations per second, as neuron-monitor's `flops` is defined),
    or None when not reported."""
    value = finite(core.get("flops"))
    return value if value is not None and value >= 0 else None


def without_rates(cores: list[Mapping[str, Any]]) -> str:
    """Why cores that report no FLOP rate have none: "effective only" (they print
    `effective_flops`, which the Neuron docs do not define) or "no flops"."""
    effective = any(finite(c.get("effective_flops")) is not None for c in cores)
    return "effective only" if effective else "no flops"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class NeuronTally:
    """Sums over a run's neuron samples, in the order they were recorded."""

    samples: int = 0
    last_t: float | None = None
    version: str | None = None
    lnc: int | None = None
    flops: dict[PeakKey, list[float]] = field(default_factory=dict)
    """Per peak key: [sum over samples of their cores' mean FLOP rate, samples, the last
    sample's number]: a sample's FLOPs utilisation is its mean rate over the key's peak."""
    errors: int | None = None
    """Execution errors over every sample (each counts its own period); None: none said."""
    by_type: dict[str, int] = field(default_factory=dict)
    reasons: list[list[Any]] = field(default_factory=list)
    """Why samples gave no FLOP rate, in the order first met: ["no core"], ["no flops"],
    ["effective only"], or ["peak", version, lnc] (a rate whose peak compare may not know)."""

    def add(self, event: Mapping[str, Any]) -> None:
        self.samples += 1
        t = finite(event.get("t"))
        if t is not None:
            self.last_t = t
        if event.get("neuroncore_version") is not None:
            self.version = str(event["neuroncore_version"])
        lnc = _count(event.get("logical_neuroncore_config"))
        if lnc is not None:
            self.lnc = lnc
        cores = [c for c in event.get("cores") or () if isinstance(c, Mapping)]
        rates = [r for c in cores if (r := core_flops(c)) is not None]
        if rates:
            key = (self.version, self.lnc)
            slot = self.flops.setdefault(key, [0.0, 0, 0])
            slot[0] += sum(rates) / len(rates)
            slot[1] += 1
            slot[2] = self.samples
            self._reason(["peak", self.version, self.lnc])
        elif cores:
            self._reason([without_rates(cores)])
        errors = finite(event.get("exec_errors"))
        if errors is not None:
            self.errors = (self.errors or 0) + int(errors)
            by_type = event.get("exec_errors_by_type")
            for kind, n in (by_type.items() if isinstance(by_type, Mapping) else ()):
                if isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n):
                    self.by_type[str(kind)] = self.by_type.get(str(kind), 0) + int(n)

    def _reason(self, reason: list[Any]) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "samples": self.samples, "last_t": self.last_t,
                "version": self.version, "lnc": self.lnc,
                "flops": [[v, lnc, *slot] for (v, lnc), slot in self.flops.items()],
                "errors": self.errors, "by_type": self.by_type, "reasons": self.reasons}

    @classmethod
    def from_json(cls, data: Any) -> NeuronTally | None:
        """The tally a file holds; None when it is not one (another format, damaged)."""
        try:
            if data.get("format") != FORMAT:
                return None
            return cls(int(data["samples"]), finite(data["last_t"]),
                       data["version"] if isinstance(data["version"], str) else None,
                       _count(data["lnc"]),
                       {(v, lnc): [float(total), int(n), int(last)]
                        for v, lnc, total, n, last in data["flops"]},
                       _count(data["errors"]),
                       {str(k): int(n) for k, n in data["by_type"].items()},
                       [list(r) for r in data["reasons"]])
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


def save(session_dir: Path, tally: NeuronTally) -> None:
    """Best effort: without the file, compare reads the samples themselves."""
    with contextlib.suppress(OSError):
        write_json_atomic(session_dir / layout.NEURON_TALLY, tally.to_json())


def load(session_dir: Path) -> NeuronTally | None:
    try:
        data = read_json_file(session_dir / layout.NEURON_TALLY, SMALL_FILE_MAX_BYTES)
        return NeuronTally.from_json(restore_nonfinite(data) if isinstance(data, dict) else data)
    except (OSError, ValueError):  # (past the limits on a session's JSON: a ValueError)
        return None
