"""The way a profile request reaches the ranks, and their answers come back, through the
session folder (the folder is the user's own, 0700: only they can ask).

The request: profiles/request.json, written whole (a temporary file renamed: a new inode, which
is how each rank's one os.stat every half second tells a new request from the last). The
answers: the `profile` records each rank's automatic probe appends to its probe file
(probe/auto-rank-R.jsonl), read from where the files ended when the request was made."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.jsonfile import SMALL_FILE_MAX_BYTES, read_json_file

PROFILES_DIR = "profiles"
REQUEST_FILE = "request.json"
"""The names the automatic probe looks for (PROFILES_DIR, PROFILE_REQUEST there)."""
MAX_STEPS = 1000
"""The most steps a rank profiles at once (the probe refuses more)."""
_READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class ProfileRequest:
    id: str
    steps: int
    ranks: tuple[int, ...] | None
    """The ranks asked; None: every rank."""
    memory: bool
    device_trace: bool
    posted: float
    expires: float

    def folder(self, session_dir: Path) -> Path:
        return session_dir / PROFILES_DIR / self.id


def request_path(session_dir: Path) -> Path:
    return session_dir / PROFILES_DIR / REQUEST_FILE


def post_request(session_dir: Path, *, steps: int, ranks: tuple[int, ...] | None,
                 memory: bool, device_trace: bool, timeout_s: float) -> ProfileRequest:
    """Leave a profile request for the session's ranks; it expires after `timeout_s` (a
    rank that starts later, or a restarted one, does not take a request no one waits on)."""
    if not 0 < steps <= MAX_STEPS:
        raise ValueError(f"steps must be 1 to {MAX_STEPS}, not {steps}")
    now = time.time()
    request = ProfileRequest(uuid.uuid4().hex[:16], steps, ranks, memory, device_trace, now,
                             now + timeout_s)
    folder = session_dir / PROFILES_DIR
    folder.mkdir(exist_ok=True)
    temporary = folder / f".{REQUEST_FILE}.{request.id}"
    temporary.write_text(json.dumps({
        "id": request.id, "steps": steps, "ranks": list(ranks) if ranks is not None else None,
        "memory": memory, "device_trace": device_trace, "t": now, "expires": request.expires}))
    os.replace(temporary, request_path(session_dir))
    return request


def pending_request(session_dir: Path) -> dict[str, Any] | None:
    """A request still there and not expired (another `neurotui profile` waits on it)."""
    try:
        found = read_json_file(request_path(session_dir), SMALL_FILE_MAX_BYTES)
    except (OSError, ValueError):
        return None
    if isinstance(found, dict) and isinstance(found.get("expires"), (int, float)) \
            and found["expires"] > time.time():
        return found
    return None


def withdraw(session_dir: Path, request: ProfileRequest) -> None:
    """Take the request away once its answers are in (or no longer waited for), if it is
    still this one."""
    with contextlib.suppress(OSError, ValueError):
        found = read_json_file(request_path(session_dir), SMALL_FILE_MAX_BYTES)
        if isinstance(found, dict) and found.get("id") == request.id:
            request_path(session_dir).unlink()


@dataclass
class RankAnswer:
    rank: int
    started: dict[str, Any] | None = None
    ended: dict[str, Any] | None = None
    """The `done` or `failed` record."""

    @property
    def state(self) -> str:
        if self.ended is not None:
            return str(self.ended.get("what"))
        return "started" if self.started is not None else "asked"


@dataclass
class _Tail:
    offset: int
    pending: bytes = b""


@dataclass
class ProfileAnswers:
    """The `profile` records of one request in the ranks' probe files, read as they come:
    make it before posting the request (it reads from where the files end now)."""

    session_dir: Path
    tails: dict[Path, _Tail] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for path in layout.probe_files(self.session_dir, auto=True).values():
            with contextlib.suppress(OSError):
                self.tails[path] = _Tail(path.stat().st_size)

    def poll(self) -> None:
        """Take in the records written since the last poll (a new rank's file from its start)."""
        for path in layout.probe_files(self.session_dir, auto=True).values():
            tail = self.tails.setdefault(path, _Tail(0))
            try:
                with open(path, "rb") as f:
                    f.seek(tail.offset)
                    while chunk := f.read(_READ_CHUNK):
                        tail.offset += len(chunk)
                        self._take(tail, chunk)
            except OSError:
                continue

    def _take(self, tail: _Tail, chunk: bytes) -> None:
        lines = (tail.pending + chunk).split(b"\n")
        tail.pending = lines.pop()  # a line still being written: read again with its end
        for line in lines:
            if b'"profile"' not in line:
                continue
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("kind") == "profile":
                    self.records.append(record)

    def of(self, request: ProfileRequest) -> dict[int, RankAnswer]:
        """Rank -> what it said about `request` so far."""
        answers: dict[int, RankAnswer] = {}
        for record in self.records:
            rank = record.get("rank")
            if record.get("id") != request.id or not isinstance(rank, int):
                continue
            answer = answers.setdefault(rank, RankAnswer(rank))
            if record.get("what") == "started":
                answer.started = record
            elif record.get("what") in ("done", "failed"):
                answer.ended = record
        return answers
