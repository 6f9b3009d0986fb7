"""Peak dense FLOPS of a NeuronCore, by core version and data type, and FLOPs utilisation.

core_peaks.toml (beside this module) holds the AWS Neuron docs' per-chip peaks, each core
version with its source and date; a core's peak is the chip figure divided by the chip's
physical cores, and `PeakFlops.arithmetic` shows that division. Under LNC=2 (Trainium2 and
Trainium3; the SDK's default on Trn2) a logical NeuronCore is two physical cores, so its peak
is twice a physical core's: `peak_flops("v3", "bf16", lnc=2)`. neuron-monitor's "v3d" names
such a logical core and implies LNC=2.

Whatever the table does not hold (a core version, a data type, an LNC the docs do not allow
for that core) gives None: an unknown peak is shown as unknown, never guessed.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TABLE_FILE = "core_peaks.toml"
TFLOPS = 1e12

# The docs' and frameworks' names for a data type -> the table's key.
_DTYPES = {
    "fp32": "fp32", "float32": "fp32", "f32": "fp32", "float": "fp32",
    "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "f16": "fp16", "half": "fp16",
    "fp8": "fp8", "cfp8": "fp8", "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "mxfp8": "mxfp8", "mxfp4": "mxfp4",
}
# "v3", "V3", "NC_v3", "NeuronCore-v3", "ncv3", "3"; a trailing "d" (NC_v3d) is the logical
# core of two physical ones under LNC=2.
_VERSION_RE = re.compile(r"^(?:neuroncore|nc)?[-_ ]?v?(\d+)(d?)$")


class CorePeaksError(ValueError):
    """core_peaks.toml is malformed (a packaging or editing mistake, named)."""


@dataclass(frozen=True)
class PeakFlops:
    """The peak dense FLOP rate of one NeuronCore (a logical one when `lnc` > 1)."""

    core_version: str
    """"v1" .. "v4"."""
    dtype: str
    """The table's key: "fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4"."""
    tflops: float
    """Dense TFLOPS of the core: chip_tflops / cores_per_chip * lnc."""
    lnc: int
    """Physical cores in the core this peak is for (1, or 2 under LNC=2)."""
    chip_tflops: float
    cores_per_chip: int
    source: str
    as_of: str

    @property
    def flops_per_s(self) -> float:
        return self.tflops * TFLOPS

    @property
    def arithmetic(self) -> str:
        """How the per-core figure follows from the published per-chip one."""
        per_core = self.chip_tflops / self.cores_per_chip
        text = (f"{self.chip_tflops:g} {self.dtype.upper()} TFLOPS per chip / "
                f"{self.cores_per_chip} cores = {per_core:g}")
        if self.lnc > 1:
            text += f"; x {self.lnc} physical cores per logical core (LNC={self.lnc}) = " \
                    f"{self.tflops:g}"
        return text


@dataclass(frozen=True)
class _Core:
    version: str
    name: str
    cores_per_chip: int
    lnc: tuple[int, ...]
    source: str
    as_of: str
    chip_tflops: dict[str, float]
    lnc_source: str | None = None


def normalize_dtype(value: object) -> str | None:
    """'bfloat16' -> 'bf16', 'torch.float32' -> 'fp32'; None for anything else."""
    if not isinstance(value, str):
        return None
    key = value.strip().lower().removeprefix("torch.")
    return _DTYPES.get(key)


def normalize_core_version(value: object) -> tuple[str, int | None] | None:
    """('v3', None) for "NC_v3"; ('v3', 2) for "v3d" (LNC=2's logical core); None if unknown."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        return None
    match = _VERSION_RE.match(str(value).strip().lower())
    if match is None:
        return None
    return f"v{int(match.group(1))}", (2 if match.group(2) else None)


def peak_flops(core_version: str, dtype: str, *, lnc: int | None = None) -> PeakFlops | None:
    """The peak of one core of `core_version` for `dtype`, or None when not known.

    `lnc`: physical cores per logical core (the runtime's NEURON_LOGICAL_NC_CONFIG). Default:
    2 for a "v3d"-style name, else 1. An LNC the docs do not allow for the core (2 on
    NeuronCore-v2), or one that contradicts a "d" name, gives None.
    """
    version = normalize_core_version(core_version)
    key = normalize_dtype(dtype)
    if version is None or key is None:
        return None
    name, implied = version
    if implied is not None and lnc is not None and lnc != implied:
        return None
    lnc = lnc if lnc is not None else (implied or 1)
    core = _table().get(name)
    if core is None or lnc not in core.lnc or key not in core.chip_tflops:
        return None
    chip = core.chip_tflops[key]
    # A logical core's peak rests on the LNC page too: both are cited.
    source = core.source if lnc == 1 else f"{core.source}; {core.lnc_source}"
    return PeakFlops(name, key, chip / core.cores_per_chip * lnc, lnc, chip,
                     core.cores_per_chip, source, core.as_of)


def all_peaks() -> list[PeakFlops]:
    """Every physical-core peak in the table (LNC=1), by core version then data type."""
    found = []
    for name, core in sorted(_table().items()):
        for key in core.chip_tflops:
            peak = peak_flops(name, key, lnc=1)
            if peak is not None:
                found.append(peak)
    return found


def flops_utilization(measured_flops_per_s: float | None,
                      peak: PeakFlops | float | None) -> float | None:
    """Measured FLOP/s over the peak (a fraction, 0.42 = 42 %), or None when either is unknown.

    `peak` is a PeakFlops or a peak in FLOP/s. Not clamped at 1: a figure above the peak means
    the data type or the core count is wrong, and hiding that would hide the mistake.
    """
    peak_value = peak.flops_per_s if isinstance(peak, PeakFlops) else peak
    if measured_flops_per_s is None or peak_value is None:
        return None
    try:
        measured, top = float(measured_flops_per_s), float(peak_value)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(measured) and math.isfinite(top)) or measured < 0 or top <= 0:
        return None
    return measured / top


@lru_cache(maxsize=1)
def _table() -> dict[str, _Core]:
    text = resources.files("neurotui.pricing").joinpath(TABLE_FILE).read_text("utf-8")
    return parse_core_peaks(text)


def parse_core_peaks(text: str) -> dict[str, _Core]:
    """core_peaks.toml -> {"v2": core, ...}; CorePeaksError naming the entry when malformed.

    Every core must cite a source with a date and give positive per-chip figures, so that
    no peak is shown without where it comes from and how old it is."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CorePeaksError(f"{TABLE_FILE}: not valid TOML: {exc}") from None
    sources = {key: _source(key, entry) for key, entry in doc.get("sources", {}).items()}
    cores: dict[str, _Core] = {}
    for version, entry in doc.get("cores", {}).items():
        where = f"{TABLE_FILE}: cores.{version}"
        if not isinstance(entry, dict):
            raise CorePeaksError(f"{where}: must be a table")
        if normalize_core_version(version) != (version, None):
            raise CorePeaksError(f"{where}: not a core version like 'v2'")
        cited = sources.get(entry.get("source"))
        if cited is None:
            raise CorePeaksError(f"{where}: source {entry.get('source')!r} is not in [sources]")
        lnc = tuple(entry.get("lnc", (1,)))
        if not lnc or any(not _whole(n) or n < 1 for n in lnc):
            raise CorePeaksError(f"{where}.lnc: {lnc!r} must list whole numbers >= 1")
        if lnc != (1,) and entry.get("lnc_source") not in sources:
            raise CorePeaksError(f"{where}: lnc {list(lnc)} needs an lnc_source in [sources]")
        cores_per_chip = entry.get("cores_per_chip")
        if not _whole(cores_per_chip) or cores_per_chip < 1:
            raise CorePeaksError(f"{where}.cores_per_chip: {cores_per_chip!r} must be >= 1")
        chip: dict[str, float] = {}
        for key, value in entry.get("chip_tflops", {}).items():
            if normalize_dtype(key) != key:
                raise CorePeaksError(f"{where}.chip_tflops.{key}: not a data type key")
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value <= 0:
                raise CorePeaksError(f"{where}.chip_tflops.{key}: {value!r} must be > 0")
            chip[key] = float(value)
        lnc_cited = sources.get(entry.get("lnc_source"))
        cores[version] = _Core(version, str(entry.get("name", version)), cores_per_chip, lnc,
                               cited[0], cited[1], chip, lnc_cited[0] if lnc_cited else None)
    return cores


def _source(key: str, entry: Any) -> tuple[str, str]:
    where = f"{TABLE_FILE}: sources.{key}"
    if not isinstance(entry, dict):
        raise CorePeaksError(f"{where}: must be a table")
    text, as_of = entry.get("text"), entry.get("as_of")
    if not isinstance(text, str) or not text.strip():
        raise CorePeaksError(f"{where}.text: missing")
    if isinstance(as_of, _dt.datetime):
        as_of = as_of.date()
    if not isinstance(as_of, _dt.date):
        raise CorePeaksError(f"{where}.as_of: {as_of!r} must be a date like 2025-12-02")
    return text.strip(), as_of.isoformat()


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
