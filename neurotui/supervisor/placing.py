"""Placing the lines of a log by the automatic probe's steps: its records say where the
rank's stdout and stderr stood at each step (stepoffsets.py), so each line read at a poll is
given the time of the step it was printed after, and its record names that step
(`after_step`): its loss goes with that step.
LogFollower decides which logs are placed (_place_new_logs) and when they are read.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import TYPE_CHECKING

from neurotui.supervisor.followedlogs import _CR, _MAX_READ, _Followed, _line_ends, _written_at

if TYPE_CHECKING:
    from collections.abc import Callable

    from neurotui.supervisor.logtakes import LineTaker
    from neurotui.supervisor.stallwatch import StallWatch
    from neurotui.supervisor.steprecorder import LogLines, StepRecorder

PLACE_AFTER_S = 0.5
"""A line of a log placed by the probe's steps (read_placed) that no later step bounds yet is
placed once the probe files were read this long after the line was: the probe writes a step
within 50 ms of it, so every step done before the line was printed is known by then."""


def read_placed(followed: _Followed, now: float, final: bool, figures: list[LogLines], *,
                stalls: StallWatch, taker: LineTaker, recorder: StepRecorder,
                cannot_open: Callable[[OSError, float], None]) -> bool:
    """What a placed log gained (LogFollower._place_new_logs): each complete line stamped with
    the time of the probe's last step before it was printed, once that step is sure: a later
    step is known, or the probe files were read PLACE_AFTER_S after the line was, or the
    job has exited. The lines after it wait in `pending` for the next poll (not marked
    read: an adopting supervisor reads them again). True when there may be more (a full
    read)."""
    assert followed.ident is not None
    before = followed.offset
    try:
        chunk = followed.read_chunk(now)
    except OSError as exc:
        cannot_open(exc, now)
        return False
    if chunk:
        followed.held.append((followed.offset, now))
    elif not followed.pending:
        # Nothing new, nothing waiting (a rank's quiet stderr, half of the placed logs):
        # its steps need no forgetting either, as a step printing nothing replaces the one
        # before it (StepOffsets.add_many).
        return False
    offsets, ident = stalls.offsets, followed.ident
    whole = followed.pending + chunk
    if followed.parsed or _CR in whole or ident not in offsets:
        # A bar redrawn with carriage returns (or steps forgotten at a new attempt): all
        # of it at once, stamped by the last step before the read's end.
        (stamp,), (after_step,), *_ = offsets.place_all(ident, [followed.offset]) \
            if ident in offsets else ((None,), (None,))
        if stamp is None:
            stamp = _written_at(followed.modified_ns, now, followed.grew_at)
        followed.held.clear()
        recorder.record(figures)  # those read before it first, in the order read
        taker.take_chunk(followed, chunk, stamp, after_step)
        return followed.offset - before >= _MAX_READ
    base = followed.offset - len(whole)  # where `whole` begins in the file
    read_at = stalls.read_at
    ripe = math.inf if final else max(
        (end for end, read in followed.held if read + PLACE_AFTER_S <= read_at), default=-1)
    ends = _line_ends(whole, base)
    times, after_steps, first, bounded = offsets.place_all(ident,
                                                           [base, *ends[:-1]] if ends else [])
    # The lines a later step bounds, and those the probe was read long enough after
    # (both the first ones): the rest wait, as a step not read yet may come first.
    take = max(bounded, bisect_right(ends, ripe))
    start = ends[take - 1] if take else base
    if take:
        # A line printed before the first step known: just before it.
        stamps = [min(now, first - 1e-6) if t is None else t for t in times[:take]]
        lines = whole[:start - base - 1].decode("utf-8", "replace").split("\n")
        taker.take_lines(followed, lines, stamps, figures, after_steps[:take])
        followed.held = [mark for mark in followed.held if mark[0] > start]
    offsets.forget_before(ident, start)  # (at every poll: a quiet stderr's steps too)
    followed.pending = whole[start - base:]
    if not followed.held and followed.pending.endswith(b"]"):
        recorder.record(figures)
        taker.take_bar_positions(followed, now)
    return followed.offset - before >= _MAX_READ
