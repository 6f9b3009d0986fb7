"""The reader tolerates bad input, refuses newer formats, and merges probe and log steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from neurotui.session import layout
from neurotui.session.reader import SessionFormatError, SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic


def make_session(tmp_path: Path, **meta_extra: object) -> Path:
    d = tmp_path / "20260101-000000-test"
    (d / "probe").mkdir(parents=True)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name, "exit": None,
                                        "started_at": 100.0, **meta_extra})
    return d


def step(t: float, rank: int, n: int, src: str = "probe", **kw: object) -> dict:
    return {"t": t, "kind": "step", "rank": rank, "step": n, "samples": 16, "loss": 1.0,
            "dt": 0.1, "src": src, "attempt": 0, **kw}


def test_writer_lines_come_back_as_steps(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    w = EventWriter(d / layout.EVENTS)
    for i in range(1, 4):
        w.write("step", t=100.0 + i, rank=0, step=i, samples=16, loss=0.5, dt=0.1, src="log",
                attempt=0)
    w.write("proc_start", attempt=0, pid=1, pgid=1, argv=["x"])
    w.close()
    r = SessionReader(d).load()
    steps = r.steps()
    assert list(steps["step"]) == [1, 2, 3]
    assert steps["samples"].sum() == 48
    assert r.last("proc_start")["pid"] == 1
    assert r.problems.summary() is None


def test_truncated_last_line_waits_while_live_then_counts(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    path = d / layout.EVENTS
    good = json.dumps(step(101, 0, 1, src="log"))
    path.write_text(good + "\n" + good[:25])
    r = SessionReader(d)
    assert r.poll() == 1
    assert r.problems.truncated_lines == 0  # live: the writer may still finish the line
    with open(path, "a") as f:  # the rest of the line arrives
        f.write(good[25:] + "\n")
    assert r.poll() == 1
    with open(path, "a") as f:
        f.write('{"t": 1, "kind": "st')
    r.poll(final=True)
    assert r.problems.truncated_lines == 1
    assert len(r.steps()) == 2


def test_garbage_binary_and_unknown_kinds_are_counted_not_fatal(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    lines = [json.dumps(step(101, 0, 1, src="log")).encode(), b"\x00\xff\xfe garbage \x1b[31m",
             b"[1, 2, 3]", b'{"kind": "step"}', json.dumps({"t": 1, "kind": "future"}).encode(),
             json.dumps(step(102, 0, 2, src="log")).encode(), b'{"t": 3, "kind": "step"}']
    (d / layout.EVENTS).write_bytes(b"\n".join(lines) + b"\n")
    r = SessionReader(d).load()
    assert len(r.steps()) == 2
    assert r.problems.bad_lines == 4
    assert r.problems.unknown_kinds["future"] == 1
    summary = r.problems.summary()
    assert "events.jsonl:2" in summary and "future x1" in summary


def test_newer_format_is_refused_clearly(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION + 1})
    with pytest.raises(SessionFormatError, match="newer than this neurotui reads"):
        SessionReader(d)


def test_missing_and_corrupt_meta_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SessionFormatError, match=r"meta\.json: missing"):
        SessionReader(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(SessionFormatError, match=r"meta\.json: unreadable"):
        SessionReader(tmp_path)


def test_probe_steps_win_over_log_steps_of_the_same_rank(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    with open(d / layout.EVENTS, "w") as f:
        for i in (1, 2):
            f.write(json.dumps(step(100 + i, 0, i, src="log")) + "\n")
            f.write(json.dumps(step(100 + i, 1, i, src="log")) + "\n")
    with open(layout.probe_path(d, 0), "w") as f:
        for i in (1, 2):
            f.write(json.dumps(step(100 + i, 0, i, phases={"data": 0.01})) + "\n")
    r = SessionReader(d).load()
    steps = r.steps()
    assert sorted(steps.loc[steps["rank"] == 0, "src"].unique()) == ["probe"]
    assert sorted(steps.loc[steps["rank"] == 1, "src"].unique()) == ["log"]
    assert len(steps) == 4
    assert list(r.phases()["data"]) == [0.01, 0.01]


def test_nan_loss_survives_the_round_trip(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    (layout.probe_path(d, 0)).write_text('{"t":1.0,"kind":"step","rank":0,"step":1,'
                                         '"samples":16,"loss":NaN,"dt":null,"src":"probe"}\n')
    steps = SessionReader(d).load().steps()
    assert math.isnan(steps["loss"].iloc[0]) and math.isnan(steps["dt"].iloc[0])


def test_a_full_disk_loses_events_but_never_raises(capsys: pytest.CaptureFixture[str]) -> None:
    writer = EventWriter(Path("/dev/full"))  # every write fails with ENOSPC, like a full disk
    writer.write("host", cpu=[1.0])
    writer.flush()
    writer.write("host", cpu=[2.0])
    writer.flush()
    writer.close()
    assert writer.failed_writes >= 2
    assert "training goes on" in capsys.readouterr().err
