"""The flood gate's parts (supervisor/floodgate.py): sizes, the scan of skipped bytes for step
lines, their stamps, the session's log cap in the spool's copies, and the exit clock."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neurotui.session import layout
from neurotui.session.meta import FORMAT_VERSION
from neurotui.session.writer import EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser, StepValues
from neurotui.supervisor import floodgate
from neurotui.supervisor.floodgate import FloodGate, interpolated_stamps
from neurotui.supervisor.logcap import LogCap, parse_size
from neurotui.supervisor.logfollow import LogFollower
from neurotui.supervisor.spool import Copy
from neurotui.supervisor.wakeups import ExitClock

FILLER = b"flood 000001: activations mean 0.1 std 1.0 max 3.5 (debug dump of a tensor)\n"
STEP_LINES = [b"step 7 loss 0.5000", b"{'loss': 1.25, 'learning_rate': 5e-05, 'epoch': 0.1}",
              b"Epoch: [0][ 10/500]\tTime  0.210 ( 0.230)\tLoss 6.9e+00 (6.9e+00)",
              b" 40%|####      | 40/100 [00:04<00:06,  9.87it/s, loss=0.42]",
              b"2024-01-01 INFO Compiler status PASS"]


@pytest.mark.parametrize(("text", "size"), [("200M", 200 << 20), ("1G", 1 << 30),
                                            ("1.5g", 3 << 29), ("512 KiB", 512 << 10),
                                            ("1000000", 1_000_000)])
def test_sizes_are_read_as_people_write_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "200X", "-5M", "1e9"])
def test_a_size_that_is_none_says_so(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize("native", [True, False])
def test_every_step_and_compile_line_in_a_flood_is_found(monkeypatch: pytest.MonkeyPatch,
                                                         native: bool) -> None:
    if not native:  # the way without the Aho-Corasick library: a find a word
        monkeypatch.setattr(floodgate, "BytesAhoCorasick", None)
    gate = FloodGate()
    data = b"".join(FILLER * 997 + line + b"\n" for line in STEP_LINES) + FILLER * 3
    spans = gate.candidates(data)
    assert [data[a:b] for a, b in spans] == STEP_LINES
    parser = StepLineParser.default()
    parsed = [parser.parse_values(data[a:b].decode()) for a, b in spans]
    assert sum(isinstance(record, StepValues) for record in parsed) == 4


def test_a_users_pattern_is_searched_for_itself_line_by_line() -> None:
    gate = FloodGate(step_patterns=(r"^it=(?P<step>\d+)", r"done\s+(?P<step>\d+)"))
    data = FILLER * 50 + b"it=41 nothing else\n" + FILLER + b"done\n" + b"7 done 6\n" + FILLER
    found = [data[a:b] for a, b in gate.candidates(data)]
    # `done\s+\d+` matches across the end of the `done` line: that line is looked at (the
    # parser, a line at a time, says it is none), and so is the next with its own match.
    assert found == [b"it=41 nothing else", b"done", b"7 done 6"]


def test_a_pattern_bytes_cannot_hold_makes_every_line_a_candidate() -> None:
    gate = FloodGate(step_patterns=(r"\N{DIGIT ONE}(?P<step>\d+)",))  # (\N: str patterns only)
    data = b"a\nb\n12"
    assert [data[a:b] for a, b in gate.candidates(data)] == [b"a", b"b", b"12"]


def test_skipped_lines_are_stamped_between_the_looks_around_them() -> None:
    anchors = [(1000, 10.0), (2000, 11.0), (4000, 11.5)]
    assert interpolated_stamps([500, 1000, 1500, 3000, 5000], anchors) == \
        [10.0, 10.0, 10.5, 11.25, 11.5]


def test_the_cap_cuts_at_a_line_and_says_how_much_was_dropped(tmp_path: Path) -> None:
    cap = LogCap(1000)
    first, second = Copy(tmp_path / "a.log", cap), Copy(tmp_path / "b.log", cap)
    line = b"x" * 99 + b"\n"
    first.write(line * 6, 1.0)  # 600 of the 1000
    second.write(line * 7, 2.0)  # 400 fit: 4 lines; then nothing more of either
    first.write(line * 2, 3.0)
    first.close()
    second.close()
    assert (cap.kept, cap.dropped, cap.reached_at) == (1000, 500, 2.0)
    a, b = (tmp_path / "a.log").read_bytes(), (tmp_path / "b.log").read_bytes()
    assert b == line * 4 + b"\n[neurotui: output dropped from here on: the session's log " \
        b"cap (1000 bytes) was reached]\n[neurotui: 300 bytes of output dropped here: the " \
        b"session's log cap (1000 bytes) was reached]\n"
    assert a.startswith(line * 6 + b"\n[neurotui: output dropped from here on")
    assert a.endswith(b"[neurotui: 200 bytes of output dropped here: the session's log cap "
                      b"(1000 bytes) was reached]\n")
    gate = FloodGate(cap)
    assert gate.dropped is not None and gate.dropped["over_cap_bytes"] == 500


def test_the_exit_clock_reads_the_time_the_process_ended() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    clock = ExitClock(child.pid)
    started = time.time()
    # Busy elsewhere (as a supervisor reading a flood) and late to look: the clock is not.
    time.sleep(2.0)
    assert child.wait() == 0
    assert clock.at is not None
    assert started + 0.3 < clock.at < started + 1.5
    clock.close()
    clock.close()  # (twice: nothing more)


def _spooled_follower(tmp_path: Path, gate: FloodGate) -> tuple[Path, Path, EventWriter,
                                                                  LogFollower]:
    """A follower of a new session whose job writes into a spool folder (polled logs)."""
    session, spool_dir = tmp_path / "s", tmp_path / "spool"
    session.mkdir()
    spool_dir.mkdir()
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    (spool_dir / layout.LAUNCHER_LOG_NAME).write_bytes(b"")
    writer = EventWriter(session / layout.EVENTS)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=True,
                           spool_dir=spool_dir, watch=False, flood=gate)
    return session, spool_dir / layout.LAUNCHER_LOG_NAME, writer, follower


def _steps(session: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (session / layout.EVENTS).read_text()
            .splitlines() if json.loads(line)["kind"] == "step"]


def test_a_log_far_behind_is_skipped_ahead_keeping_its_step_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("neurotui.supervisor.logfollow.CATCH_UP_S", 0.0)  # a read a poll
    gate = FloodGate(behind_max=2 << 20)
    session, log, writer, follower = _spooled_follower(tmp_path, gate)
    follower.poll(1.0)
    step_lines = [b"step %d loss 0.5" % n for n in range(1, 61)]
    with open(log, "ab") as f:  # 12 MB: a read of 4 MiB leaves four times the bound
        for line in step_lines:
            f.write(FILLER * 2600 + line + b"\n")
    size = log.stat().st_size
    follower.poll(2.0)  # reads 4 MiB, and sees how far the log goes
    follower.poll(3.0)  # skips to its last MiB, taking the step lines on the way, reads it
    writer.flush()
    assert _steps(session) == list(range(1, 61))
    # The part skipped is not in the session's copy, and its memory was given back.
    copy = (session / layout.LAUNCHER_LOG).read_bytes()
    skipped = gate.skipped["logs/launcher.log"]
    assert size - skipped - (64 << 10) < len(copy) < size - skipped + (64 << 10)
    assert re.search(rb"\[neurotui: [0-9.]+ MB of output dropped here: the supervisor fell "
                     rb"behind the job's output \(a flood of it\); the (\d+) step and compile "
                     rb"lines in it follow\]\n(step \d+ loss 0.5\n)+", copy)
    assert all(line in copy for line in step_lines)
    assert log.stat().st_blocks * 512 <= size - skipped + (1 << 20)
    dropped = gate.dropped
    assert dropped is not None and dropped["skipped_bytes"] == skipped > size - (6 << 20)
    warnings = [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()
                if '"warning"' in line]
    assert len(warnings) == 1 and "prints faster than the supervisor reads" in \
        warnings[0]["message"]
    follower.close()


def test_a_poll_reads_on_past_one_read_for_a_while(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("neurotui.supervisor.logfollow._MAX_READ", 1 << 16)
    monkeypatch.setattr("neurotui.supervisor.followedlogs._MAX_READ", 1 << 16)  # (its reads)
    session, log, writer, follower = _spooled_follower(tmp_path, FloodGate())
    follower.poll(1.0)
    with open(log, "ab") as f:  # 16 reads' worth, and no skipping: well within the bound
        for n in range(1, 11):
            f.write(FILLER * 1300 + b"step %d loss 0.5\n" % n)
    follower.poll(2.0)
    writer.flush()
    assert _steps(session) == list(range(1, 11))
    assert not follower.flood.skipped
    follower.close()
