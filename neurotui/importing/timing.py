"""How an imported run's steps are timed, and how finely: pure functions.

A saved log's step gets its time from what its line prints, in this order: a printed
date-time (the parser's stamps, and a syslog-like `May 01 12:00:03` here), a printed step time
or throughput (times added up from the start), else none (steps counted, never timed). A date
printed to the second is 1 s resolution: a step time read from two such stamps is off by up
to a second, so each step's `dt` is then the time over a span of steps long enough that the
second is a small share of it (`span_step_times`).
"""

from __future__ import annotations

import itertools
import math
import re
from datetime import datetime

import numpy as np

from neurotui.sources.steplog.text import _printed_time, strip_rank_prefix

PRINTED_DATE = "printed date-time"
PRINTED_STEP_TIME = "printed step time"
PRINTED_THROUGHPUT = "printed throughput"
TENSORBOARD_WALL_TIME = "tensorboard wall time"
CLOUDWATCH_TIMESTAMP = "cloudwatch timestamp"
NO_TIMES = "none"
TIMED_BY = (PRINTED_DATE, PRINTED_STEP_TIME, PRINTED_THROUGHPUT, TENSORBOARD_WALL_TIME,
            CLOUDWATCH_TIMESTAMP, NO_TIMES)
"""meta.json's `imported.times` (FORMAT.md)."""

SPAN_SHARE = 0.02
"""The resolution's share of a span's time at most: a step time read over a span of steps
`resolution / SPAN_SHARE` long is off by 2% at most (50 s of steps at 1 s resolution)."""

_SYSLOG_RE = re.compile(
    r"\s*(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(\d{1,2}) "
    r"(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?(?!\d)")
_INDEX_PREFIX_RE = re.compile(r"^\[\d{1,7}\]:")
_MONTHS = {name: n for n, name in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def line_stamp(line: str, year: int) -> float | None:
    """Unix seconds of the date-time printed at the start of `line` (local time where it
    names no zone), or None. The parser's forms (ISO, `[2024-05-01 12:00:03,123]`, asctime,
    US dates), then syslog's `May 01 12:00:03`, which prints no year: `year` is taken."""
    # A launcher's prefix (`[rank0]:`, TorchX's `[0]:`) is no part of the stamp's line.
    line = _INDEX_PREFIX_RE.sub("", strip_rank_prefix(line)[1], count=1)
    stamp = _printed_time(line)
    if stamp is not None or ":" not in line[:40]:
        return stamp
    m = _SYSLOG_RE.match(line)
    if m is None:
        return None
    month, day, hh, mm, ss, frac = m.groups()
    try:
        when = datetime(year, _MONTHS[month], int(day), int(hh), int(mm), int(ss),
                        int((frac or "0").ljust(6, "0")))
        return when.timestamp()
    except (ValueError, OverflowError, OSError):
        return None


_ISO_HEAD_RE = re.compile(
    r"\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](\d{1,6}))?(?![\dZ+\-.,])")


class Stamps:
    """line_stamp for every line of a log, with its date and time to the second read once
    per second of the run: an ISO stamp without a zone at the line's start (Python logging's
    `2024-05-01 12:00:03,123`), read by the parser's rule for its head and its fraction added
    here; any other line goes to line_stamp. A million lines' stamps in about a second."""

    def __init__(self, year: int) -> None:
        self.year = year
        self._seconds: dict[str, float | None] = {}
        self.fraction_digits = 0
        """The most digits of a second printed (3: milliseconds), read the short way."""
        self.head_end = 0
        """Where the last line's stamp read the short way ended (0: not read so)."""

    def resolution(self, stamps: list[float]) -> float:
        """How finely the stamps were printed: by the digits of a second printed where the
        short way read them (a run whose steps fall on round times is still printed to
        the millisecond), else by the stamps themselves (resolution_of)."""
        if self.fraction_digits:
            return 10.0 ** -self.fraction_digits
        return resolution_of(stamps)

    def __call__(self, line: str) -> float | None:
        self.head_end = 0
        if line[:1].isdigit() or line[:1] == "[":
            m = _ISO_HEAD_RE.match(line)
            if m is not None:
                head, fraction = m.groups()
                seconds = self._seconds.get(head, -1.0)
                if seconds == -1.0:
                    seconds = self._seconds[head] = _printed_time(head)
                if seconds is not None:
                    self.head_end = m.end()
                    if not fraction:
                        return seconds
                    if len(fraction) > self.fraction_digits:
                        self.fraction_digits = len(fraction)
                    return seconds + int(fraction) / 10 ** len(fraction)
        return line_stamp(line, self.year)


def resolution_of(stamps: list[float]) -> float:
    """The finest a run of printed stamps can say: 1 s where none has a fraction of a second,
    else the finest decimal place any has (at least a microsecond)."""
    finest = 1.0
    for stamp in stamps[:10_000]:  # a run prints its stamps one way: a sample says it
        fraction = round(stamp % 1.0, 6)
        while fraction and finest > 1e-6 and round(fraction / finest % 1.0, 6) not in (0, 1):
            finest /= 10
    return finest


def span_steps(times: list[float], steps: list[int], resolution: float) -> int:
    """How many steps a span needs for the resolution to be at most SPAN_SHARE of its time
    (1: each step's own time is fine enough)."""
    if len(times) < 2 or steps[-1] <= steps[0] or times[-1] <= times[0]:
        return 1
    per_step = (times[-1] - times[0]) / (steps[-1] - steps[0])
    return max(1, math.ceil(resolution / SPAN_SHARE / per_step))


def span_step_times(times: list[float], steps: list[int], span: int) -> list[float | None]:
    """Each step's time as the time over the span of about `span` steps around it (one
    rank's lines, in order; `steps` their step numbers, so a log printing every 10th step
    spans fewer lines), None where the span has no time or no steps (a log too short for
    one). Near the ends the span is taken inside the run; where the steps go back (a
    restart), each rising run is spanned alone."""
    t = np.asarray(times, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    result = np.full(len(t), np.nan)
    bounds = [0, *(np.flatnonzero(s[1:] < s[:-1]) + 1).tolist(), len(t)]
    half = span / 2
    for begin, end in itertools.pairwise(bounds):
        ts, ss = t[begin:end], s[begin:end]
        if len(ss) < 2:
            continue
        last = len(ss) - 1
        lo = np.searchsorted(ss, ss - half, "left")
        hi = np.searchsorted(ss, ss + half, "right") - 1
        # At an end the span is cut short: widen it inward to `span` steps where it can.
        short = ss[hi] - ss[lo] < span
        at_start = short & (lo == 0)
        hi[at_start] = np.minimum(np.searchsorted(ss, ss[0] + span, "left"), last)
        at_end = short & (hi == last)
        lo[at_end] = np.maximum(np.searchsorted(ss, ss[last] - span, "right") - 1, 0)
        advanced = ss[hi] - ss[lo]
        elapsed = ts[hi] - ts[lo]
        with np.errstate(divide="ignore", invalid="ignore"):
            each = np.where((advanced > 0) & (elapsed > 0), elapsed / advanced, np.nan)
        result[begin:end] = each
    return [None if math.isnan(x) else float(x) for x in result.tolist()]
