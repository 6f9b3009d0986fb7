"""The job's processes: remembered by (pid, create time) so that none is left behind.

torchrun starts every rank in a session of its own, so signalling the launcher's process group
does not reach the ranks; the supervisor therefore remembers every descendant it has seen and
signals them one by one when a stop has to be forced.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

ProcKey = tuple[int, float]
RESCAN_S = 1.0
SETTLED_RESCAN_S = 5.0
SETTLE_S = 30.0
"""How often `sampled` rescans the tree: each second while it changes (the launcher starting
its ranks, DataLoader workers, a compiler) and for SETTLE_S after it last did, every
SETTLED_RESCAN_S once it has not for that long. A scan reads every process of the host
(/proc/PID/stat), hundreds on a big instance: most of an idle supervisor's cost when done
every second."""


class JobTree:
    def __init__(self, leader_pid: int) -> None:
        self.leader_pid = leader_pid
        self.known: dict[ProcKey, psutil.Process] = {}
        self._sampled: list[psutil.Process] = []
        self._next_scan = 0.0
        self._changed_at: float | None = None  # the last rescan that found a change
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
        try:
            leader = psutil.Process(self.leader_pid)
            procs = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            procs = []
        current = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                # The remembered object, not the fresh one: cpu_percent() measures between
                # calls on the same object.
                current.append(self.known.setdefault((proc.pid, proc.create_time()), proc))
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
