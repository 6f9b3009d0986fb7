"""The reader's columnar cache: a restored read equals a fresh parse of the JSON lines, bytes
appended after the cache are read, and a source that shrank or was rewritten rebuilds it. The
cache itself (a raw file per column) round-trips every column type, and a damaged, foreign,
older or half-written one reads as None."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neurotui.session import cache, layout
from neurotui.session import reader as reader_module
from neurotui.session.columns import Columns
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

SOURCES = ("probe", "log", "auto")
"""The reader's step sources, in the order of their `src` codes."""

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


def table(rows: Any) -> dict[str, np.ndarray]:
    """A reader's table (a DataFrame or Columns) as named arrays, `src` as source names."""
    out = {name: np.asarray(values) for name, values in Columns.of(rows).items()}
    if "src" in out and out["src"].dtype.kind in "iu":  # codes, as take_steps hands them
        out["src"] = np.asarray(SOURCES, dtype=object)[out["src"]]
    return out


def assert_same_table(a: Any, b: Any) -> None:
    a, b = table(a), table(b)
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def assert_same_read(d: Path, history: int | None = 300) -> SessionReader:
    """Load with the cache and without it: every view must be the same."""
    cached = SessionReader(d, telemetry_history=history).load()
    fresh = SessionReader(d, telemetry_history=history, use_cache=False).load()
    assert_same_table(cached.steps(), fresh.steps())
    assert_same_table(cached.phases(), fresh.phases())
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
    assert set(table(again.steps())["src"]) == {"probe"}
    stamp = json.loads((d / ".cache" / "stamp.json").read_text())
    assert stamp["src_categories"] == list(SOURCES)
    assert again.problems.bad_lines == 1 and again.problems.unknown_kinds["future_kind"] == 1
    assert again.problems.locations == ["events.jsonl:3 (not JSON)"]
    assert [e["procs"][0]["cpu"] for e in again.events["procs"]] == [0, 1, 2, 3, 4]


def test_sources_as_they_were_read_are_trusted_without_reading_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished session's sources, of the same inode, size and modification time as when
    the cache read them, are not read again to open it (their fingerprints are for a file
    that grew: a live one); one that grew is."""
    d = make_session(tmp_path)
    SessionReader(d).load()
    fingerprinted: list[str] = []
    fingerprints = cache._fingerprints

    def counted(f: Any, offset: int) -> tuple[str, str]:
        fingerprinted.append(Path(f.name).name)
        return fingerprints(f, offset)

    monkeypatch.setattr(cache, "_fingerprints", counted)
    assert SessionReader(d).load().cache_state == "restored"
    assert fingerprinted == []
    with open(layout.probe_path(d, 1), "a") as f:
        f.write(step(120.0, 1, 31))
    assert cache.state(d, SOURCES) is not None  # still valid: it grew, as a live one does
    assert fingerprinted == [layout.probe_path(d, 1).name]
    assert assert_same_read(d).cache_state == "restored+written"


def test_restored_telemetry_msgspec_refuses_reads_as_json_reads_it(tmp_path: Path) -> None:
    # The restore decodes each kept record by msgspec; NaN (Python's json writes it), a
    # float beyond range and an int beyond 64 bits it refuses go to json, as a fresh read.
    d = make_session(tmp_path)
    with open(d / layout.EVENTS, "a") as f:
        f.write(event(110, "host", cpu=[float("nan"), 1.0], mem_used=2**70, mem_total=9,
                      load=None))
        f.write('{"t": 111, "kind": "host", "cpu": [1e400], "mem_used": 1, "mem_total": 9}\n')
    SessionReader(d).load()
    again = SessionReader(d).load()
    assert again.cache_state == "restored"
    hosts = list(again.events["host"])
    assert hosts[-2]["mem_used"] == 2**70 and np.isnan(hosts[-2]["cpu"][0])
    assert hosts[-1]["cpu"] == [float("inf")]
    fresh = SessionReader(d, use_cache=False).load()
    assert repr(hosts) == repr(list(fresh.events["host"]))


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


def test_a_telemetry_history_longer_than_the_samples_restores_them_all(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    assert [e["t"] for e in assert_same_read(d, history=7).events["host"]] == [
        104, 105, 106, 107, 108]


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
    assert table(r.steps())["step"].max() == 31
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
    assert np.unique(table(r.steps())["rank"]).tolist() == [0, 1, 2]


def test_probe_records_arriving_after_the_cache_still_win_over_log_lines(
        tmp_path: Path) -> None:
    d = make_session(tmp_path, ranks=1)
    with open(d / layout.EVENTS, "a") as f:  # rank 1 only printed step lines so far
        f.writelines(step(110 + i * 0.1, 1, i, src="log") for i in range(1, 6))
    first = SessionReader(d).load()
    assert first.cache_state == "written"
    steps = table(first.steps())
    assert set(steps["src"][steps["rank"] == 1]) == {"log"}
    layout.probe_path(d, 1).write_text("".join(step(110 + i * 0.1, 1, i) for i in range(1, 6)))
    with open(d / layout.EVENTS, "a") as f:  # a late log line of a rank now probed: dropped
        f.write(step(111.0, 1, 6, src="log"))
    r = assert_same_read(d)
    steps = table(r.steps())
    assert set(steps["src"][steps["rank"] == 1]) == {"probe"}
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
    steps = table(r.steps())
    if change == "truncate":
        assert steps["step"].max() == 30 and len(r.steps()) == 55
    if change == "same_size_edit":
        assert (steps["step"] == 13).sum() == 3
    if change == "delete":
        assert set(steps["rank"].tolist()) == {1}


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
    assert r.problems.truncated_lines == 0 and table(r.steps())["step"].max() == 31


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


@pytest.mark.parametrize("damage", ["stamp", "column", "version", "index", "foreign",
                                    "token", "categories"])
def test_a_damaged_cache_is_ignored_and_rebuilt(tmp_path: Path, damage: str) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    folder = d / ".cache"
    stamp = json.loads((folder / "stamp.json").read_text())
    if damage == "stamp":
        (folder / "stamp.json").write_text("{not json")
    elif damage == "column":
        (folder / f"{stamp['token']}.steps.0.col").write_bytes(b"short")
    elif damage == "version":
        (folder / "stamp.json").write_text(json.dumps({**stamp, "version": 999}))
    elif damage == "foreign":  # a stamp naming a file outside the session's streams
        (tmp_path / "elsewhere.jsonl").write_bytes((d / layout.EVENTS).read_bytes())
        stamp["sources"][0]["name"] = "../elsewhere.jsonl"
        (folder / "stamp.json").write_text(json.dumps(stamp))
    elif damage == "token":  # a stamp naming column files outside the cache folder
        (folder / "stamp.json").write_text(json.dumps({**stamp, "token": "../x"}))
    elif damage == "categories":  # written by a version with other step sources
        (folder / "stamp.json").write_text(json.dumps({**stamp, "src_categories": ["x"]}))
    else:  # offsets that point into the middle of lines
        offsets = folder / f"{stamp['token']}.events.1.col"
        (np.fromfile(offsets, dtype=np.int64) + 3).tofile(offsets)
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
    # t, rank, data, fwd; 8 step columns; 4 event columns.
    assert files == sorted([*(f"{token}.phases.{i}.col" for i in range(4)),
                            *(f"{token}.steps.{i}.col" for i in range(8)),
                            *(f"{token}.events.{i}.col" for i in range(4)), "stamp.json"])


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
    phases = table(again.phases())
    assert list(phases) == ["t", "rank", "data", "fwd", "optimizer"]
    assert (~np.isnan(phases["optimizer"])).sum() == 1 and np.isnan(phases["data"]).sum() == 1


def test_a_follower_restores_the_cache_and_takes_every_step(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    SessionReader(d).load()
    follower = SessionReader(d)
    follower.poll()
    taken = follower.take_steps()
    assert follower.cache_state == "restored" and taken is not None
    fresh = SessionReader(d, use_cache=False).load()
    assert_same_table(taken.steps, fresh.steps())
    assert_same_table(taken.phases, fresh.phases())


def test_rows_read_after_a_cache_that_is_behind_come_as_later_batches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An attach to a running session whose cache is behind: the rows read after the cache
    are not joined to its millions (a copy) but handed out as batches after them, one after
    the other in time, each with the phase rows of its steps; joined, the same as a fresh
    read; taken in batch by batch, the same figures as all at once. Here rank 1 was behind
    in the cache (its late rows sort among rank 0's cached ones, one at a cached time)."""
    from neurotui.live.stepstate import StepState

    d = make_session(tmp_path, finished=False)
    behind = layout.probe_path(d, 1)
    behind.write_text("".join(behind.read_text().splitlines(keepends=True)[:20]))  # to 112.0
    with monkeypatch.context() as m:
        m.setattr(cache, "RUNNING_MIN_NEW_BYTES", 0)
        SessionReader(d).load()  # the cache, as the keeper wrote it
    with open(behind, "a") as f:
        f.write("".join(step(112.1 + i * 0.1, 1, 21 + i, phases={"data": 0.03, "fwd": 0.06})
                        for i in range(10)))
    with open(layout.probe_path(d, 0), "a") as f:
        f.write("".join(step(113.1 + i * 0.1, 0, 31 + i, phases={"data": 0.02, "fwd": 0.04})
                        for i in range(5)))

    follower = SessionReader(d)
    follower.poll()
    taken = follower.take_steps()
    assert follower.cache_state == "restored" and taken is not None
    batches = taken.batches()
    assert len(batches) == 2 and taken.rows == 30 + 20 + 10 + 5
    assert batches[0].steps["t"].max() < batches[1].steps["t"].min() == 112.1
    for batch in batches:
        steps = set(zip(batch.steps["t"].tolist(), batch.steps["rank"].tolist(), strict=True))
        assert set(zip(batch.phases["t"].tolist(), batch.phases["rank"].tolist(),
                       strict=True)) <= steps
    fresh = SessionReader(d, use_cache=False).load()
    joined = taken.joined()
    assert_same_table(joined.steps, fresh.steps())
    assert_same_table(joined.phases, fresh.phases())

    in_batches, at_once = StepState(started_at=100.0), StepState(started_at=100.0)
    for batch in batches:
        in_batches.add(batch.steps, phases=batch.phases)
    at_once.add(joined.steps, phases=joined.phases)
    assert in_batches.rows == at_once.rows == 65 and in_batches.late_rows == 0
    assert in_batches.breakdown.result() == at_once.breakdown.result()
    assert in_batches.rank_medians() == at_once.rank_medians()


def test_a_job_hands_out_every_batch_of_a_node_whose_cache_is_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's reader passes on each node's batches (the node's cached rows, then those read
    since), none dropped."""
    from neurotui.session.jobreader import JobReader
    from tests.unit.compare.test_compare_job_figures import make_part

    parts = [make_part(tmp_path, node, attempts=1) for node in (0, 1)]
    meta = json.loads((parts[0] / layout.META).read_text())
    write_json_atomic(parts[0] / layout.META, {**meta, "ended_at": None, "exit": None})
    with monkeypatch.context() as m:  # node 0 runs on: its cache as the keeper wrote it
        m.setattr(cache, "RUNNING_MIN_NEW_BYTES", 0)
        SessionReader(parts[0]).load()
    rank = layout.probe_path(parts[0], 0)
    last = json.loads(rank.read_text().splitlines()[-1])
    with open(rank, "a") as f:
        f.write("".join(step(last["t"] + i, 0, last["step"] + i) for i in range(1, 6)))
    job = JobReader(tmp_path, "J")
    job.poll()
    taken = job.take_steps()
    assert taken is not None and len(taken.batches()) == 3
    fresh = [SessionReader(p, use_cache=False).load().steps() for p in parts]
    assert taken.rows == sum(len(f) for f in fresh) == 2 * 4 * 60 + 5
    assert job.parts[0].reader.cache_state == "restored"


# -- the cache on its own (no reader) ------------------------------------------------------

ODD_PHASES = ["data", "forward", "optimizer step/all-reduce", "../../etc/passwd", "a b",
              "", "0", "ünïcode ⏱", "t.npy", "steps.3", "x.col"]


def a_session(tmp_path: Path) -> Path:
    d = tmp_path / "s"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    (d / layout.EVENTS).write_text(event(101, "compile", rank=0, what="compile", line="x")
                                   + event(102, "host", cpu=[1.0], mem_used=1, mem_total=2))
    layout.probe_path(d, 0).write_text(step(110.0, 0, 1))
    return d


def a_read(d: Path, rows: int = 5, phases: list[str] | None = None) -> cache.CachedRead:
    """A read of every column type, with extreme values (NaN, inf, int64 limits)."""
    sources = [cache.stamp_source(d, name, (d / name).stat().st_size, 1)
               for name in (layout.EVENTS, "probe/rank-0.jsonl")]
    assert all(s is not None for s in sources)
    rng = np.random.default_rng(7)
    floats = rng.normal(size=rows)
    floats[:3] = [np.nan, np.inf, -0.0][:rows]
    ints = rng.integers(-2**63, 2**63 - 1, size=rows, dtype=np.int64)
    steps = Columns({"t": 1.764e9 + np.arange(rows) * 0.1, "rank": ints % 64,
                     "step": ints, "samples": floats * 32, "loss": floats,
                     "dt": np.abs(floats), "src": (np.arange(rows) % 3).astype(np.int8),
                     "attempt": np.arange(rows, dtype=np.int64)})
    names = ODD_PHASES if phases is None else phases
    phase_table = Columns({"t": steps["t"], "rank": steps["rank"],
                           **{name: floats + i for i, name in enumerate(names)}}
                          ) if names else Columns()
    events = Columns({"stream": np.array([0, 0, 1, 1], dtype=np.int16),
                      "offset": np.array([0, 90, 0, 2**40], dtype=np.int64),
                      "length": np.array([90, 80, 5, 2**31 - 1], dtype=np.int32),
                      "kind": np.array([0, 1, 1, 0], dtype=np.int8)})
    return cache.CachedRead(
        sources=sources, steps=steps, phases=phase_table, events=events,  # type: ignore[arg-type]
        kinds=["compile", "host"], src_categories=list(SOURCES),
        problems={"bad_lines": 2, "truncated_lines": 0, "unknown_kinds": {"odd kind": 1},
                  "locations": ["events.jsonl:3 (not JSON)"]},
        rank_sources={0: [0, 2], 5: [1]}, samples_from=["probe", "the step lines"])


def assert_same_columns(a: Columns, b: Columns) -> None:
    assert a.columns == b.columns and len(a) == len(b)
    for name in a.columns:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def assert_round_trip(d: Path, read: cache.CachedRead) -> cache.CachedRead:
    assert cache.save(d, read)
    back = cache.load(d, SOURCES)
    assert back is not None
    assert_same_columns(back.steps, read.steps)
    assert_same_columns(back.phases, read.phases)
    assert_same_columns(back.events, read.events)
    assert (back.sources, back.kinds, back.problems, back.rank_sources, back.samples_from,
            back.src_categories) == (read.sources, read.kinds, read.problems,
                                     read.rank_sources, read.samples_from, list(SOURCES))
    return back


def test_every_column_type_and_odd_phase_names_round_trip(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    back = assert_round_trip(d, a_read(d))
    assert back.steps.columns == list(cache.STEP_COLUMNS)
    assert [str(back.steps[n].dtype) for n in back.steps.columns] == [
        "float64", "int64", "int64", "float64", "float64", "float64", "int8", "int64"]
    assert back.phases.columns == ["t", "rank", *ODD_PHASES]
    assert [str(back.events[n].dtype) for n in back.events.columns] == [
        "int16", "int64", "int32", "int8"]
    # Read whole: a memory map would pin files a later save deletes.
    assert not any(isinstance(v, np.memmap) for _, v in back.steps.items())
    # No file is named after a column: only the token, the table and a number.
    token = json.loads((d / ".cache" / "stamp.json").read_text())["token"]
    for path in (d / ".cache").iterdir():
        assert path.name == "stamp.json" or re.fullmatch(
            rf"{token}\.(steps|phases|events)\.\d+\.col", path.name), path.name


def test_phase_columns_keep_their_order_with_t_and_rank_first(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d, phases=["zeta", "alpha"])
    shuffled = Columns({name: read.phases[name] for name in ["zeta", "rank", "alpha", "t"]})
    assert cache.save(d, cache.CachedRead(**{**read.__dict__, "phases": shuffled}))
    back = cache.load(d, SOURCES)
    assert back is not None and back.phases.columns == ["t", "rank", "zeta", "alpha"]


@pytest.mark.parametrize("rows", [0, 1, 5])
def test_empty_tables_round_trip(tmp_path: Path, rows: int) -> None:
    d = a_session(tmp_path)
    read = a_read(d, rows=rows, phases=[])  # no step reported phases: a table of no column
    read.events = read.events.rows(slice(0, 0))
    back = assert_round_trip(d, read)
    assert back.phases.columns == [] and len(back.phases) == 0
    assert_round_trip(d, a_read(d, rows=0))  # phase columns, no rows


@pytest.mark.parametrize("damage", ["truncated", "wrong_dtype", "other_length", "missing",
                                    "empty", "src_code", "stream", "kind", "columns", "rows",
                                    "phases_without_columns"])
def test_a_damaged_column_file_reads_as_none(tmp_path: Path, damage: str) -> None:
    d = a_session(tmp_path)
    assert cache.save(d, a_read(d))
    folder = d / ".cache"
    stamp = json.loads((folder / "stamp.json").read_text())
    token = stamp["token"]
    loss, src = folder / f"{token}.steps.4.col", folder / f"{token}.steps.6.col"
    if damage == "truncated":  # e.g. a full disk, or a copy cut short
        loss.write_bytes(loss.read_bytes()[:-3])
    elif damage == "wrong_dtype":  # as float32: half as long
        np.fromfile(loss, dtype=np.float64).astype(np.float32).tofile(loss)
    elif damage == "other_length":
        np.fromfile(loss, dtype=np.float64)[:-1].tofile(loss)
    elif damage == "missing":
        loss.unlink()
    elif damage == "empty":
        loss.write_bytes(b"")
    elif damage == "src_code":  # a code no source stands for
        np.array([0, 1, 2, 3, 0], dtype=np.int8).tofile(src)
    elif damage in ("stream", "kind"):  # an event of no source / no kind
        column = folder / f"{token}.events.{0 if damage == 'stream' else 3}.col"
        values = np.fromfile(column, dtype=np.int16 if damage == "stream" else np.int8)
        values[1] = 9
        values.tofile(column)
    elif damage == "columns":  # a stamp that lists the steps' columns in another order
        stamp["columns"]["steps"] = stamp["columns"]["steps"][::-1]
        (folder / "stamp.json").write_text(json.dumps(stamp))
    elif damage == "rows":  # a stamp counting more rows than the files hold
        stamp["rows"]["steps"] += 1
        (folder / "stamp.json").write_text(json.dumps(stamp))
    else:  # rows of phases, and no column to hold them
        stamp["columns"]["phases"] = []
        (folder / "stamp.json").write_text(json.dumps(stamp))
    assert cache.load(d, SOURCES) is None
    assert cache.state(d, SOURCES) is None or damage in ("src_code", "stream", "kind")


def test_rows_beyond_the_stamp_are_not_counted(tmp_path: Path) -> None:
    """An appender that died before its stamp left rows at the end of some column files: the
    cache reads as the stamp says, and the next append cuts them off first."""
    d = a_session(tmp_path)
    read = a_read(d, phases=["data"])
    assert cache.save(d, read)
    token = json.loads((d / ".cache" / "stamp.json").read_text())["token"]
    for path in (d / ".cache").glob(f"{token}.steps.*.col"):
        with open(path, "ab") as f:
            f.write(b"\x01" * 8 * 3)
    back = cache.load(d, SOURCES)
    assert back is not None
    assert_same_columns(back.steps, read.steps)
    found = cache.state(d, SOURCES)
    assert found is not None and found.rows["steps"] == 5
    more = a_read(d, rows=2, phases=["data"])
    assert append(d, found, more)
    back = cache.load(d, SOURCES)
    assert back is not None
    assert_same_columns(back.steps, Columns.concat([read.steps, more.steps]))


def append(d: Path, found: cache.CacheState, more: cache.CachedRead,
           events: Columns | None = None) -> bool:
    return cache.append(d, found, steps=more.steps, phases=more.phases,
                        events=more.events.rows(slice(0, 0)) if events is None else events,
                        sources=found.sources, problems=more.problems,
                        rank_sources=more.rank_sources, samples_from=more.samples_from)


def test_an_append_adds_rows_new_phases_and_events(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d, rows=4, phases=["data", "fwd"])
    assert cache.save(d, read)
    found = cache.state(d, SOURCES)
    assert found is not None
    more = a_read(d, rows=3, phases=["opt", "data"])  # fwd not reported, opt new
    events = read.events.rows(np.array([1, 2]))
    assert append(d, found, more, events)
    back = cache.load(d, SOURCES)
    assert back is not None
    assert_same_columns(back.steps, Columns.concat([read.steps, more.steps]))
    assert back.phases.columns == ["t", "rank", "data", "fwd", "opt"]
    assert_same_columns(back.phases, Columns.concat([read.phases, more.phases]))
    assert np.isnan(back.phases["opt"][:4]).all() and np.isnan(back.phases["fwd"][4:]).all()
    assert_same_columns(back.events, Columns.concat([read.events, events]))
    assert back.problems == more.problems and back.rank_sources == more.rank_sources
    # The state was brought along: a second append goes on from it.
    assert found.rows == {"steps": 7, "phases": 7, "events": 6}
    assert append(d, found, a_read(d, rows=1, phases=[]))
    back = cache.load(d, SOURCES)
    assert back is not None and len(back.steps) == 8 and len(back.phases) == 7


def test_the_first_phases_appended_to_a_cache_without_any(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    assert cache.save(d, a_read(d, rows=2, phases=[]))
    found = cache.state(d, SOURCES)
    assert found is not None and found.columns["phases"] == []
    more = a_read(d, rows=2, phases=["data"])
    assert append(d, found, more)
    back = cache.load(d, SOURCES)
    assert back is not None
    assert_same_columns(back.phases, more.phases)


def test_a_reader_of_the_old_stamp_reads_the_same_rows_after_an_append(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d, rows=5, phases=["data"])
    assert cache.save(d, read)
    old = cache.state(d, SOURCES)
    mine = cache.state(d, SOURCES)
    assert old is not None and mine is not None
    assert append(d, mine, a_read(d, rows=3, phases=["data", "new"]))
    for what, table in (("steps", read.steps), ("phases", read.phases)):
        rows = cache.read_rows(d, old, what, table.columns, 0, old.rows[what])
        assert rows is not None
        assert_same_columns(rows, table)
    tail = cache.read_rows(d, old, "steps", ["t", "loss"], 3, 5)
    assert tail is not None and tail.columns == ["t", "loss"]
    np.testing.assert_array_equal(tail["loss"], read.steps["loss"][3:])
    assert cache.read_rows(d, old, "steps", ["t"], 4, 6) is None  # beyond its stamp


def test_an_append_to_a_cache_rebuilt_meanwhile_counts_for_nothing(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    assert cache.save(d, a_read(d, rows=5, phases=["data"]))
    found = cache.state(d, SOURCES)
    assert found is not None
    rebuilt = a_read(d, rows=2, phases=["other"])
    assert cache.save(d, rebuilt)
    assert not append(d, found, a_read(d, rows=3, phases=["data"]))
    back = cache.load(d, SOURCES)
    assert back is not None and back.phases.columns == ["t", "rank", "other"]
    assert_same_columns(back.steps, rebuilt.steps)


def test_appends_of_other_columns_or_codes_are_refused(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d, rows=3, phases=["data"])
    assert cache.save(d, read)
    found = cache.state(d, SOURCES)
    assert found is not None
    steps = dict(read.steps.items())
    for bad in (cache.CachedRead(**{**read.__dict__, "steps": Columns(
                    {k: v for k, v in steps.items() if k != "dt"})}),
                cache.CachedRead(**{**read.__dict__, "steps": Columns(
                    {**steps, "src": np.array([0, 7, 0], dtype=np.int8)})}),
                cache.CachedRead(**{**read.__dict__, "phases": Columns(
                    {"data": steps["t"]})})):
        assert not append(d, found, bad)
    assert not append(d, found, read, read.events.with_column(
        "stream", np.full(4, 5, dtype=np.int16)))  # a stream of no source
    assert not cache.append(d, found, steps=read.steps, phases=read.phases,
                            events=read.events, sources=found.sources[1:], problems={},
                            rank_sources={}, samples_from=[])  # a source dropped
    back = cache.load(d, SOURCES)
    assert back is not None
    assert_same_columns(back.steps, read.steps)


def test_single_values_are_overwritten_in_place(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d, rows=5)
    assert cache.save(d, read)
    found = cache.state(d, SOURCES)
    assert found is not None
    assert cache.write_values(d, found, "steps", "loss", [1, 3], [7.5, 8.5])
    assert not cache.write_values(d, found, "steps", "loss", [5], [1.0])  # not a cached row
    assert not cache.write_values(d, found, "steps", "nope", [1], [1.0])
    back = cache.load(d, SOURCES)
    assert back is not None
    expected = read.steps["loss"].copy()
    expected[[1, 3]] = [7.5, 8.5]
    np.testing.assert_array_equal(back.steps["loss"], expected)


def test_one_keeper_at_a_time(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    with cache.keeper_lock(d) as first, cache.keeper_lock(d) as second:
        assert first and not second
    with cache.keeper_lock(d) as again:
        assert again
    (d / ".cache" / cache.KEEPER_LOCK).unlink()
    (d / ".cache").rmdir()
    (d / ".cache").write_text("a file where the cache folder would go")
    with cache.keeper_lock(d) as blocked:
        assert not blocked


def test_a_npy_cache_of_version_3_is_ignored_and_replaced(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d)
    assert cache.save(d, read)
    folder = d / ".cache"
    stamp = json.loads((folder / "stamp.json").read_text())
    for path in folder.glob("*.col"):  # as version 3 had them: .npy files
        np.save(path.with_suffix(".npy"), np.zeros(5), allow_pickle=False)
        path.unlink()
    (folder / "stamp.json").write_text(json.dumps({**stamp, "version": 3}))
    assert cache.load(d, SOURCES) is None and cache.state(d, SOURCES) is None
    assert_round_trip(d, read)
    assert not list(folder.glob("*.npy"))


def test_a_cache_of_other_step_sources_reads_as_none(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    assert cache.save(d, a_read(d))
    assert cache.load(d, SOURCES) is not None
    assert cache.load(d, ("probe", "log")) is None
    assert cache.load(d, ("probe", "log", "auto", "new")) is None


def test_a_parquet_cache_of_version_2_is_ignored_and_replaced(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    folder = d / ".cache"
    folder.mkdir()
    read = a_read(d)
    token = "0123456789abcdef"
    for what in ("steps", "phases", "events"):
        (folder / f"{token}.{what}.parquet").write_bytes(b"PAR1 ... PAR1")
    (folder / "stamp.json").write_text(json.dumps({
        "version": 2, "token": token, "sources": [s.to_json() for s in read.sources],
        "kinds": read.kinds, "src_categories": list(SOURCES), "problems": read.problems,
        "rank_sources": {}, "samples_from": []}))
    assert cache.load(d, SOURCES) is None
    assert_round_trip(d, read)
    assert not list(folder.glob("*.parquet"))


def test_a_stale_source_makes_the_cache_none(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    assert cache.save(d, a_read(d))
    with open(d / layout.EVENTS, "a") as f:  # appended: still valid (read from the offset)
        f.write(event(103, "compile", rank=0, what="x", line="y"))
    assert cache.load(d, SOURCES) is not None
    (d / layout.EVENTS).write_text("rewritten\n")
    assert cache.load(d, SOURCES) is None


def test_tables_not_of_the_caches_columns_are_not_saved(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    read = a_read(d)
    steps = dict(read.steps.items())
    bad = [
        {"steps": Columns({k: v for k, v in steps.items() if k != "dt"})},  # a column missing
        {"steps": Columns({**steps, "extra": steps["t"]})},
        {"steps": Columns({**steps, "step": steps["loss"]})},  # floats in an integer column
        {"steps": Columns({**steps, "src": np.array(["probe"] * 5, dtype=object)})},
        {"phases": Columns({"data": steps["t"]})},  # phases without t and rank
        {"events": Columns({"stream": [0], "offset": [0], "length": [1]})},
    ]
    for change in bad:
        assert not cache.save(d, cache.CachedRead(**{**read.__dict__, **change}))
        assert not (d / ".cache").exists() or not any((d / ".cache").iterdir())
    # Codes as int64 (same kind) are stored as the cache's int8.
    assert cache.save(d, cache.CachedRead(**{**read.__dict__, "steps": Columns(
        {**steps, "src": steps["src"].astype(np.int64)})}))
    back = cache.load(d, SOURCES)
    assert back is not None and back.steps["src"].dtype == np.int8


@pytest.mark.parametrize("fail_at", [0, 5, 13, "stamp", "replace"])
def test_a_save_failing_half_way_removes_what_it_wrote(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      fail_at: int | str) -> None:
    """A full disk at any point: the files of the failed save are gone and the cache written
    before still loads."""
    d = a_session(tmp_path)
    before = a_read(d, phases=["data"])
    assert cache.save(d, before)
    files = sorted(p.name for p in (d / ".cache").iterdir())
    calls = {"n": 0}
    write, replace = cache._write_values, os.replace

    def failing_write(f: Any, values: Any) -> None:
        if calls["n"] == fail_at:
            f.write(b"half")
            raise OSError(28, "No space left on device")
        calls["n"] += 1
        write(f, values)

    def failing_replace(*args: Any, **kw: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "_write_values", failing_write)
    if fail_at == "stamp":
        monkeypatch.setattr(cache.json, "dumps", lambda *a, **k: 1 / 0)
    if fail_at == "replace":
        monkeypatch.setattr(cache.os, "replace", failing_replace)
    assert not cache.save(d, a_read(d))
    monkeypatch.setattr(cache, "_write_values", write)
    monkeypatch.setattr(cache.os, "replace", replace)
    assert sorted(p.name for p in (d / ".cache").iterdir()) == files
    back = cache.load(d, SOURCES)
    assert back is not None and back.phases.columns == ["t", "rank", "data"]


def test_an_unwritable_cache_folder_saves_nothing(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    (d / ".cache").write_text("a file where the cache folder would go")
    assert not cache.save(d, a_read(d))
    assert cache.load(d, SOURCES) is None
    if os.geteuid() != 0:  # root writes anywhere
        (d / ".cache").unlink()
        (d / ".cache").mkdir(mode=0o500)
        try:
            assert not cache.save(d, a_read(d))
        finally:
            (d / ".cache").chmod(0o700)


def test_concurrent_saves_never_give_a_mix(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Another save completes while this one is between its column files and its stamp: a
    load then gives one whole cache or none (the next reader rebuilds), never a mix."""
    d = a_session(tmp_path)
    mine, theirs = a_read(d, phases=["mine"]), a_read(d, phases=["theirs"])
    replace = os.replace
    order = []

    def replace_after_theirs(src: Any, dst: Any) -> None:
        monkeypatch.setattr(cache.os, "replace", replace)
        order.append("theirs")
        assert cache.save(d, theirs)
        order.append("mine")
        replace(src, dst)

    monkeypatch.setattr(cache.os, "replace", replace_after_theirs)
    assert cache.save(d, mine)
    assert order == ["theirs", "mine"]
    back = cache.load(d, SOURCES)
    assert back is None or back.phases.columns == ["t", "rank", "mine"]
    # And whichever won, the next save leaves one complete cache.
    assert_round_trip(d, theirs)
    assert len(list((d / ".cache").glob("*.col"))) == 8 + 3 + 4


def test_the_cache_needs_neither_pandas_nor_pyarrow(tmp_path: Path) -> None:
    d = a_session(tmp_path)
    code = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
sys.modules["pandas"] = None  # an import of either fails
sys.modules["pyarrow"] = None
import numpy as np
from neurotui.session import cache
from neurotui.session.columns import Columns
d = Path({str(d)!r})
steps = Columns({{name: np.zeros(3, dtype=dtype) for name, dtype in cache.STEP_COLUMNS.items()}})
events = Columns({{name: np.zeros(0, dtype=dtype) for name, dtype in cache.EVENT_COLUMNS.items()}})
phases = Columns({{"t": np.zeros(3), "rank": np.zeros(3, dtype=np.int64), "data": np.ones(3)}})
read = cache.CachedRead(sources=[cache.stamp_source(d, "events.jsonl", 0, 0)], steps=steps,
                        phases=phases, events=events, kinds=[], problems={{}},
                        src_categories=["probe", "log", "auto"])
assert cache.save(d, read)
back = cache.load(d, ["probe", "log", "auto"])
assert back is not None and len(back.steps) == 3 and back.phases.columns == ["t", "rank", "data"]
assert sys.modules["pandas"] is None and sys.modules["pyarrow"] is None
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
