"""A columnar cache of what the reader took from a session's JSON-lines files.

The JSON-lines files stay the source of truth: the cache is `<session>/.cache/`, a stamp
(stamp.json) and one `.npy` file per column, named by the stamp's token, the table and the
column's place in it (`<token>.steps.3.npy`: never by a column's name, a phase may be called
anything). It holds the steps table, the phase timings, an index (file, byte offset, length,
kind) of every other event, the problems counted and, per source file, how far it was read. A
reader restores from it and then reads only what was appended after those offsets; it is
rebuilt when a source shrank, was replaced or rewritten (checked by inode, size, modification
time and fingerprints of the bytes read).

numpy only (no pandas, no pyarrow): a dashboard attaching to a long run restores its steps in
its first half second and within its memory budget.

Everything here is best-effort: a missing, stale, foreign or unreadable cache reads as None
and an unwritable session folder means no cache, never an error, because the cache only
saves time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurotui.session.columns import Columns

CACHE_DIR = ".cache"
STAMP = "stamp.json"
CACHE_VERSION = 3
"""3: a .npy file per column (2: Parquet files, read with pyarrow into pandas)."""
MIN_SOURCE_BYTES = 8 << 20
"""Sessions with less JSON-lines data than this parse in well under a second: not cached."""
RUNNING_MIN_NEW_BYTES = 64 << 20
"""A running session is cached (for the next attach) only after reading this much anew."""
_FINGERPRINT_BYTES = 4096
# The only files a stamp may name: a cache copied in from elsewhere cannot point outside.
_SOURCE_NAME = re.compile(r"^(events\.jsonl|probe/(auto-)?rank-\d+\.jsonl)$")
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


def cache_dir(session_dir: Path) -> Path:
    return session_dir / CACHE_DIR


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
    rewritten: the cache no longer describes it.
    """
    try:
        with open(session_dir / stamp.name, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_ino != stamp.ino or st.st_size < stamp.offset:
                return False
            if st.st_size == stamp.size and st.st_mtime_ns != stamp.mtime_ns:
                return False
            return _fingerprints(f, stamp.offset) == (stamp.head, stamp.tail)
    except OSError:
        return False


def load(session_dir: Path, src_categories: Sequence[str]) -> CachedRead | None:
    """The cached read of this session, or None when there is none or it is not valid.

    `src_categories`: what the caller's `src` codes stand for; a cache written with others
    (another version's) is not used.
    """
    folder = cache_dir(session_dir)
    try:
        stamp = json.loads((folder / STAMP).read_text("utf-8"))
        if not isinstance(stamp, dict) or stamp.get("version") != CACHE_VERSION:
            return None
        if [str(c) for c in stamp["src_categories"]] != [str(c) for c in src_categories]:
            return None
        token = str(stamp["token"])
        if not _TOKEN.match(token):
            return None
        sources = [SourceStamp(**s) for s in stamp["sources"]]
        if not all(_SOURCE_NAME.match(s.name) and source_still_valid(session_dir, s)
                   for s in sources):
            return None
        kinds = [str(k) for k in stamp["kinds"]]
        columns, rows = stamp["columns"], stamp["rows"]
        tables = {}
        for what in ("steps", "phases", "events"):
            dtypes = _dtypes(what, [str(name) for name in columns[what]])
            if dtypes is None or list(dtypes) != list(columns[what]):
                return None
            tables[what] = _read_table(folder, token, what, dtypes, int(rows[what]))
            if tables[what] is None:
                return None
        steps, events = tables["steps"], tables["events"]
        if not (_within(steps["src"], len(src_categories))
                and _within(events["stream"], len(sources))
                and _within(events["kind"], len(kinds))):
            return None
        return CachedRead(sources=sources, steps=steps, phases=tables["phases"], events=events,
                          kinds=kinds, problems=dict(stamp["problems"]),
                          src_categories=[str(c) for c in src_categories],
                          rank_sources={int(r): [int(c) for c in codes]
                                        for r, codes in stamp["rank_sources"].items()},
                          samples_from=[str(x) for x in stamp["samples_from"]])
    except Exception:  # stale, half-deleted by a concurrent writer, foreign, truncated...
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
    return folder / f"{token}.{what}.{number}.npy"


def _read_table(folder: Path, token: str, what: str, dtypes: dict[str, np.dtype[Any]],
                rows: int) -> Columns | None:
    data = {}
    for number, (name, dtype) in enumerate(dtypes.items()):
        # Read whole, no memmap: a later save deletes the file (and the reader copies anyway).
        values = np.load(_file(folder, token, what, number), allow_pickle=False)
        if values.ndim != 1 or values.dtype != dtype or len(values) != rows:
            return None  # another table's file, a foreign one, or one cut short
        data[name] = values
    return Columns(data, rows)


def _within(codes: np.ndarray, n: int) -> bool:
    """Whether every code indexes a list of `n` (a foreign index would point anywhere)."""
    return not len(codes) or (int(codes.min()) >= 0 and int(codes.max()) < n)


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
                # same_kind: int64 codes may become int8, a float column never an integer one.
                values = np.asarray(table[name]).astype(dtype, casting="same_kind", copy=False)
                if values.ndim != 1:
                    raise ValueError(f"{what}.{name} is not a column")
                path = _file(folder, token, what, number)
                written.append(path)
                with open(path, "xb") as f:
                    np.save(f, values, allow_pickle=False)
        stamp = {"version": CACHE_VERSION, "token": token,
                 "sources": [s.to_json() for s in read.sources], "kinds": list(read.kinds),
                 "src_categories": [str(c) for c in read.src_categories],
                 "columns": {what: list(d) for what, d in dtypes.items()},
                 "rows": {what: len(table) for what, table in tables.items()},
                 "problems": read.problems,
                 "rank_sources": {str(r): [int(c) for c in codes]
                                  for r, codes in sorted(read.rank_sources.items())},
                 "samples_from": list(read.samples_from)}
        tmp = folder / f".{STAMP}.{token}.tmp"
        written.append(tmp)
        tmp.write_text(json.dumps(stamp), "utf-8")
        os.replace(tmp, folder / STAMP)
    except Exception:  # unwritable folder, full disk, a table not of the cache's columns...
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        return False
    _remove_other_tokens(folder, token)
    return True


def _remove_other_tokens(folder: Path, token: str) -> None:
    """Delete the column files of other tokens (and the Parquet files of version 2)."""
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if path.suffix in (".npy", ".parquet") and not path.name.startswith(f"{token}."):
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
