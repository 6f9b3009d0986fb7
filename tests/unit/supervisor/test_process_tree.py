"""The job's process tree as telemetry samples it: real processes, real /proc."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from neurotui.collect import host
from neurotui.collect.host import ProcessRows
from neurotui.supervisor import process_tree
from neurotui.supervisor.process_tree import RESCAN_S, SETTLE_S, SETTLED_RESCAN_S, JobTree

# A launcher named like torchrun, two ranks, each with a worker (a DataLoader's); with
# SHORT set, one more child of the launcher that ends after a second and is reaped.
_LAUNCHER = """
import subprocess, sys, time
rank = ("import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)")
ranks = [subprocess.Popen([sys.executable, '-c', rank]) for _ in range(2)]
if sys.argv[2:] == ['SHORT']:
    subprocess.Popen(['sleep', '1']).wait()
time.sleep(60)
"""


def _wait_for(tree_pid: int, count: int) -> None:
    deadline = time.time() + 15
    while time.time() < deadline:
        if len(psutil.Process(tree_pid).children(recursive=True)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"the job did not start its {count} processes")


@pytest.fixture
def job(request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[bytes]]:
    extra = getattr(request, "param", [])
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, "torchrun", *extra],
                            start_new_session=True)
    try:
        yield proc
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()


def test_roles_of_a_torchrun_tree_and_each_command_line_read_once(job, monkeypatch) -> None:
    _wait_for(job.pid, 4)
    read = []
    real_cmdline = psutil.Process.cmdline

    def cmdline(self: psutil.Process) -> list[str]:
        read.append(self.pid)
        return real_cmdline(self)

    monkeypatch.setattr(psutil.Process, "cmdline", cmdline)
    tree, rows = JobTree(job.pid), ProcessRows()
    first = rows.sample(tree.sampled(100.0), job.pid)
    roles = sorted(row["role"] for row in first)
    assert roles == ["launcher", "rank", "rank", "worker", "worker"]
    assert next(r["role"] for r in first if r["pid"] == job.pid) == "launcher"
    once = len(read)
    assert once <= len(first) + 1  # each process's, and the launcher's for its kind
    again = rows.sample(tree.sampled(100.5), job.pid)
    assert sorted(row["role"] for row in again) == roles
    assert len(read) == once  # roles are remembered, not worked out at every sample
    assert all(row["rss"] > 0 for row in again)


@pytest.mark.parametrize("job", [["SHORT"]], indirect=True)
def test_a_settled_tree_is_rescanned_every_few_seconds_a_changing_one_each_second(job) -> None:
    _wait_for(job.pid, 5)
    tree = JobTree(job.pid)
    assert len(tree.sampled(100.0)) == 6  # the first scan
    # A launcher's ranks can take many seconds to start: a tree is rescanned each second
    # until it has not changed for SETTLE_S.
    assert len(tree.sampled(101.0)) == 6
    assert tree._next_scan == 102.0
    settled_at = 100.0 + SETTLE_S
    assert len(tree.sampled(settled_at)) == 6  # no change for SETTLE_S: settled
    deadline = time.time() + 10
    while len(psutil.Process(job.pid).children(recursive=True)) > 4 and time.time() < deadline:
        time.sleep(0.05)  # the short-lived child ended and was reaped
    assert len(tree.sampled(settled_at + SETTLED_RESCAN_S - 0.1)) == 6  # not looked at yet
    assert len(tree.sampled(settled_at + SETTLED_RESCAN_S)) == 5  # rescanned: it is gone
    assert tree._next_scan == settled_at + SETTLED_RESCAN_S + RESCAN_S  # changing again


@pytest.fixture
def stat_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids whose /proc/PID/stat ProcScan reads (still read for real), in order."""
    read: list[int] = []
    real_read = process_tree._read_stat

    def counting(pid: int) -> tuple[int, int] | None:
        read.append(pid)
        return real_read(pid)

    monkeypatch.setattr(process_tree, "_read_stat", counting)
    return read


def test_a_scan_reads_only_new_processes_until_a_full_look(job, stat_reads) -> None:
    """ProcScan reads the stat of processes it has not seen; one of the job's whose parent is
    still there, or another process of the host, is read again only at a full look
    (FULL_SCAN_S)."""
    _wait_for(job.pid, 4)
    read = stat_reads
    scan = process_tree.ProcScan()
    first = scan.scan(job.pid, now=0.0)
    assert first is not None and len(first) == 5  # launcher, 2 ranks, 2 workers
    assert len(read) > len(first)  # the whole host, once
    others = len(read) - len(first)
    read.clear()
    assert sorted(scan.scan(job.pid, now=1.0)) == sorted(first)
    assert not set(read) & {pid for pid, _ in first}  # the job's: known, parents alive
    assert len(read) <= 2  # what started since
    rank = next(pid for pid, _ in first if psutil.Process(pid).ppid() == job.pid)
    late = subprocess.Popen(["sleep", "30"])  # a new process of the host, not of the job
    try:
        assert late.pid not in {pid for pid, _ in scan.scan(job.pid, now=2.0)}  # not the job's
        read.clear()
        scan.scan(job.pid, now=3.0)
        assert late.pid not in read  # seen once as another's: not read again
    finally:
        late.kill()
        late.wait()
    read.clear()
    full = scan.scan(job.pid, now=3.0 + process_tree.ProcScan.FULL_SCAN_S)
    assert sorted(full) == sorted(first) and len(read) >= others  # a full look
    assert rank in {pid for pid, _ in full}


def test_a_process_whose_parent_ended_is_read_again_and_leaves_the_tree(stat_reads) -> None:
    """A process is given a new parent only when its own ends: then (once the ended parent is
    reaped and its pid leaves /proc) the scan reads it again, and an orphan is no longer
    one of the job's."""
    launcher = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "middle = subprocess.Popen([sys.executable, '-c', 'import subprocess, time; "
        "subprocess.Popen([\"sleep\", \"60\"]); time.sleep(60)'])\n"
        "middle.wait()\n"  # reaps it when it is killed
        "time.sleep(60)\n")], start_new_session=True)
    orphan = None
    try:
        _wait_for(launcher.pid, 2)
        middle = psutil.Process(launcher.pid).children()[0]
        orphan = middle.children()[0]
        read = stat_reads
        scan = process_tree.ProcScan()
        assert {pid for pid, _ in scan.scan(launcher.pid, now=0.0)} == \
            {launcher.pid, middle.pid, orphan.pid}
        middle.kill()
        deadline = time.time() + 10
        while psutil.pid_exists(middle.pid) and time.time() < deadline:
            time.sleep(0.05)  # reaped by the launcher
        read.clear()
        assert {pid for pid, _ in scan.scan(launcher.pid, now=1.0)} == {launcher.pid}
        assert orphan.pid in read and launcher.pid not in read
    finally:
        if orphan is not None:
            with contextlib.suppress(psutil.Error):
                orphan.kill()
        for child_proc in psutil.Process(launcher.pid).children(recursive=True):
            child_proc.kill()
        launcher.kill()
        launcher.wait()


def test_rows_leave_out_a_process_that_ended_though_its_pid_is_taken(monkeypatch) -> None:
    """A row is a process's, not a pid's: once the process a stat file was kept open for
    ended, a process given its pid since is not read in its place (until the tree's scan
    finds that one and hands it over as a process of its own)."""
    ended = subprocess.Popen(["sleep", "30"])
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        proc = psutil.Process(ended.pid)
        rows = ProcessRows()
        assert [row["pid"] for row in rows.sample([proc], leader_pid=0)] == [ended.pid]
        ended.kill()
        ended.wait()
        # Its pid handed to another process: /proc/PID/stat now says the stranger's.
        real_open = host._open_stat
        monkeypatch.setattr(host, "_open_stat", lambda pid: real_open(stranger.pid))
        assert rows.sample([proc], leader_pid=0) == []
        assert rows.sample([proc], leader_pid=0) == []  # and at every sample after
        rows.close()
    finally:
        ended.kill()
        stranger.kill()
        stranger.wait()


def test_a_worker_started_later_joins_the_tree() -> None:
    launcher = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "time.sleep(1.0)\n"
        "subprocess.Popen(['sleep', '30'])\n"
        "time.sleep(30)\n")], start_new_session=True)
    try:
        scan = process_tree.ProcScan()
        assert [pid for pid, _ in scan.scan(launcher.pid, now=0.0)] == [launcher.pid]
        deadline = time.time() + 10
        while not psutil.Process(launcher.pid).children() and time.time() < deadline:
            time.sleep(0.05)
        child = psutil.Process(launcher.pid).children()[0].pid
        assert child in {pid for pid, _ in scan.scan(launcher.pid, now=1.0)}
    finally:
        for child_proc in psutil.Process(launcher.pid).children(recursive=True):
            child_proc.kill()
        launcher.kill()
        launcher.wait()
