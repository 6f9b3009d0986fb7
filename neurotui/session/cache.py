"""A columnar cache of what the reader took from a session's JSON-lines files.

The JSON-lines files stay the source of truth: the cache is `<session>/.cache/`, a stamp
(stamp.json) and three Parquet files named by the stamp's token. It holds the steps table, the
phase timings, an index (file, byte offset, length, kind) of every other event, the problems
counted and, per source file, how far it was read. A reader restores from it and then reads
only what was appended after those offsets; it is rebuilt when a source shrank, was replaced
or rewritten (checked by inode, size, modification time and fingerprints of the bytes read).

Everything here is best-effort: a missing, stale, foreign or unreadable cache reads as None
and an unwritable session folder means no cache, never an error, because the cache only
saves time. Parquet needs pyarrow; without it there is simply no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

CACHE_DIR = ".cache"
STAMP = "stamp.json"
CACHE_VERSION = 2
MIN_SOURCE_BYTES = 8 << 20
"""Sessions with less JSON-lines data than this parse in well under a second: not cached."""
RUNNING_MIN_NEW_BYTES = 64 << 20
"""A running session is cached (for the next attach) only after reading this much anew."""
_FINGERPRINT_BYTES = 4096
# The only files a stamp may name: a cache copied in from elsewhere cannot point outside.
_SOURCE_NAME = re.compile(r"^(events\.jsonl|probe/(auto-)?rank-\d+\.jsonl)$")
_STEP_INTS = {"rank": "int32", "step": "int64", "attempt": "int32"}
_STEP_COLUMNS = ("t", "rank", "step", "samples", "loss", "dt", "src", "attempt")


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
    steps: pd.DataFrame
    """The reader's steps table (`src` categorical)."""
    phases: pd.DataFrame
    events: pd.DataFrame
    """Columns stream (index into `sources`), offset, length, kind (index into `kinds`)."""
    kinds: list[str]
    problems: dict[str, Any]
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


def load(session_dir: Path) -> CachedRead | None:
    """The cached read of this session, or None when there is none or it is not valid."""
    folder = cache_dir(session_dir)
    try:
        stamp = json.loads((folder / STAMP).read_text("utf-8"))
        if not isinstance(stamp, dict) or stamp.get("version") != CACHE_VERSION:
            return None
        sources = [SourceStamp(**s) for s in stamp["sources"]]
        if not all(_SOURCE_NAME.match(s.name) and source_still_valid(session_dir, s)
                   for s in sources):
            return None
        import pyarrow.parquet as pq

        token = str(stamp["token"])
        steps = _read_steps(pq.ParquetFile(folder / f"{token}.steps.parquet"),
                            stamp["src_categories"])
        phases = pq.read_table(folder / f"{token}.phases.parquet").to_pandas()
        events = pq.read_table(folder / f"{token}.events.parquet").to_pandas()
        release_arrow_memory()  # the tables are converted: before the caller's big allocations
        return CachedRead(sources=sources, steps=steps, phases=phases, events=events,
                          kinds=list(stamp["kinds"]), problems=dict(stamp["problems"]),
                          rank_sources={int(r): [int(c) for c in codes]
                                        for r, codes in stamp["rank_sources"].items()},
                          samples_from=[str(x) for x in stamp["samples_from"]])
    except Exception:  # stale, half-deleted by a concurrent writer, foreign, no pyarrow...
        return None


def release_arrow_memory() -> None:
    """Hand pyarrow's unused memory back to the OS. Its pool (mimalloc or jemalloc) keeps freed
    memory for itself, out of reach of numpy and of malloc_trim: attaching to a long run read
    from its cache otherwise leaves about 100 MB there for good."""
    pyarrow = sys.modules.get("pyarrow")  # imported only where a cache was read or written
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()


def _read_steps(parquet: Any, categories: list[str]) -> pd.DataFrame:
    columns: dict[str, Any] = {}
    for name in _STEP_COLUMNS:
        # A column at a time: a long run's whole table decoded at once doubles its memory.
        values = parquet.read(columns=[name]).column(0).to_numpy()
        if name == "src":
            columns[name] = pd.Categorical.from_codes(values, categories)
        else:
            # int64 as the reader's own columns; a cache written as int64 is not copied.
            columns[name] = values.astype("int64", copy=False) if name in _STEP_INTS \
                else values
    return pd.DataFrame(columns, copy=False)


def save(session_dir: Path, read: CachedRead) -> bool:
    """Write the cache (replacing any other); False when it cannot be written. Never raises.

    The Parquet files are written under a fresh token first and the stamp naming that token
    last (atomically), so a concurrent reader sees the old cache or the new one, never a mix.
    """
    folder = cache_dir(session_dir)
    token = secrets.token_hex(8)
    written: list[Path] = []
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder.mkdir(exist_ok=True)
        tables = {
            "steps": _steps_table(pa, read.steps),
            "phases": pa.Table.from_pandas(read.phases, preserve_index=False),
            "events": pa.Table.from_pandas(read.events, preserve_index=False),
        }
        for what, table in tables.items():
            path = folder / f"{token}.{what}.parquet"
            written.append(path)
            pq.write_table(table, path, compression="lz4")
        stamp = {"version": CACHE_VERSION, "token": token,
                 "sources": [s.to_json() for s in read.sources], "kinds": read.kinds,
                 "src_categories": [str(c) for c in read.steps["src"].cat.categories],
                 "problems": read.problems,
                 "rank_sources": {str(r): c for r, c in sorted(read.rank_sources.items())},
                 "samples_from": list(read.samples_from)}
        tmp = folder / f".{STAMP}.{token}.tmp"
        written.append(tmp)
        tmp.write_text(json.dumps(stamp), "utf-8")
        os.replace(tmp, folder / STAMP)
    except Exception:  # unwritable folder, full disk, no pyarrow, odd phase values...
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        return False
    finally:
        release_arrow_memory()
    _remove_other_tokens(folder, token)
    return True


def _steps_table(pa: Any, steps: pd.DataFrame) -> Any:
    columns = {}
    for name in _STEP_COLUMNS:
        values = steps[name]
        if name == "src":  # codes: a Parquet dictionary would come back with other categories
            array = np.asarray(values.cat.codes, dtype="int8")
        elif name in _STEP_INTS:
            array = values.to_numpy(dtype=_STEP_INTS[name])
        else:
            array = values.to_numpy(dtype="float64")
        # from_pandas=False keeps NaN as a value: a null would come back as a masked column.
        columns[name] = pa.array(array)
    return pa.table(columns)


def _remove_other_tokens(folder: Path, token: str) -> None:
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if path.suffix == ".parquet" and not path.name.startswith(f"{token}."):
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
