"""A session's meta.json, read and checked: light on purpose (no pandas), for the commands
and the supervisor that need only that.

Checked so that one session's meta.json can only ever be that session's problem: over its size
cap, nested too deep, not JSON, or a field of the wrong type (a `started_at` that is a string,
a `user_command` that is not a list) is a SessionFormatError naming the file and why, which
every command reports for that session alone (jsonfile.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.jsonfile import META_MAX_BYTES, JsonFileError, read_json_file
from neurotui.session.writer import FORMAT_VERSION


class SessionFormatError(ValueError):
    """The session cannot be read at all (missing or corrupt meta.json, newer format)."""


_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "id": ((str,), "a string"), "name": ((str,), "a string"),
    "host": ((str,), "a string"), "cwd": ((str,), "a string"),
    "started_at": (_NUMBER, "a number"), "ended_at": (_NUMBER, "a number"),
    "adopted_at": (_NUMBER, "a number"), "job_create_time": (_NUMBER, "a number"),
    "supervisor_pid": ((int,), "a whole number"), "job_pid": ((int,), "a whole number"),
    "job_pgid": ((int,), "a whole number"), "attempt": ((int,), "a whole number"),
    "command": ((list,), "a list"), "user_command": ((list,), "a list"),
    "exit": ((dict,), "an object"), "instance": ((dict,), "an object"),
    "price": ((dict,), "an object"), "config": ((dict,), "an object"),
    "summary": ((dict,), "an object"), "job": ((dict,), "an object"),
    "versions": ((dict,), "an object"), "log_timing": ((dict,), "an object"),
    "metrics": ((dict,), "an object"),
    "spool": ((str,), "a string"), "control_socket": ((str,), "a string"),
}
"""The types of the fields commands read (FORMAT.md); null is allowed for each."""


def load_meta(session_dir: Path) -> dict[str, Any]:
    """meta.json of `session_dir`, checked; SessionFormatError says why it cannot be used."""
    path = session_dir / layout.META
    try:
        meta = read_json_file(path, META_MAX_BYTES)
    except FileNotFoundError:
        raise SessionFormatError(f"{path}: missing: not a neurotui session") from None
    except JsonFileError as exc:
        raise SessionFormatError(f"{path}: unreadable: {exc}") from None
    except OSError as exc:
        raise SessionFormatError(f"{path}: unreadable: {exc.strerror or exc}") from None
    if not isinstance(meta, dict):
        raise SessionFormatError(f"{path}: not a JSON object")
    version = meta.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SessionFormatError(f"{path}: no format version")
    if version > FORMAT_VERSION:
        raise SessionFormatError(
            f"{path}: session format {version} is newer than this neurotui reads "
            f"(format {FORMAT_VERSION}); upgrade neurotui to read it")
    for field, (types, what) in _FIELD_TYPES.items():
        value = meta.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            raise SessionFormatError(f"{path}: `{field}` is {_json_type(value)}, not {what}")
    for field in ("command", "user_command"):
        if any(not isinstance(arg, str) for arg in meta.get(field) or ()):
            raise SessionFormatError(f"{path}: `{field}` holds something other than strings")
    return meta


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"
