"""A bad field drops the field, not the step (issue #63): a step line printing a negative
throughput, samples or time is recorded as its step without that figure. The reader refuses a
step whose samples or time is below 0, and samples are worked out of a printed rate: such a
line cost the whole step before. Through the parser's every way of reading a line, and
through a real supervised run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.sources.steplog import StepLineParser

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tests" / "scripts" / "bad_fields.py"


@pytest.mark.parametrize(("line", "left_out"), [
    ("step 5 loss 0.3 throughput -3.2 samples/s", "throughput"),
    ("neurotui-runner step=5 rank=1 samples=-16 loss=0.3", "samples"),
    ("neurotui-runner step=5 rank=1 samples=16 loss=0.3 throughput=-3.2", "throughput"),
    ("neurotui-runner step=5 rank=1 samples=16 loss=0.3 dt=-0.5", "dt"),
])
def test_the_parser_keeps_the_step_and_leaves_the_bad_field_out(line: str,
                                                                left_out: str) -> None:
    good = line.replace("=-", "=").replace(" -", " ")
    parser = StepLineParser.default()
    expected = parser.parse(good)
    assert expected is not None and getattr(expected, left_out) is not None
    record = parser.parse(line)
    assert record is not None and record.step == 5 and record.loss == 0.3
    assert getattr(record, left_out) is None
    # The supervisor's ways: a batch of lines, a shape learnt at its second line and read at
    # its places after (the sign is the shape's: such a shape is read the long way).
    for values in parser.parse_values_many([line] * 4) + parser.parse_values_many([line]):
        assert values is not None and values.step == 5  # type: ignore[union-attr]
        assert getattr(values, left_out) is None
    assert parser.parse_figures_many([line, line]) is None
    assert parser.figure_runs_many([line, line]) is None


def test_a_negative_zero_is_no_bad_field() -> None:
    record = StepLineParser.default().parse("step 5 loss 0.3 throughput -0.0 samples/s")
    assert record is not None and record.throughput == 0.0


def test_a_supervised_run_records_every_step_without_its_bad_field(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    done = subprocess.run(
        [sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions), "run",
         "--headless", "--no-auto-probe", "--", sys.executable, str(SCRIPT)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "unreadable" not in done.stderr, done.stderr  # (no step refused when read)
    (session,) = sessions.iterdir()
    reader = SessionReader(session).load()
    assert reader.problems.summary() is None
    steps = reader.steps()
    for rank in (0, 1):
        assert list(steps[steps["rank"] == rank]["step"]) == list(range(1, 9)), rank
    records = {(r["rank"], r["step"]): r for r in map(
        json.loads, (session / layout.EVENTS).read_text().splitlines()) if r["kind"] == "step"}
    plain, runner = records[(0, 5)], records[(1, 6)]
    assert plain["loss"] == 0.5 and plain.get("throughput") is None
    assert plain.get("samples") is None  # (no rate to work them out of)
    assert records[(0, 4)]["throughput"] == 12.5  # (the good lines' figures kept)
    assert runner["loss"] == 0.6 and runner.get("samples") is None
    assert records[(1, 7)]["samples"] == 16.0
