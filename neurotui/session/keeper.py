"""The cache keeper: keeps a recording session's columnar cache (cache.py) current.

The supervisor must stay light (no numpy, no reader), so it starts this as a child process
while the job runs, once the session holds enough JSON lines to be worth a cache and again
after every 8 MiB more (supervisor/cachekeeping.py): `python -m neurotui.session.keeper
SESSION_DIR`. So the first attach, replay or compare of a day-long run restores the cache and
reads at most those last megabytes itself, instead of parsing a gigabyte. An adopting
supervisor's keeper goes on from the stamp the last one wrote: nothing is lost when a
supervisor dies.

Each run:
- no valid cache (and enough JSON lines): a reader parses the session and writes one;
- a valid cache: a reader resumed at the cache's offsets (SessionReader.resumed) reads what
  was appended since, and its steps, phase rows and event index entries are appended to the
  cache (cache.append) under a new stamp. Memory and time follow what was appended since the
  last run, not the session's length;
- a better step source appeared for a rank (rows already cached must go, as take_steps says
  by handing out None): the cache is rebuilt from the files.

A log line's loss lands on the automatic probe's step just before it (stepsources.put_log_losses);
when that step is already cached, the keeper writes the loss into the cached row, so that the
cache holds what a reader parsing every file at once takes.

Served (`--serve`, as the supervisor starts it): after its first run the keeper stays, and
runs again at each word the supervisor writes to its stdin, until that closes. Starting an
interpreter and loading numpy and the reader is most of what a run costs (0.13-0.16 CPU-s,
against 0.01-0.03 for the run itself on an up-to-date cache), so a keeper that stays pays it
once. Each run is done by a forked worker, which takes whatever memory the run needed with it
when it exits: the keeper that stays holds only its modules (36 MB resident, 19 MB of it its
own), never the memory of a build.

Best effort throughout, as the cache is: it never raises out of `main`, exits 0 even when it
did nothing, and says on stderr (the supervisor's log) only what is worth knowing.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurotui.session import cache, layout
from neurotui.session.columns import Columns
from neurotui.session.reader import (
    _INDEXED_KINDS,
    _MAX_BAD_LOCATIONS,
    SessionReader,
    location_order,
)
from neurotui.session.stepsources import AUTO, STEP_SOURCES

SEARCH_ROWS = 1 << 16
"""Cached rows read at a time, from the end, looking for the step a late log line's loss
belongs to (it is nearly always among the last)."""
USAGE = "usage: python -m neurotui.session.keeper [--serve] [--min-bytes N] SESSION_DIR"
SERVE = "--serve"


def keep(session_dir: Path | str, *, min_bytes: int | None = None) -> str:
    """Bring the session's cache up to date with its files; returns what it did (for the
    log). `min_bytes`: no cache is built below this much JSON lines (cache.MIN_SOURCE_BYTES).
    """
    return _keep(Path(session_dir), min_bytes)[0]


def _keep(d: Path, min_bytes: int | None) -> tuple[str, bool]:
    """What it did, and whether that is worth a line in the log."""
    threshold = cache.MIN_SOURCE_BYTES if min_bytes is None else min_bytes
    if cache.state(d, STEP_SOURCES) is None:
        size = layout.json_lines_bytes(d)
        if size < threshold:
            return f"not cached: {size:,} bytes of JSON lines, under {threshold:,}", False
    with cache.keeper_lock(d) as mine:
        if not mine:
            return "another keeper is at work, or no cache folder can be made", False
        found = cache.state(d, STEP_SOURCES)  # again: the last keeper may have just written
        if found is None:
            return _build(d, "no valid cache")
        if found.kinds != list(_INDEXED_KINDS):
            return _build(d, "a cache of other event kinds")
        return _append(d, found)


def _build(d: Path, why: str) -> tuple[str, bool]:
    reader = SessionReader(d, telemetry_history=0)
    reader.rebuilds_cache = True
    reader.poll()
    if reader.cache_state != "written":
        return f"could not write the cache ({why})", True
    return (f"built the cache ({why}): {len(reader.step_columns()):,} steps, "
            f"{sum(t.taken for t in reader._tails.values()):,} bytes read"), True


def _append(d: Path, found: cache.CacheState) -> tuple[str, bool]:
    reader = SessionReader.resumed(d, found)
    # The first locations in file order are kept: those of this read are merged in below.
    known_locations = list(reader.problems.locations)
    reader.problems.locations.clear()
    reader.poll()
    losses = list(reader.table.log_losses)
    taken = reader.take_steps()
    if taken is None:
        return _build(d, "a better step source appeared for a rank")
    taken = taken.joined()
    stamped = reader.stamps_and_index(cached=len(found.sources))
    if stamped is None:
        return "a file could not be stamped: not appended", True
    sources, index = stamped
    if len(sources) == len(found.sources) and all(
            new.offset == old.offset for new, old in zip(sources, found.sources, strict=True)):
        return "up to date", False
    placed = _place_cached_losses(d, found, _losses_for_cached_rows(losses, taken.steps))
    problems = reader.problems.record()
    problems["locations"] = sorted(known_locations + problems["locations"],
                                   key=location_order)[:_MAX_BAD_LOCATIONS]
    if not cache.append(
            d, found, steps=taken.steps, phases=taken.phases, events=index, sources=sources,
            problems=problems, rank_sources=reader.rank_sources(),
            samples_from=sorted(reader.samples_from)):
        return "could not append to the cache (rewritten meanwhile, or a full disk)", True
    return (f"appended {len(taken.steps):,} steps, {len(taken.phases):,} phase rows, "
            f"{len(index):,} events; {placed} cached losses placed"), False


def _losses_for_cached_rows(losses: Sequence[tuple[float, int, float]], steps: Columns
                            ) -> list[tuple[float, int, float]]:
    """Of the log lines' losses read (t, rank, loss), those whose automatic-probe step is not
    among the new rows (take_steps placed the others): it is in the cache, or nowhere."""
    if not losses:
        return []
    auto = np.asarray(steps["src"]) == AUTO
    first: dict[int, float] = {}
    for rank, t in zip(steps["rank"][auto].tolist(), steps["t"][auto].tolist(), strict=True):
        first.setdefault(rank, t)  # rows in time order: the first is the earliest
    return [loss for loss in losses if first.get(loss[1], math.inf) > loss[0]]


def _place_cached_losses(d: Path, found: cache.CacheState,
                         losses: Sequence[tuple[float, int, float]]) -> int:
    """Each loss onto the cached automatic-probe row of its rank just before it, where that
    row has none yet (as stepsources.put_log_losses over the whole table); returns how many.

    The cached rows of one rank and source are in time order (each append's after the last),
    so the row is the last such one with t <= the loss's: looked for from the end, a block of
    SEARCH_ROWS at a time."""
    if not losses:
        return 0
    wanted = dict(enumerate(losses))
    target: dict[int, tuple[int, float]] = {}  # loss -> (row, its cached loss)
    stop = found.rows["steps"]
    while wanted and stop > 0:
        start = max(0, stop - SEARCH_ROWS)
        rows = cache.read_rows(d, found, "steps", ("t", "rank", "src", "loss"), start, stop)
        if rows is None:
            return 0
        auto = rows["src"] == AUTO
        for i, (t, rank, _) in list(wanted.items()):
            mine = np.flatnonzero(auto & (rows["rank"] == rank))
            before = mine[rows["t"][mine] <= t]
            if len(before):
                row = int(before[-1])
                target[i] = (start + row, float(rows["loss"][row]))
                del wanted[i]
        stop = start
    loss_of: dict[int, float] = {}
    at, values = [], []
    for i, (_, _, value) in enumerate(losses):  # in the order read: the first one wins
        if i not in target:
            continue
        row, cached = target[i]
        if math.isnan(loss_of.get(row, cached)):
            loss_of[row] = value
            at.append(row)
            values.append(value)
    if not at or not cache.write_values(d, found, "steps", "loss", at, values):
        return 0
    return len(at)


def main(argv: list[str] | None = None) -> int:
    with contextlib.suppress(OSError):
        os.nice(10)  # beside training: the cache waits, the job does not
    args = sys.argv[1:] if argv is None else list(argv)
    served = SERVE in args[:1]
    if served:
        args = args[1:]
    min_bytes = None
    if len(args) == 3 and args[0] == "--min-bytes" and args[1].isdigit():
        min_bytes, args = int(args[1]), args[2:]
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    if served:
        _serve(args[0], min_bytes)
    else:
        _run(args[0], min_bytes)
    return 0


def _run(session_dir: str, min_bytes: int | None) -> None:
    """One run, told in the supervisor's log when worth it; never raises."""
    try:
        what, worth_saying = _keep(Path(session_dir), min_bytes)
    except Exception as exc:  # a bug, a file that vanished...: the next run tries again
        what, worth_saying = f"failed: {exc!r}", True
    if worth_saying:
        print(f"neurotui cache keeper: {session_dir}: {what}", file=sys.stderr, flush=True)


def _serve(session_dir: str, min_bytes: int | None) -> None:
    """A run now, and one more each time stdin has words (all those written meanwhile ask
    for one run), until it closes: the supervisor left, or has had nothing to ask for a
    while (cachekeeping.LINGER_S)."""
    # Loaded here once, not by every worker: np.unique loads numpy.ma at its first call (8 ms,
    # a third of a run with nothing to append).
    import numpy.ma  # noqa: F401
    while _run_in_worker(session_dir, min_bytes):
        try:
            asked = os.read(0, 4096)
        except OSError:
            return
        if not asked:
            return


def _run_in_worker(session_dir: str, min_bytes: int | None) -> bool:
    """A run in a forked child, waited for; False where none could be forked (the run was
    then done here, and this process, grown by it, should end)."""
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"neurotui cache keeper: cannot fork a worker ({exc}): one run in the keeper",
              file=sys.stderr, flush=True)
        _run(session_dir, min_bytes)
        return False
    if pid == 0:  # the worker
        try:
            _run(session_dir, min_bytes)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return True


if __name__ == "__main__":
    sys.exit(main())
