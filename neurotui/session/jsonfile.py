"""JSON as sessions hold it: read with limits, written strict.

Reading: a session's JSON files (meta.json, neuron_tally.json, the cache's stamp, a stop
request) come from a folder anyone sharing it may write to. One file nested a thousand levels
deep, a FIFO or a 100 MB meta.json must give that session a named problem, never an exception
that takes every other command down (`ls`, `stop` of another session) nor minutes of reading.
So a file is refused before it is read when it is not a regular file or is over its size cap,
and after parsing when it is nested deeper than MAX_DEPTH.

Writing: what neurotui writes is strict JSON (RFC 8259: no NaN, no Infinity), readable by any
JSON parser. A non-finite number is written as null, and the record says what it was in one
field, `nonfinite`: an object from the number's place (its keys joined by dots, list items by
their index: `loss`, `phases.data`, `cpu.3`) to "nan", "inf" or "-inf" (FORMAT.md).
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

MAX_DEPTH = 32
"""Deepest nesting a session's JSON may have (its meta.json has 4 levels): past Python's
recursion limit (about 1,000) json.loads raises RecursionError, and well before it every
recursive walk over the value (json.dumps when meta.json is updated) becomes a hazard."""

META_MAX_BYTES = 1 << 20
"""meta.json is a few kB (a finished run's summary included): 1 MiB leaves room for any real one
and keeps a 100 MB one from being read by every `ls`."""

SMALL_FILE_MAX_BYTES = 16 << 20
"""Other per-session JSON files (neuron_tally.json, the cache's stamp.json, a stop request)."""

NONFINITE = "nonfinite"
"""The field a strict record names its non-finite numbers in (see the module's docstring)."""


class JsonFileError(ValueError):
    """A session's JSON file cannot be used: its reason, for the user, without the path."""


def read_json_file(path: Path, max_bytes: int, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `path`. Raises FileNotFoundError when there is no such file,
    JsonFileError (a ValueError) when it is not a regular file, holds more than `max_bytes`,
    is not JSON or is nested deeper than `max_depth`, and OSError when it cannot be read."""
    # O_NONBLOCK: opening a FIFO put in place of the file must not wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JsonFileError("not a regular file")
        if info.st_size > max_bytes:
            raise JsonFileError(f"{info.st_size:,} bytes, over the {max_bytes:,} such a file "
                                "may hold: not read")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while being opened
        raise JsonFileError(f"over the {max_bytes:,} bytes such a file may hold: not read")
    return loads_limited(data, max_depth=max_depth)


def loads_limited(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads, raising JsonFileError (a ValueError) for text that is not JSON or is nested
    deeper than `max_depth`. Bare NaN and Infinity, which older sessions hold, are read."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise JsonFileError(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise JsonFileError(str(exc)) from None
    if depth_over(value, max_depth):
        raise JsonFileError(f"nested deeper than {max_depth} levels")
    return value


def depth_over(value: Any, max_depth: int) -> bool:
    """Whether `value` has lists or objects nested more than `max_depth` levels (without
    recursion: the value may be as deep as the parser allowed)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item  # type: ignore[assignment]
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return False


# -- strict writing ----------------------------------------------------------------------------
def strict(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with every non-finite float (at any depth) as None, and those places named in
    its `nonfinite` field (merged with one it has); the record itself when all are finite."""
    found: dict[str, str] = {}
    cleaned = _finite(record, "", found)
    if not found:
        return record
    previous = cleaned.get(NONFINITE)
    cleaned[NONFINITE] = {**previous, **found} if isinstance(previous, dict) else found
    return cleaned


def _finite(value: Any, place: str, found: dict[str, str]) -> Any:
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        found[place] = nonfinite_name(value)
        return None
    if isinstance(value, dict):
        return {key: _finite(item, f"{place}.{key}" if place else str(key), found)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item, f"{place}.{i}" if place else str(i), found)
                for i, item in enumerate(value)]
    return value


def nonfinite_name(value: float) -> str:
    """How `nonfinite` names a non-finite number: "nan", "inf" or "-inf"."""
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def restore_nonfinite(record: dict[str, Any]) -> dict[str, Any]:
    """The record as written before `strict`: its `nonfinite` places back to NaN or +-inf (in
    nested objects and lists too; a place that is not there now, or not null, is left alone)."""
    places = record.get(NONFINITE)
    if not isinstance(places, dict):
        return record
    values = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    for place, name in places.items():
        if not isinstance(place, str) or name not in values:
            continue
        *path, last = place.split(".")
        target: Any = record
        for key in path:
            target = _child(target, key)
        if isinstance(target, dict) and target.get(last, 0) is None:
            target[last] = values[name]
        elif isinstance(target, list) and last.isdigit() and int(last) < len(target) and \
                target[int(last)] is None:
            target[int(last)] = values[name]
    return record


def _child(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key)
    if isinstance(value, list) and key.isdigit() and int(key) < len(value):
        return value[int(key)]
    return None


def dumps_strict(value: Any, **options: Any) -> str:
    """json.dumps that writes strict JSON: a value holding non-finite numbers is written with
    them as null (and, for an object, named in `nonfinite`)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise  # a circular reference: not a number's fault
        cleaned = strict(value) if isinstance(value, dict) else \
            [strict(item) for item in value] if isinstance(value, list) and \
            all(isinstance(item, dict) for item in value) else _finite(value, "", {})
        return json.dumps(cleaned, allow_nan=False, **options)
