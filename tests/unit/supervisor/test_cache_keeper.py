"""The cache keeper (session/keeper.py) keeps a recording session's cache current, and the
supervisor's side of it (supervisor/cachekeeping.py) starts it as a child past a size.

The measure of the keeper: after every run, a reader restoring the cache sees exactly what a
reader parsing every file at once sees (steps, phases, events kept, problems, how samples were
known), whatever was appended between runs: new ranks, new phases, late lines, a log line
whose step is already cached, a better step source, an appender killed before its stamp.
Real files and real processes throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from neurotui.session import cache, keeper, layout
from neurotui.session.columns import Columns
from neurotui.session.reader import STEP_SOURCES, SessionReader
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic
from neurotui.supervisor.cachekeeping import CacheKeeper

REPO = Path(__file__).resolve().parents[3]
T0 = 1000.0


def record(t: float, kind: str, **fields: Any) -> str:
    return json.dumps({"t": t, "kind": kind, **fields}) + "\n"


def step(t: float, rank: int, n: int, src: str = "probe", **fields: Any) -> str:
    return record(t, "step", rank=rank, step=n, samples=fields.pop("samples", 16),
                  loss=fields.pop("loss", 2.0 / (n + 1)), dt=0.5, src=src, attempt=0, **fields)


def at(i: int, rank: int) -> float:
    """Step i's time on `rank`: every row's time differs (a tie between rows read in
    different runs is ordered by run, not by file, and a whole read orders it by file)."""
    return T0 + i * 0.5 + rank * 0.001


def new_session(tmp_path: Path) -> Path:
    d = tmp_path / "20260101-000000-kept"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "id": d.name,
                                        "started_at": T0 - 1, "ended_at": None, "exit": None})
    return d


def add(d: Path, name: str, *lines: str) -> None:
    with open(d / name, "a") as f:
        f.writelines(lines)


def probe(rank: int, auto: bool = False) -> str:
    return f"{layout.PROBE_DIR}/{'auto-' if auto else ''}rank-{rank}.jsonl"


def write_round(d: Path, first: int, last: int) -> None:
    """Steps first..last of a run: ranks 0 and 1 through the probe (with phase timings),
    rank 2 timed by the automatic probe with its losses in log lines (the last one's line
    comes with the next round, its step already cached), rank 3 in log lines only; 1 Hz
    telemetry."""
    for i in range(first, last + 1):
        add(d, probe(0), step(at(i, 0), 0, i, phases={"data": 0.01 * i, "fwd": 0.2}))
        add(d, probe(1), step(at(i, 1), 1, i, phases={"x": 0.1}))
        add(d, probe(2, auto=True), step(at(i, 2), 2, i, src="auto", loss=None))
    events = []
    for i in range(first, last + 1):
        if i > 1:  # the loss of the step before, printed once it ended
            events.append(step(at(i - 1, 2) + 0.1, 2, i - 1, src="log", samples=None,
                               loss=1.0 / i))
        events.append(step(at(i, 3), 3, i, src="log", samples_from="line"))
        if i % 2 == 0:
            events.append(record(at(i, 9), "host", cpu=[i, 2 * i], mem_used=i,
                                 mem_total=99, load=[1, 1, 1]))
            events.append(record(at(i, 9) + 0.01, "procs", procs=[{"pid": 7, "cpu": i}]))
    add(d, layout.EVENTS, *events)


def assert_as_a_whole_read(d: Path) -> SessionReader:
    """A reader restoring the cache and one parsing every file: the same in every view."""
    for history in (3, None):
        kept = SessionReader(d, telemetry_history=history)
        kept.poll()
        whole = SessionReader(d, telemetry_history=history, use_cache=False)
        whole.poll()
        assert kept.cache_state == "restored"
        assert_same(kept.step_columns(), whole.step_columns())
        assert_same(kept.phase_columns(), whole.phase_columns())
        assert {k: list(v) for k, v in kept.events.items()} == \
            {k: list(v) for k, v in whole.events.items()}
        assert kept.problems == whole.problems
        assert kept.samples_from == whole.samples_from
    follower = SessionReader(d)  # as attach takes it in
    follower.poll()
    taken = follower.take_steps()
    assert taken is not None and follower.cache_state == "restored"
    assert_same(taken.steps, whole.step_columns())
    return kept


def assert_same(a: Columns, b: Columns) -> None:
    assert a.columns == b.columns and len(a) == len(b)
    for name in a.columns:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def stamp(d: Path) -> dict[str, Any]:
    return json.loads((d / ".cache" / "stamp.json").read_text())


def test_a_session_kept_run_after_run_reads_as_a_whole_read(tmp_path: Path) -> None:
    d = new_session(tmp_path)
    add(d, layout.EVENTS, record(T0 - 0.5, "proc_start", attempt=0, pid=7, pgid=7,
                                 argv=["x"]))
    add(d, probe(0), record(T0 - 0.4, "probe_info", what="armed"))
    write_round(d, 1, 20)
    add(d, layout.EVENTS, "garbage line\n", record(T0 + 3, "future_kind"))
    assert keep(d).startswith("built the cache (no valid cache)")
    kept = assert_as_a_whole_read(d)
    assert kept.problems.locations == ["events.jsonl:61 (not JSON)"]

    # Round 2: a new rank's file, a phase first reported now (by rank 0, whose file is read
    # before rank 1's), late lines, garbage in a probe file, a partial last line.
    write_round(d, 21, 40)
    add(d, probe(0), step(at(41, 0), 0, 41, phases={"data": 0.3, "fwd": 0.2, "y": 0.5}),
        record(at(41, 0), "probe_info", what="optimizers", count=2), "{not json\n")
    add(d, probe(4), step(at(30, 4), 4, 30, phases={"data": 0.1}),
        step(at(31, 4), 4, 31, phases={"data": 0.1}))
    add(d, layout.EVENTS, step(T0 + 0.0001, 3, 0, src="log"),  # late: before every row
        record(T0 + 0.5, "compile", rank=0, what="compile", line="late"),
        record(at(41, 9), "warning", source="test", message="w"), "also garbage\n")
    add(d, probe(1), step(at(41, 1), 1, 41, phases={"x": 0.1})[:30])
    what = keep(d)
    assert what.startswith("appended") and "1 cached losses placed" in what, what
    kept = assert_as_a_whole_read(d)
    assert kept.phase_columns().columns == ["t", "rank", "data", "fwd", "x", "y"]
    assert kept.problems.bad_lines == 3 and len(kept.problems.locations) == 3
    steps = kept.step_columns()
    rank2 = steps.rows((steps["rank"] == 2) & (steps["step"] == 20))
    assert rank2["loss"].tolist() == [1.0 / 21]  # its log line came after it was cached
    assert stamp(d)["sources"][-1]["name"] == probe(4)

    # Nothing new: nothing written.
    before = (d / ".cache" / "stamp.json").stat().st_mtime_ns
    assert keep(d) == "up to date"
    assert (d / ".cache" / "stamp.json").stat().st_mtime_ns == before

    # An appender killed after writing its rows, before its stamp.
    killed_mid_append(d)
    assert_as_a_whole_read(d)
    add(d, probe(1), step(at(41, 1), 1, 41, phases={"x": 0.1})[30:])  # the line completes
    write_round(d, 42, 50)
    assert keep(d).startswith("appended")
    assert_as_a_whole_read(d)

    # Rank 2's own probe calls start: its automatic-probe rows must go. A rebuild.
    add(d, probe(2), *(step(at(i, 2) + 0.0002, 2, i) for i in range(51, 55)))
    write_round(d, 51, 54)
    token = stamp(d)["token"]
    assert keep(d).startswith("built the cache (a better step source appeared")
    assert stamp(d)["token"] != token
    kept = assert_as_a_whole_read(d)
    src = kept.step_columns().rows(kept.step_columns()["rank"] == 2)["src"]
    assert set(src.tolist()) == {STEP_SOURCES.index("probe")}

    # And on, appended to the rebuilt cache, by the keeper as the supervisor starts it.
    killed_mid_append(d)
    write_round(d, 55, 60)
    done = subprocess.run([sys.executable, "-m", "neurotui.session.keeper", "--min-bytes",
                           "0", str(d)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""  # an append is not worth a log line
    assert stamp(d)["rows"]["steps"] == len(SessionReader(d, use_cache=False).load().steps())
    assert_as_a_whole_read(d)


def keep(d: Path) -> str:
    return keeper.keep(d, min_bytes=0)


def killed_mid_append(d: Path) -> None:
    """What an appender killed between its rows and its stamp leaves: bytes past the rows the
    stamp counts in every column file, and a phase column the stamp does not name."""
    token = stamp(d)["token"]
    for path in (d / ".cache").glob(f"{token}.*.col"):
        with open(path, "ab") as f:
            f.write(b"\x7f" * 48)
    (d / ".cache" / f"{token}.phases.{len(stamp(d)['columns']['phases'])}.col").write_bytes(
        b"\x01" * 40)


def test_events_of_a_kind_in_several_files_keep_the_whole_reads_order(tmp_path: Path) -> None:
    d = new_session(tmp_path)
    for rank in (0, 1):
        add(d, probe(rank, auto=True), record(T0 + rank, "probe_info", what="armed"))
    write_round(d, 1, 5)
    assert keep(d).startswith("built")
    for rank in (0, 1):
        add(d, probe(rank, auto=True), record(T0 + 10 + rank, "probe_info", what="again"))
    add(d, layout.EVENTS, record(T0 + 20, "probe_info", what="from the log"))
    assert keep(d).startswith("appended")
    kept = assert_as_a_whole_read(d)
    assert [e["what"] for e in kept.events["probe_info"]] == [
        "from the log", "armed", "again", "armed", "again"]


def test_a_log_only_rank_then_the_automatic_probe_rebuilds(tmp_path: Path) -> None:
    d = new_session(tmp_path)
    add(d, layout.EVENTS, *(step(at(i, 5), 5, i, src="log") for i in range(1, 6)))
    assert keep(d).startswith("built")
    add(d, probe(5, auto=True), *(step(at(i, 5) - 0.1, 5, i, src="auto", loss=None)
                                  for i in range(1, 9)))
    add(d, layout.EVENTS, *(step(at(i, 5), 5, i, src="log") for i in range(6, 9)))
    assert keep(d).startswith("built the cache (a better step source")
    kept = assert_as_a_whole_read(d)
    steps = kept.step_columns()
    assert set(steps["src"].tolist()) == {STEP_SOURCES.index("auto")}
    assert not np.isnan(steps["loss"]).any()  # every log line's loss on its step


def test_a_small_session_is_left_alone(tmp_path: Path) -> None:
    d = new_session(tmp_path)
    write_round(d, 1, 3)
    assert keeper.keep(d, min_bytes=1 << 20).startswith("not cached")
    assert keeper.keep(d).startswith("not cached")  # cache.MIN_SOURCE_BYTES: 8 MiB
    assert not (d / ".cache").exists()


def test_the_keeper_never_raises_and_exits_0(tmp_path: Path) -> None:
    d = tmp_path / "not-a-session"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    (d / layout.EVENTS).write_text(record(T0, "host") * 10)  # no meta.json
    done = subprocess.run([sys.executable, "-m", "neurotui.session.keeper", "--min-bytes",
                           "0", str(d)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert len(done.stderr.splitlines()) == 1 and "failed" in done.stderr
    assert keeper.main([]) == 2


def test_a_keeper_at_work_keeps_a_second_one_out(tmp_path: Path) -> None:
    d = new_session(tmp_path)
    write_round(d, 1, 3)
    with cache.keeper_lock(d) as mine:
        assert mine
        assert keep(d).startswith("another keeper")
    assert keep(d).startswith("built")


def test_a_served_keeper_that_cannot_fork_runs_once_itself_and_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """No worker (no memory, a process limit): the run is not lost, and the keeper, grown by
    it, does not stay."""
    d = new_session(tmp_path)
    write_round(d, 1, 3)

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert keeper._run_in_worker(str(d), 0) is False
    assert_as_a_whole_read(d)
    assert "cannot fork a worker" in capfd.readouterr().err


# -- the supervisor's side ------------------------------------------------------------------

def wait_kept(d: Path, timeout: float = 60.0) -> None:
    """Until the cache's stamp covers every byte of the session's JSON lines."""
    deadline = time.time() + timeout
    while True:
        found = cache.state(d, STEP_SOURCES)
        if found is not None and \
                sum(s.offset for s in found.sources) == layout.json_lines_bytes(d):
            return
        assert time.time() < deadline, "the keeper did not catch up"
        time.sleep(0.05)


def wait_reaped(keeping: CacheKeeper, now: float, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while keeping.child is not None:
        assert time.time() < deadline, "the keeper did not end"
        time.sleep(0.05)
        keeping.tick(now)


def test_the_supervisor_starts_one_keeper_past_its_size_asks_it_for_runs_and_lets_it_go(
        tmp_path: Path) -> None:
    d = new_session(tmp_path)
    write_round(d, 1, 2)
    size = layout.json_lines_bytes(d)
    keeping = CacheKeeper(d, every_s=60.0, min_bytes=size + 1, behind_bytes=10**9,
                          check_every_s=10.0, linger_s=120.0)
    keeping.tick(T0)
    assert keeping.child is None and keeping.started == 0  # too small: nothing started
    keeping.tick(T0 + 1)  # and not asked again before its time
    write_round(d, 3, 4)
    keeping.tick(T0 + 5)
    assert keeping.child is None  # the size is looked at every 10 s
    keeping.tick(T0 + 10)
    child = keeping.child
    assert child is not None and keeping.started == 1 and keeping.asked == 0
    wait_kept(d)  # its first run, unasked
    assert_as_a_whole_read(d)
    keeping.tick(T0 + 40)
    assert keeping.child is child and keeping.asked == 0  # nothing new: nothing asked
    write_round(d, 5, 6)
    keeping.tick(T0 + 50)
    assert keeping.asked == 0  # a little, and a minute has not passed
    keeping.tick(T0 + 70)
    assert keeping.child is child and keeping.started == 1 and keeping.asked == 1
    wait_kept(d)  # the same keeper, asked again
    assert_as_a_whole_read(d)
    keeping.behind_bytes = layout.json_lines_bytes(d) // 10
    write_round(d, 7, 8)  # more than a tenth of it again: at once, before the minute
    keeping.tick(T0 + 80)
    assert keeping.child is child and keeping.asked == 2
    wait_kept(d)
    assert_as_a_whole_read(d)
    assert child.poll() is None  # it stays, between runs...
    keeping.tick(T0 + 190)
    assert child.stdin is not None
    keeping.tick(T0 + 200)  # ...until nothing was asked of it for two minutes
    assert child.stdin is None
    wait_reaped(keeping, T0 + 200)
    assert keeping.last_code == 0
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(child.pid, os.WNOHANG)
    write_round(d, 9, 10)
    keeping.tick(T0 + 270)  # the next run: a keeper of its own
    assert keeping.started == 2 and keeping.child not in (None, child)
    keeping.close()  # told to end, and waited for
    assert keeping.child is None and keeping.last_code == 0
    assert_as_a_whole_read(d)


def keeper_started(tmp_path: Path, rounds: int = 2, **options: Any
                   ) -> tuple[Path, CacheKeeper, subprocess.Popen[bytes]]:
    """A session of `rounds` rounds, and the supervisor's keeper just started on it
    (`options`: CacheKeeper's)."""
    d = new_session(tmp_path)
    write_round(d, 1, rounds)
    keeping = CacheKeeper(d, min_bytes=0, **options)
    keeping.tick(T0)
    child = keeping.child
    assert child is not None
    return d, keeping, child


def wait_no_worker(keeper: psutil.Process) -> None:
    """Until the keeper's worker, if any, has ended (after its stamp: wait_kept)."""
    deadline = time.time() + 30
    while keeper.children():
        assert time.time() < deadline, "the worker did not end"
        time.sleep(0.02)


def test_each_run_of_a_keeper_that_stays_is_done_by_a_worker_of_its_own(
        tmp_path: Path) -> None:
    """The keeper that stays holds its modules, not what its runs needed: each is a forked
    child, gone when the run is; words written while it works ask for one more run."""
    d, keeping, child = keeper_started(tmp_path, 4, behind_bytes=1, check_every_s=0.0)
    wait_kept(d)  # its first run
    process = psutil.Process(child.pid)
    wait_no_worker(process)
    before = process.cpu_times()
    for i in range(4):  # four runs asked at once, of 500 steps each
        write_round(d, 5 + i * 500, 4 + (i + 1) * 500)
        keeping.tick(T0 + i + 1)
    assert keeping.asked == 4
    wait_kept(d)
    assert_as_a_whole_read(d)
    wait_no_worker(process)
    after = process.cpu_times()
    # The runs' CPU is that of reaped children; the keeper's own, of waiting for words.
    own = (after.user + after.system) - (before.user + before.system)
    workers = (after.children_user + after.children_system) - \
        (before.children_user + before.children_system)
    assert own < 0.05 and workers > own
    assert keeping.child is child and child.poll() is None
    keeping.close()
    assert keeping.last_code == 0


def test_a_keeper_that_died_is_told_of_once_and_the_next_run_starts_a_new_one(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    d, keeping, child = keeper_started(tmp_path, 2, behind_bytes=1, check_every_s=0.0)
    wait_kept(d)  # its first run
    os.killpg(child.pid, 9)
    child.wait()
    write_round(d, 3, 4)
    keeping.tick(T0 + 1)  # reaped; the run it would have been asked for: a new keeper
    assert keeping.last_code == -9 and keeping.started == 2 and keeping.child is not None
    wait_kept(d)
    assert_as_a_whole_read(d)
    keeping.close()
    assert capfd.readouterr().err.count("the cache keeper exited with -9") == 1


def test_a_keeper_still_at_work_when_the_supervisor_ends_is_killed(tmp_path: Path) -> None:
    d, keeping, child = keeper_started(tmp_path)
    keeping.close(timeout_s=0)  # it is still starting up
    assert keeping.child is None and keeping.last_code == -9
    assert child.returncode == -9
    if cache.state(d, STEP_SOURCES) is not None:  # it was quicker: a whole cache, then
        assert_as_a_whole_read(d)


def test_the_keeper_loads_numpy_with_one_blas_thread_and_nothing_else_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenBLAS starts a spinning thread per CPU as numpy loads: half of an idle keeper's CPU
    on 2 cores, more on a 128-vCPU host. The keeper is told to start one; the supervisor's
    own environment, which the training job gets, is left as it was."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    d, keeping, child = keeper_started(tmp_path)
    # Popen returned after the exec: this is the keeper's own environment.
    environ = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
    wait_kept(d)
    keeping.close()
    assert b"OPENBLAS_NUM_THREADS=1" in environ
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    assert keeping.last_code == 0 and cache.state(d, STEP_SOURCES) is not None
