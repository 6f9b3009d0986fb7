"""The accelerator panel on Neuron sessions recorded through the stand-ins (tests/ui/
neuron_sessions.py): cores as the SDK counts them, FLOPs utilisation against the named peak,
memory by kind, errors, latency, ECC; the trn1 capture's missing FLOPs said missing; the same in
replay; the compare screen's columns; the header's price region. Pilot and snapshots.

Update the snapshots after an intended change with `--snapshot-update`, then read the SVGs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from neurotui.ui.compare_app import CompareApp
from neurotui.ui.replay import ReplayApp
from neurotui.ui.widgets.accelerator import AcceleratorPanel
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.neuron_sessions import neuron_session
from tests.ui.sessions import Recorder
from tests.ui.test_compare_screen import settle as compare_settle
from tests.ui.test_compare_screen import table_cells

Compare = Callable[..., bool]
# 1234567891011 flops/s (the 2.30 fragment's core 0) over 667e12 / 8 x 2 (Trainium2's BF16
# peak per chip over its 8 cores, two per logical core under LNC 2): 0.7404 %.
TRN2_CORE_FLOPS_PCT = f"{1234567891011 / (667e12 / 8 * 2) * 100:.2f}%"
# 20 of the 40 samples kept are the trn1 full report, each with 23654 generic errors.
TRN1_ERRORS = f"{20 * 23654:,}"


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


async def _settled_blurred(pilot: Pilot[object]) -> None:
    await settle(pilot)
    pilot.app.screen.set_focus(None)
    await pilot.pause()


async def test_trn2_panel_shows_logical_cores_flops_utilisation_and_detail(
        tmp_path: Path) -> None:
    app = make_app(neuron_session(tmp_path, "trn2"), at=50)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(AcceleratorPanel)
        assert panel.border_title == "Accelerator: 2/64 logical NeuronCores, LNC 2, v3d"
        text = screen_text(app)
    assert TRN2_CORE_FLOPS_PCT == "0.74%"
    assert f"FLOPs util {TRN2_CORE_FLOPS_PCT} mean vs BF16 peak 166.75 TF/core (LNC 2)" in text
    assert f"42% FLOPs {TRN2_CORE_FLOPS_PCT}" in text
    assert "nc_v3.0 21% nc_v3.1 63%" in text and "nc_v3.2 21% nc_v3.3 63%" in text
    assert "mem by kind tensors 40.0M constants 370.0M code 336.2M" in text
    assert "exec errors (last 39s) none" in text
    assert "latency p50 11.0ms p99 11.0ms  device 10.0ms/10.0ms" in text
    assert "ECC corrected mem 0 sram 0  uncorrected mem 0 sram 0" in text
    assert "667 BF16 TFLOPS per chip / 8 cores = 83.375" in text
    assert "AWS Neuron docs 2025-12-02; BF16 assumed" in text


async def test_trn2_at_80_columns_keeps_the_essentials(tmp_path: Path) -> None:
    app = make_app(neuron_session(tmp_path, "trn2"), at=50)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(AcceleratorPanel)
        assert panel.border_title == "Accelerator: 2/64 NCs, LNC 2, v3d"
        text = screen_text(app)
    assert f"FLOPs {TRN2_CORE_FLOPS_PCT} of BF16 peak 166.75TF" in text
    assert text.count(f"FLOPs {TRN2_CORE_FLOPS_PCT} ") == 3  # the mean and each core's


async def test_trn1_capture_shows_flops_missing_and_its_errors(tmp_path: Path) -> None:
    app = make_app(neuron_session(tmp_path, "trn1"), at=50)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(AcceleratorPanel)
        assert panel.border_title == "Accelerator: 2/2 logical NeuronCores, LNC 1, v2"
        text = screen_text(app)
    assert "FLOPs util —: neuron-monitor reported no FLOPs" in text
    assert "FLOPs     — 97.5M pid 1337" in text  # a core's: missing, never 0%
    assert f"exec errors (last 38s) {TRN1_ERRORS}: generic {TRN1_ERRORS}" in text


async def test_replay_shows_the_panel(tmp_path: Path) -> None:
    app = ReplayApp(neuron_session(tmp_path, "trn2"), at="0:50", paused=True,
                    interval_s=3600.0, ascii_mode=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    assert "Accelerator: 2/64 logical NeuronCores, LNC 2, v3d" in text
    assert f"FLOPs util {TRN2_CORE_FLOPS_PCT} mean vs BF16 peak 166.75 TF/core" in text
    assert "exec errors (last 39s) none" in text


async def test_header_names_the_price_region(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "20260101-170000-priced", instance={
        "type": "trn2.48xlarge", "source": "imds", "region": "us-east-2"},
        price={"usd_per_hour": 44.7, "source": "built-in table", "as_of": "2025-11-01",
               "spot": False, "region": "us-east-2", "price_region": "us-east-2"})
    app = make_app(rec.close(), at=5)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        text = screen_text(app)
    assert "$44.70/h (built-in table, us-east-2 price, 2025-11-01)" in text


async def test_compare_screen_has_flops_and_error_columns(tmp_path: Path) -> None:
    trn2, trn1 = neuron_session(tmp_path, "trn2"), neuron_session(tmp_path, "trn1")
    app = CompareApp(tmp_path, [trn2, trn1], ascii_mode=False)
    async with app.run_test(size=(240, 40)) as pilot:
        await compare_settle(pilot)
        cells = table_cells(app)
    assert cells[trn2.name]["flops_util"] == TRN2_CORE_FLOPS_PCT
    assert cells[trn2.name]["exec_errors"] == "0"
    assert cells[trn1.name]["flops_util"] == "n/a"  # no FLOPs reported: missing, not 0%
    # 60 samples, one a second, half of them the full report with 23654 generic errors.
    assert cells[trn1.name]["exec_errors"] == f"{30 * 23654:,}"


class TestSnapshots:
    def test_trn2_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(neuron_session(tmp_path, "trn2"), at=50)
        assert snap_compare(app, terminal_size=(120, 36), run_before=_settled_blurred)

    def test_trn2_80x24(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(neuron_session(tmp_path, "trn2"), at=50)
        assert snap_compare(app, terminal_size=(80, 24), run_before=_settled_blurred)

    def test_trn2_ascii_160x48(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(neuron_session(tmp_path, "trn2"), at=50, ascii_mode=True)
        assert snap_compare(app, terminal_size=(160, 48), run_before=_settled_blurred)

    def test_trn1_120x36(self, snap_compare: Compare, tmp_path: Path) -> None:
        app = make_app(neuron_session(tmp_path, "trn1"), at=50)
        assert snap_compare(app, terminal_size=(120, 36), run_before=_settled_blurred)
