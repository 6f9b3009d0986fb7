"""The jobs of many nodes in a sessions folder: each node's part is a session of its own, and
the parts of one job share meta.json's `job.id` (session/jobid.py). With the sessions folder on
shared storage (FSx for Lustre, EFS), every node's part is there."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.paths import list_sessions


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
    """The sessions that are nodes of `job_id`, ordered by node name (then folder)."""
    parts: list[tuple[str, Path]] = []
    for path in list_sessions(root):
        try:
            meta = load_meta(path)
        except SessionFormatError:
            continue  # `ls` names it; a job is what can be read of it
        if job_of(meta) == job_id:
            parts.append((node_of(meta) or "", path))
    return [path for _, path in sorted(parts)]
