"""Turning what LogFollower read from a log into lines: each line's rank (its log's, the
job's global rank on a node of many, or the prefix of the launcher's combined output), the
ranks' tails, the positions of a bar redrawn with carriage returns, and the lines held until
a rank's global rank is known. Each line then goes to the step recorder (steprecorder.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from neurotui.session.writer import EventWriter
from neurotui.sources.steplog import StepLineParser, strip_rank_prefix
from neurotui.supervisor.followedlogs import _CR, _Followed, _looked_stamps, _Pieces
from neurotui.supervisor.steprecorder import TAIL_LINE_CHARS, LogLines, StepRecorder, capped

if TYPE_CHECKING:
    from collections.abc import Callable

_TAIL_LINES = 20
GLOBAL_RANKS_WAIT_S = 30.0
HELD_LINES_MAX = 10_000
"""A node of a job of many nodes holds each rank's lines until the rank's global rank is known
(the supervisor reads it from the rank's environment within a second or two of its start), at
most this many per log and this long; then they go in under the local rank, and a warning says
so."""


@dataclass
class LineTaker:
    """The lines of the logs LogFollower reads, each recorded by `recorder` (or held)."""

    writer: EventWriter
    parser: StepLineParser
    recorder: StepRecorder
    parse_launcher: bool
    tails: dict[int | None, deque[str]] = field(default_factory=dict)
    line_count: int = 0
    first_line_at: float | None = None
    global_ranks: dict[int, int] | None = None
    """A node of a job of many nodes: its local ranks (as torchrun files their logs) -> the
    job's global ranks (set_global_ranks). None: one node, where the two are the same."""
    held: dict[_Followed, list[tuple[str, float, bool, bool]]] = field(default_factory=dict)
    """Lines of a rank whose global rank is not known yet, with their stamps (see _take)."""
    held_since: float | None = None

    def take_pieces(self, followed: _Followed, pieces: _Pieces,
                    seen: list[tuple[int, float]],
                    count_shared: Callable[[int, int], None]) -> None:
        """A read holding carriage returns (a bar), a look's piece at a time."""
        for size, stamp in seen:
            piece = pieces.upto(size)
            if not piece:
                continue
            lines = piece.count(b"\n")  # the lines this piece completes
            count_shared(lines, max(0, lines - 1))
            self.take_chunk(followed, piece, stamp)

    def take_looked_lines(self, followed: _Followed, start: int, data: bytes,
                          seen: list[tuple[int, float]], figures: list[LogLines],
                          count_shared: Callable[[int, int], None],
                          stamped: tuple[list[float], int] | None = None) -> None:
        """Whole lines without a carriage return (every step line comes this way), read in
        one go from `start` and each stamped with the first look that saw all of it; step
        lines of the short way wait in `figures` (take_lines); `count_shared` is told how
        many lines came and how many shared a stamp. `stamped`: the lines' stamps
        and how many shared one, found as the read was made (_looker.c's read_looked)."""
        whole = followed.pending + data
        cut = whole.rfind(b"\n")
        if cut >= 0:
            stamps, shared = stamped if stamped is not None else \
                _looked_stamps(whole, start - len(followed.pending), seen)
            followed.pending = whole[cut + 1:]
            count_shared(len(stamps), shared)
            text = whole[:cut].decode("utf-8", "replace")
            self.take_lines(followed, text.split("\n"), stamps, figures)
        else:
            followed.pending = whole  # a line still being written
        if followed.pending.endswith(b"]"):
            self.recorder.record(figures)  # those read before it first, in the order read
            self.take_bar_positions(followed, seen[-1][1])

    def take_chunk(self, followed: _Followed, chunk: bytes, now: float,
                   after_step: int | None = None) -> None:
        """The lines of a piece read from `followed` at `now` (its stamp: for a placed log,
        the time of the probe's step `after_step`), and the positions of a bar redrawn with
        carriage returns after them."""
        if not followed.parsed and _CR not in chunk and _CR not in followed.pending:
            # The usual piece (every step line comes this way): whole lines without a
            # carriage return, each one position, taken without looking for positions.
            raw_lines = followed.split(chunk)
            if raw_lines:
                text = b"\n".join(raw_lines).decode("utf-8", "replace")
                self.take_lines(followed, text.split("\n"), [now] * len(raw_lines), None,
                                None if after_step is None else [after_step] * len(raw_lines))
            if not followed.pending.endswith(b"]"):
                return  # and no carriage return waits: no bar position to take yet
        else:
            for raw in followed.split(chunk):
                if followed.parsed:  # only the first line can hold positions parsed before
                    rest = raw[followed.parsed:]
                    followed.parsed = 0
                    if not rest.strip(b"\r \t"):
                        # Every position was parsed as it came: the line's last goes to the
                        # tail.
                        last = raw.decode("utf-8", errors="replace").rstrip("\r")
                        self._take(last.rsplit("\r", 1)[-1], followed, now, parse=False)
                    else:
                        self._take_positions(rest.decode("utf-8", errors="replace"),
                                             followed, now, whole_line=True)
                    continue
                self._take_positions(raw.decode("utf-8", errors="replace"), followed, now,
                                     whole_line=True)
        self.take_bar_positions(followed, now)

    def take_bar_positions(self, followed: _Followed, now: float) -> None:
        """A bar redrawn with carriage returns: its positions so far, without waiting for the
        newline that comes at the end of the epoch."""
        cut = followed.pending.rfind(b"\r")
        if followed.pending.endswith(b"]"):
            # tqdm draws "\r" then the bar, closed by "]": the newest position is whole now.
            cut = len(followed.pending)
        if cut >= followed.parsed:
            positions = followed.pending[followed.parsed:cut]
            self._take_positions(positions.decode("utf-8", errors="replace"), followed, now,
                                 whole_line=False)
            followed.parsed = cut + 1

    def _take_positions(self, text: str, followed: _Followed, now: float, *,
                        whole_line: bool) -> None:
        """One line's text, or the positions a bar drew on it with carriage returns."""
        if "\r" not in text:
            self._take(text, followed, now, keep_in_tail=whole_line)
            return
        positions = [p for p in text.split("\r") if p.strip()]
        for i, position in enumerate(positions):
            self._take(position, followed, now,
                       keep_in_tail=whole_line and i == len(positions) - 1)

    def set_global_ranks(self, mapping: dict[int, int]) -> None:
        """This node's local ranks -> the job's global ranks (supervisor/globalranks.py);
        the lines held for want of it are taken now, with the stamps they were read at."""
        self.global_ranks = dict(mapping)
        for followed in [f for f in self.held if f.rank in mapping]:
            for line, stamp, keep_in_tail, parse in self.held.pop(followed):
                self._take(line, followed, stamp, keep_in_tail=keep_in_tail, parse=parse)
        if not self.held:
            self.held_since = None

    def release_held(self, now: float, final: bool) -> None:
        """The global ranks did not come (the ranks' environments could not be read) in
        GLOBAL_RANKS_WAIT_S, or the job ended: the held lines go in under their local ranks,
        and the session says so."""
        if self.held_since is None or \
                (not final and now - self.held_since < GLOBAL_RANKS_WAIT_S):
            return
        held, since = self.held, self.held_since
        self.held, self.held_since = {}, None
        mapping = self.global_ranks
        self.global_ranks = None  # from now on, local ranks
        for followed, lines in held.items():
            for line, stamp, keep_in_tail, parse in lines:
                self._take(line, followed, stamp, keep_in_tail=keep_in_tail, parse=parse)
        self.global_ranks = mapping
        self.writer.write("warning", t=now, source="ranks", message=(
            f"the job's global ranks of this node's ranks "
            f"{sorted(f.rank for f in held if f.rank is not None)} are unknown after "
            f"{now - since:.0f} s (their environments could not be read): their log lines "
            "are recorded under their local ranks"))

    def take_lines(self, followed: _Followed, lines: list[str], stamps: list[float],
                   figures: list[LogLines] | None = None,
                   after_steps: list[int | None] | None = None) -> None:
        """Whole lines of one log, each with its stamp: kept in its rank's tail and parsed in
        one batch (what _take does a line at a time, without its per-line costs). Step lines
        of the short way are recorded, or wait in `figures` for the caller to record
        (StepRecorder.record) with other logs'; what is recorded otherwise comes after them.
        `after_steps`: a placed log's, the probe's step each line was printed after."""
        rank = followed.rank
        if (rank is None and self.parse_launcher) or (rank is not None and \
                self.global_ranks is not None and rank not in self.global_ranks):
            # The launcher's ranks are in each line's prefix; a rank's global rank is not
            # known yet (its lines are held): a line at a time.
            if figures:
                self.recorder.record(figures)
            for i, (line, stamp) in enumerate(zip(lines, stamps, strict=True)):
                self._take(line, followed, stamp,
                           after_step=None if after_steps is None else after_steps[i])
            return
        if rank is not None and self.global_ranks is not None:
            rank = self.global_ranks[rank]
        tail = self.tails.get(rank)
        if tail is None:
            tail = self.tails[rank] = deque(maxlen=_TAIL_LINES)
        last = lines[-_TAIL_LINES:]  # only the last lines stay anyway
        tail.extend(last if max(map(len, last), default=0) <= TAIL_LINE_CHARS
                    else map(capped, last))
        self.line_count += len(lines)
        if self.first_line_at is None:
            self.first_line_at = stamps[0]
        if followed.rank is None:
            return  # torchrun's console: the rank files are parsed instead
        # A placed log's rank is timed by the probe's steps, which the stall watch has: it
        # prefers them to log lines, so it is not told of each line as well.
        watched = not followed.placed
        if figures is None:
            self.recorder.record([(lines, stamps, rank, watched, after_steps)])
        else:
            figures.append((lines, stamps, rank, watched, after_steps))  # with the others'

    def _take(self, line: str, followed: _Followed, now: float, *,
              keep_in_tail: bool = True, parse: bool = True,
              after_step: int | None = None) -> None:
        rank = followed.rank
        if rank is not None and self.global_ranks is not None:
            global_rank = self.global_ranks.get(rank)
            if global_rank is None:
                held = self.held.setdefault(followed, [])
                if len(held) < HELD_LINES_MAX:
                    held.append((line, now, keep_in_tail, parse))
                    if self.held_since is None:
                        self.held_since = now
                    return
            else:
                rank = global_rank
        if rank is None and self.parse_launcher:
            rank, line = strip_rank_prefix(line)  # a plain command: ranks only by prefix
        if keep_in_tail:  # a bar's every redraw would push the real last lines out
            tail = self.tails.get(rank)
            if tail is None:
                tail = self.tails[rank] = deque(maxlen=_TAIL_LINES)
            tail.append(line if len(line) <= TAIL_LINE_CHARS else capped(line))
            self.line_count += 1
            if self.first_line_at is None:
                self.first_line_at = now
        if not parse or (followed.rank is None and not self.parse_launcher):
            return  # torchrun's console: the rank files are parsed instead
        self.recorder.record_line(self.parser.parse_values(line), rank, line, now, after_step)

    def tail_lines(self) -> dict[str, list[str]]:
        return {("launcher" if k is None else str(k)): list(v) for k, v in self.tails.items()}
