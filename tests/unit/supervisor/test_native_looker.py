"""The native looker (supervisor/_looker.c): a thread outside Python that looks at busy logs on
the batch's timer and stamps what it finds as LogFollower._grown does. Real files, a real
thread; the stamps are checked against the files' own modification times."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from neurotui.supervisor import followedlogs, logfollow

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
    """_looker.c's read_looked against followedlogs._looked_stamps (the loop it replaces, kept
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
            assert (stamps, shared) == followedlogs._looked_stamps(
                pending + data, offset - len(pending), looks)
        assert read_looked(fd, 10, 100, []) == (b"", [], 0)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        read_looked(fd, 0, 100, [(5, 1.0)])  # (closed: the read fails)
    with pytest.raises(TypeError):
        read_looked(0, 0, 100, [[5, 1.0]])  # (a look is a tuple)


# -- its callers' edge cases (issue #63): each risky call in a fresh interpreter, so that a
# hang or a crash fails the test instead of stopping pytest ------------------------------------

def _isolated(code: str, timeout_s: float = 60.0) -> str:
    """`code` run by a new Python (with `Looker`, `read_looked`, `os`, `threading`, `time`
    imported); its output. A crash, an uncaught error or a hang fails the test."""
    prelude = ("import os, sys, threading, time\n"
               "from neurotui.supervisor._looker import Looker, read_looked\n")
    try:
        done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as hung:
        raise AssertionError(f"hung: {hung.stdout!r} {hung.stderr!r}") from None
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


@pytest.mark.parametrize("seconds", [math.inf, -math.inf, math.nan, 1e10, 1e-8, -0.5, 3601.0])
def test_an_interval_out_of_range_is_refused_and_the_looker_goes_on(
        looker, logs, seconds: float) -> None:
    """An infinite, NaN, huge or tiny interval spun the thread with its lock held, and the next
    take() or close() hung the interpreter."""
    out = _isolated(f"""
        fd = os.open({os.devnull!r}, os.O_RDONLY)
        looker = Looker()
        looker.set_logs([(fd, 0, 0.0)])
        try:
            looker.set_interval(float({str(seconds)!r}))
        except ValueError:
            print("refused")
        looker.take()
        looker.close()
        print("closed")
    """, timeout_s=30)
    assert out.split() == ["refused", "closed"]
    # (and in this process, now that it cannot hang it)
    looker.set_logs([(logs[0], 0, 0.0)])
    with pytest.raises(ValueError, match="set_interval"):
        looker.set_interval(seconds)
    looker.set_interval(INTERVAL_S)
    os.write(logs[0], b"step 1\n")
    _wait_passes(looker)
    assert [entry[0] for entry in looker.take()] == [0]


def test_the_edges_of_the_interval_are_taken(looker, logs) -> None:
    looker.set_logs([(logs[0], 0, 0.0)])
    for seconds in (0.0, 1e-3, 3600.0, 0.0, INTERVAL_S):
        looker.set_interval(seconds)
    _wait_passes(looker)


def test_close_from_two_threads_returns_in_both_and_a_closed_looker_starts_again(
        tmp_path: Path) -> None:
    out = _isolated(f"""
        fd = os.open({str(tmp_path / "a.log")!r}, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        before = set(os.listdir("/proc/self/task"))
        for round in range(20):
            looker = Looker()
            looker.set_logs([(fd, os.fstat(fd).st_size, 0.0)])
            looker.set_interval(0.001)
            while looker.passes < 2:
                time.sleep(0.001)
            go = threading.Barrier(3)
            def close():
                go.wait()
                looker.close()
            closers = [threading.Thread(target=close) for _ in range(3)]
            for closer in closers:
                closer.start()
            for closer in closers:
                closer.join(10)
            assert not any(closer.is_alive() for closer in closers), "a close hung"
            deadline = time.monotonic() + 5  # (a joined Python thread ends just after)
            while set(os.listdir("/proc/self/task")) != before and time.monotonic() < deadline:
                time.sleep(0.001)
            assert set(os.listdir("/proc/self/task")) == before, "the thread lives on"
            # Closed: set_logs with logs starts the thread again, and it looks.
            passes = looker.passes
            looker.set_logs([(fd, os.fstat(fd).st_size, 0.0)])
            os.write(fd, b"step 1\\n")
            deadline = time.monotonic() + 5
            while looker.passes < passes + 2 and time.monotonic() < deadline:
                time.sleep(0.001)
            assert looker.passes >= passes + 2, "a closed looker did not start again"
            assert [entry[0] for entry in looker.take()] == [0]
            looker.close()
            looker.close()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_a_write_time_past_2262_is_clamped_and_stamps_with_the_looks_time(
        looker, tmp_path: Path) -> None:
    """A job may set its log's time to anything: 1e10 s (the year 2286) is past what 64 bits
    of nanoseconds hold (UBSan's signed overflow before)."""
    path = tmp_path / "future.log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        now = time.time()
        looker.set_logs([(fd, 0, now)])
        os.write(fd, b"step 1\n")
        os.utime(path, (1e10, 1e10))
        assert os.fstat(fd).st_mtime_ns > 2**63  # (ext4 and tmpfs keep it)
        looker.set_interval(INTERVAL_S)
        _wait_passes(looker)
        ((_, ((size, stamp),), changes, first_ns, last_ns, grew_at),) = looker.take()
        assert size == 7 and changes == 1
        assert first_ns == last_ns == 2**63 - 1  # clamped
        assert now <= stamp == grew_at <= time.time()  # the look's own time, as _grown's
    finally:
        looker.close()
        os.close(fd)


def test_a_take_without_memory_loses_that_take_only(tmp_path: Path) -> None:
    """A MemoryError inside a take left the count of logs grown stale: the thread then noted
    a log twice and wrote past its list (a heap-buffer-overflow under AddressSanitizer).
    Now the take's looks are moved out first: a take that fails loses those, the next is
    right (each log once)."""
    pytest.importorskip("_testcapi")
    out = _isolated(f"""
        import _testcapi
        fds = [os.open({str(tmp_path)!r} + f"/{{i}}.log", os.O_RDWR | os.O_CREAT | os.O_APPEND)
               for i in range(3)]
        looker = Looker()
        looker.set_logs([(fd, 0, 0.0) for fd in fds])
        looker.set_interval(0.001)
        failed = 0
        for round in range(200):
            for fd in fds:
                os.write(fd, b"step\\n")
            passes = looker.passes
            while looker.passes < passes + 2:
                time.sleep(0.0005)
            _testcapi.set_nomemory(round % 7 + 1, 0)  # a later allocation fails
            try:
                taken = looker.take()
            except MemoryError:
                failed += 1
                taken = None
            finally:
                _testcapi.remove_mem_hooks()
            if taken is not None:
                indexes = [entry[0] for entry in taken]
                assert len(indexes) == len(set(indexes)), indexes
        for fd in fds:
            os.write(fds[0], b"last\\n")
        passes = looker.passes
        while looker.passes < passes + 2:
            time.sleep(0.0005)
        taken = looker.take()
        assert sorted(entry[0] for entry in taken) == [0], taken
        looker.close()
        print(failed)
    """)
    assert int(out) > 20  # (the failures this test is for happened)


def test_logs_out_of_range_are_refused(looker) -> None:
    for bad in ([(-1, 0, 0.0)], [(0, -5, 0.0)], [(0, 0, math.nan)], [(0, 0, math.inf)]):
        with pytest.raises(ValueError, match="set_logs"):
            looker.set_logs(bad)
    with pytest.raises(OverflowError):
        looker.set_logs([(2**32, 0, 0.0)])  # (a descriptor is an int)
    with pytest.raises(TypeError):
        looker.set_logs([[0, 0, 0.0]])
    assert looker.set_logs([(0, 0, -math.inf)]) == []  # never grown: _Followed's own
    looker.set_logs([])


def test_read_looked_refuses_what_cannot_be_a_read(tmp_path: Path) -> None:
    """The size's arithmetic wrapped on extreme offsets, and a descriptor above 2**32 was cut
    to another one (read_looked read that file)."""
    from neurotui.supervisor._looker import read_looked

    path = tmp_path / "rank.log"
    path.write_bytes(b"one\ntwo\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        for fd_, offset, most, looks in ((fd + 2**32, 0, 100, [(8, 1.0)]),
                                         (-1, 0, 100, [(8, 1.0)]),
                                         (fd, -2**63, 100, [(8, 1.0)]),
                                         (fd, 0, -1, [(8, 1.0)]),
                                         (fd, 0, 100, [(-8, 1.0)])):
            with pytest.raises(ValueError, match="read_looked"):
                read_looked(fd_, offset, most, looks)
        with pytest.raises(OverflowError):
            read_looked(fd, 2**64, 100, [(8, 1.0)])
        assert read_looked(fd, 2**63 - 1, 2**63 - 1, [(8, 1.0)]) == (b"", [], 0)
        with pytest.raises((OverflowError, MemoryError)):  # (as os.pread: no such buffer)
            read_looked(fd, 0, 2**63 - 1, [(2**63 - 1, 1.0)])
        assert read_looked(fd, 0, 100, [(2**63 - 1, 1.0)]) == (b"one\ntwo\n", [1.0, 1.0], 1)
        assert read_looked(fd, 0, 100, [(4, 1.0), (8, 2.0)]) == (b"one\ntwo\n", [1.0, 2.0], 0)
    finally:
        os.close(fd)


def test_read_looked_is_safe_from_looks_changed_as_it_reads(tmp_path: Path) -> None:
    """A size's int may be Python code (__index__), which may empty the caller's list: the
    looks were read again after it (past the list's end)."""
    path = tmp_path / "rank.log"
    path.write_bytes(b"one\ntwo\n")
    out = _isolated(f"""
        looks = []
        class Size:
            def __init__(self, n):
                self.n = n
            def __index__(self):
                looks.clear()
                return self.n
        looks += [(Size(4), 1.0), (Size(8), 2.0)]
        fd = os.open({str(path)!r}, os.O_RDONLY)
        print(read_looked(fd, 0, 100, looks))
    """)
    assert out.strip() == "(b'one\\ntwo\\n', [1.0, 2.0], 0)"


def test_set_logs_is_safe_from_logs_changed_as_it_reads(tmp_path: Path) -> None:
    """A descriptor's int may be Python code (__index__) that empties the caller's list: the
    list was read again after it, past its end."""
    out = _isolated(f"""
        logs = []
        fd = os.open({str(tmp_path / "a.log")!r}, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        class Fd:
            def __index__(self):
                logs.clear()
                return fd
        logs += [(Fd(), 0, 0.0), (Fd(), 0, 0.0), (Fd(), 0, 0.0)]
        looker = Looker()
        print(looker.set_logs(logs))
        looker.set_interval(0.001)
        os.write(fd, b"step 1\\n")
        target = looker.passes + 2  # (a pass begun before the write, and one after it)
        while looker.passes < target:
            time.sleep(0.001)
        print(sorted(entry[0] for entry in looker.take()))
        looker.close()
    """)
    assert out.split("\n")[:2] == ["[]", "[0, 1, 2]"]
