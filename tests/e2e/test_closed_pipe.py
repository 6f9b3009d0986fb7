"""`neurotui ... | head -1`: a reader that goes away early ends the command quietly (exit
141, as SIGPIPE would, no traceback), and a followed run trains on without its view.

Real processes on real pipes: the reader takes what it wants and closes its end. The pipe is
shrunk to one page so that the output left behind cannot all fit in it."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, meta, neurotui_argv, only_session, run_cli, wait_for

SIGPIPE_EXIT = 141


def small_pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    return read_end, write_end


def start_piped(sessions: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    """The real CLI writing into a small pipe; our read end of it."""
    read_end, write_end = small_pipe()
    proc = subprocess.Popen(neurotui_argv(sessions, *args), stdout=write_end,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    os.close(write_end)
    return proc, read_end


def first_line(read_end: int) -> str:
    """Read up to the first newline, unbuffered (what `head -1` takes), then close."""
    got = b""
    while b"\n" not in got:
        chunk = os.read(read_end, 1)
        assert chunk, f"the output ended before a line: {got!r}"
        got += chunk
    os.close(read_end)
    return got.decode()


def ended_quietly(proc: subprocess.Popen[str]) -> str:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == SIGPIPE_EXIT, (proc.returncode, err)
    assert "Traceback" not in err and "Error" not in err, err
    return err


def a_finished_session(sessions: Path) -> Path:
    result = run_cli(sessions, "run", "--headless", "--name", "one", "--",
                     sys.executable, "-c", "print('hello')")
    assert result.returncode == 0, result.stderr
    return only_session(sessions)


def test_ls_into_head_ends_quietly(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    recorded = a_finished_session(sessions)
    # Many rows (copies of a real session): more than the pipe and Python's buffer hold.
    for i in range(300):
        shutil.copytree(recorded, sessions / f"20250101-000000-copy{i:03d}")
    proc, read_end = start_piped(sessions, "ls")
    assert first_line(read_end).startswith("SESSION ")
    assert ended_quietly(proc) == ""


@pytest.mark.parametrize("command", [
    ["ls"], ["compare", "one", "one"], ["export", "one", "--what", "events", "--out", "-"]])
def test_output_closed_before_anything_is_written(tmp_path: Path,
                                                  command: list[str]) -> None:
    """`| head -0`: the first write already meets the closed pipe."""
    sessions = tmp_path / "sessions"
    a_finished_session(sessions)
    read_end, write_end = small_pipe()
    os.close(read_end)
    proc = subprocess.Popen(neurotui_argv(sessions, *command), stdout=write_end,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    os.close(write_end)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    # export stops writing when its reader has gone, as it did before: 0.
    assert proc.returncode == (0 if command[0] == "export" else SIGPIPE_EXIT), err


TRAINING = """
import time
for i in range(12):
    print(f"line {i}", flush=True)
    time.sleep(0.5)
"""


def test_a_headless_run_into_head_trains_on(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    proc, read_end = start_piped(sessions, "run", "--headless", "--interval", "0.2", "--",
                                 sys.executable, "-c", TRAINING)
    assert first_line(read_end).startswith("neurotui: session ")
    err = ended_quietly(proc)
    assert "training goes on" in err
    session = only_session(sessions)
    assert meta(session).get("exit") is None, "the view ended after the run: nothing shown"
    # The supervisor is detached: the run goes to its end, every line recorded.
    wait_for(lambda: meta(session).get("exit"), 60, "the run's end")
    assert meta(session)["exit"]["code"] == 0
    logged = (session / "logs" / "launcher.log").read_text().splitlines()
    assert logged == [f"line {i}" for i in range(12)]
