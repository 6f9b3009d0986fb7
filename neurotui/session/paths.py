"""Where sessions live and how a user names one on the command line."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

SESSIONS_ENV = "NEUROTUI_SESSIONS"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SessionNotFound(LookupError):
    """No session, or more than one, matches what the user typed."""


def sessions_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--sessions-dir`, else $NEUROTUI_SESSIONS, else ./sessions (like a build tool's output)."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(SESSIONS_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return (Path.cwd() / "sessions").resolve()


def new_session_id(name: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    safe = _UNSAFE.sub("-", name).strip("-.") or "run"
    return f"{stamp}-{safe[:60]}"


def list_sessions(root: Path) -> list[Path]:
    """Session folders (those holding a meta.json), oldest first by folder name. Whatever
    their meta.json is (a FIFO, a folder): listed, and found unreadable when read."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "meta.json").exists())


def broken_sessions(root: Path) -> list[Path]:
    """Folders that hold a session's files (events, probe, logs) but no meta.json: shown as
    broken, never silently skipped."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not (p / "meta.json").exists()
                  and any((p / name).exists() for name in ("events.jsonl", "probe", "logs")))


def find_session(root: Path, query: str | None, *, running_only: bool = False) -> Path:
    """Resolve a session by folder name or any unique part of it.

    With no query, the one running session is meant (or the only session there is).
    """
    from neurotui.session.status import session_status  # local: avoids an import cycle

    candidates = list_sessions(root)
    if query:
        path = Path(query)
        if (path / "meta.json").is_file():
            return path.resolve()
        exact = [p for p in candidates if p.name == query]
        if exact:
            return exact[0]
        candidates = [p for p in candidates if query in p.name]
        if not candidates:
            broken = [p for p in broken_sessions(root) if query in p.name]
            if broken:
                raise SessionNotFound(f"{broken[0]} has no meta.json: the session is broken "
                                      "(its files are there; `neurotui ls` lists it)")
            raise SessionNotFound(f"no session matching {query!r} under {root}")
    if running_only or not query:
        running = [p for p in candidates if session_status(p).running]
        if running or running_only:
            candidates = running
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        what = "running session" if (running_only or not query) else "session"
        raise SessionNotFound(f"no {what} under {root}")
    names = ", ".join(p.name for p in candidates[-8:])
    raise SessionNotFound(f"{len(candidates)} sessions match; name one of: {names}")
