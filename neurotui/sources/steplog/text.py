"""Reading the pieces of a log line: printed numbers, a launcher's rank prefix, colour
codes, carriage-return redraws and a date-and-time stamp at its start. Pure."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

# A number as scripts print it, including nan/inf. Repeats are bounded so that no
# built-in pattern can backtrack badly on a hostile 64 KiB line.
_NUM = (
    r"(?:[-+]?(?:\d{1,24}(?:\.\d{0,24})?|\.\d{1,24})(?:[eE][-+]?\d{1,4})?"
    r"|[-+]?(?i:nan|inf(?:inity)?)(?![A-Za-z]))"
)
# Stops a number match from ending early by backtracking ("2.3e" must not give 2).
_NUM_END = r"(?![\w]|\.\d)"
# A number with nanotron's human-readable suffix: ``11.5K``, ``85.8G``.
_NUMX = rf"(?:{_NUM})[KMGTP]?"
_SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}

_RANK_PREFIX_RE = re.compile(
    # torchrun --tee: ``[default0]:`` (role "default", local rank), newer torchrun ``[rank0]:``,
    # the usual named roles ``[trainer0]:`` / ``[worker0]:`` (not any word: ``[step10]:``
    # is a script's own text), and any role in a prefix template ``[trainer0|0]:``.
    r"\[(?:default|rank|trainer|worker)(\d{1,7})\]:"
    r"|\[[A-Za-z][A-Za-z_-]{0,31}?(\d{1,7})\|\d{1,7}\]:"
    # mpirun --tag-output ``[1,0]<stdout>:``; SageMaker's ``[1,mpirank:0,algo-1]<stdout>:``.
    r"|\[\d{1,9},(?:mpirank:)?(\d{1,7})(?:,[\w.-]{1,64})?\]<(?:stdout|stderr|stddiag)>:",
    re.ASCII,
)
# OSC sequences (Rich's file:// hyperlinks) first, then CSI and two-byte escapes.
_ANSI_RE = re.compile(
    r"\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[@-Z\\-_]"
)
_LEADING_ANSI_RE = re.compile(r"(?:\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]){1,8}")
# A rank prefix that follows a time stamp: ``2024-01-02 10:11:12 [rank1]: ...``.
_LATE_RANK_RE = re.compile(r"[\d\s\-:.,/TZ\[\]]{1,48}?\[(?:default|rank)(\d{1,7})\]:", re.ASCII)


def strip_rank_prefix(line: str) -> tuple[int | None, str]:
    """Split a launcher's per-rank prefix off ``line``: ``(rank, rest)``.

    torchrun ``--tee`` writes ``[default0]:`` (local rank), newer torchrun ``[rank0]:``, a
    named role ``[trainer0]:`` or, with a prefix template, ``[trainer0|0]:`` (the first number
    is taken); mpirun ``--tag-output`` ``[1,0]<stdout>:`` (job, rank), under SageMaker
    ``[1,mpirank:0,algo-1]<stdout>:``. Colour codes in front of the prefix are skipped (and
    dropped with it). Without one: ``(None, line)``.
    """
    start = 0
    if line.startswith("\x1b"):
        lead = _LEADING_ANSI_RE.match(line)
        if lead is not None:
            start = lead.end()
    if not line.startswith("[", start):
        return None, line
    m = _RANK_PREFIX_RE.match(line, start)
    if m is None:
        return None, line
    digits = m.group(1) or m.group(2) or m.group(3)
    return int(digits), line[m.end() :]


def _to_float(text: str | None) -> float | None:
    """Read a printed number; None when it is not one (thousands commas and nanotron's
    ``K``/``M``/``G``/``T``/``P`` suffixes allowed)."""
    if text is None:
        return None
    if len(text) <= 64:
        try:  # the usual case, plain digits: as the general path below would read them
            return float(text)
        except ValueError:
            pass
    s = text.strip().replace(",", "")
    if not s or len(s) > 64:
        return None
    scale = 1.0
    if s[-1] in _SUFFIX and len(s) > 1 and (s[-2].isdigit() or s[-2] == "."):
        scale = _SUFFIX[s[-1]]
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        return None
    return value * scale


def _to_int(text: str | None) -> int | None:
    """Read a step/rank count; ``1.000`` (NxD's global_step) counts, ``1.5`` does not."""
    if text is None:
        return None
    s = text.strip().replace(",", "")
    if not s or len(s) > 32:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    value = _to_float(s)
    if value is None or not math.isfinite(value) or not value.is_integer():
        return None
    return int(value)


def _inverse(value: float | None) -> float | None:
    """Seconds per step from steps per second (tqdm switches units below 1 it/s)."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return 1.0 / value


# --------------------------------------------------------------------------- time stamps

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
)}
_TS_ISO_RE = re.compile(
    r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"(Z|[+-]\d{2}:?\d{2})?(?!\d)",
    re.ASCII,
)
_TS_US_RE = re.compile(
    r"(?<![\d/])(\d{2})/(\d{2})/(\d{4}|\d{2}),? (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?"
    r"(?: ?([AP]M)\b)?(?!\d)",
    re.ASCII,
)
_TS_ASCTIME_RE = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r" {1,2}(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\b",
    re.ASCII,
)
#: Only the start of a line is searched: a stamp is a prefix, not a date in a path.
_TS_SEARCH_CHARS = 120


def _stamp(
    year: int, month: int, day: int, hh: int, mm: int, ss: int, frac: str | None, zone: str | None
) -> float | None:
    try:
        micro = int((frac or "0")[:6].ljust(6, "0"))
        when = datetime(year, month, day, hh, mm, ss, micro)
        if zone:
            if zone == "Z":
                tz = timezone.utc
            else:
                sign = -1 if zone[0] == "-" else 1
                digits = zone[1:].replace(":", "")
                tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
            when = when.replace(tzinfo=tz)
        return when.timestamp()  # naive: local time
    except (ValueError, OverflowError, OSError):
        return None


_FIRST_DIGIT = re.compile(r"\d")


def _printed_time(text: str) -> float | None:
    """Unix seconds of the full date-and-time stamp at the start of ``text``, if any.

    Megatron ``[2025-01-02 10:11:12]``, Python logging ``2025-03-12 11:10:21,511``,
    ISO ``2023-06-15T12:11:12Z``, torch-neuronx ``LOG Wed Dec 21 00:12:27 2022`` and
    ``MM/DD/YYYY HH:MM:SS`` (HF / nanotron / neuron-cc logging). The stamp must be the
    first number on the line (words and brackets may come before it: ``[titan] ``), so
    a date further on (a checkpoint path) is not taken. A time without a date (Rich's
    ``[20:31:51]``, absl's ``I0302 02:18:34``) gives None.
    """
    head = text[:_TS_SEARCH_CHARS]
    if ":" not in head:
        return None  # every form has its HH:MM:SS (most step lines have no stamp)
    digit = _FIRST_DIGIT.search(head)
    if digit is None:
        return None
    first = digit.start()
    if (m := _TS_ISO_RE.match(head, first)) is not None:
        y, mo, d, hh, mi, ss, frac, zone = m.groups()
        return _stamp(int(y), int(mo), int(d), int(hh), int(mi), int(ss), frac, zone)
    if (m := _TS_US_RE.match(head, first)) is not None:
        mo, d, y, hh, mi, ss, frac, ampm = m.groups()
        year = int(y) + (2000 if len(y) == 2 else 0)
        hour = int(hh)
        if ampm is not None and 1 <= hour <= 12:
            hour = hour % 12 + (12 if ampm == "PM" else 0)
        return _stamp(year, int(mo), int(d), hour, int(mi), int(ss), frac, None)
    if (m := _TS_ASCTIME_RE.search(head, max(0, first - 12))) is not None:
        mon, d, hh, mi, ss, y = m.groups()
        if m.start(2) == first:
            return _stamp(int(y), _MONTHS[mon], int(d), int(hh), int(mi), int(ss), None, None)
    return None


def _last_segment(text: str) -> str:
    for segment in reversed(text.split("\r")):
        if segment.strip():
            return segment
    return ""
