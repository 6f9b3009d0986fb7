"""A columnar cache of what the reader took from a session's JSON-lines files.

The JSON-lines files stay the source of truth: the cache is `<session>/.cache/`, a stamp
(stamp.json) and one raw binary file per column (no header: the stamp says the dtype and how
many rows count), named by the stamp's token, the table and the column's place in it
(`<token>.steps.3.col`: never by a column's name, a phase may be called anything). It holds
the steps table, the phase timings, an index (file, byte offset, length, kind) of every other
event, the problems counted and, per source file, how far it was read. A reader restores from
it and then reads only what was appended after those offsets; it is rebuilt when a source
shrank, was replaced or rewritten (checked by inode, size, modification time and, for a
source that grew since, fingerprints of the bytes read).

Appendable: while a run records, the cache keeper (keeper.py, started by the supervisor) adds
the rows read since the last stamp to the end of each column file and then writes a new stamp
(`append`). A column file longer than its rows is fine (rows of an append whose stamp is not
written yet: not counted), so a reader holding the old stamp still reads a consistent prefix;
a shorter one makes the cache invalid.

numpy only (no pandas, no pyarrow): a dashboard attaching to a long run restores its steps in
its first half second and within its memory budget.

Everything here is best-effort: a missing, stale, foreign or unreadable cache reads as None
and an unwritable session folder means no cache, never an error, because the cache only
saves time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurotui.session import layout
from neurotui.session.columns import Columns
from neurotui.session.jsonfile import SMALL_FILE_MAX_BYTES, read_json_file

CACHE_DIR = ".cache"
STAMP = "stamp.json"
CACHE_VERSION = 4
"""4: a raw binary file per column, appendable (3: a .npy file per column; 2: Parquet files,
read with pyarrow into pandas). An older cache is ignored, and replaced by the next save."""
MIN_SOURCE_BYTES = layout.CACHE_MIN_SOURCE_BYTES
"""Sessions with less JSON-lines data than this parse in well under a second: not cached."""
RUNNING_MIN_NEW_BYTES = 64 << 20
"""A reader caches a running session (for the next attach) only after reading this much anew;
meanwhile the supervisor's cache keeper keeps the cache current."""
KEEPER_LOCK = ".keeper.lock"
"""Held (flock) by the cache keeper at work: never two of them on one session."""
TABLES = ("steps", "phases", "events")
_COLUMN_SUFFIX = ".col"
_OLD_SUFFIXES = (".npy", ".parquet")  # the column files of versions 3 and 2
_FINGERPRINT_BYTES = 4096
# The only files a stamp may name: a cache copied in from elsewhere cannot point outside.
_SOURCE_NAME = re.compile(r"^(events\.jsonl|probe/(auto-)?rank-\d+\.jsonl)$")
_PROBE_SOURCE = re.compile(r"^probe/(auto-)?rank-(\d+)\.jsonl$")
_TOKEN = re.compile(r"^[0-9a-f]{16}$")
STEP_COLUMNS: dict[str, np.dtype[Any]] = {
    name: np.dtype(dtype) for name, dtype in (
        ("t", "float64"), ("rank", "int64"), ("step", "int64"), ("samples", "float64"),
        ("loss", "float64"), ("dt", "float64"), ("src", "int8"), ("attempt", "int64"))}
"""The steps table's columns, in the order they are stored (`src`: codes of src_categories)."""
EVENT_COLUMNS: dict[str, np.dtype[Any]] = {
    name: np.dtype(dtype) for name, dtype in (
        ("stream", "int16"), ("offset", "int64"), ("length", "int32"), ("kind", "int8"))}
"""The event index's columns (`stream`: index into the sources, `kind`: into the kinds)."""
PHASE_KEYS: dict[str, np.dtype[Any]] = {"t": np.dtype("float64"), "rank": np.dtype("int64")}
"""The phases table's first columns; every other one (a phase, any name) is float64."""


@dataclass(frozen=True)
class SourceStamp:
    """How far one JSON-lines file was read, and what it looked like then."""

    name: str
    """Path relative to the session folder, e.g. 'probe/rank-3.jsonl'."""
    offset: int
    """Bytes taken: always just after a newline (a partial last line is read again)."""
    line_no: int
    size: int
    mtime_ns: int
    ino: int
    head: str
    tail: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CachedRead:
    """The reader's state after taking the complete lines up to each source's offset."""

    sources: list[SourceStamp]
    steps: Columns
    """The reader's steps table: the columns and dtypes of STEP_COLUMNS."""
    phases: Columns
    """Columns t, rank, then one float64 column per phase (any names); or no column at all."""
    events: Columns
    """Columns stream (index into `sources`), offset, length, kind (index into `kinds`)."""
    kinds: list[str]
    problems: dict[str, Any]
    src_categories: list[str]
    """What the steps' `src` codes stand for (the reader's STEP_SOURCES)."""
    rank_sources: dict[int, list[int]] = field(default_factory=dict)
    """Per rank, the `src` codes of the steps taken (the reader keeps the best one's)."""
    samples_from: list[str] = field(default_factory=list)
    """How the steps' samples were known (SessionReader.samples_from)."""


@dataclass
class CacheState:
    """A valid cache's stamp, its columns not loaded: what an appender needs (and a reader
    that goes on from where the cache ends, SessionReader.resumed)."""

    token: str
    sources: list[SourceStamp]
    kinds: list[str]
    src_categories: list[str]
    columns: dict[str, list[str]]
    """Per table, its columns in the order of their files."""
    rows: dict[str, int]
    """Per table, the rows this stamp counts (its files may hold more: see module doc)."""
    problems: dict[str, Any]
    rank_sources: dict[int, list[int]]
    samples_from: list[str]

    def dtypes(self, what: str) -> dict[str, np.dtype[Any]]:
        """Each column of table `what` and its dtype, in the order of their files."""
        found = _dtypes(what, self.columns[what])
        if found is None:
            raise ValueError(f"not the columns of a {what} table")
        return found


def cache_dir(session_dir: Path) -> Path:
    return session_dir / CACHE_DIR


def source_order(name: str) -> tuple[int, int]:
    """Where source `name` comes in the order a reader reads the files: events.jsonl, the
    probe files by rank, then the automatic probe's by rank."""
    m = _PROBE_SOURCE.match(name)
    if m is None:
        return (0, 0) if name == layout.EVENTS else (3, 0)
    return (2 if m.group(1) else 1, int(m.group(2)))


def stamp_source(session_dir: Path, name: str, offset: int, line_no: int) -> SourceStamp | None:
    """The stamp of one source read up to `offset`, or None when it cannot be taken."""
    path = session_dir / name
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            head, tail = _fingerprints(f, offset)
    except OSError:
        return None
    return SourceStamp(name, offset, line_no, st.st_size, st.st_mtime_ns, st.st_ino, head, tail)


def _fingerprints(f: Any, offset: int) -> tuple[str, str]:
    """Digests of the first and the last few KiB before `offset`: a rewrite shows in them."""
    f.seek(0)
    head = f.read(min(offset, _FINGERPRINT_BYTES))
    start = max(0, offset - _FINGERPRINT_BYTES)
    f.seek(start)
    tail = f.read(offset - start)
    if len(tail) != offset - start or (offset and not tail.endswith(b"\n")):
        raise OSError("source shorter than its stamp")
    return _digest(head), _digest(tail)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def source_still_valid(session_dir: Path, stamp: SourceStamp) -> bool:
    """True when the file still starts with exactly the bytes that were read from it.

    The writers only append, so a file that shrank, was replaced (new inode), kept its size
    but changed (new mtime), or whose read bytes no longer match their fingerprints was
    rewritten: the cache no longer describes it. A file of the same inode, size and
    modification time as when it was read is as it was (as make, rsync and git judge a
    file): its fingerprints are not read again. A finished job's parts are all so, and
    reading two blocks of each of their thousands of sources was most of opening the job
    when they were not in the page cache.
    """
    try:
        with open(session_dir / stamp.name, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_ino != stamp.ino or st.st_size < stamp.offset:
                return False
            if st.st_size == stamp.size:
                return st.st_mtime_ns == stamp.mtime_ns
            return _fingerprints(f, stamp.offset) == (stamp.head, stamp.tail)
    except OSError:
        return False


def state(session_dir: Path, src_categories: Sequence[str]) -> CacheState | None:
    """The stamp of this session's cache, if the cache is valid; its columns are not read.

    Valid: of this version and these `src_categories` (what the caller's `src` codes stand
    for), every source still as it was read, every column file at least as long as the rows
    the stamp counts.
    """
    try:
        stamp = read_json_file(cache_dir(session_dir) / STAMP, SMALL_FILE_MAX_BYTES)
        return _state_of(stamp, session_dir, src_categories)
    except Exception:  # stale, half-deleted by a concurrent writer, foreign, truncated...
        return None


def _state_of(stamp: Any, session_dir: Path, src_categories: Sequence[str]
              ) -> CacheState | None:
    if not isinstance(stamp, dict) or stamp.get("version") != CACHE_VERSION:
        return None
    categories = [str(c) for c in src_categories]
    if [str(c) for c in stamp["src_categories"]] != categories:
        return None
    token = str(stamp["token"])
    if not _TOKEN.match(token):
        return None
    sources = [SourceStamp(**s) for s in stamp["sources"]]
    if not all(_SOURCE_NAME.match(s.name) and source_still_valid(session_dir, s)
               for s in sources):
        return None
    folder = cache_dir(session_dir)
    columns: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for what in TABLES:
        names = [str(name) for name in stamp["columns"][what]]
        dtypes = _dtypes(what, names)
        count = stamp["rows"][what]
        if dtypes is None or list(dtypes) != names or not isinstance(count, int) \
                or count < 0 or (count and not names):
            return None
        for number, dtype in enumerate(dtypes.values()):
            if os.stat(_file(folder, token, what, number)).st_size < count * dtype.itemsize:
                return None  # cut short: a full disk, a copy, another table's file
        columns[what], rows[what] = names, count
    return CacheState(token=token, sources=sources, kinds=[str(k) for k in stamp["kinds"]],
                      src_categories=categories, columns=columns, rows=rows,
                      problems=dict(stamp["problems"]),
                      rank_sources={int(r): [int(c) for c in codes]
                                    for r, codes in stamp["rank_sources"].items()},
                      samples_from=[str(x) for x in stamp["samples_from"]])


def load(session_dir: Path, src_categories: Sequence[str]) -> CachedRead | None:
    """The cached read of this session, or None when there is none or it is not valid.

    `src_categories`: what the caller's `src` codes stand for; a cache written with others
    (another version's) is not used.
    """
    found = state(session_dir, src_categories)
    if found is None:
        return None
    try:
        folder = cache_dir(session_dir)
        tables = {}
        for what in TABLES:
            table = _read_table(folder, found, what, 0, found.rows[what])
            if table is None:
                return None
            tables[what] = table
        steps, events = tables["steps"], tables["events"]
        if not (_within(steps["src"], len(src_categories))
                and _within(events["stream"], len(found.sources))
                and _within(events["kind"], len(found.kinds))):
            return None
        return CachedRead(sources=found.sources, steps=steps, phases=tables["phases"],
                          events=events, kinds=found.kinds, problems=found.problems,
                          src_categories=found.src_categories,
                          rank_sources=found.rank_sources, samples_from=found.samples_from)
    except Exception:  # half-deleted by a concurrent writer, unreadable...
        return None


def read_rows(session_dir: Path, found: CacheState, what: str, names: Sequence[str],
              start: int, stop: int) -> Columns | None:
    """Rows `start` to `stop` of the columns `names` of table `what` (an appender looking at
    the last rows without loading the whole table); None when they cannot be read."""
    try:
        if not 0 <= start <= stop <= found.rows[what]:
            return None
        return _read_table(cache_dir(session_dir), found, what, start, stop, names)
    except Exception:
        return None


def _dtypes(what: str, names: Sequence[str]) -> dict[str, np.dtype[Any]] | None:
    """Each column's dtype, in the order stored; None when `names` are not such a table's."""
    if what == "steps":
        fixed = STEP_COLUMNS
    elif what == "events":
        fixed = EVENT_COLUMNS
    else:
        if not names:
            return {}  # no step reported phases
        if len(set(names)) != len(names) or not set(PHASE_KEYS) <= set(names):
            return None
        return {**PHASE_KEYS, **{name: np.dtype("float64") for name in names
                                 if name not in PHASE_KEYS}}
    return dict(fixed) if set(names) == set(fixed) and len(names) == len(fixed) else None


def _file(folder: Path, token: str, what: str, number: int) -> Path:
    return folder / f"{token}.{what}.{number}{_COLUMN_SUFFIX}"


def _read_table(folder: Path, found: CacheState, what: str, start: int, stop: int,
                names: Sequence[str] | None = None) -> Columns | None:
    data = {}
    for number, (name, dtype) in enumerate(found.dtypes(what).items()):
        if names is not None and name not in names:
            continue
        # Read whole, no memmap: a later save deletes the file (and the reader copies anyway).
        with open(_file(folder, found.token, what, number), "rb") as f:
            if start:
                f.seek(start * dtype.itemsize)
            values = np.fromfile(f, dtype=dtype, count=stop - start)
        if len(values) != stop - start:
            return None  # cut short since the stamp was read (a rebuild removed it...)
        data[name] = values
    return Columns(data, stop - start)


def _within(codes: np.ndarray, n: int) -> bool:
    """Whether every code indexes a list of `n` (a foreign index would point anywhere)."""
    return not len(codes) or (int(codes.min()) >= 0 and int(codes.max()) < n)


def _column(values: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """`values` as a column of `dtype`: int64 codes may become int8, a float column never an
    integer one (same_kind)."""
    column = np.asarray(values).astype(dtype, casting="same_kind", copy=False)
    if column.ndim != 1:
        raise ValueError("not a column")
    return column


def _write_values(f: Any, values: np.ndarray) -> None:
    """A column's values, raw, at the file's position."""
    f.write(memoryview(np.ascontiguousarray(values)).cast("B"))


def _stamp(token: str, sources: Sequence[SourceStamp], kinds: Sequence[str],
           src_categories: Sequence[str], columns: Mapping[str, Sequence[str]],
           rows: Mapping[str, int], problems: dict[str, Any],
           rank_sources: Mapping[int, Sequence[int]], samples_from: Sequence[str]
           ) -> dict[str, Any]:
    return {"version": CACHE_VERSION, "token": token,
            "sources": [s.to_json() for s in sources], "kinds": list(kinds),
            "src_categories": [str(c) for c in src_categories],
            "columns": {what: list(names) for what, names in columns.items()},
            "rows": {what: int(n) for what, n in rows.items()},
            "problems": problems,
            "rank_sources": {str(r): [int(c) for c in codes]
                             for r, codes in sorted(rank_sources.items())},
            "samples_from": list(samples_from)}


def _write_stamp(folder: Path, stamp: dict[str, Any], written: list[Path]) -> None:
    """The stamp, atomically (a reader sees the old one or this one, whole)."""
    tmp = folder / f".{STAMP}.{stamp['token']}.tmp"
    written.append(tmp)
    tmp.write_text(json.dumps(stamp, allow_nan=False), "utf-8")  # counts: all finite
    os.replace(tmp, folder / STAMP)


def save(session_dir: Path, read: CachedRead) -> bool:
    """Write the cache (replacing any other); False when it cannot be written. Never raises.

    The column files are written under a fresh token first and the stamp naming that token
    last (atomically), so a concurrent reader sees the old cache or the new one, never a mix.
    A save failing half-way removes what it wrote.
    """
    folder = cache_dir(session_dir)
    token = secrets.token_hex(8)
    written: list[Path] = []
    try:
        tables = {"steps": read.steps, "phases": read.phases, "events": read.events}
        dtypes: dict[str, dict[str, np.dtype[Any]]] = {}
        for what, table in tables.items():
            stored = _dtypes(what, table.columns)
            if stored is None:
                return False  # not the columns of the cache's tables: nothing written
            dtypes[what] = stored
        folder.mkdir(exist_ok=True)
        for what, table in tables.items():
            for number, (name, dtype) in enumerate(dtypes[what].items()):
                values = _column(table[name], dtype)
                path = _file(folder, token, what, number)
                written.append(path)
                with open(path, "xb") as f:
                    _write_values(f, values)
        _write_stamp(folder, _stamp(
            token, read.sources, read.kinds, read.src_categories,
            {what: list(d) for what, d in dtypes.items()},
            {what: len(table) for what, table in tables.items()}, read.problems,
            read.rank_sources, read.samples_from), written)
    except Exception:  # unwritable folder, full disk, a table not of the cache's columns...
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        return False
    _remove_other_tokens(folder, token)
    return True


def append(session_dir: Path, found: CacheState, *, steps: Columns, phases: Columns,
           events: Columns, sources: Sequence[SourceStamp], problems: dict[str, Any],
           rank_sources: Mapping[int, Sequence[int]], samples_from: Sequence[str]) -> bool:
    """Add rows to the end of the tables of the cache `found` describes, then write its new
    stamp: `sources` (the old ones first, in their places; then any new file), and what the
    reader knows now. False when it cannot be done (the cache is then as it was, for every
    reader); never raises.

    Each column file is first cut to the rows the stamp counts (an appender that died before
    its stamp left rows beyond), then the new rows go to its end; a phase first reported now
    gets a new file, NaN for the rows before. The stamp is written last, atomically, and only
    if the cache is still the one `found` describes (no rebuild or other append since).
    Call it from one process at a time (keeper_lock).
    """
    folder = cache_dir(session_dir)
    try:
        old_sources = found.sources
        if [s.name for s in sources[:len(old_sources)]] != [s.name for s in old_sources]:
            return False  # a source dropped or moved: the index would point elsewhere
        if set(steps.columns) != set(STEP_COLUMNS) or set(events.columns) != set(EVENT_COLUMNS):
            return False
        names = list(found.columns["phases"])
        if len(phases):
            if not set(PHASE_KEYS) <= set(phases.columns):
                return False
            names = names or list(PHASE_KEYS)
            names += [name for name in phases.columns if name not in names]
        phase_dtypes = _dtypes("phases", names)
        if phase_dtypes is None or list(phase_dtypes) != names:
            return False
        if not (_within(np.asarray(steps["src"]), len(found.src_categories))
                and _within(np.asarray(events["stream"]), len(sources))
                and _within(np.asarray(events["kind"]), len(found.kinds))):
            return False
        new = {"steps": (found.dtypes("steps"), steps), "phases": (phase_dtypes, phases),
               "events": (found.dtypes("events"), events)}
        for what, (dtypes, table) in new.items():
            had = found.rows[what]
            for number, (name, dtype) in enumerate(dtypes.items()):
                path = _file(folder, found.token, what, number)
                if number < len(found.columns[what]):
                    f = open(path, "r+b")  # noqa: SIM115 (closed below)
                    f.truncate(had * dtype.itemsize)
                    f.seek(0, os.SEEK_END)
                else:  # a new phase (or the first): its rows so far reported none
                    f = open(path, "wb")  # noqa: SIM115
                    if had:
                        _write_values(f, np.full(had, np.nan))
                with f:
                    if len(table):
                        values = table[name] if name in table else np.full(len(table), np.nan)
                        _write_values(f, _column(values, dtype))
        columns = {**found.columns, "phases": names}
        rows = {what: found.rows[what] + len(table) for what, (_, table) in new.items()}
        stamp = _stamp(found.token, sources, found.kinds, found.src_categories, columns, rows,
                       problems, rank_sources, samples_from)
        if _stamped(folder) != (found.token, found.rows):
            return False  # rebuilt or appended to meanwhile: this append counts for nothing
        _write_stamp(folder, stamp, [])
    except Exception:  # a full disk, a file removed by a concurrent rebuild...
        return False
    found.columns, found.rows, found.sources = columns, rows, list(sources)
    _remove_other_tokens(folder, found.token)
    return True


def write_values(session_dir: Path, found: CacheState, what: str, name: str,
                 rows: Sequence[int] | np.ndarray, values: Sequence[float] | np.ndarray
                 ) -> bool:
    """Overwrite single values of column `name` of table `what`, in rows the stamp counts
    (the appender placing a late log line's loss on a cached step); False when it cannot."""
    try:
        dtypes = found.dtypes(what)
        number, dtype = list(dtypes).index(name), dtypes[name]
        at = np.asarray(rows, dtype=np.int64)
        column = _column(values, dtype)
        if len(at) != len(column) or (len(at) and (at.min() < 0
                                                   or at.max() >= found.rows[what])):
            return False
        with open(_file(cache_dir(session_dir), found.token, what, number), "r+b") as f:
            for row, value in zip(at.tolist(), column, strict=True):
                f.seek(row * dtype.itemsize)
                f.write(value.tobytes())
        return True
    except Exception:
        return False


def _stamped(folder: Path) -> tuple[str, dict[str, int]] | None:
    """The token and row counts of the stamp there now."""
    try:
        stamp = read_json_file(folder / STAMP, SMALL_FILE_MAX_BYTES)
        return str(stamp["token"]), {what: int(n) for what, n in stamp["rows"].items()}
    except Exception:
        return None


@contextlib.contextmanager
def keeper_lock(session_dir: Path) -> Iterator[bool]:
    """Whether this process may keep the session's cache (no other keeper holds the lock);
    held until the block ends. False too when the cache folder cannot be made."""
    folder = cache_dir(session_dir)
    try:
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / KEEPER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _remove_other_tokens(folder: Path, token: str) -> None:
    """Delete the column files of other tokens (and those of versions 3 and 2)."""
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if path.suffix in (_COLUMN_SUFFIX, *_OLD_SUFFIXES) \
                    and not path.name.startswith(f"{token}."):
                with contextlib.suppress(OSError):
                    path.unlink()


def remove(session_dir: Path) -> None:
    """Delete the cache (a rebuild happens at the next load)."""
    folder = cache_dir(session_dir)
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            with contextlib.suppress(OSError):
                path.unlink()
        folder.rmdir()
