"""What wakes the supervisor: the job's exit and caught signals through descriptors, and its
timed work on one grid (supervisor/wakeups.py, core._next_due)."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurotui.supervisor.core import _next_due
from neurotui.supervisor.wakeups import SignalWake, Waits, exit_descriptor


def _readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd is Linux 5.3+ only")
def test_the_exit_descriptor_wakes_when_the_job_exits_not_before() -> None:
    job = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                           stdin=subprocess.PIPE)
    fd = exit_descriptor(job.pid)
    assert fd is not None
    try:
        assert not _readable(fd, 0.2)  # running: nothing to say
        assert job.stdin is not None
        job.stdin.close()  # the job ends
        assert _readable(fd, 10.0)
        assert job.wait(timeout=5) == 0  # the exit code is still the supervisor's to take
    finally:
        os.close(fd)


def test_no_exit_descriptor_for_a_process_that_is_gone() -> None:
    job = subprocess.Popen([sys.executable, "-c", "pass"])
    job.wait()
    assert exit_descriptor(job.pid) is None  # reaped: the supervisor looks instead


def test_a_caught_signal_makes_the_wake_socket_readable() -> None:
    caught: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: caught.append(signum))
    wake = SignalWake()
    try:
        assert not _readable(wake.fileno(), 0.0)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert _readable(wake.fileno(), 5.0)
        assert caught == [signal.SIGUSR1]
        wake.drain()
        assert not _readable(wake.fileno(), 0.0)  # waits again
    finally:
        wake.close()
        signal.signal(signal.SIGUSR1, previous)


def test_waits_hands_back_what_each_readable_descriptor_stands_for() -> None:
    control, client = socket.socketpair()
    job = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                           stdin=subprocess.PIPE)
    exit_fd = exit_descriptor(job.pid)
    waits = Waits()
    waits.register(control, "control")  # an object with fileno(), as the control socket
    if exit_fd is not None:
        waits.register(exit_fd, "exit")  # a bare descriptor, as the pidfd
    try:
        started = time.monotonic()
        assert waits.wait(0.2) == []  # nothing readable: the whole timeout, then nothing
        assert time.monotonic() - started >= 0.19
        client.send(b"x")
        assert waits.wait(5.0) == ["control"]
        assert waits.wait(0) == ["control"]  # unread: still readable, and 0 does not wait
        waits.unregister(control)
        assert waits.wait(0) == []  # no longer waited on
        if exit_fd is not None:
            assert job.stdin is not None
            job.stdin.close()
            assert waits.wait(10.0) == ["exit"]
            waits.unregister(exit_fd)
    finally:
        job.kill()
        job.wait()
        if exit_fd is not None:
            os.close(exit_fd)
        control.close()
        client.close()


def test_timed_work_stays_on_one_grid() -> None:
    # Logs every 0.5 s and telemetry every second, started together: every telemetry run
    # falls on a log poll, however late each wakeup came.
    logs = telemetry = start = 100.0
    wakeups = set()
    now = start
    for lateness in [0.003, 0.0, 0.012, 0.001, 0.04, 0.002] * 5:
        now = min(logs, telemetry) + lateness
        wakeups.add(round(min(logs, telemetry), 6))
        if now >= logs:
            logs = _next_due(logs, 0.5, now)
        if now >= telemetry:
            telemetry = _next_due(telemetry, 1.0, now)
    assert all(round((t - start) / 0.5, 6).is_integer() for t in wakeups)
    assert round(telemetry - start, 6) % 1.0 == 0


@given(due=st.floats(0, 1e9), period=st.sampled_from([0.5, 1.0, 2.0]),
       offset=st.floats(-0.4, 50))
def test_the_next_due_time_is_after_now_and_on_the_grid(due: float, period: float,
                                                        offset: float) -> None:
    now = due + offset
    nxt = _next_due(due, period, now)
    assert nxt > now or nxt > due
    assert nxt - max(now, due) <= period * (1 + 1e-9) + 1e-6
    steps = (nxt - due) / period
    assert abs(steps - round(steps)) < 1e-3 and round(steps) >= 1
