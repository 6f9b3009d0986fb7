"""The native looker (supervisor/_looker.c): a thread outside Python that looks at busy logs on
the batch's timer and stamps what it finds as LogFollower._grown does. Real files, a real
thread; the stamps are checked against the files' own modification times."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from neurotui.supervisor import logfollow

INTERVAL_S = 0.02


def test_the_looker_is_built_by_the_set_up() -> None:
    """`.ci/run` (and the README's install) build it: where it was not, the supervisor looks
    from Python, at several times the cost, and these tests would test nothing."""
    assert logfollow._NativeLooker is not None


@pytest.fixture
def logs(tmp_path: Path):
    fds = [os.open(tmp_path / f"{i}.log", os.O_RDWR | os.O_CREAT | os.O_APPEND)
           for i in range(3)]
    yield fds
    for fd in fds:
        os.close(fd)


@pytest.fixture
def looker():
    assert logfollow._NativeLooker is not None
    made = logfollow._NativeLooker()
    yield made
    made.close()


def _wait_passes(looker, more: int = 3) -> None:
    """Until the thread has looked `more` more times (a second at most)."""
    target, deadline = looker.passes + more, time.monotonic() + 1.0
    while looker.passes < target and time.monotonic() < deadline:
        time.sleep(INTERVAL_S / 2)
    assert looker.passes >= target, "the thread did not look"


def test_a_grown_log_is_noted_with_its_write_time_and_a_quiet_one_is_not(
        looker, logs) -> None:
    looker.set_logs([(fd, 0, 0.0) for fd in logs])
    looker.set_interval(INTERVAL_S)
    os.write(logs[1], b"step 1\n")
    _wait_passes(looker)
    os.write(logs[1], b"step 2\n")
    os.write(logs[2], b"step 1\n")
    _wait_passes(looker)
    taken = looker.take()
    assert [entry[0] for entry in taken] == [1, 2]  # the order first grown; log 0 quiet
    _, looks, changes, first_ns, last_ns, grew_at = taken[0]
    assert [size for size, _ in looks] == [7, 14] and changes == 2
    written_ns = os.fstat(logs[1]).st_mtime_ns
    assert last_ns == written_ns and first_ns <= last_ns
    assert looks[-1][1] == written_ns / 1e9  # stamped with when it was written
    assert written_ns / 1e9 <= grew_at <= time.time()  # the look came after the write
    assert looker.take() == []  # taken once


def test_a_time_that_cannot_be_the_writes_stamps_with_the_looks_time(looker, logs) -> None:
    """As _written_at: a modification time in whole seconds (a coarse file system), or one
    before the log's previous growth (another clock), is not when the line was written."""
    now = time.time()
    looker.set_logs([(logs[0], 0, 0.0), (logs[1], 0, now + 3600.0)])
    os.write(logs[0], b"step 1\n")
    os.utime(logs[0], ns=(int(now) * 10**9, int(now) * 10**9))  # whole seconds
    os.write(logs[1], b"step 1\n")  # written "before" its last growth (an hour from now)
    looker.set_interval(INTERVAL_S)
    _wait_passes(looker)
    after = time.time()
    taken = {entry[0]: entry for entry in looker.take()}
    for index in (0, 1):
        (_, stamp), = taken[index][1]
        assert now <= stamp <= after  # the look's own time
        assert stamp == taken[index][5]


def test_new_logs_hand_back_what_the_looks_found_of_the_old(looker, logs) -> None:
    looker.set_logs([(logs[0], 0, 0.0)])
    looker.set_interval(INTERVAL_S)
    os.write(logs[0], b"step 1\n")
    _wait_passes(looker)
    handed = looker.set_logs([(logs[2], 0, 0.0), (logs[0], 7, 0.0)])
    assert [(entry[0], entry[1][0][0]) for entry in handed] == [(0, 7)]  # old index 0
    os.write(logs[0], b"step 2\n")
    _wait_passes(looker)
    assert [(entry[0], entry[1][0][0]) for entry in looker.take()] == [(1, 14)]


def test_no_logs_or_no_interval_and_the_thread_looks_no_more(looker, logs) -> None:
    looker.set_logs([(logs[0], 0, 0.0)])
    looker.set_interval(INTERVAL_S)
    _wait_passes(looker)
    looker.set_interval(0.0)
    time.sleep(INTERVAL_S * 3)  # (a pass under way ends)
    passes = looker.passes
    time.sleep(INTERVAL_S * 5)
    assert looker.passes == passes
    looker.set_interval(INTERVAL_S)
    _wait_passes(looker)
    looker.set_logs([])
    time.sleep(INTERVAL_S * 3)
    passes = looker.passes
    time.sleep(INTERVAL_S * 5)
    assert looker.passes == passes


def test_the_thread_blocks_every_signal_and_ends_at_close(logs) -> None:
    """Signals go to the main thread, where Python's handlers run (the supervisor's SIGTERM);
    close() ends the thread."""
    before = set(os.listdir("/proc/self/task"))
    looker = logfollow._NativeLooker()
    looker.set_logs([(logs[0], 0, 0.0)])
    looker.set_interval(INTERVAL_S)
    _wait_passes(looker)
    (thread,) = set(os.listdir("/proc/self/task")) - before - {
        str(t.native_id) for t in threading.enumerate()}
    status = Path(f"/proc/self/task/{thread}/status").read_text()
    blocked = int(next(line.split()[1] for line in status.splitlines()
                       if line.startswith("SigBlk:")), 16)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP, signal.SIGUSR1):
        assert blocked & (1 << (sig - 1)), sig.name
    looker.close()
    assert thread not in os.listdir("/proc/self/task")
    looker.close()  # twice: nothing


def test_read_looked_reads_and_stamps_each_line_as_the_python_loop_does(tmp_path: Path) -> None:
    """_looker.c's read_looked against logfollow._looked_stamps (the loop it replaces, kept
    where the module was not built), on a real file: random lines, looks at random sizes
    (some before the read's start, some within a line), reads cut short by `most`, and the
    read's bytes those of the file."""
    import random

    from neurotui.supervisor._looker import read_looked

    rng = random.Random(5)
    path = tmp_path / "rank.log"
    text = b"".join(b"x" * rng.randint(0, 30) + b"\n" * rng.choice([1, 1, 1, 2])
                    for _ in range(400)) + b"a line still being written"
    path.write_bytes(text)
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(300):
            offset = rng.randint(0, len(text) - 1)
            sizes = sorted(rng.sample(range(1, len(text) + 1), rng.randint(1, 12)))
            looks = [(size, 1000.0 + i) for i, size in enumerate(sizes)]
            most = rng.choice([1 << 20, rng.randint(1, 200)])
            data, stamps, shared = read_looked(fd, offset, most, looks)
            assert data == text[offset:max(offset, min(sizes[-1], offset + most))]
            pending = b"p" * rng.randint(0, 3)  # (a line's start read before: no newline)
            assert (stamps, shared) == logfollow._looked_stamps(
                pending + data, offset - len(pending), looks)
        assert read_looked(fd, 10, 100, []) == (b"", [], 0)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        read_looked(fd, 0, 100, [(5, 1.0)])  # (closed: the read fails)
    with pytest.raises(TypeError):
        read_looked(0, 0, 100, [[5, 1.0]])  # (a look is a tuple)
