"""The NeuronCore peak table (core_peaks.toml), its loader and FLOPs utilisation."""

from __future__ import annotations

import math
from importlib import resources

import pytest

from neurotui.pricing.peaks import (
    CorePeaksError,
    PeakFlops,
    all_peaks,
    flops_utilization,
    normalize_core_version,
    normalize_dtype,
    parse_core_peaks,
    peak_flops,
)

# Per-chip dense TFLOPS and cores per chip as the AWS Neuron architecture pages state them.
PUBLISHED = {
    ("v1", "bf16"): (64, 4),
    ("v2", "bf16"): (190, 2), ("v2", "fp32"): (47.5, 2), ("v2", "fp8"): (190, 2),
    ("v3", "bf16"): (667, 8), ("v3", "fp32"): (181, 8), ("v3", "fp8"): (1299, 8),
    ("v4", "bf16"): (671, 8), ("v4", "fp32"): (183, 8), ("v4", "mxfp8"): (2517, 8),
}


def test_the_table_loads_and_every_entry_has_source_and_date() -> None:
    peaks = all_peaks()
    assert {p.core_version for p in peaks} == {"v1", "v2", "v3", "v4"}
    assert len(peaks) == 19
    for peak in peaks:
        assert peak.source.startswith("AWS Neuron docs") and "aws-neuron-sdk" in peak.source
        assert peak.as_of[:4] in ("2025", "2026") and len(peak.as_of) == 10
        assert peak.lnc == 1 and peak.tflops > 0


def test_the_table_ships_in_the_package() -> None:
    assert resources.files("neurotui.pricing").joinpath("core_peaks.toml").is_file()


@pytest.mark.parametrize("key, chip_and_cores", PUBLISHED.items())
def test_per_core_peak_is_the_chip_figure_over_its_cores(key: tuple[str, str],
                                                          chip_and_cores: tuple) -> None:
    chip, cores = chip_and_cores
    peak = peak_flops(*key)
    assert peak is not None
    assert (peak.chip_tflops, peak.cores_per_chip) == (chip, cores)
    assert peak.tflops == chip / cores


def test_worked_figures_and_their_arithmetic() -> None:
    trn1 = peak_flops("v2", "bf16")
    assert trn1.tflops == 95.0 and trn1.flops_per_s == 95e12
    assert trn1.arithmetic == "190 BF16 TFLOPS per chip / 2 cores = 95"
    assert "Trainium Architecture" in trn1.source and trn1.as_of == "2025-10-17"
    trn2 = peak_flops("v3", "fp32")
    assert trn2.tflops == 22.625 and trn2.as_of == "2025-12-02"
    assert trn2.arithmetic == "181 FP32 TFLOPS per chip / 8 cores = 22.625"


def test_lnc2_doubles_the_logical_cores_peak() -> None:
    physical = peak_flops("v3", "bf16")
    logical = peak_flops("v3", "bf16", lnc=2)
    assert physical.tflops == 83.375 and logical.tflops == 166.75
    assert logical.tflops == 2 * physical.tflops and logical.lnc == 2
    assert logical.arithmetic.endswith("x 2 physical cores per logical core (LNC=2) = 166.75")
    assert "Logical NeuronCore configuration" in logical.source
    assert "Logical NeuronCore" not in physical.source
    # neuron-monitor's "v3d" is the LNC=2 logical core
    assert peak_flops("v3d", "bf16") == logical
    assert peak_flops("NC_v3d", "bfloat16", lnc=2) == logical
    assert peak_flops("v4", "fp8", lnc=2).tflops == 2 * 2517 / 8


def test_unknown_or_impossible_gives_none() -> None:
    assert peak_flops("v2", "bf16", lnc=2) is None  # LNC applies to Trn2/Trn3 only
    assert peak_flops("v3", "bf16", lnc=4) is None
    assert peak_flops("v3d", "bf16", lnc=1) is None  # contradicts the "d"
    assert peak_flops("v1", "fp32") is None  # not published for Inferentia
    assert peak_flops("v2", "mxfp4") is None
    assert peak_flops("v9", "bf16") is None
    assert peak_flops("v3", "int8") is None  # TOPS, not FLOPS: not in the table
    assert peak_flops("gpu", "bf16") is None


def test_names_are_normalized() -> None:
    assert normalize_core_version("NeuronCore-v2") == ("v2", None)
    assert normalize_core_version("NC_V3") == ("v3", None)
    assert normalize_core_version("v3d") == ("v3", 2)
    assert normalize_core_version(2) == ("v2", None)
    assert normalize_core_version("trn2") is None and normalize_core_version(None) is None
    assert normalize_dtype("torch.bfloat16") == "bf16" and normalize_dtype("cFP8") == "fp8"
    assert normalize_dtype("half") == "fp16" and normalize_dtype("int8") is None


def test_flops_utilization_by_hand() -> None:
    trn1 = peak_flops("v2", "bf16")  # 95e12 FLOP/s
    assert flops_utilization(38e12, trn1) == pytest.approx(0.4)  # 38 / 95
    assert flops_utilization(19e12, 95e12) == pytest.approx(0.2)  # 19 / 95
    logical = peak_flops("v3", "bf16", lnc=2)  # 166.75e12
    assert flops_utilization(66.7e12, logical) == pytest.approx(0.4)  # 66.7 / 166.75
    assert flops_utilization(0.0, trn1) == 0.0
    # above the peak is kept, not clamped: it shows a wrong dtype or core count
    assert flops_utilization(190e12, trn1) == pytest.approx(2.0)


@pytest.mark.parametrize("measured, peak", [
    (None, 95e12), (1e12, None), (None, None), (math.nan, 95e12), (1e12, math.inf),
    (-1e12, 95e12), (1e12, 0.0), (1e12, -5.0), ("fast", 95e12)])
def test_flops_utilization_unknown_is_none(measured: object, peak: object) -> None:
    assert flops_utilization(measured, peak) is None  # type: ignore[arg-type]


def test_peakflops_is_a_plain_record() -> None:
    peak = PeakFlops("v2", "bf16", 95.0, 1, 190.0, 2, "s", "2025-10-17")
    assert flops_utilization(9.5e12, peak) == pytest.approx(0.1)


@pytest.mark.parametrize("text, expected", [
    ('[cores.v2]\ncores_per_chip = 2\nsource = "nope"\n', "source 'nope' is not in [sources]"),
    ('[sources.s]\ntext = "t"\n', "sources.s.as_of"),
    ('[sources.s]\ntext = "t"\nas_of = 2025-01-01\n[cores.v2]\ncores_per_chip = 2\n'
     'source = "s"\nchip_tflops = { bf16 = -1 }\n', "chip_tflops.bf16: -1 must be > 0"),
    ('[sources.s]\ntext = "t"\nas_of = 2025-01-01\n[cores.v3]\ncores_per_chip = 8\n'
     'source = "s"\nlnc = [1, 2]\n', "needs an lnc_source"),
    ('[sources.s]\ntext = "t"\nas_of = 2025-01-01\n[cores.v2]\ncores_per_chip = 0\n'
     'source = "s"\n', "cores_per_chip"),
    ('[sources.s]\ntext = "t"\nas_of = 2025-01-01\n[cores.v2]\ncores_per_chip = 2\n'
     'source = "s"\nchip_tflops = { bfloat = 1 }\n', "not a data type key"),
    ("[cores\n", "not valid TOML"),
])
def test_a_malformed_table_is_refused_naming_the_entry(text: str, expected: str) -> None:
    with pytest.raises(CorePeaksError, match=expected.replace("[", r"\[").replace("(", r"\(")):
        parse_core_peaks(text)
