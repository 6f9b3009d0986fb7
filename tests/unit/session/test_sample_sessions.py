"""The sample sessions shipped in sessions/ are real, complete recordings that load cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui import metrics
from neurotui.session.reader import SessionReader

SESSIONS = Path(__file__).resolve().parents[3] / "sessions"
SAMPLES = sorted(SESSIONS.glob("sample-*"))


def test_at_least_two_samples_with_different_settings() -> None:
    assert len(SAMPLES) >= 2
    commands = {" ".join(SessionReader(p).meta["user_command"]) for p in SAMPLES}
    assert len(commands) == len(SAMPLES)


@pytest.mark.parametrize("session", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_is_a_complete_labelled_recording(session: Path) -> None:
    reader = SessionReader(session).load()
    assert reader.problems.summary() is None
    meta = reader.meta
    assert meta["id"] == session.name and meta["exit"]["reason"] == "completed"
    steps = reader.steps()
    assert sorted(steps["rank"].unique()) == [0, 1]
    assert steps.groupby("rank")["step"].max().min() >= 100
    steady = metrics.steady_state(steps)
    assert steady is not None and steady.samples_per_s
    assert meta["summary"]["steady_samples_per_s"] == pytest.approx(steady.samples_per_s)
    label = (session / "RECORDED.md").read_text()
    assert "python -m runner.record_samples" in label and "machine:" in label
    assert reader.events["procs"] and reader.events["host"]
