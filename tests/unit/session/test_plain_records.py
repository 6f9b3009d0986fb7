"""Telemetry written by msgspec (EventWriter.write_plain) reads back as the json module's."""

from __future__ import annotations

import json
from pathlib import Path

from neurotui.session.writer import EventWriter

ROWS = [{"pid": 4242, "ppid": 1, "name": "python3 train.py é", "role": "rank", "cpu": 99.5,
         "rss": 3 << 30, "cpu_num": 127},
        {"pid": 4243, "ppid": 4242, "name": "pt_data_worker", "role": "worker", "cpu": 0.0,
         "rss": 0}]


def _lines(tmp_path: Path, write: str, **fields: object) -> list[dict[str, object]]:
    path = tmp_path / f"{write}.jsonl"
    writer = EventWriter(path)
    getattr(writer, write)("procs", t=1_700_000_000.125, **fields)
    writer.write_plain("host", t=1_700_000_001.0, cpu=[0.0, 12.5, 100.0], mem_used=1 << 33,
                       mem_total=1 << 36, load=None)
    writer.flush()
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_plain_records_read_back_as_the_json_modules(tmp_path: Path) -> None:
    plain = _lines(tmp_path, "write_plain", procs=ROWS)
    assert plain == _lines(tmp_path, "write", procs=ROWS)
    assert plain[0] == {"t": 1_700_000_000.125, "kind": "procs", "procs": ROWS}
    assert plain[1]["cpu"] == [0.0, 12.5, 100.0] and plain[1]["load"] is None


def test_a_name_msgspec_refuses_is_written_by_the_json_module(tmp_path: Path) -> None:
    """psutil decodes a process's name with surrogateescape: a lone surrogate, which msgspec
    will not write, is escaped by the json module instead; nothing is lost."""
    rows = [{**ROWS[0], "name": "train\udcff"}]
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path)
    writer.write_plain("procs", t=1.0, procs=rows)
    writer.flush()
    (line,) = path.read_text(encoding="utf-8").splitlines()
    assert "\\udcff" in line and json.loads(line)["procs"] == rows
    assert writer.failed_writes == 0
