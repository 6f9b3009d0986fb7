"""Reading a rank's trace back: self time from nesting, a real torch.profiler trace, the
ranks' differences, and traces that cannot be read said so."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from neurotui.profiling.trace import (
    RankProfile,
    TraceError,
    load_trace,
    operator_times,
    rank_differences,
    rank_profile,
)


def op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}


def test_self_time_is_the_duration_less_the_operators_directly_inside() -> None:
    events = [
        op("aten::linear", 0, 100),
        op("aten::addmm", 10, 80),  # inside linear
        op("aten::copy_", 20, 10),  # inside addmm
        op("aten::copy_", 40, 5),  # inside addmm
        op("aten::relu", 100, 30),  # starts as linear ends: a sibling, not a child
        op("aten::linear", 0, 50, tid=2),  # another thread: nests on its own
        op("Optimizer.step#SGD.step", 0, 500, cat="user_annotation"),  # not an operator
        op("train.py(12): step", 0, 500, cat="python_function"),
        {"ph": "i", "cat": "cpu_op", "name": "instant", "ts": 1},
        {"ph": "X", "cat": "cpu_op", "name": "no duration", "ts": 1},
        "not an event",
    ]
    times = {t.name: t for t in operator_times(events)}
    assert set(times) == {"aten::linear", "aten::addmm", "aten::copy_", "aten::relu"}
    assert times["aten::linear"].self_us == 20 + 50
    assert times["aten::linear"].total_us == 150 and times["aten::linear"].calls == 2
    assert times["aten::addmm"].self_us == 65
    assert times["aten::copy_"].self_us == 15 and times["aten::copy_"].calls == 2
    assert times["aten::relu"].self_us == 30
    assert operator_times(events)[0].name == "aten::linear"  # the longest self time first


def test_a_real_torch_profile_reads_back_with_aten_operators(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            model(torch.randn(8, 16)).sum().backward()
    plain = tmp_path / "trace.json"
    prof.export_chrome_trace(str(plain))
    packed = tmp_path / "rank-0.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    profile = rank_profile(0, packed)
    names = [t.name for t in profile.operators]
    assert "aten::addmm" in names and "aten::relu" in names
    # Self times add up to no more than the operators' outermost spans: nothing counted twice.
    by_name = {t.name: t for t in profile.operators}
    assert by_name["aten::linear"].self_us < by_name["aten::linear"].total_us
    assert profile.self_us <= sum(t.total_us for t in profile.operators)
    # torch's own table agrees on which operators ran, and how often.
    theirs = {e.key: e.count for e in prof.key_averages()}
    assert by_name["aten::addmm"].calls == theirs["aten::addmm"]
    assert load_trace(plain)["traceEvents"]  # not gzipped: read as it is


def test_the_operators_that_differ_most_between_ranks_come_first() -> None:
    def profile(rank: int, **self_us: float) -> RankProfile:
        events = []
        t = 0.0
        for name, us in self_us.items():
            events.append(op(f"aten::{name}", t, us))
            t += us
        return RankProfile(rank, operator_times(events))

    ranks = [profile(0, mm=100, allreduce=10, copy=5),
             profile(1, mm=105, allreduce=300, copy=5),
             profile(2, mm=98, allreduce=12)]
    found = rank_differences(ranks, 5)
    assert [d.name for d in found] == ["aten::allreduce", "aten::mm", "aten::copy"]
    assert found[0].slowest_rank == 1 and found[0].spread_us == 290
    assert found[2].self_us == {0: 5, 1: 5, 2: 0}  # a rank that never ran it: 0
    assert rank_differences(ranks[:1], 5) == []
    assert rank_differences([profile(0, mm=10), profile(1, mm=10)], 5) == []


@pytest.mark.parametrize(("content", "said"), [
    (b"not json", "not JSON"),
    (b'{"events": []}', "no traceEvents"),
    (gzip.compress(b'{"traceEvents": [')[:-8], "not JSON|cannot be read"),
    (b"[1, 2]", "no traceEvents"),
])
def test_a_file_that_is_not_a_trace_is_said_so(tmp_path: Path, content: bytes,
                                               said: str) -> None:
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=said):
        load_trace(path)
    with pytest.raises(TraceError, match="cannot be read"):
        load_trace(tmp_path / "missing.json.gz")


def test_a_trace_read_from_disk_is_the_same_gzipped_or_not(tmp_path: Path) -> None:
    trace = {"traceEvents": [op("aten::mm", 0, 10), op("aten::add", 10, 4)]}
    (tmp_path / "a.json").write_text(json.dumps(trace))
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    assert rank_profile(0, tmp_path / "a.json") == rank_profile(0, tmp_path / "b.json.gz")
