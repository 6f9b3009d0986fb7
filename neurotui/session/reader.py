"""Reading a session: tail it live or load it whole, into numpy columns (columns.py).

This reads the files: each stream's position, lines checked and counted when unreadable,
events kept (the telemetry bounded), the cache restored and left. The step rows it takes go
to its step table (steptable.py: which source wins for a rank, losses placed, time order).

Tolerant by design: a truncated last line, garbage lines and unknown kinds are counted and
reported, never fatal. A newer format version is refused with a clear message, because
guessing at a future schema would show wrong numbers.

Fast load: parsing millions of JSON lines takes minutes, so the first poll of a reader
restores what an earlier reader took from the files (neurotui.session.cache) and then reads
only the bytes appended since; a reader that had to parse a finished session (or a long run)
itself leaves such a cache behind.

pandas is imported only by the batch views (`steps()`, `phases()`, `frame()`: summary, compare,
export): a follower (`take_steps`, the dashboard) never imports it.

Memory: steps wait in typed arrays until asked for, files are read in bounded pieces, and a
follower that takes the steps in as they come (`take_steps`, the dashboard) leaves the reader
holding none: a long run's step table would otherwise be most of a follower's memory.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from array import array
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from neurotui.session import bulk, cache, helper_decode, layout
from neurotui.session.bulk import MAX_RANK, MAX_SAMPLES, MAX_STEP, MAX_TIME
from neurotui.session.columns import Columns
from neurotui.session.jsonfile import NONFINITE, restore_nonfinite
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.stepsources import STEP_SOURCES
from neurotui.session.steptable import (  # noqa: F401 (STEP_COLUMNS, _in_time_order: re-exported)
    STEP_COLUMNS,
    StepTable,
    TakenSteps,
    _in_time_order,
)
from neurotui.session.tailing import read_new_block

if TYPE_CHECKING:
    import pandas as pd

KNOWN_KINDS = frozenset({
    "step", "compile", "proc_start", "proc_exit", "restart", "stop_request", "stop_escalate",
    "host", "procs", "neuron", "gpu", "neuron_devices", "source_status", "warning",
    "instance", "log_offsets", "probe_info", "alert", "lost", "ranks", "profile",
})
# High-rate telemetry kept live: the dashboard shows the recent past; replay reads the files.
TELEMETRY_KINDS = frozenset({"host", "procs", "neuron", "gpu"})
LOG_OFFSETS = "log_offsets"
BOUNDED_KINDS = TELEMETRY_KINDS | {LOG_OFFSETS}
"""Kinds written every second or so, all of them kept only the last `telemetry_history`."""
DEFAULT_TELEMETRY_HISTORY = 3600
_MAX_BAD_LOCATIONS = 5
# Codes of the non-step kinds in the event index (what the cache keeps of them).
_INDEXED_KINDS = tuple(sorted(KNOWN_KINDS - {"step"}))
_KIND_CODE = {kind: code for code, kind in enumerate(_INDEXED_KINDS)}
_MIXED_KINDS = tuple(sorted(KNOWN_KINDS))
_MIXED = bulk.MixedDecoder(_MIXED_KINDS)
HELPER_EVENTS_MIN_BYTES = 32 << 20
"""events.jsonl bytes to read from which the helper decodes its later part (_later_part)."""
HELPER_EVENTS_SHARE = 0.5
"""The share of events.jsonl the helper decodes: it starts a new interpreter first, and the
reader takes its pieces in after; the probe files after it are shared as each gets to them."""
BATCH_PIECE_BYTES = 1 << 20
"""Short pieces of step lines (a refresh's few lines per probe file) are decoded together up
to this many bytes at once."""
READ_CHUNK_BYTES = 4 << 20
"""Most bytes read from a file at once: a first read of a long run's file would otherwise hold
the whole file twice (bytes and lines), hundreds of MB, at its peak."""


@dataclass
class _Tail:
    """Read position in one append-only file: `offset` is just after the last complete line
    taken; a partial last line (`pending`) is read again until its newline comes."""

    path: Path
    name: str
    """Relative to the session folder (how the cache names it)."""
    sid: int
    """Stream number in the event index."""
    offset: int = 0
    line_no: int = 0
    pending: bytes = b""
    read_error: str | None = None
    """Why the file could not be read at the last try (counted once, not at every poll)."""
    fspath: str = ""
    """`path` as a string (stat'ed at every poll, for each of a job's thousands of files)."""

    def __post_init__(self) -> None:
        self.fspath = os.fspath(self.path)

    @property
    def taken(self) -> int:
        """Bytes of complete lines taken: where a re-read would resume."""
        return self.offset


@dataclass
class _Piece:
    """Bytes read from a stream, waiting to be taken: `complete` of them are whole lines."""

    tail: _Tail
    chunk: bytes
    complete: int
    start: int


@dataclass
class ReadProblems:
    bad_lines: int = 0
    truncated_lines: int = 0
    unknown_kinds: Counter[str] = field(default_factory=Counter)
    locations: list[str] = field(default_factory=list)

    def summary(self) -> str | None:
        parts = []
        if self.bad_lines:
            parts.append(f"{self.bad_lines} unreadable line(s) skipped "
                         f"(first at {', '.join(self.locations)})")
        if self.truncated_lines:
            parts.append(f"{self.truncated_lines} truncated last line(s) skipped")
        if self.unknown_kinds:
            kinds = ", ".join(f"{k} x{n}" for k, n in self.unknown_kinds.most_common(5))
            parts.append(f"unknown event kinds ignored: {kinds}")
        return "; ".join(parts) or None

    def record(self) -> dict[str, Any]:
        """As a cache's stamp keeps them."""
        return {"bad_lines": self.bad_lines, "truncated_lines": self.truncated_lines,
                "unknown_kinds": dict(self.unknown_kinds), "locations": list(self.locations)}




class _EventIndex:
    """Where each non-step event came from (stream, byte offset, length, kind): the cache
    keeps this instead of the events, and re-reads only the ones a reader keeps."""

    # 15 bytes an event: a live reader keeps this for the whole run.
    _TYPES = {"stream": ("h", "int16"), "offset": ("q", "int64"), "length": ("i", "int32"),
              "kind": ("b", "int8")}

    def __init__(self) -> None:
        self.stream, self.offset, self.length, self.kind = (
            array(code) for code, _ in self._TYPES.values())

    def columns(self) -> Columns:
        """A copy of the index as columns (the arrays go on growing)."""
        return Columns({name: np.frombuffer(getattr(self, name), dtype=dtype).copy()
                        for name, (_, dtype) in self._TYPES.items()})

    @classmethod
    def from_columns(cls, columns: Columns) -> _EventIndex:
        index = cls()
        for name, (_, dtype) in cls._TYPES.items():
            getattr(index, name).frombytes(np.asarray(columns[name], dtype=dtype).tobytes())
        return index




class SessionReader:
    """Incremental reader: call `poll()` to take in what was appended since the last call.

    Steps are kept whole (they are the run's record); high-rate kinds (telemetry, log offsets)
    keep the last `telemetry_history` events each (None: all), so following a long run stays
    bounded.
    `use_cache=False` ignores and never writes the session's cache (see module docstring).
    """

    def __init__(self, session_dir: Path | str,
                 telemetry_history: int | None = DEFAULT_TELEMETRY_HISTORY, *,
                 use_cache: bool = True) -> None:
        self.dir = Path(session_dir)
        self.meta = load_meta(self.dir)
        self.problems = ReadProblems()
        self.telemetry_history = telemetry_history
        self.use_cache = use_cache
        self.rebuilds_cache = False
        """True for the cache keeper (keeper.py): the first poll ignores any cache, parses every
        file itself and leaves a new cache behind, even of a running or small session."""
        self.helper_min_bytes = helper_decode.MIN_BYTES
        """A first read of at least this many probe-file bytes has a helper process decode
        some of them (helper_decode.py)."""
        self.cache_state = "unused"
        """'unused', 'restored', 'written' or 'restored+written' (after the first poll)."""
        self.first_read: tuple[int, int] | None = None
        """(bytes read, bytes to read) while the first poll reads the files: a long run
        without a cache takes seconds, and a view says how far it got. None otherwise."""
        self._polled = False
        self._tails: dict[Path, _Tail] = {}
        self._probe_folder = layout.ProbeFolder(self.dir)  # listed again when it changed
        self.table = StepTable(self.meta)
        """The steps taken (steptable.py): kept whole, or handed out by take_steps()."""
        self._index = _EventIndex()
        self.events: dict[str, list[dict[str, Any]] | deque[dict[str, Any]]] = {}
        self._pending: dict[str, deque[dict[str, Any] | bytes]] = {}

    # -- reading -------------------------------------------------------------------------
    def poll(self, *, final: bool = False) -> int:
        """Read new complete lines from every stream; returns how many records were added.

        `final=True` treats a last line with no newline as truncated (the writer is gone).
        """
        if self._polled:
            return self._poll(final)
        with _small_pages():  # a first read: the whole session, perhaps a day of it
            return self._poll(final)

    def _poll(self, final: bool) -> int:
        added = 0
        first = not self._polled
        self._polled = True
        if first and self.use_cache:
            added += self._restore()
        restored_bytes = self._bytes_taken()
        tails = []
        for path in self._stream_paths():
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = _Tail(
                    path, path.relative_to(self.dir).as_posix(), len(self._tails))
            tails.append(tail)
        if first:
            self.first_read = (0, sum(max(0, _size(t.path) - t.offset) for t in tails))
        helper, split = self._decode_helper(tails) if first else (None, None)
        batch: list[_Piece] = []
        try:
            for i, tail in enumerate(tails):
                if helper is not None and split is not None and not i:
                    # events.jsonl up to where the helper's part of it begins, then that
                    added += self._read_tail(tail, batch, stop=split)
                    added += self._take_batch(batch)
                    added += self._take_pieces(tail, helper.take(0))
                elif helper is not None and i:
                    added += self._take_batch(batch)  # first: rows are taken in file order
                    added += self._take_pieces(tail, helper.take(i - (split is None)))
                added += self._read_tail(tail, batch)
            added += self._take_batch(batch)
        finally:
            self.first_read = None
            if helper is not None:
                helper.close()
        self._keep_pending()
        # On failure keep the last good meta: it is rewritten atomically, so this is transient.
        with contextlib.suppress(SessionFormatError):
            self.meta = load_meta(self.dir)
        if first and self.use_cache:
            self._save(self._bytes_taken() - restored_bytes)
        if final:
            for tail in self._tails.values():
                if tail.pending.strip():
                    self.problems.truncated_lines += 1
                    tail.offset += len(tail.pending)  # not to be read again
                    tail.pending = b""
        return added

    def load(self) -> SessionReader:
        """Read everything there is now (replay, compare, export)."""
        self.poll(final=not self.running)
        return self

    @property
    def running(self) -> bool:
        return self.meta.get("exit") is None

    def _stream_paths(self) -> list[Path]:
        probe, auto = self._probe_folder.both()
        return [self.dir / layout.EVENTS, *(p for _, p in sorted(probe.items())),
                *(p for _, p in sorted(auto.items()))]

    def _read_tail(self, tail: _Tail, batch: list[_Piece], stop: int | None = None) -> int:
        """Take the complete lines appended to one stream (up to byte `stop`, a line's start,
        if given); a partial last line waits. A short last piece of step lines waits in
        `batch`, to be decoded with those of other files (_take_batch): a follower's refresh
        finds a few lines in each of dozens of files."""
        added = 0
        try:  # one stat, not an open, fstat and close: most files gained nothing since
            if os.stat(tail.fspath).st_size == tail.offset + len(tail.pending) and tail.offset:
                return 0
        except OSError:
            pass  # read_new_block says what is wrong
        while True:  # in pieces of READ_CHUNK_BYTES: see there
            start = tail.offset
            most = READ_CHUNK_BYTES if stop is None else min(READ_CHUNK_BYTES, stop - start)
            if most <= 0:
                return added
            try:
                chunk, complete = read_new_block(tail.path, start, most)
            except FileNotFoundError:
                return added
            except OSError as exc:
                if tail.read_error != str(exc):  # a file that cannot be read is one problem,
                    tail.read_error = str(exc)  # however many polls find it so
                    self._bad(tail, f"{exc}")
                return added
            tail.offset, tail.pending = start + complete, chunk[complete:]
            read = len(chunk)
            if read < min(READ_CHUNK_BYTES, BATCH_PIECE_BYTES) and complete \
                    and bulk.starts_with_a_step(chunk):
                batch.append(_Piece(tail, chunk, complete, start))
                if sum(len(p.chunk) for p in batch) >= BATCH_PIECE_BYTES:
                    added += self._take_batch(batch)
            else:
                added += self._take_batch(batch)  # first: rows are taken in file order
                added += self._take_block(chunk, complete, tail, start)
            del chunk  # free this piece before reading the next
            if self.first_read is not None:
                done, total = self.first_read
                self.first_read = (done + complete, total)
            if read < READ_CHUNK_BYTES or not complete:
                return added

    def _take_batch(self, batch: list[_Piece]) -> int:
        """Take the pieces waiting in `batch` (and empty it): decoded as one block when they
        all are well-formed step lines, else each on its own."""
        pieces = batch[:]
        batch.clear()
        if len(pieces) > 1:
            counts = [p.chunk.count(b"\n", 0, p.complete) for p in pieces]
            whole = bulk.decode_block(b"".join(memoryview(p.chunk)[:p.complete] for p in pieces),
                                      sum(counts))
            if whole is not None:
                for piece, count in zip(pieces, counts, strict=True):
                    piece.tail.line_no += count
                return self._take_decoded(whole)
        return sum(self._take_block(p.chunk, p.complete, p.tail, p.start) for p in pieces)

    def _decode_helper(self, tails: list[_Tail]
                       ) -> tuple[helper_decode.HelperDecode | None, int | None]:
        """A second process decoding files of a long first read beside this one
        (helper_decode.py): the probe files (`tails` after the first), and where events.jsonl
        (the first) is long, its later part, from the byte returned (None: all of it here).
        No helper where it would not pay."""
        if self.rebuilds_cache:
            return None, None  # the keeper works in the background: one core is its share
        events, step_tails = tails[0], tails[1:]
        split = _later_part(events.path, events.offset)
        if split is None and len(step_tails) < 2:
            return None, None
        files = [helper_decode.HelperFile(t.path, t.offset) for t in step_tails]
        if split is not None:
            files.insert(0, helper_decode.HelperFile(events.path, split, _MIXED_KINDS))
        if sum(max(0, _size(f.path) - f.offset) for f in files) < self.helper_min_bytes:
            return None, None
        return helper_decode.HelperDecode(files, READ_CHUNK_BYTES), split

    def _take_pieces(self, tail: _Tail, pieces: list[helper_decode.DecodedPiece] | None) -> int:
        """Take the pieces of `tail` the helper decoded, as _read_tail would have."""
        added = 0
        for piece in pieces or ():
            if piece.start != tail.offset:  # not where this file stands: read it here
                break
            if piece.mixed is not None:  # its lines are needed too: read again (page cache)
                try:
                    chunk, complete = read_new_block(tail.path, piece.start, piece.complete)
                except OSError:
                    break  # read here, and said
                if complete != piece.complete:
                    break
                tail.offset, tail.pending = piece.start + piece.complete, piece.rest
                added += self._take_lines(_lines_of(chunk, complete), tail, piece.start,
                                          memoryview(chunk)[:complete], piece.mixed)
            else:
                tail.offset, tail.pending = piece.start + piece.complete, piece.rest
                tail.line_no += piece.lines
                added += self._take_decoded(piece.steps)
            if self.first_read is not None:
                done, total = self.first_read
                self.first_read = (done + piece.complete, total)
        return added

    def _bytes_taken(self) -> int:
        return sum(tail.taken for tail in self._tails.values())

    # -- cache ---------------------------------------------------------------------------
    def _restore(self) -> int:
        """Take the session's cache, if valid; returns the records it added (0: none).

        A cache the keeper appended to holds each append's rows after the earlier ones: they
        are put in the order a reader that parsed every file at once has them (steps and
        phases by time, events and problems by file and place in it).
        """
        if self.rebuilds_cache:
            return 0
        read = cache.load(self.dir, STEP_SOURCES)
        if read is None or not set(read.kinds) <= KNOWN_KINDS:
            return 0
        read.events = _in_file_order(read.events, read.sources)
        try:
            events = self._cached_events(read)
        except (OSError, ValueError, KeyError, IndexError):
            return 0  # the files disagree with the index after all: read them instead
        self._go_on_from(read)
        read.steps = self.table.restore(read.steps, read.phases)
        # The cache's kind codes follow its own list: translate them to this version's.
        codes = np.array([_KIND_CODE[k] for k in read.kinds] or [0], dtype="int8")
        self._index = _EventIndex.from_columns(read.events.with_column(
            "kind", codes[np.asarray(read.events["kind"], dtype="int64")]))
        self.events = events
        self.cache_state = "restored"
        return len(read.steps) + sum(len(bucket) for bucket in events.values())

    def _go_on_from(self, found: cache.CachedRead | cache.CacheState) -> None:
        """Where a cache's read ended: each file's offset and line, the step sources seen per
        rank, how samples were known, the problems counted."""
        for sid, source in enumerate(found.sources):
            path = self.dir / source.name
            self._tails[path] = _Tail(path, source.name, sid, source.offset, source.line_no)
        self.table.go_on_from(found.rank_sources, found.samples_from)
        self._take_problems(found.problems)

    def _take_problems(self, p: dict[str, Any]) -> None:
        """The problems a cache counted (the first locations in file order, as a whole read
        reports them)."""
        self.problems.bad_lines = int(p.get("bad_lines", 0))
        self.problems.truncated_lines = int(p.get("truncated_lines", 0))
        self.problems.unknown_kinds.update({str(k): int(n) for k, n in
                                            dict(p.get("unknown_kinds", {})).items()})
        self.problems.locations[:] = sorted((str(x) for x in p.get("locations", [])),
                                            key=location_order)[:_MAX_BAD_LOCATIONS]

    @classmethod
    def resumed(cls, session_dir: Path | str, found: cache.CacheState,
                telemetry_history: int | None = 0) -> SessionReader:
        """A reader that goes on from where the cache `found` ends, without loading it (the
        cache keeper): its polls read only what was appended after the cache's offsets, and
        take_steps() hands out only those steps.

        It is as a follower that handed out the cached rows: the sources seen per rank are
        the cache's, so a better source appearing for a rank makes take_steps() say start
        over (None). Its event index holds only the events read since, with this version's
        kind codes, their streams numbered as `found.sources` are (new files after them).
        """
        reader = cls(session_dir, telemetry_history)
        reader._polled = True  # the cache is where it starts: nothing to restore
        reader._go_on_from(found)
        reader.table.handed_out(found.rank_sources)
        reader.cache_state = "resumed"
        return reader

    def _cached_events(self, read: cache.CachedRead
                       ) -> dict[str, list[dict[str, Any]] | deque[dict[str, Any]]]:
        """The events this reader keeps, parsed again from the byte ranges the index gives
        (the last `telemetry_history` of each telemetry kind: a few thousand lines)."""
        index = read.events
        streams, offsets, lengths, codes = (
            index[name] for name in ("stream", "offset", "length", "kind"))
        out: dict[str, list[dict[str, Any]] | deque[dict[str, Any]]] = {}
        files: dict[int, int] = {}
        try:
            for code, kind in enumerate(read.kinds):
                rows = np.flatnonzero(codes == code)
                if not len(rows):
                    continue
                limited = kind in BOUNDED_KINDS and self.telemetry_history is not None
                if limited:
                    keep = max(0, int(self.telemetry_history or 0))
                    rows = rows[max(0, len(rows) - keep):] if keep else rows[:0]
                records = []
                # A pread and msgspec a record: an attach takes thousands of telemetry
                # records of a few kB (a day of a node's: 0.59 -> 0.3 s).
                for sid, offset, length in zip(streams[rows].tolist(), offsets[rows].tolist(),
                                               lengths[rows].tolist(), strict=True):
                    fd = files.get(sid)
                    if fd is None:
                        fd = files[sid] = os.open(self.dir / read.sources[sid].name,
                                                  os.O_RDONLY)
                    record = json_loads(os.pread(fd, length, offset))
                    if not isinstance(record, dict) or record.get("kind") != kind:
                        raise ValueError("index out of step with the file")
                    records.append(record)
                out[kind] = deque(records, maxlen=self.telemetry_history) if limited else records
        finally:
            for fd in files.values():
                os.close(fd)
        return out

    def _save(self, new_bytes: int) -> None:
        """Leave a cache for the next reader when this one parsed much itself."""
        if self.table.streaming:
            return  # steps were handed out: this reader no longer has the whole table
        if not self.rebuilds_cache:  # the keeper: it judged the session worth a cache
            if new_bytes <= 0 or self._bytes_taken() < cache.MIN_SOURCE_BYTES:
                return
            if self.running and new_bytes < cache.RUNNING_MIN_NEW_BYTES:
                return  # a live run keeps growing: cache it only when that saves much
        stamped = self.stamps_and_index()
        if stamped is None:
            return
        sources, events = stamped
        read = cache.CachedRead(
            sources=sources, steps=self.table.flush_steps(), src_categories=list(STEP_SOURCES),
            phases=self.table.flush_phases(),
            events=events, kinds=list(_INDEXED_KINDS), problems=self.problems.record(),
            rank_sources=self.rank_sources(), samples_from=sorted(self.samples_from))
        if cache.save(self.dir, read):
            self.cache_state = ("restored+" if self.cache_state == "restored" else "") + "written"

    def stamps_and_index(self, cached: int = 0
                         ) -> tuple[list[cache.SourceStamp], Columns] | None:
        """What a cache records of the files read: their stamps, in stream order, and the
        event index with its streams numbered as the stamps are. A file not there yet and
        never read (no events.jsonl yet) is left out, to be read whole when it comes, unless
        its stream is one of the first `cached` (a cache names it already). None when a file
        cannot be stamped."""
        sources: list[cache.SourceStamp] = []
        position = np.full(len(self._tails), -1, dtype="int16")  # stream -> place in sources
        for tail in sorted(self._tails.values(), key=lambda x: x.sid):
            if tail.sid >= cached and tail.taken == 0 and not tail.path.exists():
                continue
            stamp = cache.stamp_source(self.dir, tail.name, tail.taken, tail.line_no)
            if stamp is None:
                return None
            position[tail.sid] = len(sources)
            sources.append(stamp)
        events = self._index.columns()
        return sources, events.with_column(
            "stream", position[np.asarray(events["stream"], dtype=np.int64)])

    def _bad(self, tail: _Tail, why: str) -> None:
        self.problems.bad_lines += 1
        if len(self.problems.locations) < _MAX_BAD_LOCATIONS:
            # Relative to the session folder: probe/rank-3.jsonl:12 says which rank's file.
            self.problems.locations.append(f"{tail.name}:{tail.line_no} ({why})")

    def _take_block(self, chunk: bytes, complete: int, tail: _Tail, start: int) -> int:
        """Take the first `complete` bytes of `chunk` (complete lines) read from byte `start`.
        A probe file's piece is step lines only: decoded whole, it needs no bytes object per
        line (a piece that does not start with a step line is not tried whole)."""
        if whole := bulk.decode_piece(chunk, complete):
            steps, count = whole
            tail.line_no += count
            return self._take_decoded(steps)
        return self._take_lines(_lines_of(chunk, complete), tail, start,
                                memoryview(chunk)[:complete])

    def _take_lines(self, lines: Sequence[bytes], tail: _Tail, start: int,
                    block: memoryview | None = None, mixed: bulk.Mixed | None = None) -> int:
        """Take a piece of lines starting at byte `start` (`block`: the same, as the bytes
        they were split from): its step lines decoded in bulk (bulk.py), its telemetry
        lines kept as lines, column-wise, and the rest (with any step line the bulk decode
        would not take) one by one."""
        if len(lines) < bulk.MIN_BATCH:
            decoded, one_by_one, telemetry = bulk.empty(), list(range(len(lines))), {}
        elif mixed is not None or (block is not None and
                                   (mixed := _MIXED.decode(block, len(lines))) is not None):
            decoded, one_by_one, telemetry = self._sort_mixed(mixed)
        elif isinstance(lines, bulk.Spans) and block is not None and \
                (heads := bulk.heads_of(block, len(lines))) is not None:
            decoded, one_by_one, telemetry = self._sort_by_heads(lines, heads)
        else:
            if isinstance(lines, bulk.Spans):  # a bad or blank line: each looked at
                # (block: None, as the whole piece's heads just failed on that line)
                lines, block = lines.split(), None
            decoded, rejected, others = bulk.decode(lines)
            one_by_one = sorted(rejected + others)
            telemetry = self._telemetry_heads(lines, others, block)
        first_line, added = tail.line_no, len(telemetry)
        rest = [i for i in one_by_one if i not in telemetry] if telemetry else one_by_one
        indexed: dict[int, str] = {}  # line -> kind, of the lines taken one by one
        bounded: dict[int, tuple[str, dict[str, Any]]] = {}
        # In file order, as line by line: problems are reported in it, and a step line the
        # bulk decode sent back (a rank of `true`, a step of "3", a kind far into the line)
        # comes between the rows around it.
        for i in rest:
            if len(decoded.line) and decoded.line[0] < i:  # this line may be a step too
                earlier, decoded = decoded.before(i)
                added += self._take_decoded(earlier)
            raw = lines[i]
            tail.line_no = first_line + i + 1
            if raw.strip():
                took, kind, record = self._take(raw, tail)
                added += took
                if kind is not None:
                    indexed[i] = kind
                    if record is not None:
                        bounded[i] = (kind, record)
        added += self._take_decoded(decoded)
        tail.line_no = first_line + len(lines)
        self._keep_bounded(lines, telemetry, bounded)
        if self.use_cache and (telemetry or indexed):
            self._index_lines(lines, start, {**telemetry, **indexed}, tail)
        return added

    def _keep_bounded(self, lines: Sequence[bytes], telemetry: dict[int, str],
                      records: dict[int, tuple[str, dict[str, Any]]]) -> None:
        """The telemetry lines of a piece (parsed only if among the last kept) and the records
        of bounded kinds taken one by one, to each kind's pending, in file order."""
        by_kind: dict[str, list[int]] = {}
        for i, kind in telemetry.items():  # in file order (decode_heads keeps it)
            by_kind.setdefault(kind, []).append(i)
        for kind in {kind for kind, _ in records.values()}:
            by_kind[kind] = sorted([*by_kind.get(kind, ()),
                                    *(i for i, (k, _) in records.items() if k == kind)])
        for kind, which in by_kind.items():
            pending = self._pending_of(kind)
            if pending.maxlen is not None:
                which = which[-pending.maxlen:] if pending.maxlen else []
            pending.extend(records[i][1] if i in records else lines[i] for i in which)

    def _index_lines(self, lines: Sequence[bytes], start: int, kinds: dict[int, str],
                     tail: _Tail) -> None:
        """The event index of a piece's non-step events (`kinds`: line -> kind; the piece
        begins at byte `start`), in file order, as columns."""
        offsets, lengths = _positions(lines, start)
        which = np.fromiter(sorted(kinds), np.int64, len(kinds))
        codes = np.fromiter((_KIND_CODE[kinds[i]] for i in which.tolist()), np.int8,
                            len(which))
        index = self._index
        index.stream.frombytes(np.full(len(which), tail.sid, dtype=np.int16).tobytes())
        index.offset.frombytes(offsets[which].tobytes())
        index.length.frombytes(lengths[which].astype(np.int32).tobytes())
        index.kind.frombytes(codes.tobytes())

    @staticmethod
    def _sort_mixed(mixed: bulk.Mixed) -> tuple[bulk.DecodedSteps, list[int], dict[int, str]]:
        """_sort_by_heads of a piece decoded whole (bulk.MixedDecoder)."""
        others: list[int] = []
        telemetry: dict[int, str] = {}
        for i, kind, t in mixed.others:
            if _left_as_line(kind, t):
                telemetry[i] = kind
            else:
                others.append(i)
        return mixed.steps, sorted(mixed.rejected + others), telemetry

    @staticmethod
    def _sort_by_heads(lines: bulk.Spans, heads: list[bulk.Head]
                       ) -> tuple[bulk.DecodedSteps, list[int], dict[int, str]]:
        """A piece whose every line has a kind and time (`heads`): its step lines decoded,
        the lines to take one by one (steps the decode would not take, kinds not bounded),
        and its telemetry lines in range with their kind, which need not be parsed now."""
        steps: list[int] = []
        others: list[int] = []
        telemetry: dict[int, str] = {}
        for i, head in enumerate(heads):
            kind = head.kind
            if kind == "step":
                steps.append(i)
            elif _left_as_line(kind, head.t):
                telemetry[i] = kind
            else:
                others.append(i)
        decoded, rejected = bulk.decode_steps(lines, steps)
        return decoded, sorted(rejected + others), telemetry

    @staticmethod
    def _telemetry_heads(lines: Sequence[bytes], which: list[int],
                         block: memoryview | None = None) -> dict[int, str]:
        """Of the lines `which`, those that are well-formed records of a bounded kind with a
        time in range, and their kind, in file order: they need not be parsed whole now."""
        if len(which) < bulk.MIN_BATCH // 4:
            return {}
        heads, taken, _ = bulk.decode_heads(lines, which, block)
        return {i: h.kind for i, h in zip(taken, heads, strict=True)
                if _left_as_line(h.kind, h.t)}

    def _take_decoded(self, steps: bulk.DecodedSteps) -> int:
        return self.table.take_decoded(steps)

    def _take(self, raw: bytes, tail: _Tail) -> tuple[int, str | None, dict[str, Any] | None]:
        """One line: (records added, the kind to index it as, and its record if of a bounded
        kind: the caller keeps those in file order with the telemetry lines around it)."""
        try:
            record = json_loads(raw)
        except ValueError:
            self._bad(tail, "not JSON")
            return 0, None, None
        if not isinstance(record, dict):
            self._bad(tail, "not an object")
            return 0, None, None
        kind, t = record.get("kind"), record.get("t")
        if not isinstance(kind, str) or not isinstance(t, (int, float)):
            self._bad(tail, "no kind/t")
            return 0, None, None
        if not _in_range(t, 0.0, MAX_TIME):
            self._bad(tail, f"time {_short(t)} out of range")
            return 0, None, None
        if kind not in KNOWN_KINDS:
            self.problems.unknown_kinds[kind] += 1
            return 0, None, None
        if kind == "step":
            return self._take_step(record, tail), None, None
        if kind in BOUNDED_KINDS:
            return 1, kind, record
        self.events.setdefault(kind, []).append(record)
        return 1, kind, None

    def _pending_of(self, kind: str) -> deque[dict[str, Any] | bytes]:
        """The bounded kind's records (or lines, parsed when the poll ends) read this poll:
        no more than the reader keeps, so a first read of a long run parses only those."""
        pending = self._pending.get(kind)
        if pending is None:
            pending = self._pending[kind] = deque(maxlen=self.telemetry_history)
        return pending

    def _keep_pending(self) -> None:
        """The bounded kinds' records of this poll into `events` (their lines parsed now)."""
        for kind, pending in self._pending.items():
            if not pending:
                continue
            bucket = self.events.get(kind)
            if bucket is None:
                bucket = self.events[kind] = deque(maxlen=self.telemetry_history)
            bucket.extend(json_loads(x) if isinstance(x, bytes) else x for x in pending)
            pending.clear()

    def _take_step(self, r: dict[str, Any], tail: _Tail) -> int:
        try:
            t, rank, step = float(r["t"]), int(r.get("rank") or 0), int(r["step"])
            values = (_num(r.get("samples")), _num(r.get("loss")), _num(r.get("dt")))
            attempt = int(r.get("attempt") or 0)
        except (KeyError, TypeError, ValueError, OverflowError):
            self._bad(tail, "bad step")
            return 0
        # Every number is bounded before it meets a typed column: one huge value would
        # otherwise make the whole session unreadable (OverflowError) for every command.
        for name, value, low, high in (("step", step, 0, MAX_STEP), ("rank", rank, 0, MAX_RANK),
                                       ("attempt", attempt, 0, MAX_RANK),
                                       ("samples", values[0], 0.0, MAX_SAMPLES),
                                       ("dt", values[2], 0.0, MAX_TIME)):
            if not (isinstance(value, float) and math.isnan(value)) and \
                    not _in_range(value, low, high):
                self._bad(tail, f"{name} {_short(value)} out of range")
                return 0
        return self.table.add_step(r, t, rank, step, values, attempt)

    def rank_sources(self) -> dict[int, list[int]]:
        """Per rank, the `src` codes of the steps taken."""
        return self.table.rank_sources()

    @property
    def samples_from(self) -> set[str]:
        """How the steps' samples were known (StepTable.samples_from)."""
        return self.table.samples_from

    # -- views ---------------------------------------------------------------------------
    def steps(self) -> pd.DataFrame:
        """StepTable.steps: one row per rank per step, in time order, from each rank's best
        source."""
        return self.table.steps()

    def phases(self) -> pd.DataFrame:
        """StepTable.phases: per-step phase timings where the script reported them."""
        return self.table.phases()

    def step_columns(self) -> Columns:
        """steps() as numpy columns (`src` as codes into STEP_SOURCES): no pandas needed."""
        return self.table.step_columns()

    def phase_columns(self) -> Columns:
        """phases() as numpy columns."""
        return self.table.phase_columns()

    def take_steps(self) -> TakenSteps | None:
        """StepTable.take_steps: the steps taken in since the last call (a follower's)."""
        return self.table.take_steps()

    def reopened(self) -> SessionReader:
        """A new reader of the same session, with the same settings, read to now."""
        reader = SessionReader(self.dir, self.telemetry_history, use_cache=self.use_cache)
        reader.poll()
        return reader

    def frame(self, kind: str) -> pd.DataFrame:
        """The events of `kind` kept, as a DataFrame (batch views only: imports pandas)."""
        import pandas as pd

        return pd.DataFrame(list(self.events.get(kind, ())))

    def last(self, kind: str) -> dict[str, Any] | None:
        items = self.events.get(kind)
        return items[-1] if items else None

    def event_locations(self, kind: str
                        ) -> tuple[list[Path], np.ndarray, np.ndarray, np.ndarray]:
        """Where every `kind` event taken so far lies, in file order: the files (by stream
        number), and per event its stream, byte offset and length. Replay reads telemetry
        this way instead of keeping it. Needs `use_cache=True` (the index is kept then)."""
        if not self.use_cache:
            raise ValueError("event locations are only indexed with use_cache=True")
        index = self._index.columns()
        mine = index.rows(index["kind"] == _KIND_CODE[kind])
        paths = [self.dir / "-"] * len(self._tails)
        for tail in self._tails.values():
            paths[tail.sid] = tail.path
        return paths, mine["stream"], mine["offset"], mine["length"]


def _left_as_line(kind: str, t: float) -> bool:
    """Whether a well-formed record (of `kind`, at `t`) is telemetry kept as its line (parsed
    only if among the last kept): a bounded kind with a time in range."""
    return kind in BOUNDED_KINDS and 0.0 <= t < MAX_TIME


def _positions(lines: Sequence[bytes], start: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each line of a piece beginning at byte `start` begins, and its length (int64)."""
    if isinstance(lines, bulk.Spans):
        return start + lines.offsets(), lines.lengths()
    lengths = np.fromiter(map(len, lines), np.int64, len(lines))
    ends = np.cumsum(lengths + 1)
    return (np.concatenate(([start], start + ends[:-1])) if len(lines) else ends), lengths


@contextlib.contextmanager
def _small_pages() -> Iterator[None]:
    """numpy asks the kernel for huge pages for arrays of 4 MiB on (madvise): a first read
    of a long session makes and drops hundreds of those, and each one's pages were found and
    zeroed afresh, a fifth of its system time (0.2 s of 3.4 s here). Off while it reads, then
    as numpy had it; where this numpy has no such switch, as it is."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    before = switch(False) if switch is not None else None
    try:
        yield
    finally:
        if switch is not None:
            switch(before)


def _lines_of(chunk: bytes, complete: int) -> Sequence[bytes]:
    """The complete lines of the first `complete` bytes of a piece: found where they lie where
    they are long (telemetry), else split (step lines: quicker)."""
    lines: Sequence[bytes] | None = bulk.spans_of(chunk, complete)
    if lines is None:
        lines = chunk.split(b"\n")
        lines.pop()  # after the last newline: a partial line, or nothing
    return lines


def _later_part(path: Path, offset: int) -> int | None:
    """Where the helper's part of events.jsonl (read from `offset` on) begins: the start of
    the line HELPER_EVENTS_SHARE from its end; None where it is too short to share."""
    left = _size(path) - offset
    if left < HELPER_EVENTS_MIN_BYTES:
        return None
    at = offset + int(left * (1 - HELPER_EVENTS_SHARE))
    try:
        chunk, _ = read_new_block(path, at, 1 << 20)
    except OSError:
        return None
    newline = chunk.find(b"\n")
    return None if newline < 0 else at + newline + 1


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0




def _in_file_order(index: Columns, sources: list[cache.SourceStamp]) -> Columns:
    """The event index in the order a reader reads the files (events.jsonl, probe files by
    rank; each by byte offset): an appended cache holds each append's events after all the
    earlier ones."""
    if len(index) < 2:
        return index
    places = sorted(range(len(sources)), key=lambda i: cache.source_order(sources[i].name))
    order = np.empty(len(sources), dtype=np.int64)
    order[places] = np.arange(len(sources))
    stream = order[np.asarray(index["stream"], dtype=np.int64)]
    offset = index["offset"]
    next_file, further = np.diff(stream), np.diff(offset)
    if bool(((next_file > 0) | ((next_file == 0) & (further > 0))).all()):
        return index
    return index.rows(np.lexsort((offset, stream)))


_LOCATION = re.compile(r"^([^:]+):(\d+) ")


def location_order(location: str) -> tuple[int, int, int]:
    """Where a problem's location (`probe/rank-3.jsonl:12 (why)`) comes in the order a reader
    reads the files."""
    m = _LOCATION.match(location)
    if m is None:
        return (4, 0, 0)
    return (*cache.source_order(m.group(1)), int(m.group(2)))




_JSON = msgspec.json.Decoder()


def json_loads(line: bytes) -> Any:
    """json.loads of a line: by msgspec (a telemetry line in a third of the time), which
    gives what json gives wherever it reads the line; what it refuses and json reads (NaN,
    which older sessions hold; a float beyond range; a lone surrogate) by json. A record's
    numbers written as null for being NaN or infinite (its `nonfinite` field: FORMAT.md) are
    read back as they were. A ValueError for anything that is not JSON, a line nested past the
    recursion limit included (a RecursionError would stop the whole read)."""
    try:
        try:
            value = _JSON.decode(line)
        except msgspec.DecodeError:
            value = json.loads(line)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if isinstance(value, dict) and NONFINITE in value:
        restore_nonfinite(value)
    return value


def _num(value: Any) -> float:
    if value is None:
        return math.nan
    return float(value)



def _in_range(value: float, low: float, high: float) -> bool:
    """`low <= value < high` and finite; a huge int never reaches a float conversion."""
    if isinstance(value, int):
        return low <= value < high
    return math.isfinite(value) and low <= value < high


def _short(value: float) -> str:
    """A number as a problem report shows it: a 300-digit step is cut."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"
