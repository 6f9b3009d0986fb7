"""Each process row says which CPU the process last ran on (`cpu_num`): real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from neurotui.collect import host
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
    monkeypatch.setattr(host, "_HAVE_PROC", False)  # psutil's path (macOS, BSD)
    rows = ProcessRows().sample([psutil.Process(os.getpid())], os.getpid())
    assert len(rows) == 1 and "cpu_num" not in rows[0]


def test_a_stat_line_without_the_processor_field_gives_no_cpu() -> None:
    with open(f"/proc/{os.getpid()}/stat", "rb") as f:
        raw = f.read()
    whole = host.parse_proc_stat(raw)
    assert whole.cpu_num is not None and whole.ppid == os.getppid()
    close = raw.rindex(b")")
    cut = raw[:close + 2] + b" ".join(raw[close + 2:].split()[:36])  # fields 3 to 38
    assert host.parse_proc_stat(cut).cpu_num is None


@pytest.mark.skipif(not host._HAVE_PROC, reason="no /proc")
def test_rows_from_proc_match_psutil() -> None:
    """The /proc reading gives what psutil's calls give: name, parent, memory, CPU share."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nwhile True: sum(range(50000)); time.sleep(0.005)"])
    try:
        procs = [psutil.Process(child.pid)]
        rows = ProcessRows()
        rows.sample(procs, os.getpid())
        watched = psutil.Process(child.pid)
        watched.cpu_percent()
        time.sleep(1.0)
        row = rows.sample(procs, os.getpid())[0]
        expected = watched.cpu_percent()
        assert row["name"] == watched.name() and row["ppid"] == os.getpid()
        assert row["cpu"] > 0 and abs(row["cpu"] - expected) <= max(3.0, 0.2 * expected)
        assert abs(row["rss"] - watched.memory_info().rss) <= 1 << 20
    finally:
        child.kill()
        child.wait()
