"""The log follower stamps lines when they are written (inotify), parses progress-bar positions
between carriage returns as they come, and keeps every figure a line prints."""

from __future__ import annotations

import errno
import json
import os
import selectors
import time
from pathlib import Path

import pytest

from neurotui import metrics
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor import logfollow
from neurotui.supervisor.logfollow import POLL_S, LogFollower, _Followed, _write_rate

# NxD Training's bar, as its docs print it (tests/fixtures/telemetry/
# trainlog_nxdt_llama3-70B_progressbar_docs.txt), one position per global step.
NXD = ("Epoch 0:   {pct}%|▏| {n}/91 [16:05<7:52:06, 321.89s/it, loss=6.7{n}, v_num=0, "
       "reduced_train_loss=6.7{n}, global_step={n}.000, consumed_samples={samples}.0]")


def nxd(n: int) -> str:
    return NXD.format(pct=n, n=n, samples=1024 * n)


def new_follower(tmp_path: Path, *, watch: bool = True, native_looks: bool = False
                 ) -> tuple[Path, EventWriter, LogFollower]:
    """A follower of a new session's logs; busy logs looked at from Python (the looks these
    tests make themselves, at times of their own) unless `native_looks`."""
    session = tmp_path / "s"
    (session / "logs").mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    (session / layout.LAUNCHER_LOG).write_text("")
    writer = EventWriter(session / layout.EVENTS)
    return session, writer, LogFollower(session, writer, StepLineParser.default(),
                                        parse_launcher=True, watch=watch,
                                        native_looks=native_looks)


LOOKERS = [pytest.param(False, id="looked-at-from-python"),
           pytest.param(True, id="looked-at-by-the-native-looker")]
"""Who looks at busy logs on the batch's timer: the supervisor's wakeups (_look, where the
C looker was not built), or the native looker's thread (_looker.c, built at install)."""


def steps_of(session: Path, writer: EventWriter):
    writer.close()
    return SessionReader(session, telemetry_history=None).load().steps()


def test_bar_positions_count_before_the_newline_and_redraws_count_once(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path, watch=False)
    log = session / layout.LAUNCHER_LOG
    # tqdm redraws with \r and writes no newline until the epoch ends.
    for t, text in ((1.0, "\r" + nxd(1)), (2.0, "\r" + nxd(2) + "\r" + nxd(2)),
                    (3.0, "\r" + nxd(3))):
        with open(log, "a", encoding="utf-8") as f:
            f.write(text)
        follower.poll(t)
    with open(log, "a", encoding="utf-8") as f:
        f.write("\n")
    follower.poll(4.0, final=True)
    steps = steps_of(session, writer)
    assert list(steps["step"]) == [1, 2, 3]
    # A bar position closed by its "]" is whole: stamped when it was read.
    assert list(steps["t"]) == [1.0, 2.0, 3.0]
    follower_tail = follower.tail_lines()["launcher"]
    assert follower_tail == [nxd(3)], "one tail line for the whole redrawn line"


def test_a_position_cut_mid_write_waits_for_the_rest(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path, watch=False)
    log = session / layout.LAUNCHER_LOG
    whole = "\r" + nxd(1) + "\r" + nxd(2)
    for t, text in ((1.0, whole[:-20]), (2.0, whole[-20:]), (3.0, "\n")):
        with open(log, "a", encoding="utf-8") as f:
            f.write(text)
        follower.poll(t)
    steps = steps_of(session, writer)
    assert list(steps["step"]) == [1, 2]
    assert list(steps["t"]) == [1.0, 2.0]
    assert list(steps["samples"])[1] == 1024.0, "consumed_samples read whole, not cut"


def test_printed_throughput_becomes_samples_per_second(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path, watch=False)
    log = session / layout.LAUNCHER_LOG
    for i in range(1, 31):  # one torch-neuronx line every 0.05 s, as stamped
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"LOG Thu Jan  5 10:00:01 2023 - (0, {i}) step_loss : 9.8750  "
                    "learning_rate : 1.50e-05  throughput : 320.00\n")
        follower.poll(1000.0 + 0.05 * i)
    writer.close()
    events = [json.loads(x) for x in (session / layout.EVENTS).read_text().splitlines()]
    steps = [e for e in events if e["kind"] == "step"]
    assert all(e["throughput"] == 320.0 for e in steps)
    assert steps[0]["samples"] is None, "no step time yet to turn the rate into samples"
    assert all(e["samples_from"] == "throughput" for e in steps[1:])
    reader = SessionReader(session, telemetry_history=None).load()
    steady = metrics.steady_state(reader.steps())
    assert steady is not None and steady.samples_per_s is not None
    assert abs(steady.samples_per_s - 320.0) < 0.5
    assert reader.samples_from == {"throughput"}
    assert metrics.step_sources({"log"}, None, reader.samples_from) == \
        "log lines; samples from printed throughput"


def test_lines_are_stamped_by_the_look_the_kernels_word_woke(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path)
    if follower.fileno() is None:
        pytest.skip("inotify is not available on this system (the follower polls instead)")
    assert follower.timing["method"] == "inotify"
    follower.poll(time.time())  # discovers and watches the launcher log
    selector = selectors.DefaultSelector()
    selector.register(follower.fileno(), selectors.EVENT_READ)
    written, looked = [], []
    with open(session / layout.LAUNCHER_LOG, "a", encoding="utf-8") as f:
        for i in range(1, 21):
            time.sleep(0.02)
            written.append(time.time())
            f.write(f"neurotui-runner step={i} rank=0 samples=16 loss=1.0\n")
            f.flush()
            assert selector.select(timeout=2.0), "the kernel says the log changed"
            looked.append(time.time())
            follower.on_change(looked[-1])
    writer.flush()
    assert b'"step"' not in (session / layout.EVENTS).read_bytes()  # taken at the poll
    follower.poll(time.time())
    steps = steps_of(session, writer)
    assert list(steps["step"]) == list(range(1, 21))
    # Each line has the time of the look the kernel's word woke, not the poll's: how late
    # that is depends on this machine's scheduling (tests/bench/bench_log_follow.py measures
    # it: a tenth of a millisecond, median), so this test holds the stamps to the looks.
    assert list(steps["t"]) == looked
    late = steps["t"].to_numpy() - written
    assert (late >= 0).all() and late.max() < 0.5, late
    assert follower.timing["method"] == "inotify"


def test_logs_of_ranks_reporting_through_the_probe_are_read_at_polls(tmp_path) -> None:
    """A rank whose steps come from probe.step(): its log no longer wakes the supervisor (its
    step lines are not recorded anyway); its compile lines are still recorded, at the poll
    that reads them. Another rank's log stays watched, its lines stamped when written."""
    session, writer, follower = new_follower(tmp_path)
    if follower.fileno() is None:
        pytest.skip("inotify is not available on this system (the follower polls instead)")
    logs = session / "logs" / "torchrun" / "run_0" / "attempt_0"
    for rank in (0, 1):
        (logs / str(rank)).mkdir(parents=True)
        (logs / str(rank) / "stdout.log").write_text("")
    follower.poll(100.0)
    probed, plain = (follower._files[logs / str(r) / "stdout.log"] for r in (0, 1))
    assert probed.watched and plain.watched
    layout.probe_path(session, 0).parent.mkdir()
    layout.probe_path(session, 0).write_text("")  # rank 0 reports through the probe
    follower.poll(101.0)
    assert not probed.watched and plain.watched
    selector = selectors.DefaultSelector()
    selector.register(follower.fileno(), selectors.EVENT_READ)
    if selector.select(timeout=0):  # the kernel's word that the watch is gone (IN_IGNORED)
        follower.on_change(time.time())
    with open(logs / "0" / "stdout.log", "a", encoding="utf-8") as f:
        f.write("neurotui-runner step=1 rank=0 samples=16 loss=1.0\n"
                "Compiler status PASS\n")
    assert not selector.select(timeout=0.3), "the probed rank's log woke the supervisor"
    with open(logs / "1" / "stdout.log", "a", encoding="utf-8") as f:
        f.write("neurotui-runner step=1 rank=1 samples=16 loss=1.0\n")
    assert selector.select(timeout=2.0), "the other rank's log is still watched"
    written = time.time()
    follower.on_change(written)
    follower.poll(102.0, final=True)
    assert "probe.step()" in str(follower.timing["note"])
    assert follower.timing["polled_probe_logs"] == 1
    writer.close()
    events = [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()]
    steps = [(e["rank"], e["step"], e["t"]) for e in events if e["kind"] == "step"]
    assert steps == [(1, 1, pytest.approx(written, abs=0.5))]  # rank 0's came from its probe
    compiles = [(e["rank"], e["t"]) for e in events if e["kind"] == "compile"]
    assert compiles == [(0, 102.0)]  # stamped at the poll that read it


def test_torchruns_console_is_read_at_polls(tmp_path) -> None:
    """Under torchrun the launcher's console holds torchrun's own messages (and, where the
    user asked for --tee, the ranks' lines again: as here), while the ranks' logs are parsed:
    it is not watched (it would wake the supervisor twice a line), only read at polls, for
    the last lines a job printed."""
    session, writer, _ = new_follower(tmp_path)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=False)
    if follower.fileno() is None:
        pytest.skip("inotify is not available on this system (the follower polls instead)")
    follower.poll(100.0)
    launcher = follower._files[session / layout.LAUNCHER_LOG]
    assert not launcher.watched
    selector = selectors.DefaultSelector()
    selector.register(follower.fileno(), selectors.EVENT_READ)
    with open(session / layout.LAUNCHER_LOG, "a", encoding="utf-8") as f:
        f.write("[default0]:neurotui-runner step=1 rank=0 samples=16 loss=1.0\n")
    assert not selector.select(timeout=0.3), "the console woke the supervisor"
    follower.poll(101.0, final=True)
    assert follower.tail_lines()["launcher"] == [
        "[default0]:neurotui-runner step=1 rank=0 samples=16 loss=1.0"]
    assert "launcher's console" in str(follower.timing["note"])
    writer.close()
    assert not [line for line in (session / layout.EVENTS).read_text().splitlines()
                if '"step"' in line]  # the rank's own log gives its steps


def test_without_inotify_the_session_says_lines_are_stamped_at_polls(tmp_path) -> None:
    _, writer, follower = new_follower(tmp_path, watch=False)
    writer.close()
    assert follower.fileno() is None
    assert follower.timing == {"method": "poll", "max_delay_s": 0.5, "placed_logs": 0, "note": (
        "logs read every 0.5 s; the lines of a read stamped with their log's modification "
        "time (when its last line was written)")}


def test_a_job_printing_no_step_for_a_minute_is_told_so_once(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path, watch=False)
    lines = "".join(f"[train] batch {i} done, all good\n" for i in range(25))
    (session / layout.LAUNCHER_LOG).write_text(lines)
    follower.poll(1000.0)
    follower.poll(1059.0)
    follower.poll(1061.0)
    follower.poll(1200.0)
    writer.close()
    events = [json.loads(x) for x in (session / layout.EVENTS).read_text().splitlines()]
    told = [e for e in events if e["kind"] == "warning" and e["source"] == "steps"]
    assert len(told) == 1 and told[0]["t"] == 1061.0
    assert "no training step recognised in 25 log lines" in told[0]["message"]
    assert "'[train] batch 24 done, all good'" in told[0]["message"]
    assert "--step-pattern" in told[0]["message"]


def test_no_such_warning_once_steps_are_found(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path, watch=False)
    lines = "".join(f"[train] batch {i} done\n" for i in range(25))
    (session / layout.LAUNCHER_LOG).write_text(
        lines + "neurotui-runner step=1 rank=0 samples=16 loss=1.0\n")
    follower.poll(1000.0)
    follower.poll(1100.0)
    writer.close()
    assert '"source": "steps"' not in (session / layout.EVENTS).read_text()


def test_a_huge_output_line_is_cut_in_the_tail_and_says_so(tmp_path) -> None:
    session, writer, follower = new_follower(tmp_path, watch=False)
    (session / layout.LAUNCHER_LOG).write_text("x" * 10_000_000 + "\nlast words\n")
    follower.poll(1.0, final=True)
    writer.close()
    tail = follower.tail_lines()["launcher"]
    assert tail[-1] == "last words"
    assert len(tail[0]) < 2100 and tail[0].endswith("[cut: 10,000,000 characters in all]")


def _watching(follower: LogFollower) -> selectors.BaseSelector:
    if follower.fileno() is None:
        pytest.skip("inotify is not available on this system (the follower polls instead)")
    selector = selectors.DefaultSelector()
    selector.register(follower.fileno(), selectors.EVENT_READ)
    return selector


def test_a_rank_log_made_later_is_found_at_once_through_its_folder(tmp_path) -> None:
    """torchrun makes its run, attempt and rank folders after the follower started: each
    new folder is watched as it appears, and the new log's first line is read and stamped
    when written, with no poll in between."""
    session, writer, follower = new_follower(tmp_path)
    follower.poll(time.time())  # follows the launcher log, watches logs/
    selector = _watching(follower)
    rank_dir = session / layout.TORCHRUN_LOG_DIR / "run1" / "attempt_0" / "3"
    rank_dir.mkdir(parents=True)
    written = time.time()
    (rank_dir / "stdout.log").write_text("neurotui-runner step=1 rank=3 samples=16 loss=1.0\n")
    deadline = time.time() + 2.0
    while time.time() < deadline and not (session / layout.EVENTS).stat().st_size:
        if selector.select(timeout=0.1):
            follower.on_change(time.time())
        writer.flush()
    steps = steps_of(session, writer)
    assert list(steps["rank"]) == [3] and list(steps["step"]) == [1]
    assert steps["t"].iloc[0] - written < 0.05


def _write_busily(follower: LogFollower, logs: list, seconds: float, lines: int) -> None:
    """Each log gets `lines` lines (separate writes) every 0.1 s; after each round the
    follower reads what the kernel says changed, or while busy looks on its batch's timer
    (the kernel says nothing of the logs then), and polls every POLL_S, as the supervisor's
    loop would."""
    selector = _watching(follower)
    start, step = time.time(), 0
    polled = start
    while time.time() - start < seconds:
        if time.time() - polled >= POLL_S:
            follower.poll(time.time())
            polled = time.time()
        for _ in range(lines):
            step += 1
            for rank, log in enumerate(logs):
                log.write(f"neurotui-runner step={step} rank={rank} samples=16 loss=1.0\n")
        time.sleep(0.1)
        if follower.pause_s > 0:  # busy: a look a round (the batch is about as long)
            follower.on_batch(time.time())
        while selector.select(timeout=0):
            follower.on_change(time.time())


def _rank_logs(session: Path, ranks: int) -> list:
    """torchrun's log of each of `ranks` ranks, open for appending a line at a time."""
    root = session / layout.TORCHRUN_LOG_DIR / "run1" / "attempt_0"
    logs = []
    for rank in range(ranks):
        (root / str(rank)).mkdir(parents=True)
        logs.append(open(root / str(rank) / "stdout.log", "a", buffering=1))  # noqa: SIM115
    return logs


@pytest.mark.parametrize("native", LOOKERS)
def test_busy_logs_are_read_in_batches_as_long_as_they_rarely_share_a_read(
        tmp_path, native) -> None:
    """Over 50 changes a second in all: read in batches. Steps of a steady length never come
    two to a batch: 0.9 of the time between two lines of the busiest log. Lines that do come
    two to a read of their log carry the later one's time; they are counted, said in
    log_timing, and the batches shorten."""
    session, writer, follower = new_follower(tmp_path, native_looks=native)
    logs = _rank_logs(session, 8)
    follower.poll(time.time())
    assert follower.batch_s is None
    _write_busily(follower, logs, 2.3, lines=1)  # each log 10 lines a second
    assert follower.batch_s == pytest.approx(0.09, rel=0.35)  # 0.9 / 10 changes a second
    # Looked at at each round here; the native looker's timer is its own, not the rounds', and
    # a look held up by a loaded machine past a round finds two lines (rarely).
    assert follower.shared_lines <= (len(logs) * 23 // 10 if native else 0)
    assert "batches 20 to 100 ms apart" in follower.timing["note"]
    _write_busily(follower, logs, 2.3, lines=2)  # two lines a log between reads
    for log in logs:
        log.close()
    assert follower.shared_lines >= 8 * 10  # a second line of each log at each read
    assert follower.batch_s is not None and follower.batch_s < 0.09 * 0.7  # shortened
    timing = follower.timing
    assert timing["shared_stamp_lines"] == follower.shared_lines
    assert f"{follower.shared_lines} lines came in one read with a later line" in timing["note"]
    writer.close()


def test_a_batch_is_timed_by_how_far_apart_the_busiest_logs_writes_are() -> None:
    """A log's count of changes over the second is off by up to one (a log of 10 lines a
    second shows 11 in 1.05 s, and the busiest of 32 mostly does): by the span of the writes
    its looks saw it is 10. A burst (two writes milliseconds apart) is no faster than its
    count, and without the writes' times (seen by the kernel's word), or with times in whole
    seconds, the count is all."""
    log = _Followed(Path("stdout.log"), "logs/stdout.log", 0)
    at = 5 * 10**9 + 123_456_789  # (ns)
    log.changes, log.first_write_ns, log.last_write_ns = 11, at, at + 10**9
    assert _write_rate(log, 1.05) == pytest.approx(10.0)
    log.changes, log.last_write_ns = 2, at + 3_000_000
    assert _write_rate(log, 1.0) == 2.0
    log.changes, log.first_write_ns, log.last_write_ns = 5, 0, 0
    assert _write_rate(log, 1.25) == 4.0
    log.changes, log.first_write_ns, log.last_write_ns = 10, 5 * 10**9, 6 * 10**9
    assert _write_rate(log, 1.0) == 10.0  # whole seconds (a coarse file system): the count


def test_a_line_read_after_busy_looks_carries_the_first_look_that_saw_it_whole(
        tmp_path) -> None:
    """Lines seen by busy wakeups' looks are read and taken at the next poll, each stamped
    by the first look whose size covered its newline: not by a look that saw only part of
    it, and a line still being written waits for the look that sees its end. (The looks
    are given times long past here, so that each stamps with its own, not the log's
    modification time.)"""
    session, writer, follower = new_follower(tmp_path)
    (log,) = _rank_logs(session, 1)
    follower.poll(time.time())
    logs = list(follower._files.values())  # (looked at as a busy wakeup would)

    def line(step: int) -> str:
        return f"neurotui-runner step={step} rank=0 samples=16 loss=1.0\n"

    for stamp, text in ((1001.0, line(1) + line(2)[:10]),
                        (1002.0, line(2)[10:] + line(3)),
                        (1003.0, line(4) + line(5)[:-1])):
        log.write(text)
        log.flush()
        follower._look(stamp, logs)
    follower.take_read()
    log.write("\n")  # the end of step 5
    log.flush()
    follower._look(1004.0, logs)
    follower.take_read()
    log.close()
    assert follower.shared_lines == 1  # step 2 came with step 3 in one look
    steps = steps_of(session, writer)
    assert dict(zip(steps["step"], steps["t"], strict=True)) == {
        1: 1001.0, 2: 1002.0, 3: 1002.0, 4: 1003.0, 5: 1004.0}


@pytest.mark.parametrize("native", LOOKERS)
def test_while_busy_the_kernel_is_not_asked_of_each_line_and_is_again_once_calm(
        tmp_path, native) -> None:
    """Busy logs are looked at on the batch's timer, so the kernel stops saying when each
    changes (a record a line, made by the writing rank): a write wakes nothing then, and the
    next look still stamps it when written. A second of calm later they are watched again:
    a line is read the moment it is written. No line is lost either way."""
    session, writer, follower = new_follower(tmp_path, native_looks=native)
    logs = _rank_logs(session, 8)
    follower.poll(time.time())
    _write_busily(follower, logs, 2.3, lines=1)  # steps 1..23 (or so) of each log
    assert follower.batch_s is not None  # busy
    assert (follower._looker is not None) == native
    selector = _watching(follower)
    written_busy = time.time()
    logs[0].write("neurotui-runner step=100 rank=0 samples=16 loss=1.0\n")
    assert selector.select(timeout=0.3) == []  # the kernel said nothing
    follower.on_batch(time.time())  # the batch's look
    follower.poll(time.time())  # takes what looks saw
    time.sleep(1.1)  # a calm second: no longer busy at the next look
    follower.on_batch(time.time())
    assert follower.batch_s is None
    written_calm = time.time()
    logs[3].write("neurotui-runner step=200 rank=3 samples=16 loss=1.0\n")
    assert selector.select(timeout=2.0)  # watched again
    follower.on_change(time.time())
    follower.poll(time.time() + 0.5)  # takes what the change's look saw
    for log in logs:
        log.close()
    steps = steps_of(session, writer)
    t = {(r, s): t for r, s, t in zip(steps["rank"], steps["step"], steps["t"], strict=True)}
    assert t[(0, 100)] - written_busy < 0.02  # its log's modification time
    assert t[(3, 200)] - written_calm < 0.05  # read when written
    busy_steps = steps[steps["step"] < 100]
    assert len(busy_steps) == 8 * busy_steps["step"].max()  # every line of every log


@pytest.mark.parametrize("native", LOOKERS)
def test_while_busy_only_logs_that_changed_are_looked_at_on_the_timer(tmp_path, native) -> None:
    """torchrun writes each rank's stdout and stderr to a log of its own, and only one of
    them is busy in most jobs. While busy, the batch's looks are of the logs that changed
    in the last second; a quiet log stays watched by the kernel, so its line wakes the
    supervisor and is stamped then, and once quiet again a timed log is watched again."""
    session, writer, follower = new_follower(tmp_path, native_looks=native)
    logs = _rank_logs(session, 8)
    quiet = [Path(log.name).with_name("stderr.log") for log in logs]
    for path in quiet:
        path.write_text("")
    follower.poll(time.time())
    _write_busily(follower, logs, 2.3, lines=1)
    assert follower.batch_s is not None  # busy
    assert (follower._looker is not None) == native
    timed = {f.path for f in follower._timed}
    assert timed == {Path(log.name) for log in logs}
    assert all(follower._files[path].watched for path in quiet)
    selector = _watching(follower)
    written = time.time()
    with open(quiet[5], "a", encoding="utf-8") as f:
        f.write("neurotui-runner step=1000 rank=5 samples=16 loss=1.0\n")
    assert selector.select(timeout=2.0)  # the kernel said so
    follower.on_change(time.time())
    follower.poll(time.time())
    _write_busily(follower, logs[:6], 2.3, lines=1)  # the other two fall quiet
    assert {f.path for f in follower._timed} == {Path(log.name) for log in logs[:6]}
    if native:  # the looker looks at those six only
        assert {f.path for f in follower._looked} == {Path(log.name) for log in logs[:6]}
    for log in logs:
        log.close()
    steps = steps_of(session, writer)
    late = steps[steps["step"] == 1000]["t"].to_numpy() - written
    assert len(late) == 1 and 0 <= late[0] < 0.05


def test_polls_leave_watched_logs_to_the_kernel_but_take_what_a_full_read_left(
        tmp_path, monkeypatch) -> None:
    """With inotify, a poll reads a watched log only as far as the kernel said it changed
    (on_change's looks), each line stamped by the look that saw it whole; a read stops at
    the size limit, and what it left is taken at the next take, with its looks' stamps."""
    monkeypatch.setattr("neurotui.supervisor.logfollow._MAX_READ", 64)
    monkeypatch.setattr("neurotui.supervisor.followedlogs._MAX_READ", 64)  # (its reads)
    monkeypatch.setattr("neurotui.supervisor.logfollow.CATCH_UP_S", 0.0)  # no reading on
    session, writer, follower = new_follower(tmp_path)
    selector = _watching(follower)
    follower.poll(1.0)  # follows the launcher log (empty so far)
    line = "neurotui-runner step={} rank=0 samples=16 loss=1.0\n"  # 52 bytes
    with open(session / layout.LAUNCHER_LOG, "a", encoding="utf-8") as f:
        f.write(line.format(1))
    follower.poll(2.0)
    writer.flush()
    assert b'"step"' not in (session / layout.EVENTS).read_bytes()  # left to on_change
    assert selector.select(timeout=2.0)
    follower.on_change(3.0)
    with open(session / layout.LAUNCHER_LOG, "a", encoding="utf-8") as f:
        f.write(line.format(2) + line.format(3))  # more than one read takes
    assert selector.select(timeout=2.0)
    follower.on_change(4.0)
    follower.poll(5.0)  # 64 bytes a read, two takes: steps 1 and 2
    writer.flush()
    assert b'"step":3' not in (session / layout.EVENTS).read_bytes()
    follower.poll(6.0)  # the rest: step 3
    steps = steps_of(session, writer)
    assert list(steps["step"]) == [1, 2, 3] and list(steps["t"]) == [3.0, 4.0, 4.0]


def _polled_log(tmp_path: Path) -> tuple[Path, EventWriter, LogFollower, Path]:
    session, writer, follower = new_follower(tmp_path, watch=False)
    return session, writer, follower, session / layout.LAUNCHER_LOG


def _write_at(log: Path, text: str, written_ns: int) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(text)
    os.utime(log, ns=(written_ns, written_ns))  # the kernel's time of that write


def test_a_polled_reads_lines_carry_their_logs_last_write_time(tmp_path) -> None:
    """Read at polls, a read's lines carry the time its log was last written (its mtime), not
    the poll's: the figures' step time spans two writes' true times."""
    session, writer, follower, log = _polled_log(tmp_path)
    now = time.time()
    first_ns, second_ns = int((now - 3.0) * 1e9) + 123, int((now - 2.0) * 1e9) + 456
    _write_at(log, "neurotui-runner step=1 rank=0 samples=16 loss=1.0\n"
                   "neurotui-runner step=2 rank=0 samples=16 loss=1.0\n", first_ns)
    follower.poll(now - 2.5)
    _write_at(log, "neurotui-runner step=3 rank=0 samples=16 loss=1.0\n"
                   "neurotui-runner step=4 rank=0 samples=16 loss=1.0\n", second_ns)
    follower.poll(now - 1.5)
    steps = steps_of(session, writer)
    assert list(steps["t"]) == pytest.approx([first_ns / 1e9] * 2 + [second_ns / 1e9] * 2,
                                             abs=1e-6)
    # Two steps in the second's 1.0 s since the first's: 0.5 s each.
    timed = metrics.with_step_time(steps)
    assert list(timed["step_time"].iloc[2:]) == pytest.approx([0.5, 0.5])


@pytest.mark.parametrize("skew_s", [-600.0, 600.0])
def test_a_log_times_of_another_clock_leave_the_lines_stamped_at_the_poll(
        tmp_path, skew_s: float) -> None:
    """A file system whose clock is not ours (a server's, minutes off): a time before the
    log's previous read, or after now, cannot be when its new lines were written."""
    session, writer, follower, log = _polled_log(tmp_path)
    now = time.time()
    _write_at(log, "neurotui-runner step=1 rank=0 samples=16 loss=1.0\n",
              int((now - 3.0) * 1e9) + 1)
    follower.poll(now - 2.0)
    _write_at(log, "neurotui-runner step=2 rank=0 samples=16 loss=1.0\n",
              int((now - 1.5 + skew_s) * 1e9) + 1)
    follower.poll(now - 1.0)
    steps = steps_of(session, writer)
    assert list(steps["t"]) == pytest.approx([now - 3.0, now - 1.0], abs=1e-6)


def test_whole_second_file_times_are_too_coarse_to_stamp_with(tmp_path) -> None:
    session, writer, follower, log = _polled_log(tmp_path)
    now = time.time()
    _write_at(log, "neurotui-runner step=1 rank=0 samples=16 loss=1.0\n",
              (int(now) - 2) * 1_000_000_000)
    follower.poll(now)
    assert list(steps_of(session, writer)["t"]) == pytest.approx([now], abs=1e-6)


def test_where_the_looker_cannot_start_its_thread_the_looks_are_made_from_python(
        tmp_path, monkeypatch) -> None:
    """pthread_create refused (a limit on threads, EAGAIN): the busy logs are looked at from
    Python as where the looker was not built, and no line is lost."""

    class NoThread:
        """The looker as where pthread_create fails: its first set_logs raises, as
        _looker.c's start() does."""

        def set_logs(self, logs: list) -> list:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

        def close(self) -> None:
            pass

    monkeypatch.setattr(logfollow, "_NativeLooker", NoThread)
    session, writer, follower = new_follower(tmp_path, native_looks=True)
    logs = _rank_logs(session, 8)
    follower.poll(time.time())
    _write_busily(follower, logs, 2.3, lines=1)
    assert follower.batch_s is not None and follower._looker is None  # busy, from Python
    assert follower.timing["batch_looks"] == "python"
    for log in logs:
        log.close()
    follower.poll(time.time(), final=True)
    steps = steps_of(session, writer)
    assert len(steps) == 8 * steps["step"].max()  # every line of every log
