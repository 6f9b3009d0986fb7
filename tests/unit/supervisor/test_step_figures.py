"""The supervisor's short way for a busy log's step lines (StepLineParser.parse_figures_many,
StepRecorder.record): the same records as the long way (parse_values_many and
_record_step), on every capture and on logs followed both ways."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from neurotui.session import layout
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser, shapes
from neurotui.supervisor import steprecorder
from neurotui.supervisor.logfollow import LogFollower
from neurotui.supervisor.stallwatch import StallWatch
from tests.unit.sources.test_steplog_public_logs import _capture_lines

RUNNER = "neurotui-runner step={n} rank={rank} samples=16 loss={loss}"
PLAIN = "step {n} loss {loss} lr 0.001"


def _figures_of(records: list) -> list:
    return [None if r is None else (r.step, r.rank, r.samples, r.loss) for r in records]


def test_figures_are_the_records_figures_on_every_capture() -> None:
    """Each capture's lines, each followed by copies with other digits (the memo learns a
    shape at its second line): where parse_figures_many reads a batch, its figures are those
    of parse_values_many's records, of the same types (by repr: 16 is not 16.0 in the
    session), and those records print no other figure."""
    rng = random.Random(11)
    parser, read = StepLineParser.default(), []
    made = [("runner", [RUNNER.format(n=12, rank=3, loss="6.9077")]),
            ("plain", [PLAIN.format(n=120, loss="2.3456")])]
    for name, lines in [*made, *_capture_lines()]:
        for line in lines:
            if not re.search(r"[0-9]", line):
                continue
            variants = [line, line, *(re.sub(r"[0-9]", lambda _: str(rng.randint(0, 9)), line)
                                      for _ in range(4))]
            records = parser.parse_values_many(variants)
            figures = parser.parse_figures_many(variants)
            if figures is None:
                continue
            read.append(name)
            assert repr(figures) == repr(_figures_of(records)), (name, line)
            for record in records:
                assert (record.throughput, record.dt, record.samples_total,
                        record.global_batch, record.bar_n) == (None,) * 5, (name, line)
    assert read.count("runner") == read.count("plain") == 1  # the short way was taken


@pytest.fixture
def shapes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of lines of each shape's read a column at a time (_read_columns), as read."""
    read_columns = shapes._ShapeMemo._read_columns
    read: list[int] = []

    def counted(memo: object, shape: bytes, group: list[str]) -> object:
        read.append(len(group))
        return read_columns(memo, shape, group)  # type: ignore[arg-type]

    monkeypatch.setattr(shapes._ShapeMemo, "_read_columns", counted)
    return read


def test_the_lines_of_many_ranks_read_a_shape_at_a_time_are_each_lines_figures(
        shapes_read: list[int]) -> None:
    """A poll's lines of 32 ranks' logs in one batch, of several shapes (ranks of one and two
    digits, steps across a power of ten), shuffled: read a shape's lines at a time, and each
    line's figures those of its own record."""
    parser = StepLineParser.default()
    lines = [RUNNER.format(n=n, rank=rank, loss=f"{1 / (n + rank):.4f}")
             for n in range(95, 105) for rank in range(32)]
    random.Random(3).shuffle(lines)
    for _ in range(2):
        records = parser.parse_values_many(lines)  # (the shapes learnt at their second line)
    figures = parser.parse_figures_many(lines)
    assert figures is not None and repr(figures) == repr(_figures_of(records))
    assert len(shapes_read) == 4 and sum(shapes_read) == len(lines)  # 2 x 2 shapes
    assert parser.parse_figures_many([*lines, "just a line"]) is None  # one odd line: none


def test_the_lines_of_logs_in_rank_order_are_read_a_run_of_one_shape_at_a_time(
        shapes_read: list[int]) -> None:
    """A poll's lines as they come, a log at a time in rank order: the ranks of one digit and
    those of two are each one run of lines, read as they stand (two reads), and each line's
    figures are those of its own record. Where the lines of a shape are apart (a step across
    a power of ten within each log), its lines are gathered first, and read the same."""
    parser = StepLineParser.default()
    in_order = [RUNNER.format(n=n, rank=rank, loss=f"{1 / (n + rank):.4f}")
                for rank in range(32) for n in range(100, 110)]
    apart = [RUNNER.format(n=n, rank=rank, loss=f"{1 / (n + rank):.4f}")
             for rank in range(32) for n in range(95, 105)]
    for _ in range(2):  # (the shapes learnt at their second line)
        records = {"in order": parser.parse_values_many(in_order),
                   "apart": parser.parse_values_many(apart)}
    for name, lines, reads in [("in order", in_order, [100, 220]),
                               ("apart", apart, [50, 50, 110, 110])]:
        shapes_read.clear()
        figures = parser.parse_figures_many(lines)
        assert figures is not None and repr(figures) == repr(_figures_of(records[name]))
        assert sorted(shapes_read) == reads, name


@pytest.mark.parametrize("odd", [
    "..........Compiler status PASS",  # a compile line
    "[1]:step 106 loss 2.2456 lr 0.001",  # a rank prefix: the text is not the line
    "\x1b[32mstep 109 loss 2.5456 lr 0.001\x1b[0m",  # colour codes
    "step 107 loss 2.3456 lr 0.001\rstep 108 loss 2.4456 lr 0.001",  # a bar's redraws
    "neurotui-runner step=12 rank=3 samples=16 loss=6.9077 dt=0.1234",  # another figure
    "step 110 loss 2.6456 lr 0.001 " + "x" * 70_000,  # over the line limit
    "just a line the script printed",  # no step at all
    "step 111 loss 2.7456 lr 0.001\nstep 112 loss 2.8456 lr 0.001",  # not one line
    "",
])
def test_a_batch_with_one_other_line_goes_the_long_way(odd: str) -> None:
    parser = StepLineParser.default()
    learn = [PLAIN.format(n=n, loss=f"2.{n}456") for n in range(100, 104)]
    parser.parse_values_many(learn)
    parser.parse_values_many([odd, odd])  # seen twice: its shape learnt, where it can be
    assert parser.parse_figures_many(learn) is not None
    assert parser.parse_figures_many([*learn, odd]) is None
    assert parser.parse_figures_many([]) == []  # (nothing to read is no odd line)


def test_a_parser_of_the_users_own_patterns_goes_the_long_way() -> None:
    parser = StepLineParser.from_patterns([r"it (?P<step>\d+)"], include_defaults=True)
    learn = [PLAIN.format(n=n, loss="2.3456") for n in range(100, 104)]
    parser.parse_values_many(learn)
    assert parser.parse_figures_many(learn) is None


def test_a_line_with_a_rank_prefix_goes_the_long_way_and_one_in_brackets_does_not() -> None:
    """A line's text is what follows its rank prefix, and its rank is the prefix's where the
    text prints none: a line printed with two prefixes teaches the shape of one with one
    prefix, and such a line still goes the long way. A line that only begins with a bracket
    (a logger's level) is its own text."""
    parser = StepLineParser.default()
    parser.parse_values_many([f"[rank1]:[rank2]:neurotui-runner step={n} samples=16 loss=1.0"
                              for n in range(10, 14)])
    line = "[rank3]:neurotui-runner step=15 samples=16 loss=1.0"
    assert parser.parse_values_many([line])[0].rank == 3  # type: ignore[union-attr]
    assert parser.parse_figures_many([line]) is None
    bracketed = [f"[INFO] neurotui-runner step={n} samples=16 loss=1.0" for n in range(10, 14)]
    records = parser.parse_values_many(bracketed)
    assert parser.parse_figures_many(bracketed) == _figures_of(records)
    assert records[0].step == 10  # type: ignore[union-attr]


def _new_session(root: Path, ranks: int, *, watch: bool = False, stderr: bool = False,
                 ) -> tuple[Path, EventWriter, LogFollower, list[Path]]:
    """A session of `ranks` ranks' stdout logs (and, `stderr`, rank 0's stderr log last)."""
    session = root / "s"
    (session / "logs").mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    (session / layout.LAUNCHER_LOG).write_text("")
    logs = []
    for rank in range(ranks):
        folder = session / layout.TORCHRUN_LOG_DIR / "run1" / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        logs.append(folder / "stdout.log")
        logs[-1].write_text("")
    if stderr:
        logs.append(logs[0].with_name("stderr.log"))
        logs[-1].write_text("")
    writer = EventWriter(session / layout.EVENTS)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=False,
                           watch=watch)
    return session, writer, follower, logs


def _rounds(ranks: int) -> list[list[str]]:
    """Rounds of lines per rank: runner and plain lines, steps printed twice, a step past 64
    bits, losses of NaN and infinity (written by the writer's encoder), lines with no
    samples, no rank or no step, a rate printed after such lines (its samples come from their
    stamps), now and then a line that is no step, and a round's first line drawing the last
    round's last step again."""
    rng = random.Random(5)
    rounds = []
    for k in range(40):
        per_rank = []
        for rank in range(ranks):
            n = 10 * k
            lines = [RUNNER.format(n=n + i, rank=rank, loss=f"{rng.random():.4f}")
                     for i in range(1, 8)]
            if k % 3:
                lines.append(RUNNER.format(n=n + 7, rank=rank, loss="1.0000"))  # drawn again
            if rank == 1:
                lines = [PLAIN.format(n=n + i, loss=f"{rng.random():.3f}") for i in range(1, 9)]
            if k % 5 == 2:  # the last round's last step drawn again, first in this one's
                lines.insert(0, PLAIN.format(n=n - 2, loss="0.5") if rank == 1 else
                             RUNNER.format(n=n - 3, rank=rank, loss="1.0000"))
            if k == 20:
                lines.append(PLAIN.format(n=n + 9, loss="nan"))
            if k in (25, 26, 27):  # seen twice, then in a batch of lines of learnt shapes
                lines += [RUNNER.format(n=n + 8, rank=rank, loss="1e999"),
                          RUNNER.format(n=98765432109876543210 + k, rank=rank, loss="1.0")]
            if k in (33, 34, 35) and rank == 0:  # no step printed: each line counts one on
                lines = [f"neurotui-runner rank=0 samples=16 loss=0.{i}" for i in range(1, 4)]
            if k in (30, 31) and rank == 2:  # samples from a printed rate over stamped steps
                lines = [f"({rank}, {n + i}) step_loss : 9.8750  learning_rate : 1.50e-05  "
                         "throughput : 320.00" for i in range(1, 4)]
            if k % 9 == 4:
                lines.insert(3, f"epoch {k} done")
            per_rank.append(lines)
        rounds.append(per_rank)
    return rounds


def _follow(root: Path, rounds: list[list[list[str]]], monkeypatch: pytest.MonkeyPatch, *,
            short_way: bool, native: bool = False, looked: bool = False,
            stderr: bool = False) -> tuple[str, int, int, dict]:
    """The rounds written to the ranks' logs and polled once each, by a follower that
    resumed a job whose steps of rank 0 up to 25 were recorded (the third round's lines, of
    shapes learnt by then); the session's step records,
    how many batches went the short way, and how many of those held a figure the writer's
    encoder writes (an infinite loss, a step past 64 bits); and what the stall watch was
    told of each rank's steps. `looked`: the kernel says which
    logs changed (inotify) and the poll takes what its looks saw, all logs' lines together
    (take_read); else each log is read at the poll. `stderr`: the rounds' last lists are
    rank 0's stderr log's. `native`: the short way's records made by _steprecords.c,
    whose lines count as taken (those it leaves to Python are counted there too)."""
    session, writer, follower, logs = _new_session(root, len(rounds[0]) - stderr,
                                                   watch=looked, stderr=stderr)
    follower.stalls = StallWatch(session)
    follower.recorder._record_steps = steprecorder.native_record_steps if native else None
    if looked:
        assert follower.fileno() is not None, "no inotify here"
    follower.resume({}, {0: 25})
    taken, odd = [0], [0]
    figures_of = StepLineParser.parse_figures_many

    def counted(parser: StepLineParser, lines: list[str]) -> list | None:
        figures = figures_of(parser, lines) if short_way else None
        taken[0] += len(lines) if figures is not None else 0  # lines read the short way
        odd[0] += any((step or 0) > 2**63 or loss == math.inf for step, _, _, loss in figures or ())
        return figures

    def counted_runs(parser: StepLineParser, lines: list[str]) -> list | None:
        runs = runs_of(parser, lines)
        taken[0] += len(lines) if runs is not None else 0
        return runs

    runs_of = StepLineParser.figure_runs_many
    monkeypatch.setattr(StepLineParser, "parse_figures_many", counted)
    monkeypatch.setattr(StepLineParser, "figure_runs_many", counted_runs)
    for k, per_rank in enumerate(rounds):
        for log, lines in zip(logs, per_rank, strict=True):
            with open(log, "a") as f:
                f.write("".join(f"{line}\n" for line in lines))
        if looked:
            follower.on_change(1000.0 + k)
        follower.poll(1000.0 + k)
    follower.poll(2000.0, final=True)
    writer.close()
    steps = [line for line in (session / layout.EVENTS).read_text().splitlines()
             if '"kind":"step"' in line.replace(" ", "")]
    told = {key: (track.last_t, track.last_step, list(track.times), track.past_warmup)
            for key, track in follower.stalls._tracks.items()}
    return "\n".join(steps), taken[0], odd[0], told


NATIVE = [False, pytest.param(True, marks=pytest.mark.skipif(
    steprecorder.native_record_steps is None, reason="_steprecords.c was not built"))]
"""The short way's records made in Python (_record_parsed) and by _steprecords.c."""


@pytest.mark.parametrize("native", NATIVE)
def test_a_followed_log_records_the_same_steps_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    rounds = _rounds(ranks=3)
    short, taken, odd, told = _follow(tmp_path / "short", rounds, monkeypatch, short_way=True,
                                      native=native)
    long, none_taken, _, told_long = _follow(tmp_path / "long", rounds, monkeypatch,
                                             short_way=False)
    assert none_taken == 0
    # Most lines went the short way (the first lines teach the shapes).
    assert taken >= _lines_in(rounds) // 2
    assert odd >= 2  # and some of them with an infinite loss and a step past 64 bits
    assert short == long and told == told_long
    assert short.count("\n") > 800
    # Strict JSON: an infinite or NaN loss is null, named in `nonfinite` (FORMAT.md).
    assert '"nonfinite": {"loss": "inf"}' in short and '"nonfinite": {"loss": "nan"}' in short
    assert "Infinity" not in short and "NaN" not in short
    assert '"step": 98765432109876543237' in short
    assert '"samples_from":"throughput"' in short


def _lines_in(rounds: list[list[list[str]]]) -> int:
    return sum(len(lines) for per_rank in rounds for lines in per_rank)


def _by_rank(steps: str) -> dict[int, list[str]]:
    """Each rank's step records, in the order written."""
    ranks: dict[int, list[str]] = {}
    for line in steps.splitlines():
        ranks.setdefault(json.loads(line)["rank"], []).append(line)
    return ranks


@pytest.mark.parametrize("native", NATIVE)
def test_logs_taken_together_record_what_each_read_alone_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    """A poll takes what looks saw of every log in one go (take_read): the short way's step
    lines of all logs recorded together, and the lines of a log that go the long way (a step
    written by the writer's encoder, a rate, a line that is no step) after those read before
    it. Rank 0's stderr log, read before its stdout log, prints the stdout's last step
    first: one step only where the two logs' lines are taken in the order read. Each rank's
    records are those of each log read alone, the long way."""
    rounds = _rounds(ranks=4)
    for k, per_rank in enumerate(rounds):
        per_rank.append([PLAIN.format(n=10 * k + 7, loss="0.5")])
    together, taken, odd, told = _follow(tmp_path / "together", rounds, monkeypatch,
                                         short_way=True, native=native, looked=True,
                                         stderr=True)
    alone, _, _, told_alone = _follow(tmp_path / "alone", rounds, monkeypatch,
                                      short_way=False, stderr=True)
    assert taken >= _lines_in(rounds) // 2 and odd >= 2
    assert _by_rank(together) == _by_rank(alone)
    assert told == told_alone and {rank for rank, _ in told} == {0, 1, 2, 3}
    assert together.count("\n") > 1000
