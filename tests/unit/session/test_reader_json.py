"""The reader's JSON lines go through msgspec where it reads them, and json where it does
not: either way a line gives what Python's json gives it (or is refused as json refuses it)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui.session.reader import json_loads

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


def same(a: object, b: object) -> bool:
    return repr(a) == repr(b)  # (NaN == NaN, 1 is not 1.0, -0.0 is not 0.0)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_a_line_python_wrote_reads_as_json_reads_it(value: object) -> None:
    line = json.dumps(value).encode()  # NaN and infinities as Python's json writes them
    assert same(json_loads(line), json.loads(line))


@pytest.mark.parametrize("line", [
    b'{"t": 1.0, "kind": "host", "cpu": [NaN, Infinity, -Infinity]}',
    b'{"x": 1e400}', b'{"s": "\\ud800"}', b'\xef\xbb\xbf{"a": 1}',
    b'{"a": 123456789012345678901234567890}', b'{"a": 1, "a": 2}', b'{"a": -0.0}',
])
def test_lines_msgspec_refuses_or_reads_alike(line: bytes) -> None:
    assert same(json_loads(line), json.loads(line))


@pytest.mark.parametrize("line", [b'{"a": "\x01"}', b'{"a": 1}{"b": 2}', b"{", b"\xff\xfe{",
                                  b""])
def test_lines_json_refuses_are_refused(line: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(line)
    with pytest.raises(ValueError):
        json_loads(line)


def test_nan_is_kept() -> None:
    assert math.isnan(json_loads(b'{"util": NaN}')["util"])
