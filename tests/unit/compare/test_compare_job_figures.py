"""A job of many nodes' comparison row, worked out node by node (compare.job_figures), is the
row of one table of all its nodes' steps (summarize, as compare did before #13's scale work):
with compile events of one rank and of none, phases, a restart that moved ranks to the other
node, a rank whose samples are unknown, and a job that compiles at every step."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from neurotui import compare
from neurotui.session import layout
from neurotui.session.jobs import job_parts
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

T0 = 1000.0
RANKS = 4  # a node


def make_part(root: Path, node: int, *, steps: int = 60, attempts: int = 2,
              compile_every: int | None = None, phases: bool = True,
              unknown_samples: int | None = None, seed: int = 0) -> Path:
    """A node's part: RANKS ranks per attempt; in attempt 1 the nodes swapped their ranks
    (a new rendezvous ordered them anew)."""
    rng = random.Random(seed * 100 + node)
    d = root / f"part-{node}"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(d / layout.META, {
        "format": FORMAT_VERSION, "id": d.name, "name": "ddp", "started_at": T0 + node,
        "ended_at": T0 + 10_000, "records_alerts": True,
        "exit": {"code": 0, "signal": None, "reason": "completed", "attempts": attempts},
        "user_command": ["torchrun", "train.py", "--workers", "2"],
        "job": {"node": f"n{node}", "id": "J", "id_from": "--job"},
        "instance": {"type": "trn1.32xlarge", "source": "test"},
        "price": {"usd_per_hour": 20.0, "source": "test"}})
    events = [{"t": T0 + 1, "kind": "proc_start", "attempt": 0, "pid": 1, "pgid": 1,
               "argv": ["torchrun"]}]
    lines: dict[int, list[str]] = {}
    for attempt in range(attempts):
        owner = node if attempt % 2 == 0 else 1 - node
        start = T0 + 20 + attempt * 3000
        for local in range(RANKS):
            rank = owner * RANKS + local
            t = start + local * 0.01
            for i in range(1, steps + 1):
                dt = round(0.5 + 0.1 * rng.random(), 4)
                t += dt
                record = {"t": round(t, 4), "kind": "step", "rank": rank, "step": i,
                          "samples": None if rank == unknown_samples else 8 + (i % 3 == 0),
                          "loss": 1.0, "dt": dt if i % 7 else None,
                          "phases": {"data": round(dt / 5, 4), "step": round(dt * 0.8, 4)}
                          if phases and i % 5 else None, "src": "probe", "attempt": attempt}
                lines.setdefault(rank, []).append(json.dumps(record) + "\n")
                if compile_every and i % compile_every == 0:
                    events.append({"t": round(t - dt / 2, 4), "kind": "compile",
                                   "rank": None if i % 2 else rank, "what": "compile",
                                   "line": "neuronx-cc"})
        events.append({"t": start - 5, "kind": "compile", "rank": None, "what": "compile",
                       "line": "neuronx-cc"})
    for rank, records in lines.items():
        layout.probe_path(d, rank).write_text("".join(records))
    events.sort(key=lambda e: e["t"])
    (d / layout.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    return d


def one_table(job: compare.LoadedJob) -> compare.LoadedSession:
    """The job as compare had it: every node's rows in one table, in time order."""
    return compare.LoadedSession(
        path=job.path, meta=job.meta, steps=job.steps, compiles=job.compiles,
        phases=job.phases, probe_info=job.probe_info, samples_from=job.samples_from,
        problems=job.problems, state=job.state, last_seen=job.last_seen, alerts=job.alerts,
        lost=job.lost, job=job.job, nodes=job.nodes, compile_records=job.compile_records)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("case", [
    {},
    {"compile_every": 9},
    {"compile_every": 1},  # every step hit: the hit steps are the steady state
    {"unknown_samples": 5},
    {"phases": False, "attempts": 1},
    {"steps": 8},  # no rank gets past its warm-up
])
def test_a_jobs_row_node_by_node_is_the_row_of_one_table(tmp_path: Path,
                                                         case: dict[str, Any]) -> None:
    for node in (0, 1):
        make_part(tmp_path, node, **case)
    job = compare.load_job("J", job_parts(tmp_path, "J"))
    assert isinstance(job, compare.LoadedJob) and len(job.parts) == 2
    got = compare.session_row(job)
    want = compare.session_row(one_table(job))
    assert got.keys() == want.keys()
    differ = {k: (want[k], got[k]) for k in want if not same(want[k], got[k])}
    assert not differ
    if case.get("steps") != 8:
        assert got["cores_used"] == 2 * RANKS and got["step_time_median_s"] is not None
    if case.get("phases", True) and case.get("steps") != 8:
        assert got["phases_s"] and got["step_time_without_data_s"] is not None


def test_a_jobs_tables_are_put_together_only_when_asked_for(tmp_path: Path) -> None:
    for node in (0, 1):
        make_part(tmp_path, node)
    job = compare.load_job("J", job_parts(tmp_path, "J"))
    compare.session_row(job)
    assert not job._tables  # the row needed none of them
    steps = job.steps
    assert len(steps) == sum(len(p.steps) for p in job.parts)
    assert steps["t"].is_monotonic_increasing and set(steps["src"]) == {"probe"}
    assert len(compare.throughput_overlay([job]))
