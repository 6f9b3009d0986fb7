"""A followed session's long-lived objects kept out of the cyclic garbage collector's way.

Following a run for days, most of the heap is what the first frame built and keeps (Textual's
widgets and styles, the live model, the session's kept state), and what each frame makes
dies young. Python's full collection goes through all of it whenever the objects that
survived younger collections reach a quarter of it: the dashboard at 32 ranks spent 58 ms
every 25 s or so that way (0.17% of a core) going through the same 72 k objects
(tests/bench/bench_dashboard.py). gc.freeze sets what exists aside: the collector no longer
goes through it (reference counting still frees it), and what is made after it is collected
as before. gc.unfreeze gives it back when the session is left, so that what it held in
cycles is collected, not kept for the life of the process.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """After a session's first frame: what is garbage now collected, the rest set aside."""
    gc.collect()
    gc.freeze()


def release() -> None:
    """The session is left: what was set aside is the collector's again."""
    gc.unfreeze()
