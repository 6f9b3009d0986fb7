"""The log panel's source for a job of many nodes: a rank's log by the job's rank number.

Each node's torchrun writes its ranks' logs under their local rank, in that node's session
(layout.rank_log_files); the node's `ranks` record says which global rank each local one is.
This follows the wanted global rank in its node's folder, with that node's own
ShownLogFollower, and puts that node in the reader's focus: the host, accelerator and process
panels then show the machine the shown rank runs on (drilling into a rank drills into its
node). As ShownLogFollower, `choice` and `ranks` are in the job's rank numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from neurotui.live.logtail import LAUNCHER, LogChoice, ShownLogFollower
from neurotui.session.jobreader import JobReader


class JobLogFollower:
    def __init__(self, reader: Callable[[], JobReader], rescan_s: float = 5.0) -> None:
        """`reader`: the job reader in use now (the model replaces its reader when it
        starts over)."""
        self._reader = reader
        self.rescan_s = rescan_s
        self.choice: LogChoice | None = None
        self.path: Path | None = None
        self.ranks: tuple[int, ...] = ()
        self._follower: ShownLogFollower | None = None
        """The follower of the node whose log is shown (a new one for another node: it
        starts with its log's backlog, as the panel starts over)."""

    def poll(self, wanted: LogChoice | None, now: float,
             limits: Mapping[str, int] | None = None) -> tuple[list[str], bool]:
        reader = self._reader()
        ranks = sorted(r for p in reader.parts for r in p.ranks)
        self.ranks = tuple(ranks)
        choice = wanted or (LogChoice(ranks[0]) if ranks else LogChoice())
        part = reader.part_of_rank(choice.rank) if choice.rank != LAUNCHER else None
        local = part.local_rank_of(choice.rank) if part is not None else None
        if part is None or local is None:
            # The launcher, or a rank whose node or local number is not known yet: the
            # launcher log of the node in focus.
            part, local_choice = reader.focused(), LogChoice()
            if choice.rank != LAUNCHER:
                choice = LogChoice()
        else:
            local_choice = LogChoice(local, choice.stream)
            reader.focus = part.name
        follower = self._follower
        moved = follower is None or follower.session_dir != part.dir
        if follower is None or moved:
            follower = self._follower = ShownLogFollower(part.dir, self.rescan_s)
        if limits is not None:  # a replay's: each node's files under its folder's name
            prefix = f"{part.dir.name}/"
            limits = {k.removeprefix(prefix): v for k, v in limits.items()
                      if k.startswith(prefix)}
        lines, reset = follower.poll(local_choice, now, limits)
        reset = reset or moved or choice != self.choice
        self.choice, self.path = choice, follower.path
        return lines, reset
