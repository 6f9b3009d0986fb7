"""Log lines placed among the automatic probe's steps by where the log stood at each step
(supervisor/stepoffsets.py, placing.read_placed): a loss goes with the step it was printed
after, whatever the log's modification time says."""

from __future__ import annotations

import json
import math
from pathlib import Path

from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor.logfollow import LogFollower
from neurotui.supervisor.placing import PLACE_AFTER_S
from neurotui.supervisor.stallwatch import StallWatch
from neurotui.supervisor.stepoffsets import KEPT, StepOffsets

FILE = (7, 42)


def test_a_line_goes_with_the_last_step_done_before_it_began() -> None:
    offsets = StepOffsets()
    for offset, t in ((0, 1.0), (10, 2.0), (10, 3.0), (25, 4.0)):
        offsets.add((*FILE, offset), t)
    assert FILE in offsets and offsets.files_known == 1
    # Steps 2 and 3 had nothing printed between them: a line at 10 came after both.
    assert offsets.place(FILE, 10) == (3.0, 1.0, True)
    assert offsets.place(FILE, 9) == (1.0, 1.0, True)
    assert offsets.place(FILE, 25) == (4.0, 1.0, False)  # no later step known yet
    offsets.forget_before(FILE, 12)
    assert offsets.place(FILE, 12) == (3.0, 3.0, True)
    offsets.add((*FILE, 3), 5.0)  # written again from the start: a new process's steps only
    assert offsets.place(FILE, 2) == (None, 5.0, True)
    assert offsets.place(FILE, 30) == (5.0, 5.0, False)


def test_the_steps_of_a_file_no_one_reads_stay_bounded() -> None:
    offsets = StepOffsets()
    for k in range(5 * KEPT):
        offsets.add((*FILE, 10 * k), float(k))
    assert KEPT <= len(offsets._files[FILE][0]) <= 2 * KEPT
    assert offsets.place(FILE, 10 * (5 * KEPT - 2) + 5) == (5 * KEPT - 2.0, 3.0 * KEPT, True)


def new_session(tmp_path: Path) -> tuple[Path, Path, Path, LogFollower, EventWriter]:
    session = tmp_path / "s"
    (session / "logs").mkdir(parents=True)
    (session / layout.PROBE_DIR).mkdir()
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    log = session / layout.LAUNCHER_LOG
    log.write_bytes(b"")
    writer = EventWriter(session / layout.EVENTS)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=True,
                           watch=False)
    follower.stalls = StallWatch(session)
    return session, log, session / layout.PROBE_DIR / "auto-rank-0.jsonl", follower, writer


def probe_step(probe: Path, log: Path, step: int, t: float, at: int | None = None) -> None:
    """The probe's record of a step done at `t`, when `log` ended at `at` (None: now)."""
    status = log.stat()
    with open(probe, "a") as f:
        f.write(json.dumps({"t": t, "kind": "step", "rank": 0, "local_rank": 0, "step": step,
                            "samples": 8, "loss": None, "dt": None, "phases": None,
                            "src": "auto", "attempt": 0,
                            "out": [status.st_dev, status.st_ino,
                                    status.st_size if at is None else at]}) + "\n")


def printed(log: Path, text: str) -> None:
    with open(log, "a") as f:
        f.write(text)


def poll(follower: LogFollower, now: float, final: bool = False) -> None:
    """As the supervisor: the probe files read, then the logs (read_at: when, on one clock)."""
    assert follower.stalls is not None
    follower.stalls.read_probes()
    follower.stalls.read_at = now
    follower.poll(now, final)


def log_steps(session: Path) -> list[tuple[float, float]]:
    records = [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()]
    return [(r["t"], r["loss"]) for r in records if r["kind"] == "step"]


def test_a_line_waits_until_no_unread_step_can_come_before_it(tmp_path: Path) -> None:
    session, log, probe, follower, writer = new_session(tmp_path)
    printed(log, "starting\n")
    probe_step(probe, log, 1, 100.0)
    printed(log, "step 1 loss 1.5\n")
    # Step 2 is done and its line printed, but the probe has not written step 2 yet.
    printed(log, "step 2 loss 2.5\n")
    poll(follower, 1000.0)
    # Both lines came after step 1, and no later step is known: either may follow step 2.
    writer.flush()
    assert log_steps(session) == []
    probe_step(probe, log, 2, 100.1, at=len(b"starting\nstep 1 loss 1.5\n"))
    poll(follower, 1000.0 + PLACE_AFTER_S)
    writer.flush()
    assert log_steps(session) == [(100.0, 1.5), (100.1, 2.5)]
    assert follower.timing["placed_logs"] == 1

    # After the last step known: placed once the probe was read PLACE_AFTER_S after the line.
    probe_step(probe, log, 3, 100.2)
    printed(log, "step 3 loss 3.5\n")
    for now in (1002.0, 1002.0 + PLACE_AFTER_S / 2):
        poll(follower, now)
        writer.flush()
        assert len(log_steps(session)) == 2
    poll(follower, 1002.0 + PLACE_AFTER_S)
    writer.flush()
    assert log_steps(session)[2:] == [(100.2, 3.5)]

    # At the job's exit, every line goes where the steps known put it.
    probe_step(probe, log, 4, 100.3)
    printed(log, "step 4 loss 4.5\nthe end\n")
    poll(follower, 1003.0, final=True)
    writer.close()
    assert log_steps(session)[3:] == [(100.3, 4.5)]
    # Each record names the probe's step it was placed after; the reader puts its loss there.
    records = [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()]
    assert [r["after_step"] for r in records if r["kind"] == "step"] == [1, 2, 3, 4]
    steps = SessionReader(session, telemetry_history=None).load().steps()
    auto = steps[steps["src"].astype(str) == "auto"].sort_values("step")
    assert list(auto["loss"]) == [1.5, 2.5, 3.5, 4.5]
    assert list(auto["step"]) == [1, 2, 3, 4]


def test_a_line_printed_before_the_first_step_known_stays_before_it(tmp_path: Path) -> None:
    session, log, probe, follower, writer = new_session(tmp_path)
    printed(log, "step 0 loss 9.0\n")
    probe_step(probe, log, 1, 100.0)
    printed(log, "step 1 loss 1.0\n")
    probe_step(probe, log, 2, 100.1)
    poll(follower, 1000.0)
    writer.close()
    (before, loss), after = log_steps(session)
    assert before < 100.0 and loss == 9.0 and after == (100.0, 1.0)
    records = [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()]
    assert [r.get("after_step") for r in records if r["kind"] == "step"] == [None, 1]
    steps = SessionReader(session, telemetry_history=None).load().steps()
    auto = steps[steps["src"].astype(str) == "auto"].sort_values("step")
    assert list(auto["loss"][:1]) == [1.0] and math.isnan(auto["loss"].iloc[1])


def test_the_steps_before_the_lines_placed_are_forgotten(tmp_path: Path) -> None:
    """Every step's offset is kept only until the lines after it are placed: a day of steps
    would otherwise pile up (and a quiet stderr.log keeps one: a step with nothing printed
    since the last takes its place)."""
    _, log, probe, follower, writer = new_session(tmp_path)
    for k in range(50):
        probe_step(probe, log, k + 1, 100.0 + k / 10)
        printed(log, f"step {k + 1} loss 1.0\n")
        poll(follower, 1000.0 + k)
    writer.close()
    assert follower.stalls is not None
    status = log.stat()
    assert len(follower.stalls.offsets._files[(status.st_dev, status.st_ino)][0]) <= 2
    quiet = StepOffsets()
    quiet.add_many([(*FILE, 7)] * 100 + [None], [float(k) for k in range(101)],
                   list(range(101)))
    assert quiet._files[FILE] == ([7], [99.0], [99])


def test_an_adopting_supervisor_places_the_lines_since_the_old_ones_mark(
        tmp_path: Path) -> None:
    """The old supervisor died after step 1's line; steps 2 and 3 and their lines came while
    none watched. The new one reads the probe files on from their ends, but takes where their
    last steps say the log stood: the lines it reads from the old mark go with their steps."""
    session, log, probe, follower, writer = new_session(tmp_path)
    probe_step(probe, log, 1, 100.0)
    printed(log, "step 1 loss 1.5\n")
    poll(follower, 1000.0)
    poll(follower, 1000.0 + PLACE_AFTER_S)  # line 1 taken
    mark = log.stat().st_size
    for step in (2, 3):
        probe_step(probe, log, step, 100.0 + step / 10)
        printed(log, f"step {step} loss {step}.5\n")
    adopter = LogFollower(session, writer, StepLineParser.default(), parse_launcher=True,
                          watch=False)
    adopter.stalls = StallWatch(session)
    adopter.stalls.skip_history()
    adopter.resume({layout.LAUNCHER_LOG: mark}, {0: 1})
    poll(adopter, 1001.0, final=True)
    writer.close()
    assert log_steps(session) == [(100.0, 1.5), (100.2, 2.5), (100.3, 3.5)]


def test_the_placed_logs_of_many_ranks_are_recorded_together_as_each_alone(
        tmp_path: Path) -> None:
    # A poll's short-way lines of every placed log wait and are written in one go; a line of
    # the long way (a compile line) in one of them writes those before it first. Every
    # rank's steps come out as they were printed, each with its step's time and its loss.
    session = tmp_path / "s"
    root = session / layout.TORCHRUN_LOG_DIR / "job_x" / "attempt_0"
    (session / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    logs = []
    stdout_name, stderr_name = layout.TORCHRUN_RANK_LOG_NAMES
    for rank in range(3):
        (root / str(rank)).mkdir(parents=True)
        (root / str(rank) / stderr_name).write_bytes(b"")
        logs.append(root / str(rank) / stdout_name)
        logs[-1].write_bytes(b"")
    writer = EventWriter(session / layout.EVENTS)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=False,
                           watch=False)
    follower.stalls = StallWatch(session)
    want = []
    for second in range(3):
        for step in range(1 + 4 * second, 5 + 4 * second):
            for rank, log in enumerate(logs):
                t = 100.0 + step + rank / 10
                probe = session / layout.PROBE_DIR / f"auto-rank-{rank}.jsonl"
                status = log.stat()
                with open(probe, "a") as f:
                    f.write(json.dumps({"t": t, "kind": "step", "rank": rank, "step": step,
                                        "samples": 8, "loss": None, "dt": None,
                                        "phases": None, "src": "auto", "attempt": 0,
                                        "out": [status.st_dev, status.st_ino,
                                                status.st_size]}) + "\n")
                if rank == 1 and step == 6:
                    printed(log, "..........Compiler status PASS\n")
                printed(log, f"step {step} loss {step + rank / 100}\n")
                want.append((t, rank, step, step + rank / 100))
        poll(follower, 1000.0 + second)
    poll(follower, 1010.0, final=True)
    writer.flush()
    records = [json.loads(line) for line in (session / layout.EVENTS).read_text().splitlines()]
    got = sorted((r["t"], r["rank"], r["step"], r["loss"]) for r in records
                 if r["kind"] == "step")
    assert got == sorted(want)
    assert [r["kind"] for r in records].count("compile") == 1


def _placed_session(tmp_path: Path, log_records: list[dict]) -> Path:
    """A session whose rank 0 the automatic probe timed (steps 1-3, at 100, 101 and 102) and
    whose events hold `log_records` (step records of its log lines)."""
    session = tmp_path / "placed"
    (session / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    empty = {"samples": 8, "loss": None, "dt": None, "phases": None}
    (session / layout.PROBE_DIR / "auto-rank-0.jsonl").write_text("".join(
        json.dumps({"t": 99.0 + step, "kind": "step", "rank": 0, "step": step, **empty,
                    "src": "auto", "attempt": 0}) + "\n" for step in (1, 2, 3)))
    (session / layout.EVENTS).write_text("".join(
        json.dumps({"kind": "step", "rank": 0, "samples": None, "dt": None, "phases": None,
                    "src": "log", "attempt": 0, **record}) + "\n" for record in log_records))
    return session


def _auto_losses(session: Path, **reader: object) -> list[float]:
    steps = SessionReader(session, telemetry_history=None, **reader).load().steps()
    auto = steps[steps["src"].astype(str) == "auto"].sort_values("step")
    assert list(auto["step"]) == [1, 2, 3] and len(steps) == 3  # (log rows: never rows)
    return [None if math.isnan(x) else x for x in auto["loss"]]


def test_a_placed_loss_goes_on_the_step_its_record_names_not_by_time(tmp_path: Path) -> None:
    # A record naming step 1 whose time is past step 2's (a hand-made one: the supervisor
    # stamps a placed line with its step's time): the step named wins, no search by time.
    session = _placed_session(tmp_path, [
        {"t": 101.5, "step": 7, "loss": 7.5, "after_step": 1},
        {"t": 102.0, "step": 8, "loss": 8.5, "after_step": 3},
        {"t": 102.0, "step": 9, "loss": 9.5, "after_step": 3},  # (the first loss stays)
        {"t": 102.0, "step": 9, "loss": 6.5, "after_step": 40}])  # no such step: none
    assert _auto_losses(session) == [7.5, None, 8.5]


def test_a_log_loss_without_a_step_named_is_placed_by_time(tmp_path: Path) -> None:
    # Sessions recorded before `after_step`: on the automatic row just before the line.
    session = _placed_session(tmp_path, [{"t": 101.5, "step": 7, "loss": 7.5},
                                         {"t": 102.0, "step": 8, "loss": 8.5}])
    assert _auto_losses(session) == [None, 7.5, 8.5]


def test_placed_losses_read_line_by_line_go_where_the_bulk_read_puts_them(
        tmp_path: Path) -> None:
    # One line the bulk decoder cannot take (a phase that is not a number) sends the read of
    # its piece line by line: the placed losses come out the same.
    session = _placed_session(tmp_path, [
        {"t": 101.5, "step": 7, "loss": 7.5, "after_step": 1},
        {"t": 102.0, "step": 8, "loss": 8.5, "after_step": 3}])
    with open(session / layout.EVENTS, "a") as f:
        f.write(json.dumps({"t": 102.5, "kind": "step", "rank": 5, "step": 1,
                            "phases": {"data": "slow"}, "src": "log"}) + "\n")
    steps = SessionReader(session, telemetry_history=None).load().steps()
    auto = steps[steps["src"].astype(str) == "auto"].sort_values("step")
    assert [None if math.isnan(x) else x for x in auto["loss"]] == [7.5, None, 8.5]


def test_a_placed_loss_goes_on_its_own_attempts_step() -> None:
    # A restart counts the steps from 1 again: the loss goes on its attempt's step 2 only.
    import numpy as np

    from neurotui.session.columns import Columns
    from neurotui.session.stepsources import AUTO, LOG, put_placed_losses

    table = Columns({"t": np.arange(6.0), "rank": np.zeros(6, dtype=np.int64),
                     "step": np.array([1, 2, 3, 1, 2, 3]),
                     "attempt": np.array([0, 0, 0, 1, 1, 1]),
                     "src": np.array([AUTO] * 5 + [LOG], dtype=np.int8),
                     "loss": np.full(6, np.nan)})
    losses = Columns({"rank": np.array([0.0, 0.0, 0.0]), "attempt": np.array([1.0, 0.0, 1.0]),
                      "after_step": np.array([2.0, 3.0, 3.0]), "loss": np.array([5.0, 6.0, 7.0]),
                      "t": np.array([4.0, 2.0, 5.0])})
    placed, missed = put_placed_losses(table, losses)
    assert [None if math.isnan(x) else x for x in placed["loss"]] == \
        [None, None, 6.0, None, 5.0, None]
    assert missed.tolist() == [2]  # (attempt 1's step 3 is a log row here, not the probe's)
