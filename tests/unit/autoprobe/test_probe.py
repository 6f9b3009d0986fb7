"""The probe: a no-op outside neurotui, one JSON line per step inside, never raises."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from neurotui import probe
from neurotui.session.reader import json_loads


@pytest.fixture(autouse=True)
def fresh_probe(monkeypatch: pytest.MonkeyPatch):
    for var in ("NEUROTUI_SESSION", "NEUROTUI_PROBE", "RANK", "NEUROTUI_ATTEMPT"):
        monkeypatch.delenv(var, raising=False)
    probe._reset_for_tests()
    yield
    probe._reset_for_tests()


def test_outside_neurotui_it_does_nothing(tmp_path: Path) -> None:
    probe.step(16, 0.5)
    assert not probe.enabled()
    assert list(tmp_path.iterdir()) == []


def test_records_rank_step_loss_phases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEUROTUI_SESSION", str(tmp_path))
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("NEUROTUI_ATTEMPT", "2")
    probe.step(16, 0.25, phases={"data": 0.5})
    probe.step(16, float("nan"))
    probe.step(8, loss=None, step=10, dt=2.5)
    lines = (tmp_path / "probe" / "rank-3.jsonl").read_text().splitlines()
    records = [json.loads(line, parse_constant=_refuse) for line in lines]  # strict JSON
    assert [r["step"] for r in records] == [1, 2, 10]
    assert records[0]["rank"] == 3 and records[0]["attempt"] == 2
    assert records[0]["phases"] == {"data": 0.5} and records[0]["dt"] is None
    assert "nonfinite" not in records[0]
    # NaN kept, as null and named: a diverging loss is news
    assert records[1]["loss"] is None and records[1]["nonfinite"] == {"loss": "nan"}
    assert math.isnan(json_loads(lines[1].encode())["loss"])
    assert records[1]["dt"] >= 0
    assert records[2]["loss"] is None and records[2]["samples"] == 8
    assert records[2]["dt"] == 2.5


def test_a_tensor_like_loss_is_not_converted(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    class Syncing:
        def __float__(self) -> float:
            raise AssertionError("float() would force a device sync")

    monkeypatch.setenv("NEUROTUI_SESSION", str(tmp_path))
    probe.step(16, Syncing())  # type: ignore[arg-type]
    record = json.loads((tmp_path / "probe" / "rank-0.jsonl").read_text())
    assert record["loss"] is None


def test_an_unwritable_session_switches_it_off_silently(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NEUROTUI_SESSION", str(blocker))  # a file, so probe/ cannot be made
    probe.step(16, 0.5)
    probe.step(16, 0.5)
    assert not probe.enabled()


def test_disabled_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEUROTUI_SESSION", str(tmp_path))
    monkeypatch.setenv("NEUROTUI_PROBE", "0")
    probe.step(16, 0.5)
    assert not (tmp_path / "probe").exists()


def test_phase_names_are_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEUROTUI_SESSION", str(tmp_path))
    probe.step(16, 0.5, phases={'we"ird\n': 1.5, "data": float("nan"), "x.y": float("-inf")})
    line = (tmp_path / "probe" / "rank-0.jsonl").read_text()
    record = json.loads(line, parse_constant=_refuse)
    assert record["phases"] == {'we"ird\n': 1.5, "data": None, "x.y": None}
    assert record["nonfinite"] == {"phases.data": "nan", "phases.x.y": "-inf"}
    read = json_loads(line.encode())  # as the reader reads it: the values back
    assert math.isnan(read["phases"]["data"]) and read["phases"]["x.y"] is None


def test_nonfinite_samples_and_dt_are_null_and_named(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEUROTUI_SESSION", str(tmp_path))
    probe.step(float("inf"), 0.5, dt=float("nan"))
    line = (tmp_path / "probe" / "rank-0.jsonl").read_text()
    record = json.loads(line, parse_constant=_refuse)
    assert record["samples"] is None and record["dt"] is None
    assert record["nonfinite"] == {"samples": "inf", "dt": "nan"}


def _refuse(constant: str) -> None:
    raise AssertionError(f"not strict JSON: {constant}")


def test_a_step_it_cannot_record_is_left_out_and_said_once(tmp_path, monkeypatch,
                                                            capsys) -> None:
    monkeypatch.setenv("NEUROTUI_SESSION", str(tmp_path))
    probe._reset_for_tests()
    probe.step(samples=16, step=2**63)
    probe.step(samples=16, step=-1)
    probe.step(samples=16, step=7)
    lines = (tmp_path / "probe" / "rank-0.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [7]
    err = capsys.readouterr().err
    assert err.count("cannot be recorded") == 1
    probe._reset_for_tests()
