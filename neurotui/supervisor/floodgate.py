"""A flood of output is shed on purpose, never by falling behind.

A job printing 50 MB/s outran the log follower (it handles 10 to 20 MB/s of 100-byte lines on
the dev VM, at a third to a half of a core: each line is decoded, kept in a tail and parsed):
the spool in RAM grew to 600 MB, every step line came seconds late (a false stall alert for
most of the run), and the session kept every byte. So:

- a log more than `behind_max` behind is skipped ahead: the skipped bytes are not copied into
  the session and their spool memory is given back, but they are scanned first for the lines
  a step or compile line needs one of the words of (the parser's own screen, `_PREFILTER`;
  each user pattern searched for itself), and those lines are taken as if read (stamped by
  where they stood between the looks at the log); the log says what was skipped, there.
  While the flood lasts (the log was skipped at the last poll) it is skipped again once
  `flooding_behind_max` behind, and a poll does not read on past a read a take: following a
  flood costs a core, skipping it a fraction of one (tests/bench/bench_flood.py);
- the session's copies of the logs together keep at most `cap` bytes (`neurotui run
  --log-cap`); past it their output is dropped, and the log says so where it was cut and, at
  the end, how much.

Both are counted for meta.json (`log_dropped`) and said once each in a warning event.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neurotui.sources.steplog import _PREFILTER
from neurotui.supervisor import spool
from neurotui.supervisor.followedlogs import _Followed, _written_at
from neurotui.supervisor.logcap import DEFAULT_LOG_CAP, LogCap, size_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from neurotui.session.writer import EventWriter
    from neurotui.supervisor.stepoffsets import StepOffsets

try:  # several words looked for in one pass (Rust, SIMD): 0.5 GB/s against 45 MB/s for 19 finds
    from ahocorasick_rs import BytesAhoCorasick, Implementation
except ImportError:  # not installed: a find over the bytes for each word
    BytesAhoCorasick = Implementation = None

BEHIND_MAX = 32 << 20
"""A log the follower is more than this behind is skipped ahead to its last RESUME_BYTES:
the spool then holds about this much of it plus a poll's worth (a second of output)."""
FINAL_BEHIND_MAX = 16 << 20
"""At the job's exit, what is left to read is skipped down to this: the run is said to be over
within a second of its end (about 0.5 s of reading here), not after the follower worked
through the rest; a job printing 10 MB/s is less than this behind between two polls."""
FLOODING_BEHIND_MAX = 2 << 20
"""A log skipped ahead at the last poll is skipped again once this much behind: following a
flood costs a core (about 36 MB/s of 100-byte lines here), skipping it a twentieth of that."""
RESUME_BYTES = 1 << 20
"""After a skip, this much of a log's end is read as usual, each line stamped as it was seen."""
SCAN_BYTES = 8 << 20
"""Skipped bytes are scanned for step lines this much at a time."""
COMPILE_WORDS = ("ompiler", "neff", "_WRAPPER||", "RunNeuronCCImpl", "exit status",
                 "neuronx-cc terminated", "recompiled")
"""A word each of the compile lines classify_compile knows holds (its own first tests)."""


def skip_line(skipped: int, kept_lines: int) -> bytes:
    """Written into a log where it was skipped ahead."""
    kept = f"; the {kept_lines} step and compile lines in it follow" if kept_lines else \
        "; no step or compile line was in it"
    return (f"[neurotui: {size_text(skipped)} of output dropped here: the supervisor fell "
            f"behind the job's output (a flood of it){kept}]\n").encode()


@dataclass
class FloodGate:
    """The follower's limits on a flood (see the module's docstring), and what they dropped."""

    cap: LogCap = field(default_factory=lambda: LogCap(DEFAULT_LOG_CAP))
    behind_max: int = BEHIND_MAX
    final_behind_max: int = FINAL_BEHIND_MAX
    flooding_behind_max: int = FLOODING_BEHIND_MAX
    step_patterns: tuple[str, ...] = ()
    """The user's --step-pattern regexes: each searched for in skipped bytes itself."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Bytes skipped ahead of, per log (its session name)."""
    skips: int = 0
    told_cap: bool = False  # the cap's warning was written
    kept_lines: int = 0  # lines taken out of skipped bytes (step and compile line candidates)
    _words: tuple[bytes, ...] = ()
    _patterns: list[re.Pattern[bytes] | None] = field(default_factory=list)
    _matcher: object = None

    def __post_init__(self) -> None:
        self._words = tuple(word.encode() for word in (*_PREFILTER, *COMPILE_WORDS))
        if BytesAhoCorasick is not None:
            self._matcher = BytesAhoCorasick(list(self._words),
                                             implementation=Implementation.DFA)
        for pattern in self.step_patterns:
            try:  # the same regex over bytes, a line's ^ and $ at each line
                self._patterns.append(re.compile(pattern.encode(), re.MULTILINE))
            except (re.error, ValueError):
                self._patterns.append(None)  # every line of skipped bytes is then taken

    def candidates(self, data: bytes) -> list[tuple[int, int]]:
        """The (start, end) of each line of `data` (whole lines) a step or compile line could
        be, in order: each holds a word the parser's rules need, or a user pattern's match
        starts in it."""
        starts: dict[int, int] = {}
        find = data.find
        if self._matcher is not None:
            end = -1
            for _, at, _ in self._matcher.find_matches_as_indexes(data):  # type: ignore[attr-defined]
                if at > end:  # (not a second word of the line just taken)
                    start, end = _line_span(data, at)
                    starts[start] = end
        else:
            for word in self._words:
                at = find(word)
                while at >= 0:
                    start, end = _line_span(data, at)
                    starts[start] = end
                    at = find(word, end)
        for pattern in self._patterns:
            if pattern is None:
                return _all_lines(data)
            at = 0
            while (match := pattern.search(data, at)) is not None:
                start, end = _line_span(data, match.start())
                starts[start] = end
                at = end + 1  # a match across lines does not hide the next line's own
        return sorted(starts.items())

    @property
    def dropped(self) -> dict[str, object] | None:
        """What was dropped, for meta.json's `log_dropped` (None: nothing)."""
        skipped = sum(self.skipped.values())
        if not skipped and not self.cap.dropped:
            return None
        return {"skipped_bytes": skipped, "skips": self.skips,
                "skipped_lines_kept": self.kept_lines, "skipped_by_log": dict(self.skipped),
                "over_cap_bytes": self.cap.dropped, "cap_bytes": self.cap.limit,
                "cap_reached_at": self.cap.reached_at}


def _line_span(data: bytes, at: int) -> tuple[int, int]:
    """The (start, end) of the line of `data` that holds offset `at` (its end: the newline's
    offset, or the end of `data` for a last line without one)."""
    end = data.find(b"\n", at)
    return data.rfind(b"\n", 0, at) + 1, len(data) if end < 0 else end


def _all_lines(data: bytes) -> list[tuple[int, int]]:
    spans, start = [], 0
    for end in (m.start() for m in re.finditer(b"\n", data)):
        spans.append((start, end))
        start = end + 1
    if start < len(data):
        spans.append((start, len(data)))
    return spans


def interpolated_stamps(ends: list[int], anchors: list[tuple[int, float]]) -> list[float]:
    """Each line's stamp from where it ends (`ends`, offsets in the file) and `anchors`
    ((offset, time) pairs in order: how far the log was written at each look at it): read off
    the line between the two anchors around it, as a steady flood writes."""
    offsets = [offset for offset, _ in anchors]
    stamps = []
    for end in ends:
        i = bisect_left(offsets, end)
        if i >= len(anchors):
            stamps.append(anchors[-1][1])
        elif i == 0 or offsets[i] == end:
            stamps.append(anchors[i][1])
        else:
            (lo, lo_t), (hi, hi_t) = anchors[i - 1], anchors[i]
            stamps.append(lo_t + (hi_t - lo_t) * (end - lo) / (hi - lo))
    return stamps


def skip_ahead(flood: FloodGate, followed: _Followed, size: int, modified_ns: int,
               now: float, *, take_lines: Callable[..., None], writer: EventWriter,
               offsets: StepOffsets | None, deferred: list[_Followed]) -> None:
    """Skip `followed` ahead to a line's end near RESUME_BYTES before `size`: the bytes
    skipped are scanned for the lines a step or compile line could be, which are taken as
    read (and kept in the session's copy, after a line saying what was dropped); the
    rest is neither taken nor copied, and its spool memory is given back."""
    assert followed.fd is not None
    # Where each look saw the log end, and when: the stamps of the lines kept.
    anchors = sorted(look for look in [*followed.looks, followed.flood_mark]
                     if look is not None and look[0] > followed.offset)
    anchors.append((size, _written_at(modified_ns, now, followed.grew_at)))
    for i in range(1, len(anchors)):  # (a look's stamp and a file's time: never back)
        if anchors[i][1] < anchors[i - 1][1]:
            anchors[i] = (anchors[i][0], anchors[i - 1][1])
    start, until = followed.offset, size - RESUME_BYTES
    pending, parsed = followed.pending, followed.parsed
    head, target, kept = pending, start, []
    while start < until:
        chunk = os.pread(followed.fd, min(SCAN_BYTES, until - start), start)
        if not chunk:
            break
        data, base = head + chunk, start - len(head)  # base: where `data` begins
        start += len(chunk)
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) <= SCAN_BYTES:
            head = data  # no line ends in it yet: it goes on in the next scan
            continue
        cut = cut or len(data)  # a line longer than a scan: its start is dropped
        head, data, target = data[cut:], data[:cut], base + cut
        spans = flood.candidates(data)
        if spans:
            lines = [data[a:b] for a, b in spans]
            stamps = interpolated_stamps([base + b for _, b in spans], anchors)
            followed.pending, followed.parsed = b"", 0
            take_lines(followed, [line.decode("utf-8", "replace") for line in lines],
                             stamps)
            kept += lines
    skipped = target - followed.offset
    if skipped <= 0:  # not one line ended in what could be skipped: read on as usual
        followed.pending, followed.parsed = pending, parsed
        return
    followed.pending, followed.parsed = b"", 0  # (the line after `target` is read again)
    # The session's copy: what it had, the line saying what was dropped, the lines kept.
    if followed.copy is not None:
        followed.copy.flush(now)
        dropped = skipped - sum(len(line) + 1 for line in kept)
        # (on a line of its own, after the part of a line the copy has)
        followed.copy.add(b"\n" * bool(pending) + skip_line(dropped, len(kept)), now)
        followed.copy.write(b"".join(line + b"\n" for line in kept), now)  # (capped)
    followed.offset = target
    followed.seen = max(followed.seen, target)
    followed.looks = [look for look in followed.looks if look[0] > target]
    if not followed.looks:  # what is left is read at this poll, as usual
        followed.behind = True
        if followed in deferred:
            deferred.remove(followed)
    followed.held.clear()
    if offsets is not None and followed.ident is not None and followed.ident in offsets:
        offsets.forget_before(followed.ident, target)
    if followed.copy is not None:
        upto = target - target % 4096  # whole pages only
        if upto > followed.freed and spool.punch_hole(followed.fd, followed.freed, upto):
            followed.freed = upto
    if followed.name not in flood.skipped:
        flood.skipped[followed.name] = 0
        writer.write("warning", t=now, source="logs", message=(
            f"{followed.name}: the job prints faster than the supervisor reads (a flood "
            f"of output): {size_text(skipped)} of it skipped, its {len(kept)} step and "
            f"compile lines kept; it skips ahead whenever it is more than "
            f"{size_text(flood.behind_max)} behind ({size_text(flood.flooding_behind_max)} "
            "while the flood lasts), and says so in the log (meta.json's log_dropped "
            "counts it all)"))
    flood.skipped[followed.name] += skipped
    flood.skips += 1
    flood.kept_lines += len(kept)
