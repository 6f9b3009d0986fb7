"""Waiting for a session's meta.json to change: the run's end is written there.

A follower that prints the run's figures (--headless) sleeps between its reads, and must
still return within a few hundredths of a second of the job's exit. Looking at the file's
time twenty times a second did that, at twenty wakeups a second for as long as the run
lasts (on the dev VM about 0.2% of a core for the waits alone). The kernel says instead
(inotify, through inotify_simple) when a file of the session's folder is written or renamed
into place (meta.json is replaced whole: writer.write_json_atomic); where it cannot (not
Linux, no watches left) the file's time is looked at as before.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

CHECK_S = 0.05
"""Without inotify: how often the file's time is looked at."""


class MetaWait:
    """Sleeps until `meta` changes, or a given time passes."""

    def __init__(self, meta: Path) -> None:
        self.meta = meta
        self._inotify = None
        try:
            from inotify_simple import INotify, flags  # Linux only

            inotify = INotify()
            try:
                # The session's folder, not the file: a rename over it (the usual write)
                # leaves a watch on the old file's inode saying nothing more.
                inotify.add_watch(meta.parent, flags.MOVED_TO | flags.CLOSE_WRITE)
            except OSError:  # no watches left, or the folder is gone
                inotify.close()
            else:
                self._inotify = inotify
        except (ImportError, OSError):
            pass

    @property
    def kernel_says(self) -> bool:
        """Whether the kernel wakes the wait (else it looks every CHECK_S)."""
        return self._inotify is not None

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds`, or less: until meta.json changes. True when it did."""
        if self._inotify is None:
            return self._wait_looking(seconds)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            # Other files of the folder (the cache, its temporary files) wake it too.
            events = self._inotify.read(timeout=max(1, round(left * 1000)))
            if any(event.name == self.meta.name for event in events):
                return True
        return False

    def _wait_looking(self, seconds: float) -> bool:
        before, deadline = self._stamp(), time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(CHECK_S, left))
            if self._stamp() != before:
                return True
        return False

    def _stamp(self) -> int | None:
        try:
            return self.meta.stat().st_mtime_ns
        except OSError:
            return None

    def close(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(OSError):
                self._inotify.close()
            self._inotify = None
