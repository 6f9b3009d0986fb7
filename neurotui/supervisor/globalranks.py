"""A node's ranks as the job numbers them: each rank process's RANK and LOCAL_RANK, read from
its environment (torchrun sets both), so that the logs torchrun files by local rank are
recorded under the job's global ranks.

On one node the two are the same. In a job of many nodes they are not, and an elastic
rendezvous (c10d) orders the nodes as they join, so neither `--node-rank` nor the node's name
says which global ranks a node got: the ranks themselves do.
"""

from __future__ import annotations

import contextlib

import psutil

ProcKey = tuple[int, float]


class GlobalRanks:
    """Learns local rank -> global rank from the rank processes of the current attempt."""

    def __init__(self) -> None:
        self._read: set[ProcKey] = set()
        """The processes whose environment named their ranks."""
        self.mapping: dict[int, int] = {}

    def learn(self, ranks: list[psutil.Process]) -> bool:
        """Read the environment of rank processes not read before; True when the mapping
        changed (a new rank, or a restart's new rendezvous). A process whose environment did
        not say is read again at the next call: caught between torchrun's fork and its exec
        of the rank (same pid, same start time), it still had torchrun's environment."""
        changed = False
        for proc in ranks:
            try:
                key = (proc.pid, proc.create_time())
            except psutil.Error:
                continue
            if key in self._read:
                continue
            pair = _local_and_global(proc)
            if pair is None:
                continue  # read again at the next call
            self._read.add(key)
            if self.mapping.get(pair[0]) != pair[1]:
                self.mapping[pair[0]] = pair[1]
                changed = True
        return changed

    def new_attempt(self) -> None:
        """A restart rendezvous again: the ranks may come out in another order."""
        self.mapping = {}


def _local_and_global(proc: psutil.Process) -> tuple[int, int] | None:
    """(LOCAL_RANK, RANK) from the process's environment; None where it cannot be read (not
    the user's process) or does not say (not started by torchrun)."""
    with contextlib.suppress(psutil.Error, OSError, ValueError):
        env = proc.environ()
        if "RANK" in env and "LOCAL_RANK" in env:
            return int(env["LOCAL_RANK"]), int(env["RANK"])
    return None
