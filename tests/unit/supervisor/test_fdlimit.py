"""The supervisor raises its own limit of open files (a job of 128 ranks needs some 1,300
descriptors of it), and the job runs with the limit it would have had bare."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from neurotui.supervisor import fdlimit
from tests.e2e.conftest import neurotui_argv, only_session

_REPORT = """
import os, resource
def soft(pid):
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            return line.split()[3]
print("job", resource.getrlimit(resource.RLIMIT_NOFILE)[0], "supervisor", soft(os.getppid()))
"""


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] <= 512,
                    reason="needs a hard limit of open files above 512 to raise to")
def test_the_supervisor_raises_its_limit_and_the_job_keeps_its_own(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    sessions = tmp_path / "sessions"
    done = subprocess.run(
        neurotui_argv(sessions, "run", "--headless", "--", sys.executable, "-c", _REPORT),
        capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard)))
    assert done.returncode == 0, done.stderr
    said = [line for p in (only_session(sessions) / "logs").rglob("*") if p.is_file()
            for line in p.read_text(errors="replace").splitlines() if line.startswith("job ")]
    want = hard if hard != resource.RLIM_INFINITY else fdlimit.CAP
    assert said == [f"job 512 supervisor {min(want, fdlimit.CAP)}"]


def test_nothing_to_put_back_where_nothing_was_raised() -> None:
    assert fdlimit.as_it_was(None) is None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    put_back = fdlimit.as_it_was((soft, hard))
    assert put_back is not None
    put_back()  # the limits as they are: a no-op here, as in the child it restores them
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)
