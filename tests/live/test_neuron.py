"""The Neuron figures (live/neuron.py) of sessions recorded through the real collectors from the
stand-in tools: trn2 (64 logical cores, LNC 2, FLOPs from the SDK 2.30 doc fragments) and trn1
(real captures, no FLOPs). Expected figures are worked out here from the fixtures' numbers and
the AWS docs' per-chip peaks, not read back from the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neurotui import compare
from neurotui.cli import PEAK_DTYPES
from neurotui.compare.render import render
from neurotui.headless import progress_line
from neurotui.live.clock import FixedClock
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel, DashboardState
from neurotui.live.neuron import neuron_state, run_neuron
from neurotui.pricing import peaks
from neurotui.session import layout, neurontally
from neurotui.session.reader import SessionReader
from neurotui.session.timeline import Timeline
from tests.standins import tool_captures as replay
from tests.ui.neuron_sessions import neuron_session, record_through_collectors
from tests.ui.sessions import T0

# The 2.30 guide's neuroncore_counters fragment: cores 0 and 1, their flops (per second, as
# the guide defines `flops`), utilisation and v3d split.
FRAGMENT_FLOPS = {0: 1234567891011, 1: 1234567891021}
FRAGMENT_SPLIT = {0: [("nc_v3.0", 21.01), ("nc_v3.1", 63.01)],
                  1: [("nc_v3.2", 21.02), ("nc_v3.3", 63.02)]}
# Trainium2 (docs): 667 dense BF16 TFLOPS per chip, 8 physical cores; LNC 2: two per logical.
TRN2_BF16_PEAK = 667e12 / 8 * 2
TRN2_FP8_PEAK = 1299e12 / 8 * 2
# The trn1 full report's execution_stats: 23654 generic errors in its period.
TRN1_GENERIC_ERRORS = 23654


def test_fragment_holds_the_numbers_used_here() -> None:
    text = (replay.FIXTURES / replay.TRN2_FRAGMENT.format("neuroncore_counters")).read_text()
    for value in FRAGMENT_FLOPS.values():
        assert f'"flops": {value}' in text
    for split in FRAGMENT_SPLIT.values():
        for name, util in split:
            assert f'"{name}"' in text and f"{util}" in text
    report = (replay.FIXTURES / replay.MONITOR_RECORDS[1]).read_text()
    assert f'"generic": {TRN1_GENERIC_ERRORS}' in report and '"flops"' not in report


def state_at(session: Path, at: float = 50.0) -> DashboardState:
    model = DashboardModel(SessionReader(session, telemetry_history=TELEMETRY_HISTORY),
                           FixedClock(T0 + at), throttle=False)
    return model.refresh()


def test_trn2_logical_cores_lnc_and_flops_utilisation(tmp_path: Path) -> None:
    state = state_at(neuron_session(tmp_path, "trn2"))
    n = state.accelerator.neuron
    assert n is not None
    assert (n.logical_cores, n.lnc, n.core_version, n.devices, n.cores_from) == (
        64, 2, "v3d", 16, "neuron-ls")
    assert n.peak.flops is not None and n.peak.dtype_from == "default"
    assert n.peak.flops.flops_per_s == pytest.approx(TRN2_BF16_PEAK)
    by_core = {c.core: c for c in n.cores}
    assert sorted(by_core) == [0, 1]
    for core, flops in FRAGMENT_FLOPS.items():
        assert by_core[core].flops_per_s == flops
        assert by_core[core].flops_util == pytest.approx(flops / TRN2_BF16_PEAK)
        assert list(by_core[core].physical) == FRAGMENT_SPLIT[core]
    expected_mean = sum(FRAGMENT_FLOPS.values()) / 2 / TRN2_BF16_PEAK
    assert n.flops_util == pytest.approx(expected_mean) and n.flops_note is None
    assert n.flops_per_s == sum(FRAGMENT_FLOPS.values())
    # The model's rows carry the same figure for the panel.
    assert [r.flops_util for r in state.accelerator.cores] == [
        pytest.approx(f / TRN2_BF16_PEAK) for f in FRAGMENT_FLOPS.values()]


def test_trn2_memory_errors_latency_and_ecc(tmp_path: Path) -> None:
    n = state_at(neuron_session(tmp_path, "trn2")).accelerator.neuron
    assert n is not None
    # memory_used fragment: cores 0 and 1 each hold these (bytes): summed over both.
    assert dict(n.mem_by_kind or ()) == {
        "tensors": 2 * 20971520, "constants": 2 * 193986816, "model_code": 2 * 176285056,
        "model_shared_scratchpad": 0, "runtime_memory": 0}
    assert n.errors is not None and n.errors.total == 0
    assert dict(n.errors.by_type)["hardware"] == 0
    # One sample a second, the last 40 kept.
    assert n.errors.samples == 40 and n.errors.seconds == 39.0
    assert n.latency is not None
    assert (n.latency.p50, n.latency.p99) == (0.01100008, 0.01100012)
    assert (n.latency.device_p50, n.latency.device_p99) == (0.01000008, 0.01000012)
    assert dict(n.ecc or ()) == {"mem_corrected": 0, "mem_uncorrected": 0,
                                 "sram_corrected": 0, "sram_uncorrected": 0}


def test_trn1_has_no_flops_and_says_why(tmp_path: Path) -> None:
    n = state_at(neuron_session(tmp_path, "trn1")).accelerator.neuron
    assert n is not None
    assert n.flops_util is None and n.flops_per_s is None
    assert n.flops_note == "neuron-monitor reported no FLOPs"
    assert all(c.flops_util is None and c.flops_per_s is None for c in n.cores)
    # neuron-ls counts 2 cores; neuron-monitor says v2 and LNC 1.
    assert (n.logical_cores, n.lnc, n.core_version) == (2, 1, "v2")
    # The stand-in's records alternate: the first (no runtime yet) and the full report, whose
    # execution_stats count 23654 generic errors; 20 of the 40 samples kept are full reports.
    assert n.errors is not None and n.errors.samples == 20
    assert n.errors.total == 20 * TRN1_GENERIC_ERRORS
    assert dict(n.errors.by_type)["generic"] == 20 * TRN1_GENERIC_ERRORS


def test_peak_dtype_of_the_run_is_used(tmp_path: Path) -> None:
    session = neuron_session(tmp_path, "trn2", config={"peak_dtype": "fp8"})
    n = state_at(session).accelerator.neuron
    assert n is not None and n.peak.dtype == "fp8" and n.peak.dtype_from == "--peak-dtype"
    assert n.flops_util == pytest.approx(sum(FRAGMENT_FLOPS.values()) / 2 / TRN2_FP8_PEAK)
    assert "data type from run --peak-dtype" in n.peak.source


def _event(**core: object) -> dict[str, object]:
    return {"t": T0, "kind": "neuron", "cores": [{"core": 0, "pid": 1, "util": 50.0, **core}]}


def test_no_utilisation_without_a_peak_or_flops() -> None:
    # FLOPs but no core version: no peak, so no utilisation, and why.
    n = neuron_state([_event(flops=1e12)], [], {})
    assert n.flops_util is None and n.cores[0].flops_util is None
    assert n.flops_note == "neuron-monitor did not report the core version"
    # A data type the table has no figure for on this core.
    n = neuron_state([{**_event(flops=1e12), "neuroncore_version": "v1"}], [],
                     {"config": {"peak_dtype": "fp32"}})
    assert n.flops_util is None and n.flops_note == "no FP32 peak known for NeuronCore v1"
    # effective_flops alone is not taken for a rate: the docs do not define it.
    n = neuron_state([{**_event(effective_flops=3.4e13), "neuroncore_version": "v2"}], [], {})
    assert n.flops_util is None and "effective_flops only" in str(n.flops_note)
    # No execution stats, no latency, no ECC: missing, not zero.
    assert n.errors is None and n.latency is None and n.ecc is None and n.mem_by_kind is None


def test_cli_peak_dtypes_are_the_tables() -> None:
    keys = {p.dtype for p in peaks.all_peaks()}
    assert set(PEAK_DTYPES) == keys
    assert all(peaks.normalize_dtype(d) == d for d in PEAK_DTYPES)


def test_replay_shows_the_same_panel_through_the_same_model(tmp_path: Path) -> None:
    session = neuron_session(tmp_path, "trn2")
    live = state_at(session, at=50.0).accelerator
    timeline = Timeline(session)
    try:
        view = timeline.view()
        view.seek(T0 + 50.0)
        replayed = DashboardModel(view, FixedClock(T0 + 50.0), throttle=False,
                                  status=lambda: timeline.status_at(T0 + 50.0)).refresh()
    finally:
        timeline.close()
    assert replayed.accelerator.neuron == live.neuron
    assert replayed.accelerator.cores == live.cores


def test_compare_figures_over_the_whole_run(tmp_path: Path) -> None:
    trn2, trn1 = neuron_session(tmp_path, "trn2"), neuron_session(tmp_path, "trn1")
    rows = compare.compare_rows([trn2, trn1])
    assert rows[0]["flops_util"] == pytest.approx(
        sum(FRAGMENT_FLOPS.values()) / 2 / TRN2_BF16_PEAK)
    assert rows[0]["exec_errors"] == 0 and rows[0]["cores_available"] == 64
    assert rows[0]["flops_peak"] == "BF16 peak 166.75 TF/core (LNC 2)"
    # 60 samples, one a second: the first record and the full report in turn (30 each).
    assert rows[1]["flops_util"] is None
    assert rows[1]["flops_note"] == "neuron-monitor reported no FLOPs"
    assert rows[1]["exec_errors"] == 30 * TRN1_GENERIC_ERRORS
    assert rows[1]["exec_errors_by_type"] == f"generic {30 * TRN1_GENERIC_ERRORS:,}"
    table = render(rows, "table")
    header = table.splitlines()[0]
    assert "FLOPS UTIL" in header and "EXEC ERRORS" in header
    assert f"{30 * TRN1_GENERIC_ERRORS:,}" in table.splitlines()[2]
    assert "0.74%" in table.splitlines()[1]
    assert "FLOPS UTIL n/a: neuron-monitor reported no FLOPs" in table
    json_rows = render(rows, "json")
    assert '"flops_util": null' in json_rows and '"exec_errors": 0' in json_rows


def test_run_neuron_without_samples_is_missing() -> None:
    found = run_neuron([], {})
    assert found.flops_util is None and found.exec_errors is None
    assert found.flops_note == "no neuron-monitor sample recorded"


def test_headless_line_names_the_flops_utilisation_and_errors(tmp_path: Path) -> None:
    line = progress_line(state_at(neuron_session(tmp_path, "trn2")))
    assert "FLOPs util 0.74% of BF16 peak 166.75TF" in line
    line = progress_line(state_at(neuron_session(tmp_path / "b", "trn1")))
    assert f"exec errors {20 * TRN1_GENERIC_ERRORS:,} (generic " in line


@pytest.mark.parametrize("damaged", [
    {"cores": "x", "exec_errors": "many", "exec_errors_by_type": [1, 2], "latency": [],
     "ecc": {"mem_corrected": True}, "device_mem_by_kind": {"tensors": float("nan")}},
    {"cores": [{"core": "a", "pid": [], "util": "busy", "flops": -5, "physical": "nc"}],
     "latency": {"total_latency": [0.1]}, "exec_errors": float("inf"),
     "neuroncore_version": 3, "logical_neuroncore_config": "two"},
])
def test_damaged_samples_show_as_missing_not_crash(damaged: dict[str, object]) -> None:
    n = neuron_state([{"t": T0, "kind": "neuron", **damaged}], [{"logical_cores": "64"}], {})
    assert n.flops_util is None and n.latency is None
    assert n.errors is None or n.errors.total == 0
    assert all(c.flops_util is None for c in n.cores)
    assert run_neuron([{"t": T0, **damaged}], {}).exec_errors is None


# --------------------------------------------------------------------------- the kept tally
# The supervisor adds each neuron sample up as it writes it (session/neurontally.py), so that
# compare of a day-long run need not parse every sample again.


def _neuron_events(session: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()
            if '"kind": "neuron"' in line]


def _keep_tally(session: Path, samples: int) -> neurontally.NeuronTally:
    """The sums of the session's first `samples` neuron samples, saved as the supervisor
    saves them."""
    tally = neurontally.NeuronTally()
    for event in _neuron_events(session)[:samples]:
        tally.add(event)
    neurontally.save(session, tally)
    return tally


def test_compare_starts_from_the_kept_tally_and_reads_only_what_came_after(
        tmp_path: Path) -> None:
    trn2, trn1 = neuron_session(tmp_path, "trn2"), neuron_session(tmp_path / "b", "trn1")
    read_all = compare.compare_rows([trn2, trn1])
    keys = ("flops_util", "flops_note", "flops_peak", "exec_errors", "exec_errors_by_type")
    _keep_tally(trn2, 40)
    kept = _keep_tally(trn1, 40)
    from_tally = compare.compare_rows([trn2, trn1])
    for row, expected in zip(from_tally, read_all, strict=True):
        for key in keys:
            assert row[key] == pytest.approx(expected[key]) if key == "flops_util" \
                else row[key] == expected[key], key
    # The sums are taken as they are (a changed one shows), the 20 samples after them read.
    kept.errors = (kept.errors or 0) + 1000
    neurontally.save(trn1, kept)
    assert compare.compare_rows([trn1])[0]["exec_errors"] == read_all[1]["exec_errors"] + 1000
    # Sums whose last sample is not the session's (a supervisor that died between saves
    # left samples out): every sample is read instead.
    kept.last_t = (kept.last_t or 0.0) + 0.5
    neurontally.save(trn1, kept)
    assert compare.compare_rows([trn1])[0]["exec_errors"] == read_all[1]["exec_errors"]
    (trn1 / layout.NEURON_TALLY).write_text("{not json")
    assert compare.compare_rows([trn1])[0]["exec_errors"] == read_all[1]["exec_errors"]


def test_the_supervisors_telemetry_keeps_the_tally_of_what_it_wrote(tmp_path: Path) -> None:
    """Telemetry through the real collectors and the trn2 stand-in: the kept sums are the
    sums of the neuron samples in events.jsonl, and compare's figures are the same from
    them as from every sample."""
    session = record_through_collectors("trn2", tmp_path)
    events = _neuron_events(session)
    kept = neurontally.load(session)
    assert events and kept is not None and kept.samples == len(events)
    expected = neurontally.NeuronTally()
    for event in events:
        expected.add(event)
    assert kept == expected and kept.last_t == events[-1]["t"]
    meta = json.loads((session / layout.META).read_text())
    from_kept = run_neuron_of(session)
    (session / layout.NEURON_TALLY).unlink()
    assert from_kept == run_neuron_of(session) == run_neuron(events, meta)
    assert from_kept.flops_util is not None and from_kept.flops_util > 0


def run_neuron_of(session: Path) -> object:
    reader = SessionReader(session, use_cache=True, telemetry_history=TELEMETRY_HISTORY)
    return compare.run_neuron_of(reader.load())
