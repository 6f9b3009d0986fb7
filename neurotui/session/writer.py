"""Append-only writing of a session: events.jsonl and meta.json.

The writer never raises into its caller's loop on I/O errors (a full disk must not take the
supervisor down, and the supervisor must never take training down): records that cannot be
written are dropped and counted, by kind, with when; the first write that works again is
preceded by a `lost` record saying so. A small reserve file, made when the writer starts,
is given back at the end so that a run which ends on a full disk still records its end.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from neurotui.session.jsonfile import (
    META_MAX_BYTES,
    JsonFileError,
    dumps_strict,
    read_json_file,
    strict,
)

FORMAT_VERSION = 1


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Readers never see a half-written meta.json: write a sibling, then rename over. Raises
    OSError (a full disk), leaving the old file as it was and no sibling behind. Strict JSON:
    a non-finite number is written as null and named in `nonfinite` (jsonfile.py)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = dumps_strict(data, indent=2, sort_keys=True, default=str)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_meta(session_dir: Path) -> dict[str, Any]:
    """meta.json as the supervisor reads it to update it: within the limits every reader
    keeps (a JsonFileError, a ValueError, past them: jsonfile.py)."""
    meta = read_json_file(session_dir / "meta.json", META_MAX_BYTES)
    if not isinstance(meta, dict):
        raise JsonFileError("not a JSON object")
    return meta


def update_meta(session_dir: Path, **changes: Any) -> dict[str, Any]:
    meta = read_meta(session_dir)
    meta.update(changes)
    write_json_atomic(session_dir / "meta.json", meta)
    return meta


_ENCODE = json.JSONEncoder(default=str, allow_nan=False).encode
"""One encoder for every record: json.dumps(default=...) builds a new one per call, a third of
the cost of a step event, and the supervisor writes hundreds a second. Strict: a record with a
non-finite number is refused (ValueError), and written again by jsonfile.strict."""

_ENCODE_PLAIN = msgspec.json.Encoder().encode
"""write_plain's encoder: a tenth of the json module's time a process row (0.2 against 2 us),
for records written every second with a row for each of hundreds of processes."""

RESERVE = ".reserve"
RESERVE_BYTES = 1 << 20
"""Room kept for the records of a run's end: given back when the disk is full at the end."""


class EventWriter:
    """One JSON object per line. Buffered: the owner calls `flush()` once per loop tick, so a
    burst of events costs one write, and a live reader sees them within a tick."""

    def __init__(self, path: Path, *, reserve: bool = False) -> None:
        self.path = path
        self.failed_writes = 0  # records lost in all
        self._pending: list[bytes] = []  # encoded lines, each ended: joined at the flush
        self._kinds: list[str] = []
        self._lost: dict[str, int] = {}  # since the last `lost` record: kind -> count
        self._lost_from: float | None = None
        self._lost_to = 0.0
        self._error = ""
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._end = -1  # not known yet: checked at the first flush
        self._reserve = path.with_name(RESERVE) if reserve else None
        if self._reserve is not None:
            try:
                fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT, 0o600)
                try:
                    os.posix_fallocate(fd, 0, RESERVE_BYTES)
                finally:
                    os.close(fd)
            except OSError:  # no room even for that, or no fallocate: nothing kept
                self.release_reserve()

    @property
    def failing(self) -> bool:
        """The last flush could not write (records since are being lost)."""
        return self._lost_from is not None

    def write(self, kind: str, t: float | None = None, **fields: Any) -> None:
        record = {"t": time.time() if t is None else t, "kind": kind, **fields}
        try:
            try:
                line = _ENCODE(record)
            except ValueError:  # NaN or infinity: null, named in `nonfinite` (FORMAT.md)
                line = _ENCODE(strict(record))
            self._pending.append((line + "\n").encode())
            self._kinds.append(kind)
        except (TypeError, ValueError) as exc:  # not serialisable: a bug, counted not raised
            self._count_lost([kind], record["t"], exc)

    def write_plain(self, kind: str, t: float, **fields: Any) -> None:
        """`write` for a record of plain values only: strings, integers, finite numbers, None,
        and lists and dicts of them (msgspec would write NaN as null), encoded by msgspec and
        the same once read. Telemetry of every process and CPU, each second. A string
        msgspec refuses (a lone surrogate, from a process's name) and anything it cannot
        encode go to `write`, which escapes them."""
        try:
            line = _ENCODE_PLAIN({"t": t, "kind": kind, **fields})
        except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
            self.write(kind, t, **fields)
            return
        self._pending.append(line + b"\n")
        self._kinds.append(kind)

    def write_encoded_lines(self, kind: str, count: int, lines: bytes) -> None:
        """`count` records of `kind` the caller encoded itself, one JSON object a line, each
        line ended: for the hottest records (a step line's, hundreds a second), where
        building a dict to encode is most of the cost. Each must hold `t` and `kind`, as
        `write` puts them."""
        self._pending.append(lines)
        self._kinds.extend([kind] * count)

    def flush(self, *, final: bool = False) -> None:
        """Write what waits. `final` (the run's last records): if the disk refuses them, the
        reserve is given back and they are tried again."""
        if not self._pending and self._lost_from is None:
            return
        lines, kinds = self._pending, self._kinds
        self._pending, self._kinds = [], []
        now = time.time()
        for last_try in (not final or self._reserve is None, True):
            # Writing works again? The loss is said first, where it happened in the file.
            batch = [self._lost_line(now), *lines] if self._lost_from is not None else lines
            try:
                self._fresh_line()
                self._write_all(b"".join(batch))
                break
            except OSError as exc:
                if last_try:
                    self._count_lost(kinds, now, exc)
                    return
                self.release_reserve()
        if self._lost_from is not None:
            self._lost, self._lost_from = {}, None

    def _lost_line(self, now: float) -> bytes:
        return (json.dumps({
            "t": now, "kind": "lost", "what": "events", "count": sum(self._lost.values()),
            "by_kind": dict(self._lost), "from": self._lost_from, "to": self._lost_to,
            "error": self._error}) + "\n").encode()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        size = self._end
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError:
                # A partial batch would leave half a record: take it back (only this writer
                # appends to events.jsonl between flushes; see _fresh_line).
                if size >= 0:
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, size)
                raise
            view = view[written:]
        # Where this writer's lines end, without asking (a flush a wakeup, and a system
        # call costs microseconds): had another process appended meanwhile, the next
        # flush finds a size other than this and checks the last byte (_fresh_line).
        self._end = size + len(data)

    def _fresh_line(self) -> None:
        """Each record starts on a line of its own: when something else left the file
        without a final newline (another process's partial line, a writer killed mid-line),
        a newline goes first, so that line alone is unreadable, not ours as well."""
        size = os.fstat(self._fd).st_size
        if size == self._end or size == 0:
            self._end = size
            return  # only this writer wrote since its last flush: it ends its lines
        if os.pread(self._fd, 1, size - 1) != b"\n":
            os.write(self._fd, b"\n")
            size += 1
        self._end = size

    def _count_lost(self, kinds: list[str], now: float, exc: Exception) -> None:
        self.failed_writes += len(kinds)
        for kind in kinds:
            self._lost[kind] = self._lost.get(kind, 0) + 1
        if self._lost_from is None:
            self._lost_from = now
            self._error = exc.strerror if isinstance(exc, OSError) and exc.strerror \
                else str(exc)
            # Said where it can be seen; stderr may be on the same full disk (the supervisor
            # makes its own stderr safe to write to).
            print(f"neurotui: cannot write {self.path}: {self._error}; training goes on, "
                  "events are being lost (counted)", file=sys.stderr, flush=True)
        self._lost_to = now

    def release_reserve(self) -> None:
        """Give back the reserve (a full disk at the end: room for the end's records)."""
        if self._reserve is not None:
            with contextlib.suppress(OSError):
                self._reserve.unlink(missing_ok=True)
            self._reserve = None

    def close(self) -> None:
        self.flush(final=True)
        self.release_reserve()
        with contextlib.suppress(OSError):
            os.close(self._fd)
