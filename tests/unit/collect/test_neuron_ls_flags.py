"""neuron-ls is asked for JSON as Neuron 2.34+ spells it (`--output-format json`) before the
older `--json-output` and the table; a flag the tool refuses falls through, its reason kept.
Run for real: the stand-in neuron-ls replays real captures (tests/standins/tool_captures.py);
the "2.34" tool below answers the new flag with the JSON capture we have (no capture of the
new format is public yet) and refuses the old flag as 2.34 does."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from neurotui.collect.accelerators import neuron_ls_snapshot
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from tests.standins import tool_captures as replay


def snapshot(session: Path, exe: str) -> dict:
    writer = EventWriter(session / layout.EVENTS)
    assert neuron_ls_snapshot(exe, writer, time.time()) is not None
    writer.close()
    (record,) = SessionReader(session).load().events["neuron_devices"]
    return record


@pytest.fixture
def session(tmp_path: Path) -> Path:
    folder = tmp_path / "session"
    folder.mkdir()
    write_json_atomic(folder / layout.META, {"format": FORMAT_VERSION, "exit": None})
    return folder


def test_a_tool_without_the_new_flag_falls_through_with_its_reason(
        session: Path, tmp_path: Path) -> None:
    # The stand-in, like a neuron-ls before 2.34, does not know --output-format: it prints
    # its table, which is not the JSON asked for.
    exe = replay.install(tmp_path / "bin") / "neuron-ls"
    record = snapshot(session, str(exe))
    assert record["forms"] == ["json", "table"]
    assert list(record["refused"]) == ["--output-format json"]
    assert "not understood" in record["refused"]["--output-format json"]
    assert record["devices"]


def test_a_2_34_tool_is_asked_the_new_flag_and_not_the_old(session: Path,
                                                            tmp_path: Path) -> None:
    capture = replay.FIXTURES / replay.NEURON_LS_JSON
    log = tmp_path / "asked.txt"
    exe = tmp_path / "neuron-ls"
    exe.write_text(f"""#!{sys.executable}
import sys
with open({str(log)!r}, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if "--json-output" in sys.argv:
    sys.exit("Error: unknown flag: --json-output")
text = open({str(capture)!r}).read()
if text.startswith("$ "):
    text = text.split("\\n", 1)[1]
if "--output-format" not in sys.argv:  # the table: the stand-in's own
    text = open({str(replay.FIXTURES / replay.NEURON_LS_TABLE)!r}).read()
sys.stdout.write(text)
""")
    exe.chmod(0o755)
    record = snapshot(session, str(exe))
    assert log.read_text().splitlines() == ["--output-format json", ""]
    assert record["forms"] == ["json", "table"] and record["refused"] == {}


def test_a_refused_flag_says_why(session: Path, tmp_path: Path) -> None:
    exe = tmp_path / "neuron-ls"
    exe.write_text(f"""#!{sys.executable}
import sys
if "--output-format" in sys.argv:
    sys.exit("Error: unknown flag: --output-format")
sys.stdout.write(open({str(replay.FIXTURES / replay.NEURON_LS_TABLE)!r}).read())
""")
    exe.chmod(0o755)
    record = snapshot(session, str(exe))
    assert record["refused"]["--output-format json"] == (
        "neuron-ls exited with 1 (Error: unknown flag: --output-format)")
    assert record["forms"][-1] == "table" and record["devices"]
