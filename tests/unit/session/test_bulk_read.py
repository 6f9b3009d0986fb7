"""Lines decoded in bulk read exactly as the per-line path reads them, odd lines too."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurotui.session import bulk, cache, layout
from neurotui.session import reader as reader_module
from neurotui.session.reader import SessionReader
from tests.unit.session.test_session_reader import make_session

ODD_VALUES = [None, True, "3", 1.5, -1, 2**64, 10**400, float("nan"), [], {}, "probe", 0]


def _read(session: Path, how: str, monkeypatch: pytest.MonkeyPatch,
          history: int | None) -> SessionReader:
    """`how`: "bulk" as a reader reads, "spans" with every piece's lines found where they
    lie (as a telemetry piece's are: bulk.spans_of), "unmixed" with no piece decoded whole
    (bulk.MixedDecoder: the kinds first, then the step lines, as where one line is odd),
    "each" line by line."""
    with monkeypatch.context() as m:
        if how == "each":
            m.setattr(bulk, "MIN_BATCH", 10**9)
            m.setattr(bulk, "MIN_BLOCK", 10**9)
        elif how == "spans":
            m.setattr(bulk, "SPAN_MIN_LINE_BYTES", 0)
        elif how == "unmixed":
            m.setattr(reader_module._MIXED, "decode", lambda *_: None)
        m.setattr(cache, "save", lambda *_: False)  # each reader parses: none restores
        reader = SessionReader(session, telemetry_history=history)
        reader.load()
        return reader


def assert_same_reads(session: Path, monkeypatch: pytest.MonkeyPatch,
                      history: int | None = 5) -> SessionReader:
    """Steps, phases, problems (in order), the events kept (the last `history` telemetry
    samples) and the event index: the same in bulk, with lines as spans, and line by line."""
    in_bulk = _read(session, "bulk", monkeypatch, history)
    each = _read(session, "each", monkeypatch, history)
    assert_readers_agree(in_bulk, each)
    assert_readers_agree(_read(session, "spans", monkeypatch, history), each)
    assert_readers_agree(_read(session, "unmixed", monkeypatch, history), each)
    return in_bulk


def assert_readers_agree(in_bulk: SessionReader, each: SessionReader) -> None:
    """What two readers of one session took is the same, to the event index."""
    a, b = in_bulk.step_columns(), each.step_columns()
    assert a.columns == b.columns and len(a) == len(b)
    for name in a.columns:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    pa, pb = in_bulk.phase_columns(), each.phase_columns()
    assert pa.columns == pb.columns
    for name in pa.columns:
        np.testing.assert_array_equal(pa[name], pb[name], err_msg=name)
    assert in_bulk.problems.summary() == each.problems.summary()
    assert in_bulk.problems.locations == each.problems.locations
    assert in_bulk.samples_from == each.samples_from
    assert {k: list(v) for k, v in in_bulk.events.items()} == \
        {k: list(v) for k, v in each.events.items()}
    ia, ib = in_bulk._index.columns(), each._index.columns()
    for name in ia.columns:
        np.testing.assert_array_equal(ia[name], ib[name], err_msg=name)


def _line(record: dict[str, Any], spaced: bool) -> str:
    return json.dumps(record, separators=(", ", ": ") if spaced else (",", ":"))


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def test_a_probe_file_with_odd_lines_reads_the_same_in_bulk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = make_session(tmp_path)
    lines = []
    for i in range(400):
        record: dict[str, Any] = {
            "t": 1_700_000_000.0 + i * 0.1, "kind": "step", "rank": 1, "step": i + 1,
            "samples": 16, "loss": 2.0 - i / 1000, "dt": 0.1, "src": "probe", "attempt": 0,
            "phases": {"data": 0.01, "forward": 0.03, f"extra{i % 3}": 0.001}}
        field = ("t", "step", "rank", "samples", "loss", "dt", "src", "attempt",
                 "phases")[i % 9]
        if i % 7 == 3:  # an odd value in some field
            record[field] = ODD_VALUES[i % len(ODD_VALUES)]
        lines.append(_line(record, spaced=i % 2 == 0))
        if i % 50 == 10:
            lines += ["garbage", '{"kind":"step","t":', "", '{"kind": "host", "t": '
                      f'{1_700_000_000.0 + i * 0.1}, "cpu": [1, 2]}}']
        if i % 3 == 0:  # telemetry between the steps, some of it odd
            kind = ("host", "procs", "neuron", "gpu", "log_offsets", "compile", "nope")[i % 7]
            t: Any = 1_700_000_000.0 + i * 0.1 if i % 11 else ("x", True, 1e12, -1)[i % 4]
            lines.append(_line({"kind": kind, "t": t, "cpu": [i, 2], "n": i}, i % 2 == 0))
    _write(layout.probe_path(session, 1), lines)
    for history in (0, 5, None):
        assert_same_reads(session, monkeypatch, history)
    reader = assert_same_reads(session, monkeypatch)
    assert len(reader.step_columns()) > 300  # most lines are fine steps
    assert reader.problems.bad_lines > 0  # and the odd ones were seen


def test_sources_of_one_rank_meeting_in_one_piece_read_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Log rows first, then the automatic probe's (whose rows win, keeping the logs' losses),
    then the explicit probe's: the order in which the pairs meet decides what is kept."""
    session = make_session(tmp_path)
    lines = []
    for i in range(300):
        src = "log" if i < 100 else ("auto" if i < 200 else ("log" if i % 2 else "probe"))
        lines.append(_line({"t": 1_700_000_000.0 + i * 0.1, "kind": "step", "rank": i % 2,
                            "step": i // 2, "loss": 1.0 + i if src == "log" else None,
                            "src": src, "samples": 8}, spaced=src == "auto"))
    _write(session / layout.EVENTS, lines)
    assert_same_reads(session, monkeypatch)


@pytest.mark.parametrize("samples", ["every row", "some rows", "no row"])
@pytest.mark.parametrize("where", ["probe", "events"])
def test_rows_that_share_a_source_read_the_same_held_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples: str, where: str) -> None:
    """A piece whose rows all say one src and one samples_from, with no phases (a probe
    file's, a log follower's), holds each of those once (bulk.Same), and reads as line by
    line: samples_from counts only where a row has samples; a bad line among the rows (in
    events.jsonl) splits the piece around it."""
    session = make_session(tmp_path)
    lines = [_line({"t": 1_700_000_000.0 + i * 0.1, "kind": "step", "rank": i % 2,
                    "step": i // 2 + 1, "loss": 1.5, "src": "log", "samples_from": "line",
                    "samples": None if samples == "no row" or (samples == "some rows"
                                                               and i % 3 == 0) else 8},
                   spaced=False) for i in range(200)]
    decoded = bulk.decode_block("\n".join(lines).encode(), len(lines))
    assert decoded is not None and isinstance(decoded.src, bulk.Same)
    assert isinstance(decoded.samples_from, bulk.Same) and decoded.phases == bulk.Same(None, 200)
    first, rest = decoded.before(70)
    assert first.src == bulk.Same("log", 70) and rest.src == bulk.Same("log", 130)
    if where == "events":
        lines.insert(100, "not json")
    _write(layout.probe_path(session, 0) if where == "probe" else session / layout.EVENTS,
           lines)
    reader = assert_same_reads(session, monkeypatch)
    assert len(reader.step_columns()) == 200
    assert reader.samples_from == (set() if samples == "no row" else {"line"})


step_records = st.fixed_dictionaries(
    {"t": st.one_of(st.floats(1e9, 2e9), st.sampled_from(ODD_VALUES)),
     "kind": st.just("step"),
     "step": st.one_of(st.integers(0, 10**6), st.sampled_from(ODD_VALUES)),
     "rank": st.one_of(st.integers(0, 3), st.sampled_from(ODD_VALUES))},
    optional={"samples": st.one_of(st.floats(0, 100), st.sampled_from(ODD_VALUES)),
              "loss": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.none()),
              "dt": st.one_of(st.floats(0, 10), st.sampled_from(ODD_VALUES)),
              "src": st.sampled_from(["probe", "log", "auto", None, "other", 3]),
              "attempt": st.one_of(st.integers(0, 2), st.sampled_from(ODD_VALUES)),
              "samples_from": st.sampled_from(["batch", "line", None, 5]),
              "phases": st.one_of(
                  st.dictionaries(st.sampled_from(["data", "fwd", "t", "a b"]),
                                  st.one_of(st.floats(0, 1), st.sampled_from(ODD_VALUES)),
                                  max_size=3),
                  st.sampled_from(ODD_VALUES))})


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=st.lists(step_records, min_size=bulk.MIN_BATCH, max_size=150),
       spaced=st.booleans())
def test_any_step_lines_read_the_same_in_bulk(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        records: list[dict[str, Any]], spaced: bool) -> None:
    session = make_session(tmp_path_factory.mktemp("s"))
    lines = []
    for r in records:
        try:
            lines.append(_line(r, spaced))
        except ValueError:  # 10**400 and the like do not encode as JSON numbers
            lines.append(_line({**r, "step": 1}, spaced).replace('"step": 1', '"step": '
                         + str(10**400)).replace('"step":1', '"step":' + str(10**400)))
    _write(layout.probe_path(session, 0), lines)
    assert_same_reads(session, monkeypatch)


def test_bulk_decode_sends_back_what_it_does_not_take() -> None:
    good = b'{"t":1700000000.5,"kind":"step","step":3,"rank":2,"phases":{"data":0.5}}'
    lines = [good, b'{"t":1,"kind":"step","step":"3"}', b'{"kind":"step"', good,
             b'{"t":1e12,"kind":"step","step":3}', b'{"t":1,"kind":"step","step":3,"rank":-1}',
             b'{"t": 1, "kind": "host"}', b'{"t":1,"kind":"step","step":3,"rank":null}']
    decoded, rejected, others = bulk.decode(lines)
    assert decoded.line.tolist() == [0, 3] and rejected == [1, 2, 4, 5, 7] and others == [6]
    assert decoded.rank.tolist() == [2, 2] and decoded.step.dtype == np.int64
    assert decoded.phases[0] == {"data": 0.5} and math.isnan(decoded.samples[0])


def test_a_follower_s_short_pieces_of_many_files_read_the_same_decoded_together(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh finds a few lines in each probe file: decoded as one block (a garbage line
    in one file sends that refresh's pieces back one by one), as line by line."""
    session = make_session(tmp_path)
    readers = []
    for in_bulk in (True, False):
        with monkeypatch.context() as m:
            if not in_bulk:
                m.setattr(bulk, "MIN_BATCH", 10**9)
                m.setattr(bulk, "MIN_BLOCK", 10**9)
            readers.append(SessionReader(session, telemetry_history=5, use_cache=False))
    decoded: list[int] = []
    block = bulk.decode_block
    monkeypatch.setattr(bulk, "decode_block", lambda data, lines: (
        decoded.append(lines), block(data, lines))[1])
    for poll in range(4):
        for rank in range(6):
            lines = [_line({"t": 1000.0 + poll + rank * 0.01 + i * 0.1, "kind": "step",
                            "rank": rank, "step": poll * 5 + i + 1, "samples": 16,
                            "loss": 1.0, "dt": 0.1, "src": "probe", "attempt": 0}, rank % 2 == 0)
                     for i in range(5)]
            if poll == 2 and rank == 4:
                lines.insert(2, "not json")
            _write(layout.probe_path(session, rank), lines)
        for reader, in_bulk in zip(readers, (True, False), strict=True):
            with monkeypatch.context() as m:
                if not in_bulk:
                    m.setattr(bulk, "MIN_BATCH", 10**9)
                    m.setattr(bulk, "MIN_BLOCK", 10**9)
                reader.poll()
    assert 30 in decoded  # a refresh's 6 x 5 lines in one block
    a, b = readers[0].step_columns(), readers[1].step_columns()
    assert len(a) == len(b) == 4 * 6 * 5
    for name in a.columns:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert readers[0].problems.locations == readers[1].problems.locations == [
        "probe/rank-4.jsonl:13 (not JSON)"]


@pytest.mark.parametrize("odd", ["none", "a bad line", "a blank line"])
def test_a_telemetry_piece_of_long_lines_is_read_where_its_lines_lie(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: str) -> None:
    """events.jsonl of a long run is kilobyte telemetry lines, a few steps and events among
    them: its lines are found where they lie (bulk.Spans), only some made bytes, and read
    the same as line by line, to the event index. A step written with its kind late or its
    step as a string, a telemetry time out of range, an unknown kind go one by one; a bad
    or blank line sends the piece to the split path."""
    session = make_session(tmp_path)
    procs = [{"pid": 4000 + p, "cpu": 97.5, "rss": 2_000_000_000 + p,
              "cmd": f"python train.py --rank {p} --model vit_small_patch16_224"}
             for p in range(16)]
    lines = []
    for i in range(300):
        t = 1_700_000_000.0 + i
        lines.append(_line({"t": t, "kind": "procs", "procs": procs}, spaced=i % 2 == 0))
        lines.append(_line({"t": t, "kind": "host", "cpu": [50.0] * 32, "mem": 1e10},
                           spaced=False))
        if i % 10 == 0:
            lines.append(_line({"t": t + 0.5, "kind": "step", "rank": i % 3, "step": i,
                                "samples": 32, "loss": 1.0, "src": "log"}, spaced=i % 20 == 0))
        if i % 37 == 5:
            lines.append(_line({"rank": 1, "step": i, "t": t + 0.6, "samples": 32,
                                "src": "log", "loss": 2.0, "note": "x" * 40, "kind": "step"},
                               spaced=False))
        if i % 41 == 7:
            lines.append(_line({"t": -5.0, "kind": "host", "cpu": [1.0]}, spaced=False))
            lines.append(_line({"t": t, "kind": "someday", "x": 1}, spaced=False))
            lines.append(_line({"t": t, "kind": "alert", "what": "slow rank"}, spaced=False))
            lines.append(_line({"t": t, "kind": "step", "rank": 1, "step": "3"}, spaced=False))
    if odd == "a bad line":
        lines.insert(333, '{"t": 1700000100.0, "kind": "host", "cpu": [1, 2')
    elif odd == "a blank line":
        lines.insert(333, "")
    _write(session / layout.EVENTS, lines)
    assert len("\n".join(lines)) / len(lines) > bulk.SPAN_MIN_LINE_BYTES  # long lines
    sorted_by_heads = []
    by_heads = SessionReader._sort_by_heads
    monkeypatch.setattr(SessionReader, "_sort_by_heads", staticmethod(
        lambda spans, heads: (sorted_by_heads.append(len(spans)), by_heads(spans, heads))[1]))
    for history in (0, 5, None):
        reader = assert_same_reads(session, monkeypatch, history)
    assert (sorted_by_heads != []) == (odd == "none")
    steps = reader.step_columns()
    assert len(steps) == 30 + 8 + 8  # the late-kind steps, and a step of "3" (as a line is)
    assert len(reader.events["host"]) == 300 and len(reader.events["alert"]) == 8
    assert reader.problems.unknown_kinds == {"someday": 8}
    assert reader.problems.bad_lines == 8 + (odd == "a bad line")  # the times of -5
    index = reader._index.columns()
    with open(session / layout.EVENTS, "rb") as f:  # the index says where each line lies
        for offset, length in zip(index["offset"][-3:], index["length"][-3:], strict=True):
            f.seek(int(offset))
            assert json.loads(f.read(int(length)))["kind"] in ("host", "procs", "alert")


@pytest.mark.parametrize("long_lines", [False, True])
def test_a_piece_of_known_kinds_is_decoded_whole_and_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, long_lines: bool) -> None:
    """events.jsonl of a torch job timed by the automatic probe is its log lines' step
    records among telemetry and a few events: a piece of known kinds only is decoded in one
    call (bulk.MixedDecoder), and reads as line by line and as the longer way, to the event
    index; a step with a value out of range still goes line by line, and is reported."""
    session = make_session(tmp_path)
    cpu = [50.0] * (64 if long_lines else 2)
    lines = []
    for i in range(400):
        t = 1_700_000_000.0 + i
        for rank in range(4):
            lines.append(_line({"t": t + 0.1 * rank, "kind": "step", "rank": rank, "step": i,
                                "samples": 16.0, "loss": 3.0 - i / 400, "dt": None,
                                "phases": None, "src": "log", "attempt": 0,
                                "samples_from": "line"}, spaced=rank == 3))
        lines.append(_line({"t": t + 0.5, "kind": "host", "cpu": cpu}, spaced=i % 2 == 0))
        if i % 50 == 7:
            lines.append(_line({"t": t + 0.6, "kind": "compile", "rank": None,
                                "what": "compile", "line": "Compiler status PASS"}, False))
            lines.append(_line({"t": t + 0.7, "kind": "step", "rank": 1, "step": -i,
                                "src": "log"}, spaced=False))
            lines.append(_line({"t": -1.0, "kind": "procs", "procs": []}, spaced=False))
    _write(session / layout.EVENTS, lines)
    wholes: list[int] = []
    decode = reader_module._MIXED.decode
    monkeypatch.setattr(reader_module._MIXED, "decode", lambda block, n: (
        mixed := decode(block, n), wholes.append(n) if mixed else None)[0])
    for history in (0, 5, None):
        reader = assert_same_reads(session, monkeypatch, history)
    assert sum(wholes) >= len(lines)  # every piece decoded whole, in each read of it
    assert len(reader.step_columns()) == 400 * 4
    assert len(reader.events["host"]) == 400 and len(reader.events["compile"]) == 8
    assert reader.problems.bad_lines == 16  # a step of -i, a time of -1: each said
    assert "events.jsonl:" in reader.problems.locations[0]


def test_the_mixed_decoder_leaves_what_it_does_not_know_to_the_longer_way() -> None:
    decoder = bulk.MixedDecoder({"step", "host"})
    step = b'{"t":1700000000.5,"kind":"step","step":3,"rank":2}'
    host = b'{"t":1700000001,"kind":"host","cpu":[1,2]}'
    mixed = decoder.decode(b"\n".join([step, host, step]) + b"\n", 3)
    assert mixed is not None and mixed.steps.line.tolist() == [0, 2]
    assert mixed.others == [(1, "host", 1700000001.0)] and mixed.rejected == []
    for odd in (b'{"t":1,"kind":"neuron"}', b'{"t":1,"kind":"step","step":"3"}',
                b'{"t":1,"kind":"step","step":3,"rank":null}', b"", b'{"kind":"host"}'):
        assert decoder.decode(b"\n".join([step, odd, host]) + b"\n", 3) is None, odd
    out_of_range = decoder.decode(step + b"\n" + step.replace(b'"step":3', b'"step":-3'), 2)
    assert out_of_range is not None and out_of_range.rejected == [1]


def test_a_piece_of_telemetry_alone_is_decoded_whole_and_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job timed by its probe files: events.jsonl is telemetry and events only."""
    session = make_session(tmp_path)
    lines = [_line({"t": 1_700_000_000.0 + i, "kind": "host" if i % 3 else "procs",
                    "cpu": [1.0] * 16}, spaced=i % 2 == 0) for i in range(500)]
    _write(session / layout.EVENTS, lines)
    mixed = reader_module._MIXED.decode("\n".join(lines).encode() + b"\n", len(lines))
    assert mixed is not None and len(mixed.steps.t) == 0 and len(mixed.others) == 500
    for history in (0, 7, None):
        reader = assert_same_reads(session, monkeypatch, history)
    assert len(reader.events["host"]) == 333 and len(reader.step_columns()) == 0
