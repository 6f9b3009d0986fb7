"""`neurotui patterns LOGFILE`: the real command on a real capture and on a user's own format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NANOTRON = (REPO / "tests" / "fixtures" / "steplogs" /
            "nanotron_11.5K-suffixes_real-capture_nanotron-issue390_EXCERPT.txt")


def patterns(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "neurotui", "patterns", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def test_a_real_log_shows_its_steps_and_values() -> None:
    done = patterns(str(NANOTRON))
    assert done.returncode == 0, done.stderr
    assert ": 5 lines, 4 step(s), 0 compile event(s)" in done.stdout
    assert "step=327281  loss=2.38  dt=11.5  global_batch=64" in done.stdout


def test_unmatched_lines_are_shown_literally_and_a_pattern_can_be_tried(tmp_path) -> None:
    log = tmp_path / "own.log"
    log.write_text("epoch 3 batch 10 my_loss=1.5 \x1b[31mred\x1b[0m\nepoch 3 batch 11 "
                   "my_loss=1.4\n")
    done = patterns(str(log))
    assert "0 step(s)" in done.stdout
    assert "1: epoch 3 batch 10 my_loss=1.5 red" in done.stdout  # its colour codes dropped
    assert "\x1b" not in done.stdout, "escape sequences from the log are never sent as such"
    tried = patterns(str(log), "--step-pattern", r"batch (?P<step>\d+) my_loss=(?P<loss>[\d.]+)")
    assert "2 step(s)" in tried.stdout and "step=11  loss=1.4" in tried.stdout


def test_bad_input_gets_a_clear_message(tmp_path) -> None:
    missing = patterns(str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    bad = patterns(str(NANOTRON), "--step-pattern", "(?P<step>")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    piped = patterns("-", stdin="neurotui-runner step=3 rank=0 samples=16 loss=1.0\n")
    assert "1 step(s)" in piped.stdout
