"""How imported steps are timed: printed stamps (and how finely), spans for coarse ones."""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

import pytest

from neurotui.importing.timing import Stamps, line_stamp, resolution_of, span_step_times, span_steps

STEPLOGS = Path(__file__).resolve().parents[2] / "fixtures" / "steplogs"


@pytest.mark.parametrize("step_s", [0.3, 1.5, 2.2, 7.0])
def test_spans_make_steps_dated_to_the_second_honest(step_s: float) -> None:
    start = 1_700_000_000.4
    steps = list(range(1, 401))
    printed = [float(int(start + step_s * i)) for i in steps]  # a date to the second
    naive = statistics.median(b - a for a, b in itertools.pairwise(printed))
    span = span_steps(printed, steps, 1.0)
    assert span * step_s >= 50 * 0.99  # the second is at most 2% of a span
    each = span_step_times(printed, steps, span)
    assert statistics.median(x for x in each if x) == pytest.approx(step_s, rel=0.02)
    if step_s < 2:
        assert naive != pytest.approx(step_s, rel=0.05)  # what a span is for


def test_spans_count_steps_not_lines_and_restart_at_a_restart() -> None:
    steps = [*range(10, 1010, 10), *range(10, 510, 10)]  # a line each 10 steps; restarted
    times = [float(int(1000 + 0.2 * s)) for s in steps[:100]] + \
        [float(int(5000 + 0.3 * s)) for s in steps[100:]]
    each = span_step_times(times, steps, span_steps(times[:100], steps[:100], 1.0))
    assert statistics.median(each[:100]) == pytest.approx(0.2, rel=0.03)  # type: ignore[type-var]
    assert statistics.median(each[100:]) == pytest.approx(0.3, rel=0.03)  # type: ignore[type-var]


def test_a_log_too_short_for_a_span_has_no_step_times() -> None:
    assert span_step_times([5.0], [1], 30) == [None]
    assert span_step_times([5.0, 5.0], [1, 2], 30) == [None, None]


def test_resolution_is_the_finest_place_printed() -> None:
    assert resolution_of([1.0, 2.0, 3.0]) == 1.0
    assert resolution_of([1.5, 2.25]) == pytest.approx(0.01)
    assert resolution_of([1.123, 2.5]) == pytest.approx(0.001)
    stamps = Stamps(2024)
    assert stamps("2024-05-01 12:00:03,000 step 1") is not None
    assert stamps.resolution([1.0]) == pytest.approx(0.001)  # printed to the ms, round or not


def test_stamps_read_what_the_parser_reads_on_real_logs() -> None:
    """The short way (a second's head read once) against line_stamp, on every line of the
    real captures and on logging's own format."""
    lines = [line for path in sorted(STEPLOGS.rglob("*.txt"))
             for line in path.read_text(errors="replace").splitlines()]
    lines += [time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1.7e9 + i)) + f",{i:03d} x"
              for i in range(0, 999, 37)]
    lines += ["2024-05-01T12:00:03.123Z step 1", "[2024-05-01 12:00:03.5] loss 1",
              "2024-05-01 12:00:03+02:00 step 2", "2024-05-01 12:00:03.1234567 x"]
    stamps = Stamps(2024)
    assert [stamps(line) for line in lines] == [line_stamp(line, 2024) for line in lines]
    assert sum(line_stamp(line, 2024) is not None for line in lines) > 40


def test_syslog_and_launcher_prefixed_stamps() -> None:
    may = line_stamp("May  1 12:00:03 ip-10-0-0-1 train.py: step 3 loss 1.0", 2024)
    assert may == pytest.approx(time.mktime((2024, 5, 1, 12, 0, 3, 0, 0, -1)))
    torchx = line_stamp("[0]:LOG Wed Dec 21 00:51:01 2022 - (0, 14) step_loss : 10.7", 1999)
    assert torchx == pytest.approx(time.mktime((2022, 12, 21, 0, 51, 1, 0, 0, -1)))
    assert line_stamp("step 3 loss 1.0 at 12:00:03", 2024) is None
