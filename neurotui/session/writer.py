"""Append-only writing of a session: events.jsonl and meta.json.

The writer never raises into its caller's loop on I/O errors (a full disk must not take the
supervisor down, and the supervisor must never take training down): failed writes are counted
and reported once on stderr, which the supervisor sends to supervisor.log.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Readers never see a half-written meta.json: write a sibling, then rename over."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    os.replace(tmp, path)


def read_meta(session_dir: Path) -> dict[str, Any]:
    with open(session_dir / "meta.json", encoding="utf-8") as f:
        return json.load(f)


def update_meta(session_dir: Path, **changes: Any) -> dict[str, Any]:
    meta = read_meta(session_dir)
    meta.update(changes)
    write_json_atomic(session_dir / "meta.json", meta)
    return meta


class EventWriter:
    """One JSON object per line. Buffered: the owner calls `flush()` once per loop tick, so a
    burst of events costs one write, and a live reader sees them within a tick."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failed_writes = 0
        # a+: appends as "a" does, and the last byte can be read (see _fresh_line).
        self._file = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - lives as long as the writer
        self._end = -1  # not known yet: checked at the first flush

    def write(self, kind: str, t: float | None = None, **fields: Any) -> None:
        record = {"t": time.time() if t is None else t, "kind": kind, **fields}
        try:
            self._file.write(json.dumps(record, default=str) + "\n")
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def flush(self) -> None:
        try:
            self._fresh_line()
            self._file.flush()
            self._end = os.fstat(self._file.fileno()).st_size
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def _fresh_line(self) -> None:
        """Each record starts on a line of its own: when something else left the file
        without a final newline (another process's partial line, a writer killed mid-line),
        a newline goes first, so that line alone is unreadable, not ours as well."""
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        if size == self._end or size == 0:
            return  # only this writer wrote since its last flush: it ends its lines
        if os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")  # O_APPEND: before the records waiting in the buffer

    def _failed(self, exc: Exception) -> None:
        self.failed_writes += 1
        if self.failed_writes == 1:
            print(f"neurotui: cannot write {self.path}: {exc}; training goes on, "
                  "events are being lost", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.flush()
        with contextlib.suppress(OSError, ValueError):
            self._file.close()
