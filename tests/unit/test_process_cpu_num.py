"""Each process row says which CPU the process last ran on (`cpu_num`): real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from neurotui.collect.host import ProcessRows

pytestmark = pytest.mark.skipif(not hasattr(psutil.Process, "cpu_num"),
                                reason="psutil has no cpu_num here (macOS)")


def test_rows_carry_the_cpu_each_process_last_ran_on() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        procs = [psutil.Process(os.getpid()), psutil.Process(child.pid)]
        rows = ProcessRows().sample(procs, os.getpid())
        cpus = psutil.cpu_count() or 1
        assert len(rows) == 2
        for row in rows:
            assert isinstance(row["cpu_num"], int) and 0 <= row["cpu_num"] < cpus
    finally:
        child.kill()
        child.wait()


def test_unknown_cpu_is_left_out_not_invented(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_cpu(self: psutil.Process) -> int:
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "cpu_num", no_cpu)
    rows = ProcessRows().sample([psutil.Process(os.getpid())], os.getpid())
    assert len(rows) == 1 and "cpu_num" not in rows[0]
