"""What the Neuron figures of a session are, from its `neuron` and `neuron_devices` events:
cores as the SDK counts them, FLOPs utilisation against the core's peak, device memory by kind,
execution errors by type, latency and ECC. UI-free (no Textual); the dashboard's model, the
headless lines and `compare` all take their figures from here, so they agree.

FLOPs: the Neuron docs (neuron-monitor user guide, SDK 2.30, `neuroncore_counters`) define a
core's `flops` as "number of floating point operations per second during the captured period":
a rate already, so it is compared with the peak as it is, never divided by the period.
`effective_flops`, which older tools printed, is not in the guide and its unit is not given:
it is not turned into a utilisation (the panel says so).

The peak is the core's dense peak for one data type (pricing/peaks.py, a dated table from the
AWS Neuron docs). The session does not record which data type the model computes in: the run's
`--peak-dtype` (meta.json config `peak_dtype`) says, else BF16, the training default on Neuron,
and every figure says which one it is measured against.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neurotui.pricing.peaks import PeakFlops, flops_utilization, normalize_dtype, peak_flops
from neurotui.session.neurontally import NeuronTally, core_flops, without_rates
from neurotui.session.neurontally import finite as _num

DEFAULT_PEAK_DTYPE = "bf16"
"""The data type whose peak FLOPs utilisation is measured against when the run does not say:
BF16, the training default on Neuron (its auto-cast target)."""
MISSING_MARK = "—"
NO_SAMPLES = "no neuron-monitor sample recorded"
NO_FLOPS = "neuron-monitor reported no FLOPs"
EFFECTIVE_ONLY = ("neuron-monitor reported effective_flops only (not defined in the Neuron "
                  "docs: not used)")
_NO_RATE = {"no flops": NO_FLOPS, "effective only": EFFECTIVE_ONLY}
"""neurontally.without_rates's answers, in words."""

# Short names for the device memory kinds neuron-monitor reports, in the order shown.
MEMORY_KIND_NAMES = {"tensors": "tensors", "constants": "constants", "model_code": "code",
                     "model_shared_scratchpad": "scratchpad", "runtime_memory": "runtime"}
ECC_KEYS = ("mem_corrected", "mem_uncorrected", "sram_corrected", "sram_uncorrected")


@dataclass(frozen=True)
class Peak:
    """The peak a core's FLOPs are measured against, or why there is none."""

    dtype: str
    """The table's key ("bf16"), or the run's own spelling when the table does not know it."""
    dtype_from: str
    """"default" (BF16, nothing recorded) or "--peak-dtype" (the run said)."""
    flops: PeakFlops | None
    reason: str | None
    """Why the peak is unknown (None when known)."""

    @property
    def label(self) -> str:
        """"BF16 peak 166.75 TF/core (LNC 2)": what a figure is measured against."""
        name = self.dtype.upper()
        if self.flops is None:
            return f"{name} peak unknown"
        lnc = f" (LNC {self.flops.lnc})" if self.flops.lnc > 1 else ""
        return f"{name} peak {self.flops.tflops:g} TF/core{lnc}"

    @property
    def short_label(self) -> str:
        """"BF16 peak 166.75TF": the label where a line is short."""
        if self.flops is None:
            return f"{self.dtype.upper()} peak unknown"
        return f"{self.dtype.upper()} peak {self.flops.tflops:g}TF"

    @property
    def source(self) -> str:
        """"AWS Neuron docs 2025-12-02" (the table's date), with how the dtype was chosen."""
        chosen = ("BF16 assumed: the session records no data type; `run --peak-dtype` sets it"
                  if self.dtype_from == "default" else "data type from run --peak-dtype")
        if self.flops is None:
            return chosen
        return f"AWS Neuron docs {self.flops.as_of}; {chosen}"


@dataclass(frozen=True)
class NeuronCore:
    """One logical NeuronCore of one runtime in the latest sample."""

    core: int | None
    pid: int | None
    util: float | None
    flops_per_s: float | None
    flops_util: float | None
    """A fraction (0.42 = 42 %) of the core's peak; None when the FLOPs or the peak are
    unknown."""
    mem_device: float | None
    physical: tuple[tuple[str, float | None], ...] = ()
    """trn2's split: the physical cores behind this logical one and their utilisation."""


@dataclass(frozen=True)
class Latency:
    """Execution latency percentiles (seconds) of the latest sample, as neuron-monitor gave
    them (with several runtimes, the highest any reported)."""

    p50: float | None
    p99: float | None
    device_p50: float | None
    device_p99: float | None


@dataclass(frozen=True)
class Errors:
    """Execution errors over the samples kept (each sample counts its own period)."""

    total: int
    by_type: tuple[tuple[str, int], ...]
    samples: int
    seconds: float | None
    """From the first to the last of those samples (None: one sample)."""


@dataclass(frozen=True)
class NeuronState:
    """The Neuron panel's figures beyond the per-core utilisation."""

    cores: tuple[NeuronCore, ...]
    core_version: str | None
    lnc: int | None
    logical_cores: int | None
    """Logical NeuronCores of the whole instance (neuron-ls, else neuron-monitor's device
    count times cores per device); None when neither said."""
    devices: int | None
    cores_from: str | None
    """"neuron-ls" or "neuron-monitor": who counted the logical cores."""
    peak: Peak
    flops_util: float | None
    """Mean over the cores in use that report FLOPs."""
    flops_per_s: float | None
    """Sum over the cores in use that report FLOPs."""
    flops_note: str | None
    """Why there is no FLOPs utilisation (None when there is one)."""
    mem_by_kind: tuple[tuple[str, int], ...] | None
    errors: Errors | None
    latency: Latency | None
    ecc: tuple[tuple[str, int | None], ...] | None
    """The latest report's ECC counters, summed over devices."""


def peak_dtype(meta: Mapping[str, Any]) -> tuple[str, str]:
    """(dtype, where it came from): the run's --peak-dtype, else BF16 by default."""
    given = (meta.get("config") or {}).get("peak_dtype")
    if isinstance(given, str) and given.strip():
        return normalize_dtype(given) or given.strip(), "--peak-dtype"
    return DEFAULT_PEAK_DTYPE, "default"


def core_peak(core_version: str | None, lnc: int | None, dtype: str, dtype_from: str) -> Peak:
    """The peak of one logical core of `core_version` under `lnc`, or why it is unknown."""
    if core_version is None:
        return Peak(dtype, dtype_from, None, "neuron-monitor did not report the core version")
    if normalize_dtype(dtype) is None:
        return Peak(dtype, dtype_from, None, f"no peak table entry for data type {dtype!r}")
    found = peak_flops(core_version, dtype, lnc=lnc)
    if found is None:
        lnc_text = f" under LNC {lnc}" if lnc else ""
        return Peak(dtype, dtype_from, None,
                    f"no {dtype.upper()} peak known for NeuronCore {core_version}{lnc_text}")
    return Peak(found.dtype, dtype_from, found, None)


def latest_with(series: Sequence[Mapping[str, Any]], key: str) -> Any:
    """The newest non-null `key` of the series (an early record may lack hardware info)."""
    for event in reversed(series):
        value = event.get(key)
        if value is not None:
            return value
    return None


def flops_reason(cores: Sequence[Mapping[str, Any]], peak: Peak) -> str | None:
    """Why a sample gives no FLOPs utilisation, or None when it gives one."""
    if not cores:
        return "no core in use in the last sample"
    if all(core_flops(c) is None for c in cores):
        return _NO_RATE[without_rates(list(cores))]
    return peak.reason


def sample_flops_util(event: Mapping[str, Any], peak: Peak) -> float | None:
    """Mean FLOPs utilisation (a fraction) of one sample's cores that report FLOPs."""
    if peak.flops is None:
        return None
    found = [u for c in event.get("cores") or ()
             if (u := flops_utilization(core_flops(c), peak.flops)) is not None]
    return sum(found) / len(found) if found else None


def recent_errors(series: Sequence[Mapping[str, Any]]) -> Errors | None:
    """Execution errors summed over the samples that report them (each counts its own
    period); None when none does."""
    total = samples = 0
    by_type: dict[str, int] = {}
    times: list[float] = []
    for event in series:
        errors = _num(event.get("exec_errors"))
        if errors is None or isinstance(event.get("exec_errors"), bool):
            continue
        samples += 1
        total += int(errors)
        for kind, n in _map(event.get("exec_errors_by_type")).items():
            if isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n):
                by_type[str(kind)] = by_type.get(str(kind), 0) + int(n)
        t = _num(event.get("t"))
        if t is not None:
            times.append(t)
    if not samples:
        return None
    seconds = times[-1] - times[0] if len(times) > 1 else None
    return Errors(total, tuple(by_type.items()), samples, seconds)


def _latency(value: Any) -> Latency | None:
    if not isinstance(value, Mapping):
        return None
    total = _map(value.get("total_latency"))
    device = _map(value.get("device_latency"))
    found = Latency(_num(total.get("p50")), _num(total.get("p99")),
                    _num(device.get("p50")), _num(device.get("p99")))
    return None if all(v is None for v in (found.p50, found.p99, found.device_p50,
                                           found.device_p99)) else found


def _ecc(value: Any) -> tuple[tuple[str, int | None], ...] | None:
    if not isinstance(value, Mapping):
        return None
    return tuple((key, value.get(key) if isinstance(value.get(key), int)
                  and not isinstance(value.get(key), bool) else None) for key in ECC_KEYS)


def _by_kind(value: Any) -> tuple[tuple[str, int], ...] | None:
    if not isinstance(value, Mapping) or not value:
        return None
    known = [k for k in MEMORY_KIND_NAMES if k in value]
    others = sorted(k for k in value if k not in MEMORY_KIND_NAMES)
    found = ((k, _num(value[k])) for k in (*known, *others) if not isinstance(value[k], bool))
    return tuple((k, int(v)) for k, v in found if v is not None)


def _map(value: Any) -> Mapping[str, Any]:
    """`value` if it is an object, else an empty one (a damaged record shows as missing)."""
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None and number >= 0 else None


def instance_cores(series: Sequence[Mapping[str, Any]],
                   devices: Sequence[Mapping[str, Any]]) -> tuple[int | None, int | None,
                                                                  str | None]:
    """(logical cores of the instance, devices, who said): neuron-ls's count, else
    neuron-monitor's devices x logical cores per device."""
    snapshot = devices[-1] if devices else None
    if snapshot is not None and _int(snapshot.get("logical_cores")):
        listed = snapshot.get("devices") or ()
        return _int(snapshot.get("logical_cores")), len(listed) or None, "neuron-ls"
    count = _int(latest_with(series, "device_count"))
    per = _int(latest_with(series, "cores_per_device"))
    if count and per:
        return count * per, count, "neuron-monitor"
    return None, count, None


def neuron_state(series: Sequence[Mapping[str, Any]], devices: Sequence[Mapping[str, Any]],
                 meta: Mapping[str, Any]) -> NeuronState:
    """The figures of the latest `neuron` sample (with the kept samples for errors), with
    neuron-ls's count of cores; `series` must hold at least one sample."""
    last = series[-1]
    version = latest_with(series, "neuroncore_version")
    version = str(version) if version is not None else None
    lnc = _int(latest_with(series, "logical_neuroncore_config"))
    if lnc is None and devices:
        lnc = _int(devices[-1].get("logical_neuroncore_config"))
    dtype, dtype_from = peak_dtype(meta)
    peak = core_peak(version, lnc, dtype, dtype_from)
    raw = [c for c in last.get("cores") or () if isinstance(c, Mapping)]
    cores = []
    for c in raw:
        physical = tuple((str(p.get("name")), _num(p.get("util")))
                         for p in c.get("physical") or () if isinstance(p, Mapping))
        rate = core_flops(c)
        cores.append(NeuronCore(_int(c.get("core")), _int(c.get("pid")), _num(c.get("util")),
                                rate, flops_utilization(rate, peak.flops),
                                _num(c.get("mem_device")), physical))
    rates = [c.flops_per_s for c in cores if c.flops_per_s is not None]
    logical, count, said = instance_cores(series, devices)
    return NeuronState(
        cores=tuple(cores), core_version=version, lnc=lnc, logical_cores=logical,
        devices=count, cores_from=said, peak=peak, flops_util=sample_flops_util(last, peak),
        flops_per_s=sum(rates) if rates else None, flops_note=flops_reason(raw, peak),
        mem_by_kind=_by_kind(last.get("device_mem_by_kind")), errors=recent_errors(series),
        latency=_latency(last.get("latency")), ecc=_ecc(last.get("ecc")))


# -- a whole run (compare) ----------------------------------------------------------------

@dataclass(frozen=True)
class RunNeuron:
    """A run's Neuron figures for compare: FLOPs utilisation and execution errors."""

    flops_util: float | None
    """Mean over the samples that report FLOPs of each sample's mean over its cores."""
    flops_samples: int
    peak: Peak | None
    flops_note: str | None
    exec_errors: int | None
    """Summed over every sample (each counts its own period); None: none reported any."""
    errors_by_type: tuple[tuple[str, int], ...]


class RunTally:
    """A run's `neuron` samples taken in one at a time, in time order (compare reads them
    off disk without keeping them), or the sums the supervisor kept of them
    (session/neurontally.py) and the samples after; the peaks are applied at the end."""

    def __init__(self, meta: Mapping[str, Any], kept: NeuronTally | None = None) -> None:
        self.dtype, self.dtype_from = peak_dtype(meta)
        self.raw = kept if kept is not None else NeuronTally()

    @property
    def samples(self) -> int:
        return self.raw.samples

    def add(self, event: Mapping[str, Any]) -> None:
        self.raw.add(event)

    def result(self) -> RunNeuron:
        raw = self.raw
        peaks = {key: core_peak(*key, self.dtype, self.dtype_from) for key in raw.flops}
        util_sum, util_n, peak, latest = 0.0, 0, None, -1
        for key, (total, n, last) in raw.flops.items():
            found = peaks[key]
            if found.flops is None:
                continue
            # Each sample's utilisation is its cores' mean rate over the peak: summed, the
            # rates' sum over the same peak.
            util_sum += total / found.flops.flops_per_s
            util_n += int(n)
            if last > latest:
                peak, latest = found, int(last)
        util = util_sum / util_n if util_n else None
        if util is not None:
            note = None
        elif not raw.samples:
            note = NO_SAMPLES
        else:
            reasons = [_tally_reason(r, peaks) for r in raw.reasons]
            note = "; ".join(dict.fromkeys(r for r in reasons if r)) or \
                "no core in use in any sample"
        return RunNeuron(util, util_n, peak, note, raw.errors, tuple(sorted(raw.by_type.items())))


def _tally_reason(reason: Sequence[Any], peaks: Mapping[tuple[str | None, int | None], Peak]
                  ) -> str | None:
    """A kept reason as flops_reason words it (None: the peak is known after all)."""
    if reason[0] in _NO_RATE:
        return _NO_RATE[reason[0]]
    if reason[0] == "peak":
        found = peaks.get((reason[1], reason[2]))
        return found.reason if found is not None and found.flops is None else None
    return None


def run_neuron(events: Iterable[Mapping[str, Any]], meta: Mapping[str, Any]) -> RunNeuron:
    tally = RunTally(meta)
    for event in events:
        tally.add(event)
    return tally.result()


def combine(runs: Sequence[RunNeuron]) -> RunNeuron:
    """A job's figures from its nodes': FLOPs utilisation weighted by samples, errors summed
    (unknown only where no node reported any)."""
    weighted = [(r.flops_util, r.flops_samples) for r in runs if r.flops_util is not None]
    n = sum(w for _, w in weighted)
    util = sum(u * w for u, w in weighted) / n if n else None
    errors = [r.exec_errors for r in runs if r.exec_errors is not None]
    by_type: dict[str, int] = {}
    for r in runs:
        for kind, count in r.errors_by_type:
            by_type[kind] = by_type.get(kind, 0) + count
    notes = list(dict.fromkeys(r.flops_note for r in runs if r.flops_note))
    return RunNeuron(util, n, next((r.peak for r in runs if r.peak is not None), None),
                     None if util is not None else "; ".join(notes) or None,
                     sum(errors) if errors else None, tuple(sorted(by_type.items())))


def flops_percent(fraction: float | None) -> str:
    """FLOPs utilisation as a percentage, with the digits a small share needs; '—' unknown."""
    if fraction is None or not math.isfinite(fraction):
        return MISSING_MARK
    pct = fraction * 100
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.1f}%" if pct >= 1 else f"{pct:.2f}%"


def errors_text(by_type: Iterable[tuple[str, int]], *, nonzero: bool = True) -> str:
    """"generic 946160, numerical 2" (only the types that occurred, unless `nonzero=False`)."""
    return ", ".join(f"{kind} {n:,}" for kind, n in by_type if n or not nonzero)
