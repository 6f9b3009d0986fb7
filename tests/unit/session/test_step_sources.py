"""Each rank's steps come from its best source: probe.step(), then the automatic probe, then
log lines, whose printed losses still reach the automatic probe's rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neurotui import metrics
from neurotui.session import layout
from neurotui.session.reader import STEP_SOURCES, SessionReader
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic


def make_session(tmp_path: Path) -> Path:
    d = tmp_path / "20260101-000000-sources"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name, "exit": None,
                                        "started_at": 100.0})
    return d


def append(path: Path, *records: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def step(t: float, rank: int, n: int, src: str, loss: float | None = None) -> dict:
    return {"t": t, "kind": "step", "rank": rank, "step": n, "samples": 16, "loss": loss,
            "dt": 0.1, "phases": None, "src": src, "attempt": 0}


def auto_file(d: Path, rank: int) -> Path:
    return d / layout.PROBE_DIR / f"auto-rank-{rank}.jsonl"


def test_auto_rows_win_over_log_rows_and_carry_the_printed_loss(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    # The script prints its loss just after each optimizer step; the supervisor stamps the
    # line a little later. Rank 1 has log lines only.
    append(auto_file(d, 0), *(step(100 + i, 0, i, "auto") for i in range(1, 6)))
    append(d / layout.EVENTS, *(step(100 + i + 0.05, 0, i, "log", loss=2.0 - i / 10)
                                for i in (2, 4)),
           *(step(100 + i, 1, i, "log", loss=1.0) for i in range(1, 4)))
    steps = SessionReader(d).load().steps()
    rank0 = steps[steps["rank"] == 0]
    assert list(rank0["src"].astype(str)) == ["auto"] * 5
    losses = dict(zip(rank0["step"], rank0["loss"], strict=True))
    assert losses[2] == 1.8 and losses[4] == 1.6
    assert all(math.isnan(losses[i]) for i in (1, 3, 5))
    assert list(steps[steps["rank"] == 1]["src"].astype(str)) == ["log"] * 3


def test_probe_rows_win_over_auto_rows_even_when_they_come_later(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    append(auto_file(d, 0), step(101, 0, 1, "auto"), step(102, 0, 2, "auto"))
    reader = SessionReader(d)
    reader.poll()
    taken = reader.take_steps()
    assert taken is not None and [STEP_SOURCES[c] for c in taken.steps["src"]] == ["auto", "auto"]
    # The script's own probe.step() reports from step 1 on (its first call comes after the
    # automatic probe's record of the same step).
    append(layout.probe_path(d, 0), step(101.001, 0, 1, "probe"), step(102.001, 0, 2, "probe"))
    reader.poll()
    assert reader.take_steps() is None, "rows handed out are void: the follower starts over"
    again = SessionReader(d).load().steps()
    assert list(again["src"].astype(str)) == ["probe", "probe"]


def test_worse_sources_arriving_after_a_better_one_are_left_out(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    append(layout.probe_path(d, 0), step(101, 0, 1, "probe"))
    append(auto_file(d, 0), step(101, 0, 1, "auto"), step(102, 0, 2, "auto"))
    append(d / layout.EVENTS, step(103, 0, 3, "log"))
    steps = SessionReader(d).load().steps()
    assert list(steps["src"].astype(str)) == ["probe"]


def test_the_cache_remembers_each_ranks_sources(tmp_path: Path, monkeypatch) -> None:
    from neurotui.session import cache

    monkeypatch.setattr(cache, "MIN_SOURCE_BYTES", 0)
    d = make_session(tmp_path)
    append(auto_file(d, 0), *(step(100 + i, 0, i, "auto") for i in range(1, 4)))
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name,
                                        "exit": {"code": 0}, "started_at": 100.0,
                                        "ended_at": 110.0})
    first = SessionReader(d).load()
    assert first.cache_state == "written"
    # A log line read after the restore is still told apart from the automatic rows.
    append(d / layout.EVENTS, step(104, 0, 4, "log", loss=0.5))
    again = SessionReader(d).load()
    assert again.cache_state.startswith("restored")
    steps = again.steps()
    assert list(steps["src"].astype(str)) == ["auto"] * 3


def test_step_sources_say_where_the_figures_come_from() -> None:
    armed = [{"kind": "probe_info", "what": "armed", "device": "xla"}]
    assert metrics.step_sources(set()) is None
    assert metrics.step_sources({"auto"}, armed) == "automatic probe (host-side, xla)"
    assert metrics.step_sources({"auto"}, [{"what": "armed", "device": "cpu"}]) == \
        "automatic probe"
    assert metrics.step_sources({"log", "probe"}) == "probe.step() + log lines"


def test_step_time_without_data_is_the_mean_steady_body() -> None:
    rows = 20
    steps = pd.DataFrame({"t": [100.0 + i for i in range(rows)], "rank": 0,
                          "step": list(range(1, rows + 1)), "samples": 16.0, "loss": math.nan,
                          "dt": 1.0, "attempt": 0})
    phases = pd.DataFrame({"t": steps["t"], "rank": 0, "data": 0.25, "step": 0.75})
    assert metrics.steady_step_time_without_data(steps, phases) == 0.75
    assert metrics.steady_step_time_without_data(steps, None) is None
    assert metrics.steady_step_time_without_data(steps.iloc[:5], phases) is None  # warm-up


def test_samples_per_step_fills_steps_that_do_not_say(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name, "exit": None,
                                        "started_at": 100.0,
                                        "config": {"samples_per_step": 64}})
    bare = [{**step(100 + i / 10, r, i, "log"), "samples": None, "dt": None}
            for i in range(1, 30) for r in (0, 1)]
    append(d / layout.EVENTS, *bare)
    reader = SessionReader(d).load()
    steps = reader.steps()
    assert (steps["samples"].iloc[2:] == 32).all(), "64 per step shared by the 2 ranks"
    assert reader.samples_from == {"samples_per_step"}
    steady = metrics.steady_state(steps)
    assert steady is not None and abs(steady.samples_per_s - 640) < 1  # 64 per 0.1 s


def test_samples_per_step_is_shared_as_the_ranks_come_in_bulk_as_line_by_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rank 0 alone at first, then ranks 1-3 join one after another: each row's share of the
    # batch is over the ranks seen up to it, whichever way the lines are read.
    d = make_session(tmp_path)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name, "exit": None,
                                        "started_at": 100.0,
                                        "config": {"samples_per_step": 96}})
    bare = [{**step(100 + i / 10, r, i, "log"), "samples": None}
            for i in range(1, 120) for r in range(4) if i > 20 * r]
    bare[50]["samples"] = 8  # (a line that says: kept as it said)
    append(d / layout.EVENTS, *bare)
    in_bulk = SessionReader(d).load().steps()
    from neurotui.session import bulk
    monkeypatch.setattr(bulk, "MIN_BATCH", 10**9)  # every line on its own
    monkeypatch.setattr(bulk, "MIN_BLOCK", 10**9)
    line_by_line = SessionReader(d).load().steps()
    pd.testing.assert_frame_equal(in_bulk, line_by_line)
    shares = sorted(set((96 / in_bulk["samples"]).round(6)) - {12.0})
    assert shares == [1.0, 2.0, 3.0, 4.0]


def _best_rows_by_the_rule(read: list[dict]) -> list[tuple[float, int, int, str, float]]:
    """The step table as the rule says, from the rows in the order read (events.jsonl, then
    the probe files, then the automatic probe's, each rank's in turn): in time order (ties in
    that order), each rank's best source's rows; where that is the automatic probe, each
    printed loss in turn onto the rank's last automatic row at or before it, if it has none."""
    rows = sorted(read, key=lambda r: r["t"])  # stable
    precedence = {"probe": 0, "auto": 1, "log": 2}
    best = {}
    for r in rows:
        best[r["rank"]] = min(best.get(r["rank"], 2), precedence[r["src"]])
    kept = [dict(r) for r in rows if precedence[r["src"]] == best[r["rank"]]]
    for r in rows:
        if r["src"] == "log" and best[r["rank"]] == 1 and r["loss"] is not None:
            before = [k for k in kept if k["rank"] == r["rank"] and k["t"] <= r["t"]]
            if before and before[-1]["loss"] is None:
                before[-1]["loss"] = r["loss"]
    return [(k["t"], k["rank"], k["step"], k["src"],
             math.nan if k["loss"] is None else k["loss"]) for k in kept]


@pytest.mark.parametrize("seed", range(30))
def test_a_cold_read_keeps_each_ranks_best_rows_and_their_losses_as_the_rule_says(
        tmp_path: Path, seed: int) -> None:
    """A session read whole (a replay, the keeper): ranks with any of the three sources, far
    apart or close (ranks looked up by table or by search), equal times, rows with losses of
    their own, lines out of time order: the table is the rule's, row for row."""
    rng = np.random.default_rng(seed)
    d = make_session(tmp_path)
    ranks = rng.choice([0, 1, 2, 40_000, 3_000_000], size=int(rng.integers(1, 5)),
                       replace=False)
    files: dict[Path, list[dict]] = {}
    for rank in ranks.tolist():
        for src in rng.choice(["log", "auto", "probe"], size=int(rng.integers(1, 4)),
                              replace=False).tolist():
            path = (d / layout.EVENTS if src == "log" else auto_file(d, rank)
                    if src == "auto" else layout.probe_path(d, rank))
            for i in range(int(rng.integers(1, 12))):
                loss = float(rng.random()) if rng.random() < (0.7 if src == "log" else 0.2) \
                    else None
                files.setdefault(path, []).append(
                    step(100.0 + float(rng.integers(0, 15)), rank, i, src, loss=loss))
    for records in files.values():
        rng.shuffle(records)  # times out of order in a file: a late line
    order = [d / layout.EVENTS,
             *sorted((p for p in files if p.name.startswith("rank-")),
                     key=lambda p: int(p.stem.split("-")[-1])),
             *sorted((p for p in files if p.name.startswith("auto-")),
                     key=lambda p: int(p.stem.split("-")[-1]))]
    for path in order:
        append(path, *files.get(path, []))
    steps = SessionReader(d).load().step_columns()
    got = list(zip(steps["t"].tolist(), steps["rank"].tolist(), steps["step"].tolist(),
                   [STEP_SOURCES[c] for c in steps["src"].tolist()], steps["loss"].tolist(),
                   strict=True))
    want = _best_rows_by_the_rule([r for path in order for r in files.get(path, [])])
    assert [g[:4] for g in got] == [w[:4] for w in want]
    np.testing.assert_array_equal([g[4] for g in got], [w[4] for w in want])


def test_the_supervisor_and_the_reader_rank_the_sources_by_one_table(tmp_path: Path) -> None:
    """The stall watch's choice of a rank's source, the follower's skipping of log lines and
    the reader's kept rows all follow stepprecedence's table."""
    from neurotui.session import stepprecedence, stepsources
    from neurotui.supervisor.stallwatch import StallWatch

    assert stepsources.PRECEDENCE is stepprecedence.PRECEDENCE
    # The stall watch takes the best source's track: a rank with all three is timed by the
    # script's own probe, one with the automatic probe and log lines by the automatic probe.
    watch = StallWatch(make_session(tmp_path))
    for src, step_s in (("log", 1.0), ("auto", 2.0), ("probe", 4.0)):
        watch.rank_steps(0, list(range(1, 30)), [step_s * i for i in range(1, 30)], src)
    for src, step_s in (("log", 1.0), ("auto", 2.0)):
        watch.rank_steps(1, list(range(1, 30)), [step_s * i for i in range(1, 30)], src)
    stalled = watch.stalled(10_000.0)
    assert stalled[0][1] == pytest.approx(4.0) and stalled[1][1] == pytest.approx(2.0)
    # Log step lines are recorded where they are the steps or carry the automatic probe's
    # losses, not where the script's own probe times the rank.
    assert [stepprecedence.log_steps_wanted(code) for code in range(3)] == [
        code != stepprecedence.PROBE for code in range(3)]


@pytest.mark.parametrize("seed", range(4))
def test_the_stall_watch_finds_the_stalled_ranks_metrics_finds(tmp_path: Path,
                                                               seed: int) -> None:
    """The supervisor's stall watch (told of each step as recorded) and the dashboard's
    metrics.stalled_ranks (on the session's step table, read back) name the same ranks
    stalled, at every moment, on the same steps: ranks of uneven step times, some of which
    stop early, some within their warm-up."""
    import random

    from neurotui.supervisor.stallwatch import StallWatch

    rng = random.Random(seed)
    session = make_session(tmp_path)
    watch = StallWatch(session)
    records = []
    for rank in range(6):
        step_s = rng.choice([0.2, 1.0, 3.0])
        count = rng.choice([5, 40, 120])  # (5: never past the warm-up)
        stop = rng.uniform(10, 400)
        t, times, steps = 100.0, [], []
        for n in range(1, count + 1):
            t += step_s * rng.uniform(0.8, 1.2)
            if t > stop:
                break
            times.append(t)
            steps.append(n)
        if not steps:
            continue
        watch.rank_steps(rank, steps, times, "log")
        records += [step(at, rank, n, "log") for n, at in zip(steps, times, strict=True)]
    records.sort(key=lambda r: r["t"])
    append(session / layout.EVENTS, *records)
    table = SessionReader(session).load().steps()
    assert len(table) == len(records)
    checked = 0
    for now in (150.0, 300.0, 450.0, 700.0, 2000.0):
        expected = set(metrics.stalled_ranks(table, now))
        assert set(watch.stalled(now)) == expected, now
        checked += len(expected)
    assert checked or seed  # (a seed whose ranks never stall checks the calm too)
