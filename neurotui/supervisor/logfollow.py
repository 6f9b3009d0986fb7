"""Following the job's log files and turning step and compiler lines into session events.

Lines are stamped when they are written: the kernel tells (inotify, through inotify_simple)
which log changed, and the supervisor looks at once how far it goes (an fstat), then reads and
takes the lines at its next poll, each with the time of the look that first saw it whole.
Where inotify cannot be had (not Linux, no watches left) the logs are polled, and each line is
then up to the poll interval late: the session says which (`log_timing` in meta.json).

The logs of ranks the automatic probe times are not stamped so: its step records say where the
rank's stdout and stderr stood at each step (stepoffsets.py), and each line is read at a poll
and given the time of the step it was printed after (placing.py), so its loss goes with that
step.

Progress bars redraw one line with carriage returns, for a whole epoch without a newline: each
position between carriage returns is parsed as it comes, a position drawn twice is one step,
and a bar that starts again each epoch continues the step count.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from neurotui.session import layout
from neurotui.session.stepprecedence import PROBE, log_steps_wanted
from neurotui.session.tailing import read_lines_backwards
from neurotui.session.writer import EventWriter
from neurotui.sources.steplog import (
    StepLineParser,
)
from neurotui.supervisor import spool
from neurotui.supervisor.floodgate import FloodGate, skip_ahead
from neurotui.supervisor.followedlogs import (
    _CR,
    _MAX_READ,
    MTIME_SLACK_S,
    _Changes,
    _changes,
    _Followed,
    _modified_times,
    _Pieces,
    _write_rate,
    _written_at,
)
from neurotui.supervisor.logcap import size_text
from neurotui.supervisor.logtakes import LineTaker
from neurotui.supervisor.placing import read_placed
from neurotui.supervisor.stallwatch import StallWatch
from neurotui.supervisor.steprecorder import LogLines, StepRecorder

try:  # built from _looker.c at install, where a C compiler was there
    from neurotui.supervisor._looker import Looker as _NativeLooker
    from neurotui.supervisor._looker import read_looked as _read_looked
except ImportError:  # not built: busy logs are looked at from Python (_look), at more cost
    _NativeLooker = _read_looked = None
if TYPE_CHECKING:
    from collections.abc import Callable

    from neurotui.supervisor._looker import Looker, Taken

CATCH_UP_S = 0.5
"""A poll reads on in a log that gives it _MAX_READ a read for at most this long (a second
poll's reads were 8 MiB, and a job printing 10 MB/s was outrun); further behind, the log is
skipped ahead (floodgate.py)."""
POLL_S = 0.5
"""The supervisor polls the logs this often where inotify is off (every line is read and
stamped at a poll then), or does not watch every log."""
WATCHED_POLL_S = 1.0
"""With every log watched, lines are stamped as they change and read and taken at polls,
which also find new logs, copy the spooled output on and read the logs read at polls
(_poll_probed_logs): once a second, with the telemetry, in the same wakeup."""
LOG_MARK_S = 2.0
"""At most this often, how far each log had been written is recorded (`log_offsets`): what a
replay shows of the logs at its cursor. Log lines carry no time of their own."""
BUSY_CHANGES_PER_S = 50
BATCH_MIN_S, BATCH_MAX_S = 0.02, 0.1
"""While the logs change more than BUSY_CHANGES_PER_S times a second (32 ranks printing 10
lines a second each), they are read in batches rather than at each change: a wakeup per line
would cost the supervisor several % of a core. A batch waits a share of the time between two
changes of the busiest log (within BATCH_MIN_S..BATCH_MAX_S), so it rarely holds two lines of
one log, and its lines are stamped with their log's modification time (when the kernel saw the
write: within its timestamp granularity, a few ms at most). meta.json's `log_timing` says so,
and how many lines came second to a read of their log (stamped with the later line's time)."""
BATCH_SHARE_MIN, BATCH_SHARE_MAX = 0.3, 0.9
SHARED_LINES_MAX = 0.01
"""The share starts at BATCH_SHARE_MAX (the fewest wakeups: steps of a steady length never come
two to a batch) and shrinks by a third after a second in which more than SHARED_LINES_MAX of
the lines read came two or more to a read of their log (uneven steps); it grows back slowly."""
REDISCOVER_S = 30.0
"""Without folder watches, the folders are looked through this often even when none's time
changed (_folders_changed: a time a network file system kept from an earlier look, say), as
with them (REDISCOVER_WATCHED_S): torchrun's folders of 32 ranks' stdout and stderr logs take
about 2 ms to look through, every 5 s 0.04% of a core."""
REDISCOVER_WATCHED_S = 30.0
"""With inotify, new logs are found when a watched folder says something was created in it,
and by a look through every folder this often in any case (a missed word, say): at 32 ranks
a look costs about 1 ms, so every 5 s it was a twentieth of the supervisor's cost."""
NO_STEP_AFTER_S = 60.0
"""A job that printed this long (and NO_STEP_MIN_LINES lines) with no step found is told so."""
NO_STEP_MIN_LINES = 20
_RESUME_LOOKBACK_S = 60.0
_RESUME_SCAN_BYTES = 64 << 20


def resume_point(events: Path, attempt: int) -> tuple[dict[str, int] | None, dict[int, int]]:
    """Where a dead supervisor's log following stood, for `LogFollower.resume`: its last
    `log_offsets` mark (None: none), and per rank the last step of `attempt` it recorded from
    the logs, from shortly before that mark on. Read backwards from the end of events.jsonl:
    the last seconds of a long run, not all of it."""
    mark: dict[str, int] | None = None
    mark_t: float | None = None
    steps: dict[int, int] = {}
    with contextlib.suppress(OSError):  # no events file: nothing was recorded
        for raw in read_lines_backwards(events, _RESUME_SCAN_BYTES):
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # a line cut by the old supervisor's death, or garbage
            if not isinstance(record, dict):
                continue
            t = record.get("t")
            if mark_t is not None and isinstance(t, (int, float)) and \
                    t < mark_t - _RESUME_LOOKBACK_S:
                break
            files = record.get("files")
            if record.get("kind") == "log_offsets" and mark is None and isinstance(files, dict):
                # With a spool, where the old supervisor had read the files the job writes.
                read = record.get("read")
                files = read if isinstance(read, dict) else files
                mark = {str(k): v for k, v in files.items() if isinstance(v, int)}
                mark_t = float(t) if isinstance(t, (int, float)) else None
            elif record.get("kind") == "step" and record.get("src") == "log" and \
                    record.get("attempt") == attempt:
                rank, step = record.get("rank"), record.get("step")
                if isinstance(rank, int) and isinstance(step, int):
                    steps[rank] = max(steps.get(rank, step), step)
    return mark, steps


def log_timing(*, all_polled: bool, parse_launcher: bool, placed_logs: int,
               polled_probe_logs: int, poll_s: float, batched: bool, shared_lines: int,
               native_looks: bool) -> dict[str, object]:
    """How the lines' times were taken, for meta.json's `log_timing`: `all_polled`, the logs
    read at polls (no inotify, or a log it could not watch); `batched`, read in batches at
    some point; `native_looks`, the native looker looked at the busy logs."""
    placed = "" if not placed_logs else (
        f"; the {placed_logs} logs of ranks timed by the automatic probe are read at "
        "polls, each line stamped with the time of the probe's step it was printed after "
        "(by how far the log was written at each step)")
    if all_polled:
        return {"method": "poll", "max_delay_s": POLL_S, "placed_logs": placed_logs,
                "note": f"logs read every {POLL_S:g} s; the lines of a read stamped with "
                        "their log's modification time (when its last line was written)"
                        + placed}
    polled = "" if parse_launcher else (
        "; the launcher's console (torchrun's own messages) is read at polls")
    polled += placed
    if polled_probe_logs:
        polled += (f"; the {polled_probe_logs} logs of ranks that report their steps "
                  f"through probe.step() are read at polls (their step lines are not "
                  f"recorded; their compile lines are up to {poll_s:g} s late)")
    if batched:
        return {"method": "inotify", "max_delay_s": None,
                "shared_stamp_lines": shared_lines,
                "batch_looks": "native thread" if native_looks else "python",
                "polled_probe_logs": polled_probe_logs,
                "placed_logs": placed_logs, "note": (
            "lines stamped as soon as the kernel said their log changed; while "
            f"the logs changed more than {BUSY_CHANGES_PER_S} times a second, read in "
            f"batches {BATCH_MIN_S * 1000:.0f} to {BATCH_MAX_S * 1000:.0f} ms apart (a "
            "share of the time between two lines of the busiest log) and stamped with "
            "their log's modification time (the kernel's timestamp granularity, a few ms "
            f"at most); {shared_lines} lines came in one read with a later line of "
            f"their log and carry its time (up to one batch late){polled}")}
    return {"method": "inotify", "max_delay_s": None,
            "polled_probe_logs": polled_probe_logs,
            "placed_logs": placed_logs,
            "note": "lines stamped as soon as the kernel said their log changed"
            + polled}


def _folders_changed(times: dict[Path, int] | None, discovered_at: float,
                     now: float) -> bool:
    """Without folder watches: whether a folder logs may appear in changed since the
    last look for logs (at `discovered_at`, when their times were `times`), or may have (a
    change within its coarse time stamp's SETTLED_DIR_S), or REDISCOVER_S passed. A look at
    each folder's time is a tenth of looking through them (torchrun's folders of 32 ranks:
    0.15 against 1.4 ms, twice a second), and a rank's folder is not looked at once both its
    logs are followed (at 32 ranks, 4 folders' times a poll, not 36: 0.04% of a core)."""
    if times is None or now - discovered_at >= REDISCOVER_S:
        return True
    for folder, seen in times.items():
        try:
            modified = os.stat(folder).st_mtime_ns
        except OSError:
            return True
        if modified != seen or now - modified / 1e9 < layout.SETTLED_DIR_S:
            return True
    return False


@dataclass
class LogFollower:
    session_dir: Path
    writer: EventWriter
    parser: StepLineParser
    parse_launcher: bool
    spool_dir: Path | None = None
    """Where the job writes its output (spool.py), copied into the session's logs/ as read;
    None: the job writes into the session's logs/ itself."""
    flood: FloodGate = field(default_factory=FloodGate)
    """Its limits on a flood of output (a log skipped ahead, the session's log cap)."""
    _files: dict[Path, _Followed] = field(default_factory=dict)
    _marked: dict[str, int] = field(default_factory=dict)
    _marked_at: float = -float("inf")
    _told_no_steps: bool = False
    _said_no_descriptors: bool = False  # see _cannot_open
    watch: bool = True
    """Look at each log as soon as the kernel says it changed (`on_change`), not only at polls."""
    _changes: _Changes | None = None
    _unwatched: int = 0
    _counting_since: float = 0.0  # the start of the second whose changes are being counted
    _busy: bool = False
    _batch_s: float = BATCH_MIN_S
    _batched: bool = False  # the logs were read in batches at some point (see BATCH_MIN_S)
    _batch_share: float = BATCH_SHARE_MAX
    _timed: list[_Followed] = field(default_factory=list)  # see _Followed.timed, _retime
    native_looks: bool = True
    """Busy logs are looked at on the batch's timer by a thread outside Python (_looker.c),
    where it was built, and the supervisor wakes only for its polls: the looks, an fstat
    each in Python, and the wakeups were most of its cost at 32 ranks x 10 lines a second.
    False: from Python (_look), as where it was not built; and the looks' lines read and
    stamped in Python too (_looked_stamps; _looker.c's read_looked otherwise)."""
    _read_looked: Callable[[int, int, int, list[tuple[int, float]]],
                           tuple[bytes, list[float], int]] | None = None
    native_records: bool = True
    """Step lines of a learnt shape recorded by _steprecords.c where it was built
    (StepRecorder.native)."""
    recorder: StepRecorder = field(init=False)
    """Makes the records of the lines read (steprecorder.py), and keeps what they depend on."""
    _looker: Looker | None = None  # the native looker, made when the logs first get busy
    _looked: list[_Followed] = field(default_factory=list)
    """The logs the looker looks at, in the order given: its notes name them by index."""
    _probe_folder: layout.ProbeFolder = field(init=False)
    _polled_probe_logs: int = 0  # logs of probe.step() ranks, read at polls (see there)
    _placed_logs: int = 0  # logs placed by the automatic probe's steps (_place_new_logs)
    _placing_checked: tuple[int, int] = (0, 0)  # (files with steps, logs) at the last check
    _deferred: list[_Followed] = field(default_factory=list)
    """The logs looks saw grow (their `looks`), in the order first seen: read and taken at
    the next poll (take_read)."""
    _batch_lines: int = 0  # lines read in batches, in the second being counted
    _shared_now: int = 0  # of those, lines that came after another of their log in one read
    shared_lines: int = 0
    """Lines stamped with a later line's time (they came with it in one batched read)."""
    _folders: set[Path] = field(default_factory=set)  # watched for new logs (inotify)
    _folders_watched: bool = True  # False: a folder could not be watched; looked at each poll
    _discover_due: bool = True
    _discovered_at: float = -float("inf")
    _folder_times: dict[Path, int] | None = None
    """Without folder watches, each folder's modification time (ns) when logs were last
    looked for (_folders_changed); None: not known, look."""
    taker: LineTaker = field(init=False)
    """Turns what is read into lines: tails, bar positions, held lines (logtakes.py)."""
    _catch_up_until: float = 0.0  # (time.monotonic) see CATCH_UP_S

    def __post_init__(self) -> None:
        if self.watch:
            self._changes = _changes()
        self._read_looked = _read_looked if self.native_looks else None
        self.recorder = StepRecorder(self.writer, self.parser, native=self.native_records)
        self.taker = LineTaker(self.writer, self.parser, self.recorder, self.parse_launcher)
        self._probe_folder = layout.ProbeFolder(self.session_dir)

    @property
    def attempt(self) -> int:
        """The job's attempt (torchrun's restarts) its step records are of."""
        return self.recorder.attempt

    @attempt.setter
    def attempt(self, attempt: int) -> None:
        self.recorder.attempt = attempt

    @property
    def stalls(self) -> StallWatch | None:
        """Told of each step and compile line recorded (the supervisor's watch for stalls);
        its probe steps' offsets place the lines of placed logs."""
        return self.recorder.stalls

    @stalls.setter
    def stalls(self, stalls: StallWatch | None) -> None:
        self.recorder.stalls = stalls

    @property
    def global_ranks(self) -> dict[int, int] | None:
        """A node of a job of many nodes: its local ranks -> the job's global ranks
        (LineTaker.global_ranks). None: one node, where the two are the same."""
        return self.taker.global_ranks

    @global_ranks.setter
    def global_ranks(self, mapping: dict[int, int] | None) -> None:
        self.taker.global_ranks = mapping

    def set_global_ranks(self, mapping: dict[int, int]) -> None:
        """This node's local ranks -> the job's global ranks (supervisor/globalranks.py)."""
        self.taker.set_global_ranks(mapping)

    def tail_lines(self) -> dict[str, list[str]]:
        return self.taker.tail_lines()

    def fileno(self) -> int | None:
        """A descriptor that becomes readable when a followed log changed (None: poll only)."""
        return self._changes.fileno() if self._changes is not None else None

    @property
    def timing(self) -> dict[str, object]:
        """How the lines' times were taken, for meta.json's `log_timing`."""
        return log_timing(all_polled=self._changes is None or bool(self._unwatched),
                          parse_launcher=self.parse_launcher, placed_logs=self._placed_logs,
                          polled_probe_logs=self._polled_probe_logs, poll_s=self.poll_s,
                          batched=self._batched, shared_lines=self.shared_lines,
                          native_looks=self._looker is not None)

    @property
    def poll_s(self) -> float:
        """How often the supervisor should call `poll`."""
        return POLL_S if self._changes is None or self._unwatched else WATCHED_POLL_S

    @property
    def pause_s(self) -> float:
        """How long the caller waits before the next read: 0, or a batch's time while busy
        (and the native looker does not look)."""
        return self._batch_s if self._busy and self._looker is None else 0.0

    @property
    def batch_s(self) -> float | None:
        """While busy (read in batches), the time from one look at the busy logs to the next,
        whoever looks (the supervisor's wakeups, or the native looker); None while calm."""
        return self._batch_s if self._busy else None

    def on_change(self, now: float) -> None:
        """Look at the logs the kernel says changed (the supervisor's selector saw
        `fileno`): what each holds now is stamped `now`, and read and taken at the next
        poll (take_read). A wakeup a line then costs an fstat, not a read, the line's
        handling and a write of its record: a light job (2 ranks x 20 lines a second) cost
        the supervisor 1.3% of a core that way."""
        if self._changes is None:
            return
        self._count_changes(now)
        for target in self._changes.changed():
            if target.__class__ is _Followed:
                target.changes += 1  # type: ignore[union-attr]
                self._note_change(target, now)  # type: ignore[arg-type]
            else:
                self._discover_due = True  # a new log, or a folder one will be in
        if self._busy and self._looker is None:
            self._look(now)  # awake anyway
        if self._discover_due:
            for followed in self._discover(now):  # lines written before it was watched
                followed.behind = self._read(followed, now)

    def on_batch(self, now: float) -> None:
        """A batch's time came (pause_s after the last read, while busy): look at the timed
        logs. The kernel says nothing of them (_retime), and its fd, readable for a quiet
        log, a new folder or log then, is not read here: on_change does when it is."""
        if self._changes is None:
            return
        self._count_changes(now)
        if self._busy and self._looker is None:
            self._look(now)

    def _note_change(self, followed: _Followed, now: float) -> None:
        """`followed`'s size, stamped `now`: the kernel just said it changed, so its new
        lines were written since the last look (within the wakeup's latency)."""
        try:
            size = followed.status().st_size
        except OSError as exc:
            self._cannot_open(exc, now)
            return
        if size > followed.seen:
            followed.seen = size
            if not followed.looks:
                self._deferred.append(followed)
            followed.looks.append((size, now))

    def _count_changes(self, now: float) -> None:
        """Each second: whether the logs are busy, and how long a batch is then."""
        if now - self._counting_since >= 1.0:
            # Counted per log, not per wakeup: batched reads wake less often but see as many
            # logs changed, so busy logs stay batched.
            # Only logs seen changed count (a quiet one's rate is 0, its counts 0 already):
            # the quiet half of torchrun's logs is not gone through twice a second.
            changed = [followed for followed in self._files.values() if followed.changes]
            busy = sum(followed.changes for followed in changed) > BUSY_CHANGES_PER_S
            if busy or self._busy:
                self._retime(busy, now)  # (which looks at the logs it watches again)
                changed = [followed for followed in self._files.values() if followed.changes]
            self._batched |= self._busy
            elapsed = now - self._counting_since
            per_s = max((_write_rate(f, elapsed) for f in changed), default=0.0)
            if self._shared_now > SHARED_LINES_MAX * self._batch_lines:
                self._batch_share = max(BATCH_SHARE_MIN, self._batch_share * 2 / 3)
            else:
                self._batch_share = min(BATCH_SHARE_MAX, self._batch_share + 0.02)
            self._batch_lines = self._shared_now = 0
            self._batch_s = min(BATCH_MAX_S, max(BATCH_MIN_S, self._batch_share / per_s)) \
                if per_s else BATCH_MAX_S
            if self._looker is not None:
                self._looker.set_interval(self._batch_s if self._busy else 0.0)
            for followed in changed:
                followed.changes = followed.first_write_ns = followed.last_write_ns = 0
            self._counting_since = now

    def _retime(self, busy: bool, now: float) -> None:
        """Each second while the logs are busy: a log that changed in the last one is looked
        at on the batch's timer (_look) and the kernel no longer says when it changes (a
        record a line to read, and to make in the writing rank); one that did not (a rank's
        quiet stderr.log, half of torchrun's logs) is watched again, so that the timer's
        looks are only of logs with lines to find. Calm again: every log is watched again.
        A log watched again is looked at once, which finds what came since its last look."""
        self._busy = busy
        assert self._changes is not None
        calmed: list[_Followed] = []
        for followed in self._files.values():
            if not followed.watched:
                continue  # read at polls
            if busy and followed.changes and not followed.timed:
                self._changes.unwatch(followed)
                followed.timed = True
                self._timed.append(followed)
            elif followed.timed and not (busy and followed.changes):
                followed.timed = False
                calmed.append(followed)
                if not self._changes.watch(followed.path, followed):
                    followed.watched = False  # no watches left: polled (timing says so)
                    self._unwatched += 1
        if calmed:
            self._timed = [f for f in self._timed if f.timed]
            self._look(now, calmed)
        self._hand_timed_over()

    def _look(self, now: float, logs: list[_Followed] | None = None) -> None:
        """While busy (read in batches): each timed log's size and modification time only
        (or those of `logs`), noted for the next poll, which reads and takes (parses,
        records) all of a poll's pieces in one go, each with the stamp of the look that
        first saw it (take_read). The supervisor then wakes for one system call per log,
        not for a read and Python's whole handling of each line."""
        # Once per log per wakeup, dozens of times each: the fstat inline, not status().
        fstat = os.fstat
        for target in self._timed if logs is None else logs:
            try:
                status = fstat(target.fd) if target.fd is not None else target.status()
            except OSError as exc:
                self._cannot_open(exc, now)
                continue
            if status.st_size > target.seen:
                self._grown(target, status.st_size, status.st_mtime_ns, now)

    def _grown(self, target: _Followed, size: int, modified_ns: int, now: float) -> None:
        """A look at `now` found `target` grown to `size` and written last at `modified_ns`:
        noted for the next take. (The native looker's note() does the same in C.)"""
        target.seen = size
        if not target.changes:
            target.first_write_ns = modified_ns
        target.last_write_ns = modified_ns
        target.changes += 1  # (the kernel says no more of a timed log: _retime)
        # A line seen now may have been written a batch ago, and stamping it now would round
        # every step time to whole batch periods (100 ms steps read every 26 ms come out 104).
        # The kernel's modification time of the log is when its last write happened (no
        # later write: the size is from the same fstat): _written_at, inline.
        written = modified_ns / 1e9
        stamp = written if modified_ns % 1_000_000_000 and \
            target.grew_at - MTIME_SLACK_S <= written <= now else now
        if not target.looks:
            self._deferred.append(target)
        target.looks.append((size, stamp))
        target.grew_at = now

    def _hand_timed_over(self) -> None:
        """The native looker looks at the timed logs from now on (made at the first: the
        logs just got busy), on the batch's timer; what it saw of those before is taken."""
        if self._looker is None:
            if not self._timed or not self.native_looks or _NativeLooker is None:
                return
            self._looker = _NativeLooker()
        looked = [followed for followed in self._timed if followed.fd is not None]
        if looked != self._looked:  # (each second while busy _retime asks: mostly the same)
            try:
                taken = self._looker.set_logs(
                    [(followed.fd, followed.seen, followed.grew_at) for followed in looked])
            except OSError:  # its thread could not be started (a limit on threads)
                self._looker, self.native_looks = None, False  # looked at from Python
                return
            self._take_native_looks(taken)
            self._looked = looked
        self._looker.set_interval(self._batch_s if self._busy and looked else 0.0)

    def _take_native_looks(self, taken: Taken | None = None) -> None:
        """Note what the native looker's looks found (or `taken`, of the logs it looked at
        before), as _look would have at each, stamped by the looker as _grown stamps."""
        if taken is None:
            if self._looker is None:
                return
            taken = self._looker.take()
        looked, deferred = self._looked, self._deferred
        for index, looks, changes, first_write_ns, last_write_ns, grew_at in taken:
            target = looked[index]
            if looks[0][0] <= target.seen:  # read further meanwhile (a poll's full read)
                looks = [look for look in looks if look[0] > target.seen]
                if not looks:
                    continue
            if not target.looks:
                deferred.append(target)
            target.looks += looks
            target.seen = looks[-1][0]
            if not target.changes:
                target.first_write_ns = first_write_ns
            target.last_write_ns = last_write_ns
            target.changes += changes
            target.grew_at = grew_at

    def close(self) -> None:
        if self._looker is not None:
            self._looker.close()  # before the descriptors it looks at are
        if self._changes is not None:
            self._changes.close()
        for followed in self._files.values():
            followed.close()

    def resume(self, offsets: dict[str, int] | None, recorded_steps: dict[int, int]) -> None:
        """Go on where a dead supervisor left off: each log from its last mark (`offsets`; no
        mark at all: from the logs' current ends), and no step line of this attempt at or below
        a rank's step already recorded (`recorded_steps`: lines past the mark it had read)."""
        self._discover(0.0)
        for followed in self._files.values():
            if offsets is None:
                with contextlib.suppress(OSError):
                    followed.offset = followed.path.stat().st_size
            else:
                followed.offset = int(offsets.get(followed.name, 0))
            followed.behind = True
        self._marked = dict(offsets or {})
        self.recorder.resume(recorded_steps)

    def poll(self, now: float, final: bool = False) -> None:
        """Read what the logs gained; `final` (the job has exited) records where they end."""
        # Ranks that report through the probe: their log step lines would be discarded by
        # the reader anyway (the sources' precedence), so they are not written twice.
        probed = self._probe_folder.files()
        if not probed.keys() <= self.recorder.probed_ranks and not log_steps_wanted(PROBE):
            self.recorder.probed_ranks.update(probed)
            self._poll_probed_logs()
        # Before anything else: a log the probe's steps now place has its looked lines placed,
        # not stamped (the first second of its steps), and lines are taken in the order read.
        self._place_new_logs()
        self._shed_flood(now, final)
        # No reading on while a log floods: it is skipped again at the next poll anyway.
        flooding = any(followed.flooding for followed in self._files.values())
        self._catch_up_until = time.monotonic() + (0.0 if flooding else CATCH_UP_S)
        self.take_read()  # (with what the native looker's looks found)
        if self._looker is not None:
            # Each second, as a batch's wakeup would (none comes while the looker looks):
            # after the take, whose looks are the second's count.
            self._count_changes(now)
        self._discover(now)
        self._place_new_logs()  # (a log found just now)
        # The short way's step lines of the placed logs (the default torch path: every rank's
        # stdout) wait here and are recorded together, one encoding a poll, as take_read's.
        figures: list[LogLines] = []
        try:
            self._read_logs(now, final, figures)
        finally:  # (what was read before a failure is recorded all the same)
            self.recorder.record(figures)
        self.take_read()  # (a busy log read here, or to its end at the job's exit)
        while self._deferred and self._catching_up():
            self.take_read()  # logs whose looks saw more than _MAX_READ: read on
        if self.taker.held:
            self.taker.release_held(now, final)
        if final:
            self._record_pending_losses(now)
        if final or now - self._marked_at >= LOG_MARK_S:
            self._mark(now)
        first_line_at = self.taker.first_line_at
        if not self._told_no_steps and first_line_at is not None and \
                now - first_line_at >= NO_STEP_AFTER_S:
            self._tell_if_no_steps(now)

    def _read_logs(self, now: float, final: bool, figures: list[LogLines]) -> None:
        """A poll's read of each log; the short way's lines of placed logs wait in
        `figures`, recorded before anything else is."""
        for followed in self._files.values():
            # A poll reads _MAX_READ of a log at a time, for at most CATCH_UP_S (a flood
            # cannot stall the supervisor); the last one, after the job's exit, reads each to
            # its end.
            # A watched log is read as far as its looks saw (take_read, above); polled, all
            # it gained.
            if followed.placed:
                assert self.stalls is not None  # (placed by its probe steps' offsets)
                placing = {"stalls": self.stalls, "taker": self.taker, "recorder": self.recorder,
                           "cannot_open": self._cannot_open}
                followed.behind = read_placed(followed, now, final, figures, **placing)
                while followed.behind and (final or self._catching_up()):
                    followed.behind = read_placed(followed, now, final, figures, **placing)
            elif final or not followed.watched or followed.behind:
                self.recorder.record(figures)  # those read before it first, in the order read
                followed.behind = self._read(followed, now)
                while followed.behind and (final or self._catching_up()):
                    followed.behind = self._read(followed, now)
            if followed.copy is not None:
                followed.copy.flush(now)  # before `_mark` says how far the copy goes
            loss = followed.copy.take_loss(final) if followed.copy is not None else None
            if loss is not None:
                lost, since, until, error = loss
                self.writer.write("lost", t=now, what="log", file=followed.name, bytes=lost,
                                  **{"from": since, "to": until}, error=error)

    def _catching_up(self) -> bool:
        return time.monotonic() < self._catch_up_until

    def _poll_probed_logs(self) -> None:
        """The logs of ranks that report their steps through probe.step() are read at polls
        from now on, not as they change: their step lines are not recorded (the probe's steps
        are), so no line of theirs needs its time to the millisecond, and a job printing a
        line a step would otherwise wake the supervisor at every step. Their compile lines
        are stamped at the poll that reads them (up to poll_s late)."""
        for followed in self._files.values():
            if followed.watched and followed.rank in self.recorder.probed_ranks and \
                    self._changes is not None:
                self._read_at_polls(followed)
                self._polled_probe_logs += 1

    def _read_at_polls(self, followed: _Followed) -> None:
        """`followed` is read at polls from now on: neither the kernel's word nor the batch's
        timer looks at it; what it gained since its last read comes at the next poll."""
        if followed.watched and self._changes is not None:
            self._changes.unwatch(followed)
        followed.watched = False
        if followed.timed:
            followed.timed = False
            self._timed.remove(followed)
            self._hand_timed_over()
        followed.behind = True

    def _place_new_logs(self) -> None:
        """Logs whose lines the automatic probe's steps can place (stepoffsets: its records
        say where the rank's stdout and stderr stood at each step) are read at polls from now
        on and placed by them (placing.read_placed), not looked at as they change: no wakeup a line,
        and each loss with the step it was printed after."""
        offsets = self.stalls.offsets if self.stalls is not None else None
        if offsets is None or (offsets.files_known, len(self._files)) == self._placing_checked:
            return
        self._placing_checked = (offsets.files_known, len(self._files))
        for followed in self._files.values():
            if followed.placed or followed.ident is None or followed.ident not in offsets:
                continue
            followed.placed = True
            self._placed_logs += 1
            self._read_at_polls(followed)
            if followed.looks:  # seen, not read yet: read and placed instead
                followed.looks = []
                self._deferred = [f for f in self._deferred if f is not followed]

    def _shed_flood(self, now: float, final: bool) -> None:
        """Skip ahead in each log the follower is too far behind (floodgate.py): at the job's
        exit, down to a shorter distance, so that its end is read within a second of it."""
        flood = self.flood
        if flood.cap.reached_at is not None and not flood.told_cap:
            flood.told_cap = True
            self.writer.write("warning", t=flood.cap.reached_at, source="logs", message=(
                f"the session's logs reached their cap ({size_text(flood.cap.limit or 0)}, "
                "`neurotui run --log-cap`): the job's further output is not kept (each log "
                "says where it was cut, and at the end how much; meta.json's log_dropped "
                "counts it); its step and compile lines are still recorded"))
        self._take_native_looks()  # (their looks stamp the lines kept from what is skipped)
        for followed in self._files.values():
            behind_max = flood.flooding_behind_max if followed.flooding else \
                flood.final_behind_max if final else flood.behind_max
            # By what looks and reads saw (no system call a log a poll), then exactly.
            if followed.fd is None or followed.seen - followed.offset <= behind_max // 4:
                followed.flooding = False
                continue
            try:
                status = os.fstat(followed.fd)
            except OSError:
                continue
            followed.flooding = status.st_size - followed.offset > behind_max
            if followed.flooding:
                skip_ahead(flood, followed, status.st_size, status.st_mtime_ns, now,
                           take_lines=self.taker.take_lines, writer=self.writer,
                           offsets=self.stalls.offsets if self.stalls is not None else None,
                           deferred=self._deferred)
            followed.flood_mark = (status.st_size, now)

    def _record_pending_losses(self, now: float) -> None:
        if self.spool_dir is not None:
            for loss in spool.pending_losses(self.spool_dir):
                self.writer.write("lost", t=now, **loss, said_by="supervisor")

    def _tell_if_no_steps(self, now: float) -> None:
        """Say so, once, when the job printed for a while and no step was found anywhere."""
        recorder = self.recorder
        taker = self.taker
        if recorder.steps_written or taker.line_count < NO_STEP_MIN_LINES or \
                recorder.probed_ranks or self._probe_folder.files(auto=True):
            return
        self._told_no_steps = True
        shown = [line for tail in taker.tails.values() for line in tail if line.strip()][-3:]
        self.writer.write("warning", t=now, source="steps", message=(
            f"no training step recognised in {taker.line_count} log lines over "
            f"{now - (taker.first_line_at or now):.0f} s (last lines: "
            + " | ".join(repr(line[:120]) for line in shown)
            + "); try a pattern with `neurotui patterns LOGFILE --step-pattern REGEX`, then "
            "run with --step-pattern, or call neurotui.probe.step() after each step"))

    def _mark(self, now: float) -> None:
        """Record the end of each log's complete lines, if any log grew since the last mark:
        in the session's file (`files`, what a replay shows) and, with a spool, in the file
        the job writes (`read`, where an adopting supervisor goes on from)."""
        read = {followed.name: followed.offset - len(followed.pending)
                for followed in self._files.values()}
        if read != self._marked:
            if self.spool_dir is None:
                self.writer.write("log_offsets", t=now, files=read)
            else:
                files = {f.name: max(0, f.copy.size - len(f.pending))
                         for f in self._files.values() if f.copy is not None}
                self.writer.write("log_offsets", t=now, files=files, read=read)
            self._marked = read
        self._marked_at = now

    @property
    def logs_root(self) -> Path:
        """The folder the job's output is written to: the spool, or the session's logs/."""
        return self.spool_dir if self.spool_dir is not None else \
            self.session_dir / layout.LOGS_DIR

    def _discover(self, now: float) -> list[_Followed]:
        """Follow the logs that appeared; returns them. With inotify, only when a watched
        folder said so (or REDISCOVER_WATCHED_S passed): looking through torchrun's folders at
        every poll cost more than an idle supervisor's other work."""
        watching = self._changes is not None and self._folders_watched
        if watching and not self._discover_due and \
                now - self._discovered_at < REDISCOVER_WATCHED_S:
            return []
        if not watching and \
                not _folders_changed(self._folder_times, self._discovered_at, now):
            return []
        self._discover_due, self._discovered_at = False, now
        found: list[_Followed] = []
        while True:  # a folder made before its parent was watched is found by looking again
            root = self.logs_root
            torchrun = root / layout.TORCHRUN_LOG_NAME
            if not watching:
                # Taken before looking: a log made after this changes its folder's time. A
                # rank's folder whose two logs are followed gets no log more: not looked at.
                done = self._complete_rank_folders()
                self._folder_times = _modified_times(
                    [d for d in (root, *layout.torchrun_log_dirs(torchrun)) if d not in done])
            launcher = root / layout.LAUNCHER_LOG_NAME
            if launcher not in self._files and launcher.exists():
                found.append(self._follow(launcher, None))
            for rank, paths in layout.torchrun_rank_logs(torchrun).items():
                for path in paths:
                    if path not in self._files:
                        found.append(self._follow(path, rank))
            if not watching:
                return found
            folders = [root] if root.is_dir() else []
            new = [d for d in (*folders, *layout.torchrun_log_dirs(torchrun))
                   if d not in self._folders]
            if not new:
                return found
            for folder in new:
                assert self._changes is not None
                self._folders_watched &= self._changes.watch(folder, folder, folder=True)
                self._folders.add(folder)

    def _complete_rank_folders(self) -> set[Path]:
        """torchrun's rank folders whose two logs, stdout and stderr, are both followed: the
        only logs torchrun writes there."""
        files = self._files
        stdout, stderr = layout.TORCHRUN_RANK_LOG_NAMES
        return {path.parent for path in files
                if path.name == stderr and path.with_name(stdout) in files}

    def _follow(self, path: Path, rank: int | None) -> _Followed:
        relative = path.relative_to(self.logs_root).as_posix()
        name = f"{layout.LOGS_DIR}/{relative}"  # as the session names it, spool or not
        copy = spool.Copy(self.session_dir / name, self.flood.cap) \
            if self.spool_dir is not None else None
        followed = self._files[path] = _Followed(path, name, rank, copy=copy)
        with contextlib.suppress(OSError):  # (else when it is opened: status())
            status = path.stat()
            followed.ident = (status.st_dev, status.st_ino)
        if self._changes is None:
            return followed
        if rank is None and not self.parse_launcher:
            # torchrun's console: its own messages (and the ranks' lines again, where the user
            # asked for --tee), while the ranks' logs are parsed: no line of it needs its time,
            # and watched it would wake the supervisor twice a line.
            return followed
        if rank in self.recorder.probed_ranks:
            self._polled_probe_logs += 1  # read at polls (_poll_probed_logs)
            return followed
        followed.watched = self._changes.watch(path, followed)  # timed if busy (_retime)
        self._unwatched += not followed.watched
        return followed

    def _read(self, followed: _Followed, now: float) -> bool:
        """Take what `followed` gained; True when there may be more (a full read). While the
        logs are busy, wakeups only look at them instead (_look)."""
        # What looks saw first (of this log too: its lines before the chunk read here, which
        # must follow them, and be split after them; taken after the chunk, a line across the
        # two was lost, as a flood's step line was).
        self.take_read()
        before = followed.offset
        try:
            chunk = followed.read_chunk(now)
        except OSError as exc:
            self._cannot_open(exc, now)
            return False
        stamp = now
        if chunk:
            stamp = _written_at(followed.modified_ns, now, followed.grew_at)
            followed.grew_at = now
        self.taker.take_chunk(followed, chunk, stamp)
        return followed.offset - before >= _MAX_READ

    def _cannot_open(self, exc: OSError, now: float) -> None:
        """Say once when a log could not be opened for want of descriptors (the supervisor
        raised its limit as far as the hard one allows: fdlimit): its lines wait, unread,
        until one is free, and the figures of its rank with them."""
        if exc.errno not in (errno.EMFILE, errno.ENFILE) or self._said_no_descriptors:
            return
        self._said_no_descriptors = True
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.writer.write("warning", t=now, source="logs", message=(
            f"cannot open a log: {exc.strerror} (this process may open {limit}): the logs "
            "it could not open are read once a descriptor is free; raise the hard limit "
            "(ulimit -Hn, or LimitNOFILE for a service) for a job this large"))

    def take_read(self) -> None:
        """Read and take what looks saw (_note_change, _look), in the order they saw it: at
        each poll, and by a supervisor leaving."""
        self._take_native_looks()
        deferred, self._deferred = self._deferred, []
        # One read per log for all its looks; each line is stamped by the look that first
        # saw it whole. The step lines of the short way (StepRecorder.record) wait in `figures`
        # and are recorded together: one encoding a poll, not one a log.
        figures: list[LogLines] = []
        read_looked = self._read_looked
        try:
            for followed in deferred:
                seen, followed.looks = followed.looks, []
                start, last_seen = followed.offset, seen[-1][0]
                stamped: tuple[list[float], int] | None = None
                try:
                    if read_looked is not None and followed.fd is not None:
                        # Read, and each line's stamp found, in one call outside Python.
                        data, stamps, shared = read_looked(followed.fd, start, _MAX_READ,
                                                           seen)
                        followed.took(data, seen[0][1])
                        stamped = (stamps, shared)
                    else:
                        data = followed.read_chunk(seen[0][1], last_seen)
                except OSError:
                    data = b""
                if not data:
                    followed.behind = followed.offset < last_seen  # read again at the poll
                    continue
                if followed.offset < last_seen:
                    # Cut at _MAX_READ (a flood): the rest at the next take, stamped by the
                    # looks that saw it.
                    followed.looks = [look for look in seen if look[0] > followed.offset]
                    self._deferred.append(followed)
                if followed.parsed or _CR in data or _CR in followed.pending:
                    self.recorder.record(figures)  # those read before it first, in the order read
                    self.taker.take_pieces(followed, _Pieces(start, data), seen,
                                           self._count_shared)
                else:
                    self.taker.take_looked_lines(followed, start, data, seen, figures,
                                                 self._count_shared, stamped)
        finally:  # (what was read before a failure is recorded all the same)
            self.recorder.record(figures)

    def _count_shared(self, lines: int, shared: int) -> None:
        """`lines` read, of which `shared` came in a look at their log after another: written
        before the stamp they get (their log's modification time)."""
        self._batch_lines += lines
        self._shared_now += shared
        self.shared_lines += shared
