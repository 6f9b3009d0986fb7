"""Keeping the session's columnar cache current while the job runs, from the supervisor.

The cache (session/cache.py) is what lets attach, replay and compare of a day-long run open in
under a second; without it their first read parses every line. Building and appending to it
needs numpy and the reader, which the supervisor must not load (it stays at about 30 MB beside
training for days), so the work is done by a child process, `python -m
neurotui.session.keeper` (session/keeper.py), started from the supervisor's loop once the
session holds enough JSON lines to be worth a cache, and again whenever KEEP_BEHIND_BYTES
more were written (or KEEP_EVERY_S passed). A keeper costs 0.13-0.17 CPU-s whatever it has
to do (a new interpreter, numpy loaded with one BLAS thread: childenv.py), and about 0.1 s
more to append 8 MiB: spaced by the bytes written, its cost follows the run's rate. At 32 ranks
x 10 steps/s that is one every 150 s from log lines alone (0.15% of a core), and one every 70 s
with the automatic probe's files beside them (0.4%): tests/bench/bench_log_follow.py measures it.
An attach never has more than those bytes to read itself (a fifth of a second).

The child runs niced in a session of its own, never two at once; it is reaped on a later tick
(no zombie), and waited for (then killed) when the supervisor exits. Whatever it does, the job
and the supervisor go on: the cache only saves time. An adopting supervisor's keeper goes on
from the stamp the last one wrote.
"""

from __future__ import annotations

import atexit
import subprocess
import sys
from pathlib import Path

from neurotui.childenv import numpy_helper_env
from neurotui.session import layout

KEEP_BEHIND_BYTES = 8 << 20
"""New JSON lines since the last keeper that start the next one."""
KEEP_EVERY_S = 600.0
"""The longest a slow run's newest lines wait for the cache."""
CHECK_EVERY_S = 10.0
"""How often the session's size is looked at (a few stat calls)."""
EXIT_WAIT_S = 5.0
"""How long a running keeper is waited for when the supervisor exits, before it is killed."""
KEEPER_MODULE = "neurotui.session.keeper"


class CacheKeeper:
    """Call `tick(now)` from the supervisor's loop; `close()` when it ends (also at exit)."""

    def __init__(self, session_dir: Path, *, every_s: float | None = None,
                 min_bytes: int | None = None, behind_bytes: int | None = None,
                 check_every_s: float = CHECK_EVERY_S) -> None:
        """`every_s`: KEEP_EVERY_S; `min_bytes`: layout.CACHE_MIN_SOURCE_BYTES (read now);
        `behind_bytes`: KEEP_BEHIND_BYTES."""
        self.dir = session_dir
        self.every_s = KEEP_EVERY_S if every_s is None else every_s
        self.min_bytes = layout.CACHE_MIN_SOURCE_BYTES if min_bytes is None else min_bytes
        self.behind_bytes = KEEP_BEHIND_BYTES if behind_bytes is None else behind_bytes
        self.check_every_s = check_every_s
        self._kept_size = 0
        self._kept_at = -float("inf")
        self.child: subprocess.Popen[bytes] | None = None
        self.started = 0
        """Keepers started so far."""
        self.last_code: int | None = None
        """The exit code of the last keeper reaped."""
        self._next = 0.0
        self._told_failure = False
        self._at_exit = False

    def tick(self, now: float) -> None:
        """Reap a keeper that finished; start one when the session is big enough and enough
        was written since the last (or long enough passed). Cheap when there is nothing to
        do: a poll of the child, a comparison, every CHECK_EVERY_S a few stat calls."""
        if self.child is not None:
            if self.child.poll() is None:
                return  # still at work: never two at once
            self._reaped(self.child.returncode)
        if now < self._next:
            return
        self._next = now + self.check_every_s
        size = layout.json_lines_bytes(self.dir)
        behind = size - self._kept_size
        if size < self.min_bytes or behind <= 0 or (
                behind < self.behind_bytes and now < self._kept_at + self.every_s):
            return
        self._kept_size, self._kept_at = size, now
        try:
            self.child = subprocess.Popen(  # an argv list: no shell
                [sys.executable, "-m", KEEPER_MODULE, "--min-bytes", str(self.min_bytes),
                 str(self.dir)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=None,  # the supervisor's own: supervisor.log
                start_new_session=True, close_fds=True, env=numpy_helper_env())
        except OSError as exc:  # no memory for a process now: next time
            self._tell(f"cannot start the cache keeper: {exc}")
            return
        self.started += 1
        if not self._at_exit:
            self._at_exit = True
            atexit.register(self.close)

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
        """Wait for a keeper at work, up to `timeout_s`, then kill it (its appends are only
        counted once its stamp is written: a killed one leaves the cache as it was)."""
        child = self.child
        if child is None:
            return
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        self._reaped(child.returncode)
