"""The job's processes: remembered by (pid, create time) so that none is left behind.

torchrun starts every rank in a session of its own, so signalling the launcher's process group
does not reach the ranks; the supervisor therefore remembers every descendant it has seen and
signals them one by one when a stop has to be forced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from neurotui.collect.host import read_proc_stat

ProcKey = tuple[int, float]
RESCAN_S = 1.0
SETTLED_RESCAN_S = 5.0
SETTLE_S = 10.0
"""How often `sampled` rescans the tree: each second while it changes (the launcher starting
its ranks, DataLoader workers, a compiler) and for SETTLE_S after it last did, every
SETTLED_RESCAN_S once it has not for that long. A scan reads every process of the host
(/proc/PID/stat), hundreds on a big instance: most of an idle supervisor's cost when done
every second (a stop or a restart rescans at once in any case)."""


class JobTree:
    def __init__(self, leader_pid: int) -> None:
        self.leader_pid = leader_pid
        self.known: dict[ProcKey, psutil.Process] = {}
        self._sampled: list[psutil.Process] = []
        self._next_scan = 0.0
        self._changed_at: float | None = None  # the last rescan that found a change
        self._by_start: dict[tuple[int, int], psutil.Process] = {}
        """(pid, start time in clock ticks, from /proc) -> its process: found once."""
        self._scan = ProcScan()
        self.refresh()

    def sampled(self, now: float) -> list[psutil.Process]:
        """The tree for telemetry: the last scan's processes, rescanned when due (see
        RESCAN_S). One that ended since is skipped by its sampler (psutil raises)."""
        if now >= self._next_scan:
            before = {id(proc) for proc in self._sampled}
            self._sampled = self.refresh()
            if self._changed_at is None or {id(proc) for proc in self._sampled} != before:
                self._changed_at = now
            settled = now - self._changed_at >= SETTLE_S
            self._next_scan = now + (SETTLED_RESCAN_S if settled else RESCAN_S)
        return self._sampled

    def refresh(self) -> list[psutil.Process]:
        """Re-scan the tree; processes seen once stay remembered until they are gone."""
        tree = self._scan.scan(self.leader_pid, time.monotonic())
        if tree is None:  # no /proc (not Linux): psutil's own walk
            try:
                leader = psutil.Process(self.leader_pid)
                procs = [leader, *leader.children(recursive=True)]
            except psutil.Error:
                procs = []
        else:
            # A process seen before (same pid, same start) is not looked up again.
            procs = []
            for pid, started in tree:
                proc = self._by_start.get((pid, started))
                if proc is None:
                    with contextlib.suppress(psutil.Error):
                        proc = self._by_start[(pid, started)] = psutil.Process(pid)
                if proc is not None:
                    procs.append(proc)
        current = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                # The remembered object, not the fresh one: cpu_percent() measures between
                # calls on the same object.
                current.append(self.known.setdefault((proc.pid, proc.create_time()), proc))
        live = {id(proc) for proc in procs}
        self._by_start = {k: v for k, v in self._by_start.items() if id(v) in live}
        return current

    def alive(self) -> list[psutil.Process]:
        live = []
        for key, proc in list(self.known.items()):
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    live.append(proc)
                    continue
            except psutil.Error:
                pass
            del self.known[key]
        return live

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.leader_pid, sig)

    def signal_all(self, sig: signal.Signals) -> int:
        """Signal every live remembered process (and its group); returns how many."""
        self.refresh()
        live = self.alive()
        for proc in live:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        return len(live)


class ProcScan:
    """The leader's descendants from /proc/PID/stat, which says each process's parent.

    A scan reads the stat of the processes it has not seen before. A process seen before
    outside the job is not read again (its parent does not change into one of the job's);
    nor is one of the job's whose parent is still there (neither ended, so its parent is the
    same: a process is given a new parent only when its own ends). Both are read again at a
    full look every FULL_SCAN_S (a pid handed to a new process in between). Reading every
    process's stat at every scan cost 3 ms on this 2-core machine with 100 processes, and
    several times that on a big host with hundreds; reading the job's own, 8 ms a scan with
    32 ranks of 8 DataLoader workers each (tests/bench/bench_collectors.py --processes 288).
    A process whose parent ended keeps its old parent here until that parent is reaped (its
    pid leaves the listing): it stays among the job's processes meanwhile, as it was."""

    FULL_SCAN_S = 30.0

    def __init__(self) -> None:
        self._others: set[int] = set()  # seen, not the job's
        self._job: dict[int, tuple[int, int]] = {}  # the job's at the last scan: (parent, start)
        self._full_at = -float("inf")

    def scan(self, leader_pid: int, now: float) -> list[tuple[int, int]] | None:
        """(pid, start time in clock ticks) of the leader and all its descendants; None
        without /proc."""
        try:
            names = os.listdir("/proc")
        except OSError:
            return None
        if now - self._full_at >= self.FULL_SCAN_S:
            self._others, self._job, self._full_at = set(), {}, now
        pids = {int(name) for name in names if name.isdigit()}
        self._others &= pids  # forget the ended
        stats = {pid: seen for pid, seen in self._job.items()
                 if pid in pids and (seen[0] in pids or pid == leader_pid)}  # known: not read
        for pid in pids - self._others - stats.keys():
            stat = _read_stat(pid)
            if stat is None:
                continue  # gone since the listing, or not readable
            stats[pid] = stat
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        found = []
        if leader_pid in stats:
            todo = [leader_pid]
            while todo:
                pid = todo.pop()
                found.append((pid, stats[pid][1]))
                todo.extend(children.get(pid, ()))
        self._job = {pid: stats[pid] for pid, _ in found}
        self._others |= stats.keys() - self._job.keys()
        return found


def _read_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a process (collect/host's stat reader)."""
    stat = read_proc_stat(pid)
    return None if stat is None else (stat.ppid, stat.started)
