"""The reader tolerates bad input, refuses newer formats, and merges probe and log steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neurotui.session import layout, stepsources
from neurotui.session import reader as reader_module
from neurotui.session.reader import STEP_SOURCES, SessionFormatError, SessionReader
from neurotui.session.tailing import read_new_block
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


def _write(path: Path, records: list[dict], mode: str = "a") -> None:
    with open(path, mode) as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def test_files_are_read_in_bounded_pieces_with_the_same_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = make_session(tmp_path)
    _write(d / layout.EVENTS, [step(100 + i, 0, i, src="log") for i in range(1, 6)]
           + [{"t": 101.5, "kind": "host", "cpu": [float(c) for c in range(40)]}])
    with open(d / layout.EVENTS, "a") as f:
        f.write("not json at all\n" + json.dumps(step(107, 0, 7, src="log"))[:20])
    _write(layout.probe_path(d, 1), [step(100.5 + i, 1, i, phases={"data": 0.01 * i})
                                     for i in range(1, 6)])
    whole = SessionReader(d).load()
    reads: list[int] = []

    def recorded(path: Path, offset: int, max_bytes: int = -1) -> tuple[bytes, int]:
        reads.append(max_bytes)
        return read_new_block(path, offset, max_bytes)

    monkeypatch.setattr(reader_module, "READ_CHUNK_BYTES", 37)  # shorter than every line
    monkeypatch.setattr(reader_module, "read_new_block", recorded)
    pieces = SessionReader(d).load()
    # A line longer than a piece is read to its end: a read for each of the 12 lines.
    assert len(reads) >= 12 and set(reads) == {37}
    pd.testing.assert_frame_equal(pieces.steps(), whole.steps())
    pd.testing.assert_frame_equal(pieces.phases(), whole.phases())
    assert pieces.events == whole.events and len(pieces.events["host"][0]["cpu"]) == 40
    assert pieces.problems == whole.problems and pieces.problems.bad_lines == 1
    assert pieces.problems.locations == ["events.jsonl:7 (not JSON)"]


def test_late_rows_are_merged_as_a_stable_sort_of_everything(tmp_path: Path) -> None:
    """Files grow unevenly (a slow log): each poll's rows may be earlier than rows already
    read; ties keep the order the rows were read in, as a stable sort of all of them."""
    rng = np.random.default_rng(7)
    d = make_session(tmp_path)
    r = SessionReader(d)
    arrived: list[dict] = []
    next_step = dict.fromkeys(range(3), 1)
    for _ in range(12):
        for rank in range(3):  # the reader reads rank 0's file, then 1's, then 2's
            new = []
            for _ in range(int(rng.integers(0, 4))):
                n = next_step[rank]
                next_step[rank] += 1
                # Half-second times: ties across ranks; rank 2 runs behind the others.
                # Every column its own values: each is sorted into memory another left.
                new.append(step(100 + n * 0.5 - (3 if rank == 2 else 0), rank, n,
                                samples=n + 8.0 * rank, loss=n / 7 + rank, dt=n / 100,
                                attempt=n % 2))
            _write(layout.probe_path(d, rank), new)
            arrived += new
        r.poll()
        r.steps()  # merged poll by poll
    shown = ["t", "rank", "step", "samples", "loss", "dt", "attempt"]
    expected = pd.DataFrame(arrived)[shown].sort_values("t", kind="stable", ignore_index=True)
    got = r.steps()[shown]
    assert len(got) == len(arrived) > 30
    pd.testing.assert_frame_equal(got, expected)


def test_take_steps_hands_each_row_over_once_and_keeps_none(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    _write(layout.probe_path(d, 0), [step(101, 0, 1, phases={"data": 0.1}), step(102, 0, 2)])
    r = SessionReader(d)
    r.poll()
    first = r.take_steps()
    assert first is not None and list(first.steps["step"]) == [1, 2]
    assert list(first.phases["data"]) == [0.1]
    _write(layout.probe_path(d, 1), [step(101.5, 1, 1)])  # later read, earlier time
    _write(layout.probe_path(d, 0), [step(103, 0, 3)])
    r.poll()
    second = r.take_steps()
    assert second is not None
    assert list(zip(second.steps["rank"], second.steps["step"], strict=True)) == [(1, 1), (0, 3)]
    assert len(second.phases) == 0
    empty = r.take_steps()
    assert empty is not None and len(empty.steps) == 0
    with pytest.raises(RuntimeError, match="keeps none"):
        r.steps()


def test_take_steps_says_start_over_when_handed_log_rows_are_dropped(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    _write(d / layout.EVENTS, [step(101, 0, 1, src="log"), step(101, 1, 1, src="log")])
    r = SessionReader(d)
    r.poll()
    taken = r.take_steps()
    assert taken is not None and len(taken.steps) == 2
    _write(d / layout.EVENTS, [step(102, 2, 2, src="log")])
    _write(layout.probe_path(d, 2), [step(102.5, 2, 2)])  # rank 2's log row not handed yet
    r.poll()
    taken = r.take_steps()
    assert taken is not None and [STEP_SOURCES[c] for c in taken.steps["src"]] == ["probe"]
    _write(layout.probe_path(d, 0), [step(103, 0, 3)])  # rank 0's log row was handed out
    r.poll()
    assert r.take_steps() is None


def test_phase_timings_are_columns_with_gaps_as_nan(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    _write(layout.probe_path(d, 0), [
        step(101, 0, 1, phases={"data": 0.1}), step(102, 0, 2, phases=None),
        step(103, 0, 3, phases={"data": 0.2, "forward": 0.3}),
        step(104, 0, 4, phases={"forward": "fast", "t": 5.0})])
    phases = SessionReader(d).load().phases()
    assert list(phases.columns) == ["t", "rank", "data", "forward"]
    assert list(phases["t"]) == [101, 103, 104]  # the step's time, not a phase named t
    assert phases["data"].tolist()[:2] == [0.1, 0.2] and math.isnan(phases["data"].iloc[2])
    assert math.isnan(phases["forward"].iloc[0]) and phases["forward"].iloc[1] == 0.3
    assert math.isnan(phases["forward"].iloc[2])  # not a number: missing, never 0


def test_first_read_says_how_far_it_got(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    d = make_session(tmp_path)
    for rank in (0, 1):
        with open(d / "probe" / f"rank-{rank}.jsonl", "w") as f:
            f.writelines(json.dumps(step(100.0 + n, rank, n)) + "\n" for n in range(1, 200))
    total = sum(p.stat().st_size for p in (d / "probe").iterdir())
    monkeypatch.setattr(reader_module, "READ_CHUNK_BYTES", 4096)
    reader = SessionReader(d, use_cache=False)
    seen: list[tuple[int, int] | None] = []
    take = reader._take_block  # once a piece of 4 KiB
    monkeypatch.setattr(reader, "_take_block",
                        lambda *a: (seen.append(reader.first_read), take(*a))[1])
    take_batch = reader._take_batch  # the files' last pieces, taken together
    monkeypatch.setattr(reader, "_take_batch", lambda batch: (
        seen.append(reader.first_read) if batch else None, take_batch(batch))[1])
    reader.poll()
    done = [p[0] for p in seen if p is not None]
    assert len(seen) >= total // 4096 and all(p is not None and p[1] == total for p in seen)
    assert done == sorted(done) and 0 <= done[0] < done[-1] <= total  # rises chunk by chunk
    assert reader.first_read is None  # only while the first read runs
    with open(d / "probe" / "rank-0.jsonl", "a") as f:
        f.write(json.dumps(step(400.0, 0, 200)) + "\n")
    seen.clear()
    reader.poll()
    assert seen and set(seen) == {None}  # later polls read a little: no progress to show


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 16])
def test_lines_backwards_whole_lines_last_first(tmp_path: Path, block: int) -> None:
    from neurotui.session.tailing import read_lines_backwards

    path = tmp_path / "f"
    path.write_bytes(b"a\nbb\nccc\ndddd\ncut mid-li")  # a writer killed mid-line
    assert list(read_lines_backwards(path, 1 << 20, block)) == [b"dddd", b"ccc", b"bb", b"a"]
    # From the last 17 bytes ("cc\ndddd\ncut mid-li"): the cut first line "cc" goes too.
    assert list(read_lines_backwards(path, 17, block)) == [b"dddd"]
    path.write_bytes(b"no newline at all")
    assert list(read_lines_backwards(path, 1 << 20, block)) == []


def test_a_partial_line_appended_by_another_process_loses_only_itself(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    w = EventWriter(d / layout.EVENTS)
    w.write("step", t=101.0, rank=0, step=1, samples=16, loss=0.5, dt=0.1, src="log",
            attempt=0)
    w.flush()
    with open(d / layout.EVENTS, "a", encoding="utf-8") as other:
        other.write('{"t": 1, "kind": "garb')  # no newline: another writer's partial line
    w.write("step", t=102.0, rank=0, step=2, samples=16, loss=0.5, dt=0.1, src="log",
            attempt=0)
    w.close()
    r = SessionReader(d).load()
    assert list(r.steps()["step"]) == [1, 2]
    assert r.problems.bad_lines + r.problems.truncated_lines == 1


def test_a_new_writer_starts_after_a_line_cut_by_a_dead_one(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    (d / layout.EVENTS).write_text('{"t": 101.0, "kind": "step", "rank": 0, "ste')
    w = EventWriter(d / layout.EVENTS)  # an adopting supervisor, say
    w.write("step", t=102.0, rank=0, step=2, samples=16, loss=0.5, dt=0.1, src="log",
            attempt=0)
    w.close()
    assert list(SessionReader(d).load().steps()["step"]) == [2]


def _put_log_losses_one_by_one(t, rank, auto, loss, losses):
    """The rule as said: each loss, in order, onto its rank's last automatic row at or before
    it, where that row has no loss yet; the rest are handed back."""
    loss = loss.copy()
    unplaced = []
    for log_t, log_rank, value in losses:
        rows = [i for i in range(len(t)) if auto[i] and rank[i] == log_rank and t[i] <= log_t]
        if not rows:
            unplaced.append((log_t, log_rank, value))
        elif math.isnan(loss[rows[-1]]):
            loss[rows[-1]] = value
    return loss, unplaced


@pytest.mark.parametrize("seed", range(40))
def test_log_losses_go_onto_the_automatic_rows_as_the_rule_says(seed: int) -> None:
    """stepsources.put_log_losses (a rank's losses found in one search) against the rule, one
    loss at a time: rows of several ranks and sources with equal times, rows with losses of
    their own, two losses for one row, losses before any row."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    t = np.sort(rng.integers(0, 20, n).astype(np.float64))
    rank = rng.integers(0, 3, n).astype(np.int64)
    src = rng.choice([STEP_SOURCES.index("auto"), STEP_SOURCES.index("log")], n).astype(np.int8)
    loss = np.where(rng.random(n) < 0.3, rng.random(n), np.nan)
    losses = [(float(rng.integers(-2, 22)), int(rng.integers(0, 4)), float(rng.random()))
              for _ in range(int(rng.integers(0, 25)))]
    chunk = reader_module.Columns({"t": t, "rank": rank, "src": src, "loss": loss})
    placed, unplaced = stepsources.put_log_losses(chunk, losses)
    want_loss, want_unplaced = _put_log_losses_one_by_one(
        t, rank, src == STEP_SOURCES.index("auto"), loss, losses)
    np.testing.assert_array_equal(placed["loss"], want_loss)
    assert unplaced == want_unplaced


def test_a_first_read_asks_numpy_for_small_pages_and_puts_its_setting_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first read makes and drops hundreds of large arrays: numpy's huge pages (madvise)
    are off while it reads, and as they were after, also when the read fails."""
    d = make_session(tmp_path)
    (d / "probe" / "rank-0.jsonl").write_text(json.dumps(step(101.0, 0, 1)) + "\n")
    state = {"huge": True}
    seen: list[bool] = []

    def switch(enabled: bool) -> bool:
        before, state["huge"] = state["huge"], enabled
        return before

    monkeypatch.setattr(np._core.multiarray, "_set_madvise_hugepage", switch)
    take = SessionReader._take_decoded
    monkeypatch.setattr(SessionReader, "_take_decoded", lambda self, steps: (
        seen.append(state["huge"]), take(self, steps))[1])
    reader = SessionReader(d, use_cache=False)
    reader.poll()
    assert seen and not any(seen) and state["huge"] is True
    with open(d / "probe" / "rank-0.jsonl", "a") as f:
        f.write(json.dumps(step(102.0, 0, 2)) + "\n")
    before = len(seen)
    reader.poll()  # a later poll: a few lines, as numpy has it
    assert len(seen) > before and seen[-1] is True
    monkeypatch.setattr(SessionReader, "_read_tail", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        SessionReader(d, use_cache=False).poll()
    assert state["huge"] is True
