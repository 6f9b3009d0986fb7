"""The live model's step breakdown equals metrics/breakdown.py's batch form on the same
recorded session, live and replayed; a run without phases is told how to add them."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from neurotui import probe
from neurotui.live.clock import FixedClock
from neurotui.live.model import BreakdownState, DashboardModel
from neurotui.metrics import breakdown as bd
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.timeline import Timeline
from tests.ui.phased_sessions import phased_session
from tests.ui.sessions import RUNNING, T0


def same_history(got: bd.BreakdownHistory | None, expected: object) -> None:
    assert isinstance(got, bd.BreakdownHistory) and isinstance(expected, bd.BreakdownHistory)
    assert (got.start, got.bucket_s, got.names) == (expected.start, expected.bucket_s,
                                                    expected.names)
    np.testing.assert_allclose(got.shares, expected.shares, rtol=1e-9)
    np.testing.assert_allclose(got.step_s, expected.step_s, rtol=1e-9)


def state_at(session: Path, at: float) -> BreakdownState:
    model = DashboardModel(SessionReader(session), FixedClock(T0 + at), status=lambda: RUNNING,
                           throttle=False)
    found = model.refresh().breakdown
    assert found is not None
    return found


def batch(session: Path, until: float | None = None) -> tuple[bd.StepBreakdown, object]:
    reader = SessionReader(session).load()
    steps, phases, compiles = reader.steps(), reader.phases(), reader.frame("compile")
    if until is not None:
        steps, phases = steps[steps["t"] <= until], phases[phases["t"] <= until]
    end = T0 + 70 if until is None else until
    return (bd.step_breakdown(steps, phases, compiles),
            bd.breakdown_history(steps, phases, T0, end))


def test_a_starved_run_shows_data_loading_as_the_largest_share(tmp_path: Path) -> None:
    session = phased_session(tmp_path, starved=True)
    got = state_at(session, 70)
    expected, history = batch(session)
    assert got.job == expected.job and got.ranks == expected.ranks
    same_history(got.history, history)
    assert got.job is not None and got.job.largest() == "data"
    assert got.job.share("data") == pytest.approx(0.66, abs=0.01)
    assert got.grew is not None and got.grew.phase == "data" and got.grew.ratio > 0.3
    assert got.note is None and got.source == "the script's probe.step phases"


def test_a_healthy_run_does_not(tmp_path: Path) -> None:
    got = state_at(phased_session(tmp_path, starved=False), 70)
    assert got.job is not None and got.job.largest() == "backward"
    assert got.job.share("data") < 0.05 and got.grew is None


def test_replay_shows_what_the_live_view_showed_at_that_moment(tmp_path: Path) -> None:
    session = phased_session(tmp_path, starved=True, steps=140)
    view = Timeline(session).view()
    model = DashboardModel(view, FixedClock(T0 + 40), status=lambda: RUNNING, throttle=False)
    for at in (50.0, 40.0, 60.0):  # back in time too: the model starts over
        view.seek(T0 + at)
        model.clock = FixedClock(T0 + at)
        got = model.refresh().breakdown
        expected, history = batch(session, T0 + at)
        assert got is not None and got.job == expected.job and got.ranks == expected.ranks
        same_history(got.history, history)


def test_no_phases_say_how_to_add_them_with_the_real_probe_call(tmp_path: Path) -> None:
    got = state_at(phased_session(tmp_path, phases=False), 70)
    assert got.job is None and got.ranks == () and got.grew is None
    assert got.note == bd.NO_PHASES_NOTE
    # The call quoted is the probe's own documented one, with its real signature.
    call = 'probe.step(samples=16, phases={"data": 0.01, "forward": 0.05})'
    assert call in got.note and call in (probe.__doc__ or "")
    assert {"samples", "phases"} <= set(inspect.signature(probe.step).parameters)


def test_warm_up_and_no_steps_yet(tmp_path: Path) -> None:
    session = phased_session(tmp_path, steps=8)
    got = state_at(session, 70)
    assert got.job is None and got.note is not None and "after warm-up" in got.note
    empty = phased_session(tmp_path, steps=0, name="20260101-170000-empty")
    assert state_at(empty, 5).note == "no step recorded yet"


def test_the_automatic_probes_phases_are_named_for_what_they_are(tmp_path: Path) -> None:
    session = phased_session(tmp_path, phases=False)
    # Rewrite the steps as the automatic probe records them: data wait and the rest.
    for path in (session / layout.PROBE_DIR).glob("rank-*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for r in rows:
            r["src"] = "auto"
            r["phases"] = {"data": 0.25, "step": r["dt"] - 0.25}
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = state_at(session, 70)
    assert got.job is not None and got.job.names == ("data", "step")
    assert got.source is not None and got.source.startswith("automatic probe")


def test_an_unchanged_breakdown_compares_equal(tmp_path: Path) -> None:
    """Panels redraw only when their state changed: NaN buckets must not make two alike
    states differ."""
    model = DashboardModel(SessionReader(phased_session(tmp_path)), FixedClock(T0 + 70),
                           status=lambda: RUNNING, throttle=False)
    first, second = model.refresh().breakdown, model.refresh().breakdown
    assert first is not None and first.history is not None
    assert any(x != x for x in first.history.step_s)  # empty buckets (NaN) in it
    assert first == second
