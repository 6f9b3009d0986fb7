"""The jobs of many nodes in a sessions folder: each node's part is a session of its own, and
the parts of one job share meta.json's `job.id` (session/jobid.py). With the sessions folder on
shared storage (FSx for Lustre, EFS), every node's part is there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.paths import list_sessions
from neurotui.session.status import status_of


def job_of(meta: Mapping[str, Any]) -> str | None:
    """The id of the job a session is a node of; None: a run of one node."""
    job = meta.get("job")
    if isinstance(job, Mapping) and isinstance(job.get("id"), str) and job["id"]:
        return str(job["id"])
    return None


def node_of(meta: Mapping[str, Any]) -> str | None:
    job = meta.get("job")
    node = job.get("node") if isinstance(job, Mapping) else None
    return str(node) if node else None


def job_parts(root: Path, job_id: str) -> list[Path]:
    """The sessions that are nodes of `job_id`, ordered by node name (then folder).

    None for a name that is a session's own folder (its name under `root`, or its path):
    that names the session, and every other session's meta.json is left unread (a damaged
    or huge meta.json elsewhere costs a command on this one nothing)."""
    if (root / job_id / layout.META).exists():
        return []
    parts: list[tuple[str, Path]] = []
    for path in list_sessions(root):
        try:
            meta = load_meta(path)
        except SessionFormatError:
            continue  # `ls` names it; a job is what can be read of it
        if job_of(meta) == job_id:
            parts.append((node_of(meta) or "", path))
    return [path for _, path in sorted(parts)]


def last_heard(session_dir: Path) -> float | None:
    """When a node's supervisor last wrote to its part (its events file's modification
    time); None: never."""
    try:
        return (session_dir / layout.EVENTS).stat().st_mtime
    except OSError:
        return None


_EXIT_ORDER = ("failed", "stopped", "ended", "completed")
"""Which node's exit stands for the job's (by its state, session/status.py): a failure
first, then a stop."""


def job_meta(job_id: str, metas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A job's nodes' meta.json as one run's: started with its first node, ended with its
    last (and only once every node has), its price the sum of its nodes' (unknown if one
    is), its instance type where all nodes share one, its exit the worst of its nodes'."""
    if not metas:
        raise ValueError(f"no session of job {job_id}")
    first = dict(metas[0])
    ended = [m.get("ended_at") for m in metas]
    prices = [(m.get("price") or {}).get("usd_per_hour") for m in metas]
    types = {(m.get("instance") or {}).get("type") for m in metas}
    job_exit = None
    if all(isinstance(m.get("exit"), Mapping) for m in metas):  # (every node has ended)
        worst = min(metas, key=lambda m: _EXIT_ORDER.index(status_of(m).state))
        job_exit = worst["exit"]
    return {
        **first, "id": job_id, "name": f"job {job_id}",
        "started_at": min((m["started_at"] for m in metas if m.get("started_at")),
                          default=None),
        "ended_at": None if None in ended else max(ended),
        "exit": job_exit,
        "instance": {"type": types.pop()} if len(types) == 1 else None,
        "price": {"usd_per_hour": sum(prices), "as_of": (first.get("price") or {}).get("as_of"),
                  "source": f"{len(metas)} nodes x "
                  f"{(first.get('price') or {}).get('source') or 'price'}"}
        if all(_is_number(p) for p in prices) else
        {"note": "no price: " + ", ".join(
            f"{node_of(m) or '?'} has none" for m, p in zip(metas, prices, strict=True)
            if not _is_number(p))},
        "records_alerts": all(m.get("records_alerts") for m in metas),
        "job": {**(first.get("job") or {}), "id": job_id, "nodes": len(metas)},
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
