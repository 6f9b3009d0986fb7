"""The supervisor's own limit of open files, raised; the job's left as it was.

At 32 ranks the supervisor holds about 200 descriptors: each rank's logs (and their copies
while spooling), its probe file, /proc/PID/stat of each of the job's processes. A trn2 host
of 128 ranks with 4 DataLoader workers each needs some 1,300: past the soft limit of 1,024
most systems give, an open fails (EMFILE), and that log or probe file goes unread. As Go's
runtime does, this process raises its soft limit to the hard one (its waits use poll, not
select, so descriptors past 1,024 are fine), and the job is started with the limit it would
have had bare: what it may open is its own business, not changed by being watched.
"""

from __future__ import annotations

import functools
import resource
from collections.abc import Callable

CAP = 1 << 16
"""At most this many (a hard limit can be a billion): 50 times what 128 ranks need."""


def raise_open_files() -> tuple[int, int] | None:
    """Raise this process's soft limit of open files to the hard one (at most CAP); the
    limits as they were, for the job, or None where nothing changed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = CAP if hard == resource.RLIM_INFINITY else min(hard, CAP)
    if soft != resource.RLIM_INFINITY and target <= soft:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):  # not allowed here: the limit stays as it is
        return None
    return soft, hard


def as_it_was(before: tuple[int, int] | None) -> Callable[[], None] | None:
    """For Popen's preexec_fn: the limits `before` put back in the child before it execs
    (None: nothing to put back). Only a call into the C library runs in the forked child."""
    if before is None:
        return None
    return functools.partial(resource.setrlimit, resource.RLIMIT_NOFILE, before)
