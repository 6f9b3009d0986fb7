"""The supervisor's log follower on real captured training logs."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.steprecord import encode_steps
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor.logfollow import LogFollower
from neurotui.supervisor.steprecorder import _step_record
from tests.captures import TELEMETRY_CAPTURES

FIXTURES = TELEMETRY_CAPTURES


def follow(tmp_path: Path, text: bytes, chunks: int = 1) -> SessionReader:
    """`text` written to the launcher log in `chunks` pieces, a poll after each."""
    size = len(text) // chunks + 1
    # Lines split across reads must come out whole.
    return follow_writes(tmp_path, [(1000.0 + i, text[i * size:(i + 1) * size])
                                    for i in range(chunks)])


def new_follower(tmp_path: Path, log_text: str = ""
                 ) -> tuple[Path, EventWriter, LogFollower]:
    """A session whose launcher log holds `log_text`, and a follower of it."""
    session = tmp_path / "s"
    (session / "logs").mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    (session / layout.LAUNCHER_LOG).write_text(log_text)
    writer = EventWriter(session / layout.EVENTS)
    # Driven by polls, as where inotify is off: with it, a poll leaves watched logs to
    # on_change (tests/unit/supervisor/test_logfollow_positions.py follows them that way).
    return session, writer, LogFollower(session, writer, StepLineParser.default(),
                                        parse_launcher=True, watch=False)


def follow_writes(tmp_path: Path, writes: list[tuple[float, bytes]],
                  final_at: float | None = None) -> SessionReader:
    """Each (time, bytes) appended to the launcher log and polled at that time; then the
    job's exit at `final_at`."""
    session, writer, follower = new_follower(tmp_path)
    log = session / layout.LAUNCHER_LOG
    for t, text in writes:
        with open(log, "ab") as f:
            f.write(text)
        follower.poll(t)
    if final_at is not None:
        follower.poll(final_at, final=True)
    writer.close()
    return SessionReader(session, telemetry_history=None).load()


def test_nxd_progress_bar_running_totals_become_per_step_samples(tmp_path: Path) -> None:
    text = (FIXTURES / "trainlog_nxdt_llama3-70B_progressbar_docs.txt").read_bytes()
    steps = follow(tmp_path, text, chunks=7).steps()
    # The bar is drawn twice for global_step 2: recorded once.
    assert list(steps["step"]) == [1, 2, 3]
    assert steps["samples"].isna().iloc[0]  # no earlier total to difference against
    assert list(steps["samples"].iloc[1:]) == [1024.0, 1024.0]
    assert list(steps["loss"]) == [6.7, 4.47, 3.35]
    assert list(steps["dt"]) == pytest.approx([321.89, 321.89, 320.22])


def test_compile_lines_and_rank_prefixes(tmp_path: Path) -> None:
    compile_log = (FIXTURES / "trainlog_torch-neuronx_mlp_trn1_first-run-compile_docs.txt")
    text = b"".join(b"[default1]:" + line + b"\n"
                    for line in compile_log.read_bytes().splitlines())
    text += b"[default0]:neurotui-runner step=1 rank=0 samples=16 loss=2.0 dt=0.5\n"
    text += b"[default1]:neurotui-runner step=1 samples=16 loss=2.1 dt=0.5\n"
    reader = follow(tmp_path, text)
    compiles = reader.frame("compile")
    assert list(compiles["what"]) == ["cache_miss", "compiled", "compiled", "cache_miss",
                                      "compiled", "compiled"]
    assert set(compiles["rank"]) == {1}
    steps = reader.steps()
    assert sorted(steps["rank"]) == [0, 1] and set(steps["src"]) == {"log"}


def test_log_offsets_mark_complete_lines_every_few_seconds_and_at_the_end(
        tmp_path: Path) -> None:
    reader = follow_writes(tmp_path, [
        (1000.0, b"one\ntw"), (1000.5, b"o\n"), (1001.0, b"three\n"), (1002.0, b"four\nfi"),
        (1003.0, b""), (1004.5, b""), (1005.0, b"ve\n")], final_at=1005.2)
    marks = [(e["t"], e["files"]) for e in reader.events["log_offsets"]]
    name = layout.LAUNCHER_LOG
    # The partial "tw" and "fi" are not counted; at most one mark per 2 s; none when
    # nothing grew (1004.5); the job's exit marks the end at once.
    assert marks == [(1000.0, {name: 4}), (1002.0, {name: 19}), (1005.2, {name: 24})]


def test_resume_reads_on_from_the_mark_and_skips_steps_already_recorded(
        tmp_path: Path) -> None:
    """A new supervisor adopting a job: the old one had marked 2 lines but recorded 3 steps;
    the 4th line was written while nobody followed."""
    lines = [f"[rank0]: neurotui-runner step={n} rank=0 samples=8 loss=1.0 dt=0.1\n"
             for n in range(1, 5)]
    session, writer, follower = new_follower(tmp_path, "".join(lines))
    mark = len(lines[0]) + len(lines[1])
    follower.resume({layout.LAUNCHER_LOG: mark}, {0: 3})
    follower.poll(2000.0)
    writer.close()
    steps = SessionReader(session).load().steps()
    assert list(steps["step"]) == [4]  # 3 was recorded already; 1 and 2 lie before the mark


def test_resume_without_a_mark_starts_at_the_logs_ends(tmp_path: Path) -> None:
    session, writer, follower = new_follower(
        tmp_path, "neurotui-runner step=1 rank=0 samples=8 loss=1.0 dt=0.1\n")
    log = session / layout.LAUNCHER_LOG
    follower.resume(None, {})  # an older session: no marks to go by
    with open(log, "a") as f:
        f.write("neurotui-runner step=2 rank=0 samples=8 loss=1.0 dt=0.1\n")
    follower.poll(2000.0)
    writer.close()
    assert list(SessionReader(session).load().steps()["step"]) == [2]


def test_resume_point_is_read_from_the_end_of_the_events(tmp_path: Path) -> None:
    from neurotui.supervisor.logfollow import resume_point

    events = tmp_path / "events.jsonl"
    writer = EventWriter(events)
    writer.write("step", t=100.0, rank=0, step=1, src="log", attempt=0)  # long before: unread
    for n in range(2, 40):
        writer.write("step", t=200.0 + n, rank=n % 2, step=n, src="log", attempt=1)
        if n == 30:
            writer.write("log_offsets", t=230.5, files={"logs/launcher.log": 999})
    writer.write("step", t=300.0, rank=5, step=7, src="probe", attempt=1)  # not from a log
    writer.close()
    with open(events, "a") as f:
        f.write('{"t": 301.0, "kind": "st')  # the old supervisor died mid-line
    assert resume_point(events, attempt=1) == ({"logs/launcher.log": 999}, {0: 38, 1: 39})
    assert resume_point(events, attempt=0) == ({"logs/launcher.log": 999}, {})
    assert resume_point(tmp_path / "missing.jsonl", attempt=0) == (None, {})


_maybe_number = st.none() | st.floats(allow_nan=True, allow_infinity=True) | \
    st.integers(-(2**70), 2**70)


@given(t=st.floats(allow_nan=False, allow_infinity=False), rank=st.integers(0, 2**40),
       step=st.integers(-(2**70), 2**70), samples=_maybe_number, loss=_maybe_number,
       dt=_maybe_number, attempt=st.integers(0, 1000), throughput=_maybe_number,
       samples_total=_maybe_number, global_batch=_maybe_number,
       samples_from=st.sampled_from([None, "line", "throughput"]))
def test_a_step_record_encoded_by_hand_is_what_the_json_encoder_writes(
        t, rank, step, samples, loss, dt, attempt, throughput, samples_total, global_batch,
        samples_from) -> None:
    """Step records are encoded by msgspec (the hottest record): the same keys and values as
    the writer's encoder gives (the kind first: StepRecord is tagged by it); where msgspec
    would write something else (NaN, infinity, integers past 64 bits), it declines and the
    encoder writes them."""
    event = _step_record(t, rank, step, samples, loss, dt, attempt, throughput, samples_total,
                         global_batch, samples_from)
    record = {"t": t, "kind": "step", "rank": rank, "step": step, "samples": samples,
              "loss": loss, "dt": dt, "phases": None, "src": "log", "attempt": attempt,
              **{k: v for k, v in (("throughput", throughput), ("samples_total", samples_total),
                                   ("global_batch", global_batch),
                                   ("samples_from", samples_from)) if v is not None}}
    finite = all(not isinstance(v, float) or math.isfinite(v) for v in record.values())
    in_range = all(-(2**63) < v < 2**63 for v in (rank, step, attempt))
    assert (event is not None) == (finite and in_range)
    if event is not None:
        text = encode_steps([event]).decode()
        assert text.endswith("}\n") and text.count("\n") == 1
        decoded = json.loads(text)
        assert next(iter(decoded)) == "kind" and decoded == record
        for key, value in record.items():  # floats stay floats, integers integers
            assert type(decoded[key]) is type(value)


def test_the_kernel_says_which_logs_changed_with_or_without_new_files_among_them(
        tmp_path: Path) -> None:
    """`_Changes.changed` reads the watches that fired: a read of file changes only (fixed-
    size records, taken at once) and one with a new file's named record among them (taken
    record by record) both give every target that fired, once."""
    from neurotui.supervisor.logfollow import _changes, _Followed

    if sys.platform != "linux":
        pytest.skip("inotify is Linux's")  # the supervisor polls the logs elsewhere
    changes = _changes()
    assert changes is not None
    folder = tmp_path / "attempt_0"
    folder.mkdir()
    logs = []
    for rank in range(40):
        path = tmp_path / f"{rank}.log"
        path.write_bytes(b"")
        logs.append(_Followed(path, path.name, rank))
        assert changes.watch(path, logs[-1])
    assert changes.watch(folder, folder, folder=True)
    try:
        for _ in range(8):  # eight records each (more than one read holds), taken once
            for followed in logs:
                with open(followed.path, "ab") as f:
                    f.write(b"step 1 loss 2\n")
        assert sorted(changes.changed(), key=lambda f: f.rank) == logs  # each once
        assert changes.changed() == []  # all was read
        with open(logs[3].path, "ab") as f:
            f.write(b"x\n")
        (folder / "new.log").write_bytes(b"")  # a record with a name, between two without
        with open(logs[5].path, "ab") as f:
            f.write(b"x\n")
        got = changes.changed()
        assert len(got) == 3 and {id(t) for t in got} == {id(logs[3]), id(logs[5]), id(folder)}
    finally:
        changes.close()


def test_polled_logs_are_looked_for_again_only_when_their_folders_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without inotify the follower looks at its folders' times at each poll, and looks
    through them for new logs (a glob) only when one changed: a new rank's folder and log
    are found at the next poll, and lines written into them recorded."""
    from neurotui.supervisor import logfollow

    session, writer, follower = new_follower(tmp_path)
    attempt = session / layout.TORCHRUN_LOG_DIR / "run" / "attempt_0"
    (attempt / "0").mkdir(parents=True)
    (attempt / "0" / "stdout.log").write_text("step 1 loss 2.5\n")
    settled = time.time() - 60
    for folder in (session / "logs", session / layout.TORCHRUN_LOG_DIR, attempt.parent,
                   attempt, attempt / "0"):
        os.utime(folder, (settled, settled))
    looks = []
    real = logfollow.layout.torchrun_rank_logs
    monkeypatch.setattr(logfollow.layout, "torchrun_rank_logs",
                        lambda root: looks.append(root) or real(root))
    follower.poll(time.time())
    assert len(looks) == 1 and len(follower._files) == 2  # the launcher's log, rank 0's
    follower.poll(time.time())
    follower.poll(time.time())
    assert len(looks) == 1  # nothing changed: not looked through again
    (attempt / "1").mkdir()  # the attempt folder's time changes
    (attempt / "1" / "stdout.log").write_text("step 1 loss 2.4\nstep 2 loss 2.3\n")
    follower.poll(time.time())
    assert len(looks) == 2 and len(follower._files) == 3
    writer.close()
    steps = SessionReader(session, telemetry_history=None).load().steps()
    assert sorted(zip(steps["rank"], steps["step"], strict=True)) == [(0, 1), (1, 1), (1, 2)]


def test_a_rank_folder_with_both_its_logs_followed_is_not_looked_at_again(
        tmp_path: Path) -> None:
    """Without inotify, a torchrun rank's folder holding both its logs (stdout and stderr,
    all torchrun writes there) gets no log more: its time is not read at polls. A rank's
    folder holding one of them is, and its other log is found once written."""
    from neurotui.supervisor.logfollow import REDISCOVER_S

    session, writer, follower = new_follower(tmp_path)
    attempt = session / layout.TORCHRUN_LOG_DIR / "run" / "attempt_0"
    for rank, names in ((0, ("stdout", "stderr")), (1, ("stdout",))):
        (attempt / str(rank)).mkdir(parents=True)
        for name in names:
            (attempt / str(rank) / f"{name}.log").write_text(f"step 1 loss 2.{rank}\n")
    settled = time.time() - 60
    for folder in (session / "logs", session / layout.TORCHRUN_LOG_DIR, attempt.parent,
                   attempt, attempt / "0", attempt / "1"):
        os.utime(folder, (settled, settled))
    now = time.time()
    follower.poll(now)
    assert len(follower._files) == 4  # the launcher's log and the ranks' three
    follower.poll(now + REDISCOVER_S)  # a look through them all: the times taken again
    times = follower._folder_times
    assert times is not None and attempt / "1" in times and attempt / "0" not in times
    assert attempt in times  # (a new rank's folder would appear there)
    (attempt / "1" / "stderr.log").write_text("step 2 loss 2.2\n")
    follower.poll(now + REDISCOVER_S + 1)
    assert len(follower._files) == 5
    follower.poll(now + REDISCOVER_S + 2, final=True)
    writer.close()
    steps = SessionReader(session, telemetry_history=None).load().steps()
    assert sorted(zip(steps["rank"], steps["step"], strict=True)) == [(0, 1), (1, 1), (1, 2)]


def test_a_log_that_cannot_be_opened_for_want_of_descriptors_is_said_and_read_later(
        tmp_path: Path) -> None:
    """Where every descriptor the limit allows is taken (a huge job past the hard limit),
    the follower says so once, as a warning; its lines are read once one is free again."""
    import resource

    session, writer, follower = new_follower(
        tmp_path, "".join(f"step {i} loss 2.5\n" for i in (1, 2, 3)))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    taken: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, soft), hard))
        with pytest.raises(OSError):
            while True:
                taken.append(os.open(os.devnull, os.O_RDONLY))
        follower.poll(1000.0)
        follower.poll(1001.0)
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    follower.poll(1002.0)
    writer.close()
    reader = SessionReader(session, telemetry_history=None).load()
    warnings = [w["message"] for w in reader.events.get("warning", [])
                if w.get("source") == "logs"]
    assert len(warnings) == 1 and "cannot open a log" in warnings[0]
    assert "Too many open files" in warnings[0]
    assert len(reader.steps()) == 3  # read once a descriptor was free: nothing lost
