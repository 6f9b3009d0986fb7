"""A session's JSON: read within limits (size, depth, type), written strict (no NaN, no
Infinity: null, named in `nonfinite`), and older sessions' bare NaN still read."""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
from pathlib import Path

import pytest

from neurotui.session import layout, neurontally
from neurotui.session.jsonfile import (
    JsonFileError,
    dumps_strict,
    loads_limited,
    read_json_file,
    restore_nonfinite,
    strict,
)
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.reader import SessionReader, json_loads
from neurotui.session.writer import EventWriter, update_meta, write_json_atomic

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "sessions" / "sample-cpu-gloo"


def strict_loads(text: str | bytes) -> object:
    """A strict JSON reader: NaN and Infinity are refused, as other languages' parsers do."""
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_depth_and_size_past_the_limits_are_named_problems(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("[" * 1000 + "]" * 1000)  # past the parser's own recursion limit
    with pytest.raises(JsonFileError, match="nested deeper than 32 levels"):
        read_json_file(path, 1 << 20)
    path.write_text("[" * 40 + "]" * 40)  # parsed, then refused
    with pytest.raises(JsonFileError, match="nested deeper than 32 levels"):
        read_json_file(path, 1 << 20)
    path.write_text("[" * 32 + "]" * 32)
    assert read_json_file(path, 1 << 20) is not None
    path.write_text(json.dumps({"pad": "x" * 2000}))
    with pytest.raises(JsonFileError, match="2,011 bytes, over the 1,000"):
        read_json_file(path, 1000)
    path.write_bytes(b"\xff{")
    with pytest.raises(JsonFileError):
        read_json_file(path, 1000)
    with pytest.raises(FileNotFoundError):
        read_json_file(tmp_path / "none.json", 1000)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "meta.json")
    done: list[BaseException] = []

    def read() -> None:
        try:
            load_meta(tmp_path)
        except SessionFormatError as exc:
            done.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert done and "not a regular file" in str(done[0])


@pytest.mark.parametrize(("change", "reason"), [
    ({"started_at": "yesterday"}, "`started_at` is a string, not a number"),
    ({"exit": "done"}, "`exit` is a string, not an object"),
    ({"user_command": "python train.py"}, "`user_command` is a string, not a list"),
    ({"command": ["python", 3]}, "`command` holds something other than strings"),
    ({"job_pid": 1.5}, "`job_pid` is a number, not a whole number"),
    ({"supervisor_pid": True}, "`supervisor_pid` is true/false, not a whole number"),
    ({"format": "1"}, "no format version"),
])
def test_fields_of_the_wrong_type_are_named(tmp_path: Path, change: dict[str, object],
                                            reason: str) -> None:
    meta = json.loads((SAMPLE / layout.META).read_text())
    (tmp_path / layout.META).write_text(json.dumps({**meta, **change}))
    with pytest.raises(SessionFormatError) as caught:
        load_meta(tmp_path)
    assert str(caught.value) == f"{tmp_path / layout.META}: {reason}"


def test_meta_json_is_written_strict_and_read_back(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / layout.META, {
        "format": 1, "started_at": 1.0, "summary": {"loss": math.nan, "s": [1.0, -math.inf]}})
    text = (tmp_path / layout.META).read_text()
    meta = strict_loads(text)
    assert meta == {"format": 1, "started_at": 1.0, "summary": {"loss": None, "s": [1.0, None]},
                    "nonfinite": {"summary.loss": "nan", "summary.s.1": "-inf"}}
    update_meta(tmp_path, ended_at=math.inf)  # merged with the places already named
    meta = strict_loads((tmp_path / layout.META).read_text())
    assert meta["ended_at"] is None and meta["nonfinite"] == {
        "summary.loss": "nan", "summary.s.1": "-inf", "ended_at": "inf"}


def test_events_are_written_strict_and_read_back_as_they_were(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path / layout.EVENTS)
    writer.write("step", t=5.0, rank=0, step=1, samples=8, loss=math.nan, dt=0.5,
                 phases={"data": math.inf, "step": 0.25}, src="log", attempt=0)
    writer.write("host", t=6.0, cpu=[10.0, 20.0], mem_used=1, mem_total=2, load=None)
    writer.close()
    lines = (tmp_path / layout.EVENTS).read_bytes().splitlines()
    first, second = (strict_loads(line) for line in lines)
    assert first["loss"] is None and first["phases"] == {"data": None, "step": 0.25}
    assert first["nonfinite"] == {"loss": "nan", "phases.data": "inf"}
    assert "nonfinite" not in second  # a record of finite numbers is as it was
    read = json_loads(lines[0])
    assert math.isnan(read["loss"]) and read["phases"]["data"] == math.inf


def test_strict_leaves_finite_records_alone_and_restore_is_its_inverse() -> None:
    record = {"t": 1.0, "a": [1, 2.5, {"b": "text"}]}
    assert strict(record) is record
    odd = {"t": 1.0, "a": [math.nan, {"b": -math.inf}], "c": {"d": math.inf}}
    back = restore_nonfinite(json.loads(json.dumps(strict(odd), allow_nan=False)))
    assert math.isnan(back["a"][0]) and back["a"][1] == {"b": -math.inf}
    assert back["c"] == {"d": math.inf}
    rows = [{"x": math.nan}, {"x": 1.0}]
    assert strict_loads(dumps_strict(rows)) == [{"x": None, "nonfinite": {"x": "nan"}},
                                                {"x": 1.0}]


def test_older_sessions_with_bare_nan_are_still_read(tmp_path: Path) -> None:
    session = tmp_path / "old"
    shutil.copytree(SAMPLE, session)
    probe = layout.probe_path(session, 0)
    last = json.loads(probe.read_text().splitlines()[-1])
    with open(probe, "a") as f:  # as neurotui wrote it before: bare NaN and Infinity
        f.write(json.dumps({**last, "t": last["t"] + 0.01, "step": last["step"] + 1,
                            "loss": math.nan, "dt": 0.01}) + "\n")
    assert "NaN" in probe.read_text()
    reader = SessionReader(session).load()
    assert reader.problems.summary() is None
    steps = reader.steps()
    row = steps[(steps["rank"] == 0) & (steps["step"] == last["step"] + 1)]
    assert len(row) == 1 and math.isnan(float(row["loss"].iloc[0]))
    assert loads_limited("[NaN, Infinity]")[1] == math.inf


def test_neuron_tally_with_nonfinite_flops_round_trips(tmp_path: Path) -> None:
    tally = neurontally.NeuronTally(3, 10.0, "2.20", 2, {("2.20", 2): [math.nan, 3, 2]}, 0,
                                    {}, [])
    neurontally.save(tmp_path, tally)
    strict_loads((tmp_path / layout.NEURON_TALLY).read_text())
    back = neurontally.load(tmp_path)
    assert back is not None and math.isnan(back.flops[("2.20", 2)][0])
    (tmp_path / layout.NEURON_TALLY).write_text("[" * 1000 + "]" * 1000)
    assert neurontally.load(tmp_path) is None  # derived: without it, compare reads samples


def test_naming_a_session_by_its_folder_reads_no_other_meta_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neurotui.session import jobs

    for name in ("a", "b", "c"):
        shutil.copytree(SAMPLE, tmp_path / name)
    read: list[str] = []
    real = jobs.load_meta
    monkeypatch.setattr(jobs, "load_meta", lambda path: read.append(path.name) or real(path))
    assert jobs.job_parts(tmp_path, "b") == [] and read == []
    assert jobs.job_parts(tmp_path, str(tmp_path / "c")) == [] and read == []
    assert jobs.job_parts(tmp_path, "some-job") == [] and read == ["a", "b", "c"]
