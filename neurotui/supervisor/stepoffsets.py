"""Where each log file stood at each step the automatic probe recorded: the printed lines'
places among the steps, by byte offset rather than by time.

The probe's step records say how far the rank had written its stdout and stderr when the step
was done (`out`, `err`: device, inode, offset). A line that begins at or after a step's offset
was printed after that step (and before the next step whose offset is past its start): the
loss a script prints after `optimizer.step()` belongs to that step. The logs' modification
times could not say so: the kernel stamps them with a coarse clock, milliseconds behind the
probe's, so a loss printed right after a step looked older than it and went with the step
before.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

FileId = tuple[int, int]
"""(device, inode) of a log file, as os.fstat gives them."""
KEPT = 4096
"""Steps kept per file beyond those the follower still needs (forget_before): a file no log
follower reads (a script that sent its stdout elsewhere) must not grow them for days."""


class StepOffsets:
    """Per log file: the offsets, times and numbers of the probe's steps, in the order
    recorded."""

    def __init__(self) -> None:
        self._files: dict[FileId, tuple[list[int], list[float], list[int | None]]] = {}
        self.files_known = 0
        """How many files have steps: grows when a new one does (a cheap test for news)."""

    def __contains__(self, file: FileId) -> bool:
        return file in self._files

    def add(self, where: tuple[int, int, int], t: float, step: int | None = None) -> None:
        """Step `step`, done at `t` when the file (device, inode) ended at `offset`."""
        self.add_many([where], [t], [step])

    def add_many(self, wheres: Sequence[object], times: list[float],
                 numbers: Sequence[int | None] | None = None) -> None:
        """Steps in the order done (`numbers`: theirs, if known): each done at its time when
        its file ended at its offset, a (device, inode, offset) tuple (anything else: not
        known, e.g. None or a record's UNSET). A step with nothing printed since the one
        before takes that one's place (a line there came after both): a quiet stderr keeps
        one."""
        if numbers is None:
            numbers = [None] * len(times)
        if wheres and wheres[0].__class__ is tuple and len(times) == len(wheres) == \
                wheres.count(wheres[0]):
            # Nothing printed over all of them (a rank's quiet stderr, at every read of its
            # probe file): the last step takes the place, as the loop below would have it.
            dev, ino, offset = wheres[0]
            steps = self._files.get((dev, ino))
            if steps is not None and steps[0] and steps[0][-1] == offset:
                steps[1][-1] = times[-1]
                steps[2][-1] = numbers[-1]
                return
        # Hundreds a second (a 32-rank job's steps, for two files each): one loop, no calls.
        current: FileId | None = None
        offsets: list[int] = []
        kept: list[float] = []
        counted: list[int | None] = []
        for where, t, number in zip(wheres, times, numbers, strict=True):
            if where.__class__ is not tuple:
                continue
            dev, ino, offset = where  # type: ignore[misc]
            if current is None or current[0] != dev or current[1] != ino:
                current = (dev, ino)
                steps = self._files.get(current)
                if steps is None:
                    steps = self._files[current] = ([], [], [])
                    self.files_known += 1
                offsets, kept, counted = steps
            if offsets:
                last = offsets[-1]
                if offset == last:
                    kept[-1] = t
                    counted[-1] = number
                    continue
                if offset < last:  # written again from the start (a new process): its own
                    offsets.clear()
                    kept.clear()
                    counted.clear()
            offsets.append(offset)
            kept.append(t)
            counted.append(number)
            if len(offsets) > 2 * KEPT:
                del offsets[:KEPT], kept[:KEPT], counted[:KEPT]

    def place(self, file: FileId, start: int) -> tuple[float | None, float, bool]:
        """For a line of `file` that begins at byte `start`: the time of the last step done
        before it was printed (None: none known), the time of the first step known at all,
        and whether a later step is known (the line's place is then certain: a step not yet
        read cannot come between)."""
        (stamp,), _, first, bounded = self.place_all(file, [start])
        return stamp, first, bounded == 1

    def place_all(self, file: FileId, starts: list[int]
                  ) -> tuple[list[float | None], list[int | None], float, int]:
        """`place` for lines beginning at `starts` (in file order), in one walk: each one's
        step time (None: before the first step known) and that step's number (None: not
        known), the first step's time, and how many of them (the first ones) a later step
        bounds."""
        offsets, times, numbers = self._files[file]
        count = len(offsets)
        at = bisect_right(offsets, starts[0]) - 1 if starts else -1
        stamps: list[float | None] = []
        after: list[int | None] = []
        bounded = 0
        for start in starts:
            while at + 1 < count and offsets[at + 1] <= start:
                at += 1
            if at >= 0:
                stamps.append(times[at])
                after.append(numbers[at])
            else:
                stamps.append(None)
                after.append(None)
            bounded += at + 1 < count
        return stamps, after, times[0], bounded

    def forget_before(self, file: FileId, start: int) -> None:
        """Lines before byte `start` are all placed: only the last step before it is kept."""
        steps = self._files.get(file)
        if steps is None:
            return
        offsets, times, numbers = steps
        at = bisect_right(offsets, start) - 1
        if at > 0:
            del offsets[:at], times[:at], numbers[:at]

    def clear(self) -> None:
        self._files.clear()
