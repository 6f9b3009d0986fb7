"""`neurotui ls`: every session with its state and how long it ran, bad ones named."""

from __future__ import annotations

from pathlib import Path

from neurotui.session import layout
from tests.e2e.conftest import run_cli
from tests.ui.sessions import Recorder, reference_session


def test_ls_lists_states_and_durations_and_names_a_bad_meta(tmp_path: Path) -> None:
    reference_session(tmp_path, end=True)  # crashed after 1m12s
    Recorder(tmp_path, "20260101-160000-nostart", started_at=None,
             ended_at=None).close()  # a meta without a start: no duration to show
    broken = tmp_path / "20260101-170000-broken"
    broken.mkdir()
    (broken / layout.META).write_text("{not json")
    result = run_cli(tmp_path, "ls")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    crashed = rows["20260101-120000-vit-b16"].split()
    assert crashed[1:3] == ["failed", "1m12s"], crashed
    assert "torchrun train.py" in rows["20260101-120000-vit-b16"]
    assert rows["20260101-160000-nostart"].split()[2] == "n/a"
    assert "unreadable" in rows["20260101-170000-broken"]


def test_a_session_without_meta_is_listed_as_broken_and_named_when_asked_for(
        tmp_path: Path) -> None:
    lost = tmp_path / "20260101-180000-nometa"
    (lost / layout.PROBE_DIR).mkdir(parents=True)
    (lost / layout.EVENTS).write_text('{"t": 1.0, "kind": "host"}\n')
    (tmp_path / "not-a-session").mkdir()  # an unrelated folder stays out of the list
    result = run_cli(tmp_path, "ls")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert rows["20260101-180000-nometa"].split()[1] == "broken"
    assert "no meta.json" in rows["20260101-180000-nometa"]
    assert "not-a-session" not in rows
    asked = run_cli(tmp_path, "compare", "nometa")
    assert asked.returncode != 0 and "has no meta.json: the session is broken" in asked.stderr
