"""What wakes the supervisor besides its timers: the job's exit and the signals it is sent,
and the wait on all its descriptors (Waits).

Without these it would have to look several times a second (is the job still there? was a
SIGTERM caught?), and each look is a wakeup: on an idle job most of the supervisor's cost. The
kernel says both through descriptors the supervisor waits on.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import threading
import time
from typing import Protocol


def exit_descriptor(pid: int) -> int | None:
    """A descriptor that becomes readable when process `pid` exits (a pidfd, Linux 5.3+), for
    a child and an adopted job alike; None where the kernel or Python has none (then the
    supervisor looks every TICK_S, as before)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:  # an older kernel (ENOSYS), or the process is already gone (ESRCH)
        return None


class ExitClock:
    """When process `pid` exited, read off the clock at that moment by a thread waiting on its
    pidfd: the job's real end, whatever the supervisor is busy with then (a flood of output
    to read, say). The main loop's own look comes later by as much as its work took, and a
    run once recorded its end 20 s after the job's (tests/e2e/test_flood.py)."""

    def __init__(self, pid: int) -> None:
        self.at: float | None = None
        """The time it exited (None: not yet, or no pidfd to wait on)."""
        self._fd = exit_descriptor(pid)
        self._cancel_read, self._cancel_write = os.pipe()
        if self._fd is not None:
            threading.Thread(target=self._wait, name="neurotui-exit-clock", daemon=True).start()

    def _wait(self) -> None:
        assert self._fd is not None
        waits = select.poll()
        waits.register(self._fd, select.POLLIN)
        waits.register(self._cancel_read, select.POLLIN)
        ready = {fd for fd, _ in waits.poll()}
        if self._fd in ready:
            self.at = time.time()
        os.close(self._fd)
        os.close(self._cancel_read)

    def close(self) -> None:
        """No more waiting (another attempt's leader is timed, or the supervisor leaves)."""
        if self._cancel_write < 0:
            return
        os.close(self._cancel_write)  # its thread wakes, and closes the rest
        self._cancel_write = -1
        if self._fd is None:
            os.close(self._cancel_read)


class SignalWake:
    """A socket that becomes readable when a caught signal arrives (signal.set_wakeup_fd): a
    SIGTERM's handler only sets a flag, and a wait that Python resumes after the handler
    (PEP 475) would otherwise not see it until its timeout."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self._previous = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)

    def fileno(self) -> int:
        return self._read.fileno()

    def drain(self) -> None:
        """Empty the socket (one byte per signal) so that it waits again."""
        with contextlib.suppress(BlockingIOError, OSError):
            while self._read.recv(512):
                pass

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous)
        self._read.close()
        self._write.close()


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


class Waits:
    """The descriptors the supervisor waits on, each handed back as its own `data` when it is
    readable. select.poll rather than the selectors module: while busy logs are read in
    batches the supervisor wakes ten times a second, and the selectors wrapper's Python,
    run with cold caches at each wakeup, cost a third of the wakeup itself on the dev VM
    (about 100 against 75 us: tests/bench/bench_log_follow.py's anchor)."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._data: dict[int, object] = {}

    def register(self, source: int | _HasFileno, data: object) -> None:
        fd = source if isinstance(source, int) else source.fileno()
        self._poll.register(fd, select.POLLIN)
        self._data[fd] = data

    def unregister(self, source: int | _HasFileno) -> None:
        fd = source if isinstance(source, int) else source.fileno()
        self._poll.unregister(fd)
        del self._data[fd]

    def wait(self, timeout: float) -> list[object]:
        """The data of the descriptors readable (or hung up) within `timeout` seconds, in
        no order; empty when none was. A caught signal's handler runs meanwhile and the wait
        goes on (PEP 475): SignalWake makes it return."""
        events = self._poll.poll(timeout * 1000.0 if timeout > 0 else 0)
        if not events:
            return []
        data = self._data
        return [data[fd] for fd, _ in events if fd in data]
