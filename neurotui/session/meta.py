"""A session's meta.json, read and checked: light on purpose (no pandas), for the commands
and the supervisor that need only that."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.writer import FORMAT_VERSION


class SessionFormatError(ValueError):
    """The session cannot be read at all (missing or corrupt meta.json, newer format)."""


def load_meta(session_dir: Path) -> dict[str, Any]:
    path = session_dir / layout.META
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise SessionFormatError(f"{path}: missing: not a neurotui session") from None
    except (OSError, ValueError) as exc:
        raise SessionFormatError(f"{path}: unreadable: {exc}") from None
    if not isinstance(meta, dict):
        raise SessionFormatError(f"{path}: not a JSON object")
    version = meta.get("format")
    if not isinstance(version, int):
        raise SessionFormatError(f"{path}: no format version")
    if version > FORMAT_VERSION:
        raise SessionFormatError(
            f"{path}: session format {version} is newer than this neurotui reads "
            f"(format {FORMAT_VERSION}); upgrade neurotui to read it")
    return meta
