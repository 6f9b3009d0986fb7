"""--headless and the dashboard print the same figures for the same session: both render the
states of one live model (neurotui.live), formatted by the same helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui import fmt
from neurotui.headless import progress_line
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.sessions import reference_session


async def test_headless_prints_what_the_dashboard_shows(tmp_path: Path) -> None:
    app = make_app(reference_session(tmp_path), at=40.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = screen_text(app)
        state = app.model.refresh()  # the clock is fixed: the state the screen shows
    line = progress_line(state)
    header, tp = state.header, state.throughput
    assert tp.steady is not None and tp.now_sps is not None and header.cost_usd is not None
    figures = [
        fmt.duration(header.elapsed_s),
        f"step {header.step}",
        fmt.rate(tp.now_sps, " samples/s"),
        fmt.seconds(tp.steady.step_time_median),
        fmt.usd(header.cost_usd),
        fmt.count(tp.spd_steady),
    ]
    for figure in figures:
        assert figure in line, (figure, line)
        assert figure in screen, (figure, screen)
    assert header.phase in line and header.phase.upper() in screen


async def test_an_epochs_time_and_cost_on_both(tmp_path: Path) -> None:
    """With --dataset-size: one epoch at the steady rate, its cost, and epochs done, on the
    screen and in the headless line, from the same state."""
    app = make_app(reference_session(tmp_path, dataset_size=50_000), at=40.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = screen_text(app)
        state = app.model.refresh()
    tp = state.throughput
    assert tp.steady is not None and tp.epoch is not None and tp.epochs_done is not None
    # The steady rate is samples/s of both ranks; an epoch is 50,000 samples of it.
    assert tp.epoch.remaining_s == pytest.approx(50_000 / tp.steady.samples_per_s)
    assert tp.epoch.remaining_usd == pytest.approx(tp.epoch.remaining_s / 3600 * 1.34375)
    assert tp.epochs_done == pytest.approx(tp.total_samples / 50_000)
    epoch = f"epoch {fmt.short_duration(tp.epoch.remaining_s)}, {fmt.usd(tp.epoch.remaining_usd)}"
    assert epoch in progress_line(state)
    assert epoch in screen and f"done {tp.epochs_done:,.2f}" in screen
