"""`neurotui profile`'s arguments and refusals, through the real command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def profile(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir",
                           str(REPO / "sessions"), "profile", *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.mark.parametrize(("args", "said"), [
    (("--steps", "0"), "must be 1 to 1000"),
    (("--steps", "five"), "not a whole number"),
    (("--ranks", "0,x"), "not a list of ranks"),
    (("--ranks", "-1"), "not a list of ranks"),
])
def test_bad_arguments_are_refused_with_a_reason(args: tuple[str, ...], said: str) -> None:
    done = profile(*args)
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_a_recorded_session_that_ended_is_not_profiled() -> None:
    done = profile("sample-cpu-gloo")
    assert done.returncode == 1, done.stderr
    assert "sample-cpu-gloo is not running (completed)" in done.stderr
    assert not (REPO / "sessions" / "sample-cpu-gloo" / "profiles").exists()


def test_no_session_matching_is_said_so(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(tmp_path),
                           "profile"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and "no running session" in done.stderr, done.stderr
