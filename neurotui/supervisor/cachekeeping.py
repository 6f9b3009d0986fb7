"""Keeping the session's columnar cache current while the job runs, from the supervisor.

The cache (session/cache.py) is what lets attach, replay and compare of a day-long run open in
under a second; without it their first read parses every line. Building and appending to it
needs numpy and the reader, which the supervisor must not load (it stays at about 30 MB beside
training for days), so the work is done by a child process, `python -m
neurotui.session.keeper --serve` (session/keeper.py), started from the supervisor's loop once
the session holds enough JSON lines to be worth a cache. It runs at once, then again each time
the supervisor writes a word to its stdin: whenever KEEP_BEHIND_BYTES more were written (or
KEEP_EVERY_S passed). An attach never has more than those bytes to read itself (a fifth of a
second).

Starting a keeper costs 0.13-0.16 CPU-s (a new interpreter, numpy loaded with one BLAS thread:
childenv.py); a run then costs 0.01-0.03 CPU-s, and about 0.09 in all to append 8 MiB. At 32
ranks x 10 steps/s with the automatic probe's files, the session gains 8 MiB every 70 s: a
keeper started for each run was 0.35-0.47% of a core, more than the supervisor. So the keeper
stays while runs come at least every LINGER_S, holding its modules (36 MB resident, 19 MB of it
its own: a forked worker does each run, and its memory goes with it), and is let go (its stdin
closed) when none was asked for that long: a slow run's keeper, started every ten minutes,
costs 0.02% of a core and holds nothing between. tests/bench/bench_log_follow.py measures it.

The child runs niced in a session of its own, one at a time (a run asked for while one is at
work is done after it); it is reaped on a later tick once it exits (no zombie), and, when the
supervisor exits, told to end and waited for (then killed, with its worker). Whatever it does,
the job and the supervisor go on: the cache only saves time. An adopting supervisor's keeper
goes on from the stamp the last one wrote.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from neurotui.childenv import numpy_helper_env
from neurotui.session import layout

KEEP_BEHIND_BYTES = 8 << 20
"""New JSON lines since the last run that ask for the next one."""
KEEP_EVERY_S = 600.0
"""The longest a slow run's newest lines wait for the cache."""
LINGER_S = 300.0
"""A keeper asked for no run this long is let go; the next run starts a new one."""
CHECK_EVERY_S = 10.0
"""How often the session's size is looked at (a few stat calls)."""
EXIT_WAIT_S = 5.0
"""How long a running keeper is waited for when the supervisor exits, before it is killed."""
KEEPER_MODULE = "neurotui.session.keeper"


class CacheKeeper:
    """Call `tick(now)` from the supervisor's loop; `close()` when it ends (also at exit)."""

    def __init__(self, session_dir: Path, *, every_s: float | None = None,
                 min_bytes: int | None = None, behind_bytes: int | None = None,
                 check_every_s: float = CHECK_EVERY_S, linger_s: float | None = None) -> None:
        """`every_s`: KEEP_EVERY_S; `min_bytes`: layout.CACHE_MIN_SOURCE_BYTES (read now);
        `behind_bytes`: KEEP_BEHIND_BYTES; `linger_s`: LINGER_S."""
        self.dir = session_dir
        self.every_s = KEEP_EVERY_S if every_s is None else every_s
        self.min_bytes = layout.CACHE_MIN_SOURCE_BYTES if min_bytes is None else min_bytes
        self.behind_bytes = KEEP_BEHIND_BYTES if behind_bytes is None else behind_bytes
        self.check_every_s = check_every_s
        self.linger_s = LINGER_S if linger_s is None else linger_s
        self._kept_size = 0
        self._kept_at = -float("inf")
        self.child: subprocess.Popen[bytes] | None = None
        self.started = 0
        """Keepers started so far."""
        self.asked = 0
        """Runs asked of a keeper already there (each started keeper runs once unasked)."""
        self.last_code: int | None = None
        """The exit code of the last keeper reaped."""
        self._next = 0.0
        self._told_failure = False
        self._at_exit = False

    def tick(self, now: float) -> None:
        """Reap a keeper that ended; ask for a run (starting a keeper where none is there)
        when the session is big enough and enough was written since the last (or long enough
        passed); let a keeper asked for nothing for `linger_s` go. Cheap when there is
        nothing to do: a poll of the child, a comparison, every CHECK_EVERY_S a few stat
        calls."""
        child = self.child
        if child is not None and child.poll() is not None:
            self._reaped(child.returncode)
            child = None
        if now < self._next:
            return
        self._next = now + self.check_every_s
        size = layout.json_lines_bytes(self.dir)
        behind = size - self._kept_size
        if size < self.min_bytes or behind <= 0 or (
                behind < self.behind_bytes and now < self._kept_at + self.every_s):
            if child is not None and now >= self._kept_at + self.linger_s:
                self._let_go(child)
            return
        if child is not None:
            if child.stdin is None:
                return  # let go, not ended yet: never two at once
            if self._ask(child):
                self._kept_size, self._kept_at = size, now
                self.asked += 1
            return
        self._kept_size, self._kept_at = size, now
        self._start()

    def _start(self) -> None:
        try:
            child = subprocess.Popen(  # an argv list: no shell
                [sys.executable, "-m", KEEPER_MODULE, "--serve", "--min-bytes",
                 str(self.min_bytes), str(self.dir)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=None,  # the supervisor's own: supervisor.log
                start_new_session=True, close_fds=True, env=numpy_helper_env())
        except OSError as exc:  # no memory for a process now: next time
            self._tell(f"cannot start the cache keeper: {exc}")
            return
        assert child.stdin is not None
        os.set_blocking(child.stdin.fileno(), False)  # a keeper that stopped reading: no wait
        self.child = child
        self.started += 1
        if not self._at_exit:
            self._at_exit = True
            atexit.register(self.close)

    @staticmethod
    def _ask(child: subprocess.Popen[bytes]) -> bool:
        """One more run of `child` (after the one at work, if any); False where it is ending
        (it is reaped at a later tick, and the run asked of the next one)."""
        assert child.stdin is not None
        try:
            os.write(child.stdin.fileno(), b"k")
        except BlockingIOError:
            return True  # words it has not read yet ask for a run already
        except OSError:  # ended meanwhile (EPIPE)
            return False
        return True

    @staticmethod
    def _let_go(child: subprocess.Popen[bytes]) -> None:
        """Close the keeper's stdin: it ends after the run at work, if any."""
        if child.stdin is not None:
            with contextlib.suppress(OSError):
                child.stdin.close()
            child.stdin = None

    def _reaped(self, code: int) -> None:
        self.child = None
        self.last_code = code
        if code != 0:
            self._tell(f"the cache keeper exited with {code}")

    def _tell(self, message: str) -> None:
        """Said once in the supervisor's log: a cache that is not kept costs time, not data."""
        if not self._told_failure:
            self._told_failure = True
            print(f"neurotui: {message}; attach and replay may parse the session anew",
                  file=sys.stderr, flush=True)

    def close(self, timeout_s: float = EXIT_WAIT_S) -> None:
        """Let the keeper go and wait for it, up to `timeout_s`, then kill it and its worker
        (its appends are only counted once its stamp is written: a killed one leaves the
        cache as it was)."""
        child = self.child
        if child is None:
            return
        self._let_go(child)
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(child.pid, signal.SIGKILL)  # a session of its own: the worker too
            except OSError:
                child.kill()
            child.wait()
        self._reaped(child.returncode)
