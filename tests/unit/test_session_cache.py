"""The reader's columnar cache: a restored read equals a fresh parse of the JSON lines, bytes
appended after the cache are read, and a source that shrank or was rewritten rebuilds it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from neurotui.session import cache, layout
from neurotui.session import reader as reader_module
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

FINISHED = {"code": 0, "signal": None, "reason": "completed", "attempts": 1}


@pytest.fixture(autouse=True)
def cache_small_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    # Real sessions are cached from 8 MiB of JSON lines up; these are a few KiB.
    monkeypatch.setattr(cache, "MIN_SOURCE_BYTES", 0)


def step(t: float, rank: int, n: int, src: str = "probe", **kw: object) -> str:
    record = {"t": t, "kind": "step", "rank": rank, "step": n, "samples": 16, "loss": 2.0 / (n + 1),
              "dt": 0.1, "phases": None, "src": src, "attempt": 0, **kw}
    return json.dumps(record) + "\n"


def event(t: float, kind: str, **fields: object) -> str:
    return json.dumps({"t": t, "kind": kind, **fields}) + "\n"


def make_session(tmp_path: Path, steps: int = 30, ranks: int = 2, finished: bool = True) -> Path:
    d = tmp_path / "20260101-000000-cached"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(d / layout.META, {
        "format": FORMAT_VERSION, "id": d.name, "started_at": 100.0,
        "ended_at": 200.0 if finished else None, "exit": FINISHED if finished else None})
    for r in range(ranks):
        lines = [step(110 + i * 0.1, r, i, phases={"data": 0.01 * r, "fwd": 0.05})
                 for i in range(1, steps + 1)]
        layout.probe_path(d, r).write_text("".join(lines))
    lines = [event(101, "proc_start", attempt=0, pid=7, pgid=7, argv=["x"]),
             event(102, "compile", rank=None, what="compile", line="neuronx-cc ..."),
             "garbage line\n", event(103, "future_kind")]
    lines += [event(104 + k, "host", cpu=[k, 2 * k], mem_used=k, mem_total=9, load=[1, 1, 1])
              for k in range(5)]
    lines += [event(104.5 + k, "procs", procs=[{"pid": 7, "cpu": k}]) for k in range(5)]
    (d / layout.EVENTS).write_text("".join(lines))
    return d


def assert_same_read(d: Path, history: int | None = 300) -> SessionReader:
    """Load with the cache and without it: every view must be the same."""
    cached = SessionReader(d, telemetry_history=history).load()
    fresh = SessionReader(d, telemetry_history=history, use_cache=False).load()
    pd.testing.assert_frame_equal(cached.steps(), fresh.steps())
    pd.testing.assert_frame_equal(cached.phases(), fresh.phases())
    assert {k: list(v) for k, v in cached.events.items()} == \
        {k: list(v) for k, v in fresh.events.items()}
    assert cached.problems == fresh.problems
    return cached


def test_the_first_load_writes_the_cache_and_the_next_restores_it(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    first = SessionReader(d).load()
    assert first.cache_state == "written"
    assert (d / ".cache" / "stamp.json").is_file()
    again = assert_same_read(d)
    assert again.cache_state == "restored"
    assert len(again.steps()) == 60
    assert list(again.steps()["src"].cat.categories) == ["probe", "log", "auto"]
    assert again.problems.bad_lines == 1 and again.problems.unknown_kinds["future_kind"] == 1
    assert again.problems.locations == ["events.jsonl:3 (not JSON)"]
    assert [e["procs"][0]["cpu"] for e in again.events["procs"]] == [0, 1, 2, 3, 4]


def test_the_first_poll_counts_what_the_cache_restored(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    r = SessionReader(d)
    # 60 steps + proc_start + compile + 5 host + 5 procs: the dashboard redraws on this.
    assert r.poll(final=True) == 72
    assert r.poll(final=True) == 0


def test_telemetry_history_is_applied_to_the_restored_events(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d, telemetry_history=1).load()  # the writer's history does not matter
    assert [e["t"] for e in assert_same_read(d, history=2).events["host"]] == [107, 108]
    assert len(assert_same_read(d, history=None).events["host"]) == 5
    assert not SessionReader(d, telemetry_history=0).load().events["host"]
    r = SessionReader(d, telemetry_history=2).load()
    assert r.cache_state == "restored"
    with open(d / layout.EVENTS, "a") as f:  # live appends still roll the bounded history
        f.write(event(120, "host", cpu=[0], mem_used=1, mem_total=9, load=None))
    r.poll()
    assert [e["t"] for e in r.events["host"]] == [108, 120]


def test_lines_appended_after_the_cache_are_read(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    with open(layout.probe_path(d, 0), "a") as f:
        f.write(step(120.0, 0, 31))
        f.write("not json either\n")
    with open(d / layout.EVENTS, "a") as f:
        f.write(event(121, "compile", rank=0, what="cache_hit", line="hit"))
    r = assert_same_read(d)
    assert r.cache_state == "restored+written"  # and saved again, appended part included
    assert r.steps()["step"].max() == 31
    assert [c["what"] for c in r.events["compile"]] == ["compile", "cache_hit"]
    # Line numbers continue from where the cache stopped.
    assert r.problems.locations == ["events.jsonl:3 (not JSON)",
                                    "probe/rank-0.jsonl:32 (not JSON)"]
    assert SessionReader(d).load().cache_state == "restored"


def test_a_new_rank_file_after_the_cache_is_read_whole(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    layout.probe_path(d, 2).write_text(step(111.0, 2, 1) + step(111.1, 2, 2))
    r = assert_same_read(d)
    assert sorted(r.steps()["rank"].unique()) == [0, 1, 2]


def test_probe_records_arriving_after_the_cache_still_win_over_log_lines(
        tmp_path: Path) -> None:
    d = make_session(tmp_path, ranks=1)
    with open(d / layout.EVENTS, "a") as f:  # rank 1 only printed step lines so far
        f.writelines(step(110 + i * 0.1, 1, i, src="log") for i in range(1, 6))
    first = SessionReader(d).load()
    assert first.cache_state == "written"
    assert set(first.steps().loc[first.steps()["rank"] == 1, "src"]) == {"log"}
    layout.probe_path(d, 1).write_text("".join(step(110 + i * 0.1, 1, i) for i in range(1, 6)))
    with open(d / layout.EVENTS, "a") as f:  # a late log line of a rank now probed: dropped
        f.write(step(111.0, 1, 6, src="log"))
    r = assert_same_read(d)
    assert set(r.steps().loc[r.steps()["rank"] == 1, "src"]) == {"probe"}
    assert len(r.steps()) == 35


@pytest.mark.parametrize("change", ["truncate", "same_size_edit", "head_edit", "replace",
                                    "delete"])
def test_a_source_that_shrank_or_was_rewritten_rebuilds_the_cache(tmp_path: Path,
                                                                  change: str) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    path = layout.probe_path(d, 0)
    data = path.read_bytes()
    stat = path.stat()
    if change == "truncate":  # the last 5 steps gone
        path.write_bytes(b"".join(data.splitlines(keepends=True)[:-5]))
    elif change == "same_size_edit":  # one value changed in the middle, same length
        i = data.index(b'"step": 12')
        path.write_bytes(data[:i] + b'"step": 13' + data[i + 10:])
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    elif change == "head_edit":  # rewritten with other content, and longer
        path.write_bytes(step(109.0, 0, 0).encode() + data)
    elif change == "replace":  # a new file of the very same bytes (new inode)
        tmp = path.with_suffix(".new")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    else:
        path.unlink()
    r = assert_same_read(d)
    assert r.cache_state == "written"
    if change == "truncate":
        assert r.steps()["step"].max() == 30 and len(r.steps()) == 55
    if change == "same_size_edit":
        assert (r.steps()["step"] == 13).sum() == 3
    if change == "delete":
        assert set(r.steps()["rank"]) == {1}


def test_a_truncated_last_line_is_read_again_not_cached(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    whole = step(120.0, 0, 31)
    with open(layout.probe_path(d, 0), "a") as f:
        f.write(whole[:20])
    first = SessionReader(d).load()
    assert first.problems.truncated_lines == 1 and first.cache_state == "written"
    again = assert_same_read(d)
    assert again.problems.truncated_lines == 1
    with open(layout.probe_path(d, 0), "a") as f:  # the line completes after all
        f.write(whole[20:])
    r = assert_same_read(d)
    assert r.problems.truncated_lines == 0 and r.steps()["step"].max() == 31


def test_a_running_session_reads_appends_and_waits_for_partial_lines(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()  # cached while finished...
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name,
                                        "started_at": 100.0, "ended_at": None, "exit": None})
    whole = step(120.0, 1, 32)
    with open(layout.probe_path(d, 1), "a") as f:  # ...then it shows as running again
        f.write(step(119.0, 1, 31) + whole[:30])
    r = SessionReader(d).load()
    assert r.cache_state == "restored"  # running and little new: not written again
    assert r.problems.truncated_lines == 0  # live: the writer may finish the line
    n = len(r.steps())
    with open(layout.probe_path(d, 1), "a") as f:
        f.write(whole[30:])
    assert r.poll() == 1
    assert len(r.steps()) == n + 1


def test_running_sessions_are_not_cached_until_much_was_read(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    d = make_session(tmp_path, finished=False)
    assert SessionReader(d).load().cache_state == "unused"
    assert not (d / ".cache").exists()
    monkeypatch.setattr(cache, "RUNNING_MIN_NEW_BYTES", 1)
    assert SessionReader(d).load().cache_state == "written"
    assert_same_read(d)


def test_small_sessions_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MIN_SOURCE_BYTES", 1 << 20)
    d = make_session(tmp_path)
    assert SessionReader(d).load().cache_state == "unused"
    assert not (d / ".cache").exists()


def test_an_unwritable_session_folder_just_means_no_cache(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    (d / ".cache").write_text("a file where the cache folder would go")
    r = SessionReader(d).load()
    assert r.cache_state == "unused" and len(r.steps()) == 60
    assert_same_read(d)


@pytest.mark.parametrize("damage", ["stamp", "parquet", "version", "index", "foreign"])
def test_a_damaged_cache_is_ignored_and_rebuilt(tmp_path: Path, damage: str) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    folder = d / ".cache"
    stamp = json.loads((folder / "stamp.json").read_text())
    if damage == "stamp":
        (folder / "stamp.json").write_text("{not json")
    elif damage == "parquet":
        (folder / f"{stamp['token']}.steps.parquet").write_bytes(b"PAR1 nonsense")
    elif damage == "version":
        (folder / "stamp.json").write_text(json.dumps({**stamp, "version": 999}))
    elif damage == "foreign":  # a stamp naming a file outside the session's streams
        (tmp_path / "elsewhere.jsonl").write_bytes((d / layout.EVENTS).read_bytes())
        stamp["sources"][0]["name"] = "../elsewhere.jsonl"
        (folder / "stamp.json").write_text(json.dumps(stamp))
    else:  # offsets that point into the middle of lines
        events = pd.read_parquet(folder / f"{stamp['token']}.events.parquet")
        events["offset"] += 3
        events.to_parquet(folder / f"{stamp['token']}.events.parquet", index=False)
    r = assert_same_read(d)
    assert r.cache_state == "written"
    assert SessionReader(d).load().cache_state == "restored"


def test_only_one_cache_is_kept(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    with open(layout.probe_path(d, 0), "a") as f:
        f.write(step(120.0, 0, 31))
    SessionReader(d).load()
    files = sorted(p.name for p in (d / ".cache").iterdir())
    token = json.loads((d / ".cache" / "stamp.json").read_text())["token"]
    assert files == sorted([f"{token}.events.parquet", f"{token}.phases.parquet",
                            f"{token}.steps.parquet", "stamp.json"])


def test_use_cache_false_neither_reads_nor_writes(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    r = SessionReader(d, use_cache=False).load()
    assert r.cache_state == "unused" and not (d / ".cache").exists()
    cache.remove(d)  # and removing none is fine


def test_a_session_with_only_probe_files_is_cached_and_later_events_are_read(
        tmp_path: Path) -> None:
    d = make_session(tmp_path)
    (d / layout.EVENTS).unlink()
    assert SessionReader(d).load().cache_state == "written"
    r = assert_same_read(d)
    assert r.cache_state == "restored" and r.events == {}
    (d / layout.EVENTS).write_text(event(130, "compile", rank=1, what="compiled", line="ok"))
    r = assert_same_read(d)
    assert r.cache_state == "restored+written" and r.events["compile"][0]["rank"] == 1


def test_a_cache_written_from_small_read_pieces_points_at_the_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files read a few bytes at a time, lines cut across pieces: the event index's byte
    offsets must still point at the events (a restore re-reads them from there)."""
    d = make_session(tmp_path)
    default = reader_module.READ_CHUNK_BYTES
    monkeypatch.setattr(reader_module, "READ_CHUNK_BYTES", 29)
    assert SessionReader(d).load().cache_state == "written"
    monkeypatch.setattr(reader_module, "READ_CHUNK_BYTES", default)
    assert assert_same_read(d).cache_state == "restored"


def test_phase_gaps_and_late_phase_names_round_trip(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    with open(layout.probe_path(d, 0), "a") as f:
        f.write(step(120.0, 0, 31) + step(120.1, 0, 32, phases={"optimizer": 0.2}))
    SessionReader(d).load()
    again = assert_same_read(d)
    assert again.cache_state == "restored"
    phases = again.phases()
    assert list(phases.columns) == ["t", "rank", "data", "fwd", "optimizer"]
    assert phases["optimizer"].notna().sum() == 1 and phases["data"].isna().sum() == 1


def test_a_follower_restores_the_cache_and_takes_every_step(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    follower = SessionReader(d)
    follower.poll()
    taken = follower.take_steps()
    assert follower.cache_state == "restored" and taken is not None
    fresh = SessionReader(d, use_cache=False).load()
    pd.testing.assert_frame_equal(taken.steps, fresh.steps())
    pd.testing.assert_frame_equal(taken.phases, fresh.phases())
