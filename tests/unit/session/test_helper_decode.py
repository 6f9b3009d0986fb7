"""A long first read with a helper process decoding probe files reads exactly as without it,
also when the helper dies, and where a file's pieces stop decoding whole."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from neurotui.session import helper_decode, layout
from neurotui.session import reader as reader_module
from neurotui.session.reader import SessionReader
from tests.unit.session.test_bulk_read import assert_readers_agree
from tests.unit.session.test_session_reader import make_session, step

PIECE = 4096  # small pieces: each file is read in many, as a long run's are in 4 MiB ones


def _session(tmp_path: Path) -> Path:
    d = make_session(tmp_path)
    for rank in range(6):
        lines = []
        for i in range(1, 301):
            record: dict[str, Any] = step(1000.0 + i * 0.5 + rank * 0.01, rank, i)
            if rank == 2:
                record["phases"] = {"data": 0.01, "forward": 0.02}
            lines.append(json.dumps(record))
        if rank == 3:
            lines.insert(150, "garbage in the middle of a probe file")
        text = "\n".join(lines) + "\n"
        if rank == 4:  # still being written: a partial last line
            text += '{"t": 1200.0, "kind": "st'
        (d / "probe" / f"rank-{rank}.jsonl").write_text(text)
    with open(d / layout.EVENTS, "w") as f:
        for k in range(50):
            f.write(json.dumps({"t": 1000.0 + k, "kind": "host", "cpu": [1.0, 2.0],
                                "mem_used": 1, "mem_total": 2, "load": [0, 0, 0]}) + "\n")
    return d


def _read(session: Path, helper: bool, monkeypatch: pytest.MonkeyPatch) -> SessionReader:
    with monkeypatch.context() as m:
        m.setattr(reader_module, "READ_CHUNK_BYTES", PIECE)
        reader = SessionReader(session, telemetry_history=10, use_cache=False)
        reader.helper_min_bytes = 0 if helper else 10**18
        return reader.load()


def _assert_same(a: SessionReader, b: SessionReader) -> None:
    assert len(a.step_columns()) > 0
    assert_readers_agree(a, b)
    assert {t.name: (t.offset, t.line_no, t.pending) for t in a._tails.values()} == \
        {t.name: (t.offset, t.line_no, t.pending) for t in b._tails.values()}


def _spy(monkeypatch: pytest.MonkeyPatch, *, kill: bool = False) -> list[int | None]:
    """Records how many pieces the helper handed over per file (None: the reader's own).
    The reader waits for the helper to have claimed the last file: a small session is read
    before a new interpreter is up, and the handing over is what is tested."""
    taken: list[int | None] = []
    start, take = helper_decode.HelperDecode.__init__, helper_decode.HelperDecode.take

    def spied_init(self: helper_decode.HelperDecode, *args: Any) -> None:
        start(self, *args)
        if kill and self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            return
        last = self._folder / str(len(args[0]) - 1)
        deadline = time.monotonic() + 30
        while not last.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    def spied_take(self: helper_decode.HelperDecode, index: int) -> Any:
        pieces = take(self, index)
        taken.append(None if pieces is None else len(pieces))
        return pieces

    monkeypatch.setattr(helper_decode.HelperDecode, "__init__", spied_init)
    monkeypatch.setattr(helper_decode.HelperDecode, "take", spied_take)
    return taken


def test_a_helper_decoding_probe_files_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(tmp_path)
    alone = _read(session, False, monkeypatch)
    taken = _spy(monkeypatch)
    helped = _read(session, True, monkeypatch)
    _assert_same(helped, alone)
    assert len(taken) == 6
    # The helper starts from the last file (in many pieces of PIECE bytes).
    assert taken[-1] is not None and taken[-1] > 1
    assert helped.problems.bad_lines == 1
    assert any("probe/rank-3.jsonl:151" in where for where in helped.problems.locations)


def test_a_helper_that_dies_costs_nothing_but_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(tmp_path)
    alone = _read(session, False, monkeypatch)
    taken = _spy(monkeypatch, kill=True)
    helped = _read(session, True, monkeypatch)
    _assert_same(helped, alone)
    assert len(taken) == 6 and not any(taken)  # nothing came from it: all read here


def test_a_file_claimed_by_the_helper_goes_on_line_by_line_where_it_stops_decoding(
        tmp_path: Path) -> None:
    session = _session(tmp_path)
    path = session / "probe" / "rank-3.jsonl"
    pieces = helper_decode.decode_file(path, 0, PIECE)
    assert pieces and pieces[0].start == 0
    end = pieces[-1].start + pieces[-1].complete
    garbage_at = path.read_bytes().index(b"garbage")
    assert end <= garbage_at < end + PIECE  # stops before the piece with the garbage line
    assert [p.start for p in pieces[1:]] == [p.start + p.complete for p in pieces[:-1]]


def test_no_helper_for_a_short_read_or_the_keeper(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(tmp_path)
    taken = _spy(monkeypatch)
    SessionReader(session, use_cache=False).load()  # far below helper_decode.MIN_BYTES
    keeper = SessionReader(session, use_cache=False)
    keeper.rebuilds_cache, keeper.helper_min_bytes = True, 0
    keeper.load()
    assert taken == []


def test_a_helper_whose_reader_is_gone_leaves_nothing_behind(tmp_path: Path) -> None:
    """The pieces lie in /dev/shm (memory): a reader that dies mid-read (its pipes closed
    by the kernel) must not leave them there. The helper sees its stdin end and removes
    them."""
    session = _session(tmp_path)
    files = [helper_decode.HelperFile(p, 0) for p in sorted((session / "probe").glob("*.jsonl"))]
    helper = helper_decode.HelperDecode(files, PIECE)
    proc, folder = helper._proc, helper._folder
    assert proc is not None and folder.is_dir()
    deadline = time.monotonic() + 30
    while not (folder / str(len(files) - 1)).exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the helper is at work
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()  # as the kernel closes a killed reader's end of the pipes
    proc.stdout.close()
    assert proc.wait(timeout=30) == 0
    assert not folder.exists()


def _long_events(session: Path, *, odd_line_at: int | None = None) -> None:
    """events.jsonl as a torch job's: each step's log line (ranks 0-5 have probe files too,
    rank 7 only these) among host telemetry, now and then a compile event; optionally a line
    the helper cannot decode whole (an unknown kind) at that line."""
    lines = []
    for i in range(3000):
        t = 1000.0 + i * 0.1
        lines.append(json.dumps(step(t, i % 8, i // 8, "log", samples_from="line")))
        if i % 10 == 0:
            lines.append(json.dumps({"t": t, "kind": "host", "cpu": [float(i % 100)] * 8,
                                     "mem_used": 1, "mem_total": 2, "load": [0, 0, 0]}))
        if i % 700 == 3:
            lines.append(json.dumps({"t": t, "kind": "compile", "rank": None,
                                     "what": "compile", "line": "Compiler status PASS"}))
    if odd_line_at is not None:
        lines.insert(odd_line_at, json.dumps({"t": 1100.0, "kind": "someday", "x": 1}))
    (session / layout.EVENTS).write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("odd_line_at", [None, 3000])
def test_a_helper_decoding_the_later_part_of_events_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd_line_at: int | None) -> None:
    """A long events.jsonl: the helper decodes its later part (log lines' steps among
    telemetry) first, the reader the earlier part, and the read is the same to the event
    index and where each file stands; a piece the helper cannot decode whole (an unknown
    kind) and all after it are read by the reader."""
    session = _session(tmp_path)
    _long_events(session, odd_line_at=odd_line_at)
    monkeypatch.setattr(reader_module, "HELPER_EVENTS_MIN_BYTES", 0)
    big = 8 * PIECE  # a piece holds more than bulk.MIN_BATCH lines of events.jsonl
    with monkeypatch.context() as m:
        m.setattr(reader_module, "READ_CHUNK_BYTES", big)
        alone = SessionReader(session, telemetry_history=10, use_cache=False)
        alone.helper_min_bytes = 10**18
        alone.load()
    taken = _spy(monkeypatch)
    took: dict[str, int] = {}  # records taken from the helper's pieces, per file
    take_pieces = SessionReader._take_pieces
    monkeypatch.setattr(SessionReader, "_take_pieces", lambda self, tail, pieces: took.setdefault(
        tail.name, take_pieces(self, tail, pieces)))
    with monkeypatch.context() as m:
        m.setattr(reader_module, "READ_CHUNK_BYTES", big)
        helped = SessionReader(session, telemetry_history=10, use_cache=False)
        helped.helper_min_bytes = 0
        helped.load()
    _assert_same(helped, alone)
    assert len(taken) == 1 + 6  # the later part of events.jsonl, then each probe file
    size = (session / layout.EVENTS).stat().st_size
    pieces = taken[0]
    assert pieces is not None
    if odd_line_at is None:  # its whole later half, in pieces
        assert pieces >= (size // 2) // big
    else:  # up to the piece with the odd line
        assert 0 < pieces < (size // 2) // big
    assert took[layout.EVENTS] > 300  # the reader stopped where the helper's part begins
    assert helped.problems.unknown_kinds == ({"someday": 1} if odd_line_at else {})
    assert len(helped.events["compile"]) == 5
    assert 7 in set(helped.step_columns()["rank"].tolist())  # the log-only rank
