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

FileId = tuple[int, int]
"""(device, inode) of a log file, as os.fstat gives them."""
KEPT = 4096
"""Steps kept per file beyond those the follower still needs (forget_before): a file no log
follower reads (a script that sent its stdout elsewhere) must not grow them for days."""


class StepOffsets:
    """Per log file: the offsets and times of the probe's steps, in the order recorded."""

    def __init__(self) -> None:
        self._files: dict[FileId, tuple[list[int], list[float]]] = {}
        self.files_known = 0
        """How many files have steps: grows when a new one does (a cheap test for news)."""

    def __contains__(self, file: FileId) -> bool:
        return file in self._files

    def add(self, where: tuple[int, int, int], t: float) -> None:
        """A step done at `t` when the file (device, inode) ended at `offset`."""
        dev, ino, offset = where
        steps = self._files.get((dev, ino))
        if steps is None:
            steps = self._files[(dev, ino)] = ([], [])
            self.files_known += 1
        offsets, times = steps
        if offsets and offset < offsets[-1]:
            offsets.clear()  # written again from the start (a new process): its steps only
            times.clear()
        offsets.append(offset)
        times.append(t)
        if len(offsets) > 2 * KEPT:
            del offsets[:KEPT], times[:KEPT]

    def place(self, file: FileId, start: int) -> tuple[float | None, float | None, bool]:
        """For a line of `file` that begins at byte `start`: the time of the last step done
        before it was printed (None: none known), the time of the first step known at all,
        and whether a later step is known (the line's place is then certain: a step not yet
        read cannot come between)."""
        offsets, times = self._files[file]
        at = bisect_right(offsets, start) - 1
        return (times[at] if at >= 0 else None), (times[0] if times else None), \
            at + 1 < len(offsets)

    def forget_before(self, file: FileId, start: int) -> None:
        """Lines before byte `start` are all placed: only the last step before it is kept."""
        steps = self._files.get(file)
        if steps is None:
            return
        offsets, times = steps
        at = bisect_right(offsets, start) - 1
        if at > 0:
            del offsets[:at], times[:at]

    def clear(self) -> None:
        self._files.clear()
