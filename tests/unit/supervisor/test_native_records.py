"""A busy log's step records made outside Python (supervisor/_steprecords.c, through
LogFollower._record_native): the same records, the same ranks' last steps and the same
stall watch as LogFollower._record_parsed makes, the way kept where the module was not built,
on random lines of the shapes it reads and of what it leaves to Python."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from neurotui.session import layout
from neurotui.session.steprecord import NO_PHASES
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor import steprecorder
from neurotui.supervisor.logfollow import LogFollower
from neurotui.supervisor.stallwatch import StallWatch

built = pytest.mark.skipif(steprecorder.native_record_steps is None,
                           reason="_steprecords.c was not built")

RUNNER = "neurotui-runner step={step} rank={rank} samples={samples} loss={loss}"
NO_STEP = "neurotui-runner rank={rank} samples={samples} loss={loss}"
PLAIN = "step {step} loss {loss} lr 0.001"


def test_the_records_module_is_built_by_the_set_up() -> None:
    """`.ci/run` (and the README's install) build it: where it was not, the records are made
    in Python at about twice the cost, and these tests would test nothing."""
    assert steprecorder.native_record_steps is not None


def test_the_record_fields_are_in_the_order_the_kernel_gives_them() -> None:
    """_steprecords.c makes each StepRecord by position: steprecorder checks the order at
    import (and makes the records in Python where it differs)."""
    fields = steprecorder.STEP_RECORD_FIELDS
    assert steprecorder.StepRecord.__struct_fields__[:len(fields)] == fields
    record = steprecorder.StepRecord(*range(len(fields)))  # type: ignore[arg-type]
    assert [getattr(record, name) for name in fields] == list(range(len(fields)))


def _follower(root: Path, native: bool) -> tuple[LogFollower, EventWriter]:
    root.mkdir()
    write_json_atomic(root / layout.META, {"format": FORMAT_VERSION, "exit": None})
    writer = EventWriter(root / layout.EVENTS)
    follower = LogFollower(root, writer, StepLineParser.default(), parse_launcher=False,
                           watch=False, native_records=native)
    follower.stalls = StallWatch(root)
    return follower, writer


def _teach(follower: LogFollower) -> None:
    """Each shape's lines seen twice, as a busy log's first lines teach them."""
    for line in ("neurotui-runner step=11 rank=22 samples=33 loss=4.4",
                 "neurotui-runner rank=22 samples=33 loss=4.4", "step 11 loss 4.4 lr 0.001",
                 "neurotui-runner step=11 rank=22 samples=3_3 loss=4.4"):
        follower.parser.parse_values_many([line, line])


def _random_log(rng: random.Random, rank: int, at: int) -> list[str]:
    """A log's lines of a poll: mostly one shape, with steps drawn again and going back,
    other ranks' lines, losses written by the writer's encoder, steps past 64 bits, a
    piece int() reads and the native reader does not, lines of no learnt shape."""
    shape = rng.choice([RUNNER, RUNNER, PLAIN, NO_STEP])
    lines = []
    for i in range(rng.randint(1, 14)):
        step = at + i
        if rng.random() < 0.1:
            step -= rng.randint(1, 3)  # drawn again, or gone back
        loss = rng.choice(["1.0", "0.2345", f"{rng.random():.4f}", "nan", "1e999"]
                          if rng.random() < 0.04 else [f"{rng.random():.4f}"])
        line = shape.format(step=step, rank=rank if rng.random() > 0.1 else rank + 1,
                            samples="3_3" if rng.random() < 0.01 else "16", loss=loss)
        if rng.random() < 0.01:
            line = RUNNER.format(step=98765432109876543210 + step, rank=rank, samples=16,
                                 loss="1.0")
        if rng.random() < 0.01:
            line = f"epoch {step} done"
        lines.append(line)
    return lines


@built
@pytest.mark.parametrize("seed", range(6))
def test_native_records_are_the_python_ones(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    polls = []
    for k in range(30):
        # (rank 1's log is placed: its lines name the probe's step they came after, or none)
        polls.append([(lines, [1000.0 + k + i / 100 for i in range(len(lines))], rank,
                       rank != 3, [rng.choice([None, 8 * k, 8 * k + 1]) for _ in lines]
                       if rank == 1 else None)
                      for rank in range(5) for lines in [_random_log(rng, rank, 8 * k)]])
    results = []
    for native in (True, False):
        follower, writer = _follower(tmp_path / str(native), native)
        follower.resume({}, {0: 40, 4: 7})
        follower.recorder.probed_ranks.add(2)  # timed by the probe: its log lines are not recorded
        _teach(follower)
        native_lines = [0]
        record_steps = follower.recorder._record_steps

        def counted(lines: list[str], stamps: list[float], begin: int, end: int,
                    *args: object, record_steps=record_steps,
                    native_lines=native_lines) -> tuple[int, int, object]:
            stopped = record_steps(lines, stamps, begin, end, *args)
            native_lines[0] += stopped[0] - begin
            return stopped

        if native:
            follower.recorder._record_steps = counted
        for figures in polls:
            follower.recorder.record([(list(lines), list(stamps), rank, watched, after)
                                      for lines, stamps, rank, watched, after in figures])
        writer.close()
        assert follower.stalls is not None
        results.append(((tmp_path / str(native) / layout.EVENTS).read_bytes(),
                        follower.recorder.step_counters, follower.recorder.last_stamp,
                        follower.recorder.steps_written,
                        {key: (track.last_step, list(track.times))
                         for key, track in follower.stalls._tracks.items()}))
        if native:
            lines = sum(len(lines) for figures in polls for lines, *_ in figures)
            assert native_lines[0] > lines // 2  # most went through the native reader
    assert results[0] == results[1]
    assert results[0][0].count(b'"kind":"step"') > 500
    assert results[0][0].count(b'"after_step"') > 50
    # (a NaN loss went through the writer's encoder: NaN, or null and named in
    # `nonfinite` where it writes strict JSON)
    assert b"NaN" in results[0][0] or b'"nonfinite"' in results[0][0]
    assert b"98765432109876543" in results[0][0]


PLACES_RUNNER = (21, 23, 29, 31, 40, 42, 48, 54)  # of "neurotui-runner step=10 rank=22 ..."


def _run(lines: list[str], rank: int | None, *, last: int | None = None,
         floor: int | None = None, skip: bool = False,
         ) -> tuple[tuple[int, int, object], list, list[int]]:
    steps: list = []
    run_steps: list[int] = []
    run_times: list[float] = []
    stopped = steprecorder.native_record_steps(  # type: ignore[misc]
        lines, [5.0] * len(lines), 0, len(lines), PLACES_RUNNER, rank, skip, last, floor, 0,
        steprecorder.StepRecord, steps, run_steps, run_times, None)
    return stopped, steps, run_steps


@built
def test_record_steps_stops_at_another_rank_and_at_what_python_reads() -> None:
    from neurotui.supervisor._steprecords import DONE, NEW_RANK, PYTHON

    line = "neurotui-runner step={} rank={} samples=16 loss=0.1234"
    assert line.format(10, 22).index("10") == PLACES_RUNNER[0]
    lines = [line.format(10, 22), line.format(11, 22), line.format(11, 22),
             line.format(12, 23)]
    assert _run(lines, None)[0] == (0, NEW_RANK, 22)  # (the first line's rank is looked up)
    stopped, steps, run_steps = _run(lines, 22)
    assert stopped == (3, NEW_RANK, 23) and run_steps == [10, 11]  # 11 drawn again: once
    assert steps[0] == steprecorder.StepRecord(5.0, 22, 10, 16.0, 0.1234, None, NO_PHASES,
                                               "log", 0, samples_from="line")
    placed: list = []
    steprecorder.native_record_steps(  # type: ignore[misc]
        lines[:2], [5.0, 6.0], 0, 2, PLACES_RUNNER, 22, False, None, None, 0,
        steprecorder.StepRecord, placed, [], [], [3, None])
    assert [record.after_step for record in placed] == [3, msgspec.UNSET]
    assert placed[0] == steprecorder.StepRecord(5.0, 22, 10, 16.0, 0.1234, None, NO_PHASES,
                                                "log", 0, samples_from="line", after_step=3)
    assert _run(lines[:2], 22, last=10)[2] == [11]
    assert _run(lines[:2], 22, floor=10)[2] == [11]  # recorded before a resume
    assert _run(lines[:3], 22, skip=True) == ((3, DONE, None), [], [])
    for odd in ("neurotui-runner step=1_ rank=22 samples=16 loss=0.1234",  # int() reads it
                "neurotui-runner step=11 rank=22 samples=16 loss=nan12.",
                "neurotui-runner step=11 rank=22 samples=16 loss=9e9999"):
        assert _run([lines[0], odd], 22)[0] == (1, PYTHON, None)
    assert _run([lines[0]], 2**63)[0] == (0, PYTHON, None)  # past 64 bits: the encoder's
    with pytest.raises(TypeError):
        steprecorder.native_record_steps(lines, [], 0, 1, (1, 2), 22, False, None, None, 0,  # type: ignore[misc]
                                steprecorder.StepRecord, [], [], [], None)
    with pytest.raises(IndexError):
        _run_past = steprecorder.native_record_steps  # type: ignore[misc]
        _run_past(lines, [5.0], 0, 4, PLACES_RUNNER, 22, False, None, None, 0,
                  steprecorder.StepRecord, [], [], [], None)


# -- its callers' edge cases (issue #63): each risky call in a fresh interpreter, so that a
# crash fails the test instead of stopping pytest -----------------------------------------------

def _isolated(code: str) -> str:
    """`code` run by a new Python (with `record_steps`, `StepRecord` as `_LogStep`, and
    `line` a runner's step line at PLACES_RUNNER); its output. A crash or an uncaught
    error fails the test."""
    prelude = ("from neurotui.supervisor._steprecords import record_steps\n"
               "from neurotui.supervisor.steprecorder import StepRecord as _LogStep\n"
               f"PLACES = {PLACES_RUNNER!r}\n"
               "line = 'neurotui-runner step=10 rank=22 samples=16 loss=0.1234'\n")
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


@built
@pytest.mark.parametrize("places", [
    (2**63 - 3, -2**63 + 2, 29, 31, 40, 42, 48, 54),  # wraps to a length of 5 (a segfault)
    (21, 23, 29, 31, 2**62, -2**62, 48, 54),
    (21, 23, 29, 31, 40, 42, 54, 48),  # end before start
    (21, 23, -1, 31, 40, 42, 48, 54),  # half absent
    (-5, -1, 29, 31, 40, 42, 48, 54),
])
def test_record_steps_refuses_places_that_are_not_spans(places: tuple[int, ...]) -> None:
    out = _isolated(f"""
        try:
            record_steps([line], [5.0], 0, 1, {places!r}, 22, False, None, None, 0, _LogStep,
                         [], [], [], None)
        except ValueError as refused:
            print(refused)
    """)
    assert out.startswith("record_steps: place ")


@built
def test_record_steps_is_safe_from_lines_changed_by_the_record_it_makes() -> None:
    """`make` is Python code: it may empty `lines` and `stamps` (the list was checked once,
    then read past its end), and drop the last reference to the line and stamp in use."""
    out = _isolated("""
        lines = [line.replace("step=10", f"step={10 + i}") for i in range(50)]
        stamps = [float(1000 + i) for i in range(50)]
        steps, run_steps, run_times = [], [], []
        def make(*fields):
            lines.clear()
            stamps.clear()
            return _LogStep(*fields)
        try:
            record_steps(lines, stamps, 0, 50, PLACES, 22, False, None, None, 0, make, steps,
                         run_steps, run_times, None)
        except RuntimeError as refused:
            print(refused, run_steps, run_times, steps[0].t)
    """)
    assert out.strip() == "record_steps: the lines changed under it [10] [1000.0] 1000.0"


@built
def test_a_negative_count_of_samples_is_left_to_python() -> None:
    """steplog's rule (a bad field drops the field, not the step) is Python's: the native
    reader stops at such a line and says so."""
    from neurotui.supervisor._steprecords import PYTHON

    lines = ["neurotui-runner step=10 rank=22 samples=16 loss=0.1234",
             "neurotui-runner step=11 rank=22 samples=-6 loss=0.1234"]
    assert _run(lines, 22)[0] == (1, PYTHON, None)
    assert _run([lines[0].replace("=16", "=-0")], 22)[1][0].samples == -0.0  # not below 0
