"""The header at every width from 80 columns: the session's name first and whole, no phrase
said twice, the phase kept; why there is no price is said by samples/$, not in the header."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from neurotui.live.clock import FixedClock
from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.ui.app import DashboardApp
from neurotui.ui.widgets.throughput import ThroughputPanel
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.sessions import T0, Recorder, reference_session

WIDTHS = (80, 100, 120, 160)
XLA_SAMPLE = Path(__file__).resolve().parents[2] / "sessions" / "sample-xla-cpu"
REASON = "instance type unknown (not on EC2; pass --instance-type or --price-per-hour)"


def xla_sample_app() -> DashboardApp:
    """The shipped XLA sample at its end: no instance type, no price, a reason why."""
    end = json.loads((XLA_SAMPLE / "meta.json").read_text())["ended_at"]
    clock = FixedClock(end)
    model = DashboardModel(SessionReader(XLA_SAMPLE, telemetry_history=TELEMETRY_HISTORY),
                           clock, status=lambda: SessionStatus("completed", False),
                           throttle=False)
    return DashboardApp(XLA_SAMPLE, clock=clock, model=model, ascii_mode=False,
                        interval_s=3600.0)


def no_price_target_session(root: Path, name: str = "20260101-160000-no-price") -> Path:
    """Running, steady, with a step target and no price: ETA without a projected cost."""
    rec = Recorder(root, name, config={"step_target": 1000},
                   price={"usd_per_hour": None, "note": f"no price: {REASON}"})
    for n in range(1, 41):
        rec.step(T0 + n * 0.5, 0, n, 0.5)
    return rec.close()


async def header_at(app: DashboardApp, width: int) -> tuple[list[str], str]:
    """The header's two lines as the terminal shows them, and the throughput panel's text."""
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot)
        lines = screen_text(app).splitlines()[:2]
        panel = app.query_one(ThroughputPanel).render().plain
    return lines, panel


def assert_no_phrase_repeated(lines: list[str]) -> None:
    words = " ".join(lines).split()
    pairs = list(itertools.pairwise(words))
    assert len(pairs) == len(set(pairs)), lines


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_xla_samples_header(width: int) -> None:
    lines, panel = await header_at(xla_sample_app(), width)
    first = lines[0]
    assert first.startswith(" sample-xla-cpu ")  # first, whole
    assert "FINISHED" in first and "completed" in lines[1]
    assert "price ?" in first and "no price" not in " ".join(lines)
    assert "not on EC2" not in " ".join(lines) and "…" not in " ".join(lines)
    assert_no_phrase_repeated(lines)
    # Why: by samples/$ in the throughput panel, whole where it has the room.
    said = " ".join(panel.split())
    assert "samples/$ n/a" in said and "no price: instance typ" in said
    if width >= 120:
        assert f"no price: {REASON}" in said


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_priced_run_keeps_name_price_and_phase(tmp_path: Path, width: int) -> None:
    lines, _ = await header_at(make_app(reference_session(tmp_path)), width)
    first = lines[0]
    assert first.startswith(" 20260101-120000-vit-b16 ")
    assert first.rstrip().endswith("STEADY") and "trn1.2xlarge" in first
    assert "$1.34/h" in first and "…" not in first
    if width >= 100:  # (at 80 the cost so far gives way to the price, the name's length)
        assert "$0.0261 so far" in first
    if width >= 120:
        assert "(table, 2025-06-01)" in first  # where the price comes from, given room
    assert lines[1].startswith(" step 120/500  ETA ")
    assert_no_phrase_repeated(lines)


@pytest.mark.parametrize("width", WIDTHS)
async def test_no_price_is_said_once(tmp_path: Path, width: int) -> None:
    lines, panel = await header_at(make_app(no_price_target_session(tmp_path), at=21),
                                   width)
    text = " ".join(lines)
    assert lines[0].startswith(" 20260101-160000-no-price ") and "STEADY" in lines[0]
    assert "price ?" in lines[0] and "no price" not in text and "cost n/a" not in text
    assert "ETA " in lines[1] and "projected" not in lines[1]
    assert_no_phrase_repeated(lines)
    assert "no price: instance typ" in " ".join(panel.split())


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_name_longer_than_the_line_is_cut_at_its_end(tmp_path: Path,
                                                             width: int) -> None:
    name = "20260101-170000-" + "a-very-long-experiment-name-" * 6
    lines, _ = await header_at(make_app(no_price_target_session(tmp_path, name), at=21),
                               width)
    assert lines[0].startswith(" 20260101-170000-a-very-long")
    assert lines[0].rstrip().endswith("…") and len(lines[0].rstrip()) <= width
    assert "STEADY" in lines[1]  # the phase moved to line two, kept


async def test_a_name_that_fits_only_alone_keeps_the_line(tmp_path: Path) -> None:
    name = "20260101-170000-" + "x" * 58  # 74 columns: whole at 80, with nothing beside it
    lines, _ = await header_at(make_app(no_price_target_session(tmp_path, name), at=21), 80)
    assert lines[0].rstrip() == f" {name}"
    assert lines[1].split()[:3] == ["STEADY", "step", "40/1,000"]
