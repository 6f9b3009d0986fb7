"""No number in a session can make a command fail: out-of-range values are reported with their
file and line and skipped, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

REPO = Path(__file__).resolve().parents[3]


def make_session(root: Path) -> Path:
    d = root / "20260101-000000-huge"
    (d / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(d / layout.META, {
        "format": FORMAT_VERSION, "id": d.name, "name": "huge", "started_at": 100.0,
        "ended_at": 200.0, "exit": {"code": 0, "signal": None, "reason": "completed",
                                    "attempts": 1}, "command": ["x"], "config": {}})
    good = [{"t": 100.0 + i, "kind": "step", "rank": 0, "step": i, "samples": 16, "loss": 1.0,
             "dt": 1.0, "src": "probe", "attempt": 0} for i in range(1, 20)]
    lines = [json.dumps(r) for r in good]
    lines += [
        '{"t": 130.0, "kind": "step", "rank": 0, "step": 9223372036854775808, "samples": 16,'
        ' "loss": 1.0, "dt": 1.0, "src": "probe", "attempt": 0}',
        '{"t": 131.0, "kind": "step", "rank": 0, "step": ' + "9" * 400 + ', "samples": 16,'
        ' "loss": 1.0, "dt": 1.0, "src": "probe", "attempt": 0}',
        '{"t": 132.0, "kind": "step", "rank": 0, "step": 40, "samples": 1e999, "loss": 1.0,'
        ' "dt": 1.0, "src": "probe", "attempt": 0}',
        '{"t": 1e999, "kind": "host", "cpu": [1.0], "mem_used": 1, "mem_total": 2}',
    ]
    (layout.probe_path(d, 0)).write_text("\n".join(lines) + "\n")
    return d


def test_the_reader_skips_and_reports_out_of_range_values(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    reader = SessionReader(d).load()
    assert list(reader.steps()["step"]) == list(range(1, 20))
    summary = reader.problems.summary()
    assert summary is not None and "4 unreadable line(s)" in summary
    assert "probe/rank-0.jsonl:20 (step 9223372036854775808 out of range)" in summary
    assert "samples inf out of range" in summary and "time inf out of range" in summary


def test_no_command_prints_a_traceback_on_such_a_session(tmp_path: Path) -> None:
    d = make_session(tmp_path)
    for args in (["compare", d.name], ["export", d.name, "--format", "csv", "--out",
                                        str(tmp_path / "out.csv")], ["ls"],
                 ["attach", "--headless", d.name]):
        done = subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir",
                               str(tmp_path), *args], capture_output=True, text=True,
                              timeout=120, cwd=REPO)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode == 0, (args, done.stderr)
