"""A short fuzz of each function of the three C modules (issue #63), beside their Python twins:
random arguments, the callers' edge cases among them (NaN, infinite and extreme numbers,
wrapped places, descriptors past an int, lists changed by the Python code a call runs, two
threads closing one looker). Each function for `--seconds` (3 by default); it stops at the
first difference from the twin or unexpected error, printing the arguments.

Not a test: run by hand, and by tests/bench/asan_native.sh under AddressSanitizer and UBSan,
where a memory error or undefined behaviour stops the process with its report.

    .venv/bin/python tests/bench/fuzz_native.py [--seconds 3] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from neurotui.collect import host
from neurotui.supervisor import followedlogs, steprecorder

DONE, NEW_RANK, PYTHON = 0, 1, 2
LLONG_MAX = 2**63 - 1
EXTREME_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**32 + 3, 2**62, 2**63 - 3, LLONG_MAX,
                -(2**63) + 2, -(2**63), 2**63, 2**64, -(2**64), 10**30]
EXTREME_FLOATS = [0.0, -0.0, 1e-8, 1e-3, 0.02, 3600.0, 3600.5, 1e10, 1e300, -1.0, math.inf,
                  -math.inf, math.nan, 5e-324]


def _chance(rng: random.Random, p: float) -> bool:
    return rng.random() < p


# -- _steprecords.record_steps against a Python reading of the same rules --------------------

def _read_count(text: str, start: int, end: int) -> int | None:
    """_steprecords.c's read_count: an optional sign and 1 to 18 ASCII digits."""
    negative = False
    if start < end and text[start] in "+-":
        negative, start = text[start] == "-", start + 1
    if not 1 <= end - start <= 18:
        return None
    digits = text[start:end]
    if any(not "0" <= c <= "9" for c in digits):
        return None
    return -int(digits) if negative else int(digits)


def _read_number(text: str, start: int, end: int) -> float | None:
    """read_number: ASCII digits, signs, dots and exponents that float() reads, finite."""
    piece = text[start:end]
    if not 1 <= len(piece) <= 64 or any(c not in "0123456789.-+eE" for c in piece):
        return None
    try:
        value = float(piece)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _records_twin(lines: list, stamps: list, start: int, end: int, places: tuple,
                  rank: object, skip: bool, last: object, floor: object,
                  ) -> tuple[tuple[int, int, object], list[tuple]]:
    """What record_steps answers and records (as (t, rank, step, samples, loss) tuples)."""
    def count(value: object) -> tuple[bool, int | None]:
        if value is None:
            return True, None
        if not isinstance(value, int) or not -(2**63) < value <= LLONG_MAX:
            return False, None
        return True, value

    has_step, has_rank, has_samples, has_loss = (places[k] >= 0 for k in (0, 2, 4, 6))
    ok_rank, rank_n = count(rank)
    ok_last, last_n = count(last)
    ok_floor, floor_n = count(floor)
    if not (ok_rank and ok_last and ok_floor):
        return (start, PYTHON, None), []
    if rank_n is None and not has_rank:
        raise ValueError("no rank")
    made = []
    for i in range(start, end):
        line, stamp = lines[i], stamps[i]
        if type(line) is not str or type(stamp) is not float:
            return (i, PYTHON, None), made
        if any(places[k] > len(line) for k in (1, 3, 5, 7)):
            return (i, PYTHON, None), made
        if has_rank:
            printed = _read_count(line, places[2], places[3])
            if printed is None:
                return (i, PYTHON, None), made
            if rank_n is None or printed != rank_n:
                return (i, NEW_RANK, printed), made
        if skip:
            continue
        if has_step:
            step = _read_count(line, places[0], places[1])
            if step is None:
                return (i, PYTHON, None), made
            if (last_n is not None and step == last_n) or \
                    (floor_n is not None and step <= floor_n):
                continue
        else:
            if last_n is not None and last_n >= LLONG_MAX - 1:
                return (i, PYTHON, None), made
            step = (last_n or 0) + 1
        samples = _read_number(line, places[4], places[5]) if has_samples else None
        loss = _read_number(line, places[6], places[7]) if has_loss else None
        if (has_samples and (samples is None or samples < 0)) or \
                (has_loss and loss is None) or not math.isfinite(stamp):
            return (i, PYTHON, None), made
        made.append((stamp, rank, step, samples, loss))
        last_n = step
    return (end, DONE, None), made


_PIECES = ["0", "7", "16", "-6", "+3", "-0", "1_0", "12345678901234567890", "9" * 18,
           "1e3", "1e-3", "-1e999", "nan", "inf", ".", "", "٣", "𝟙", "x", " 1", "0.1234",
           "1.0e+5", "--1", "1e", "\x00"]


def _random_line(rng: random.Random) -> str:
    piece = lambda: rng.choice(_PIECES) if _chance(rng, 0.3) else str(rng.randint(0, 99))  # noqa: E731
    return f"neurotui-runner step={piece()} rank={piece()} samples={piece()} loss={piece()}"


def _random_places(rng: random.Random, line: str) -> tuple[int, ...]:
    if _chance(rng, 0.2):
        return tuple(rng.choice([*EXTREME_INTS, -1, 3, 20, 60]) for _ in range(8))
    spans = []
    for key in ("step=", "rank=", "samples=", "loss="):
        start = line.find(key) + len(key)
        stop = line.find(" ", start)
        stop = len(line) if stop < 0 else stop
        spans += [start, stop] if not _chance(rng, 0.15) else [-1, -1]
    return tuple(spans)


def fuzz_record_steps(rng: random.Random, seconds: float) -> int:
    from neurotui.supervisor._steprecords import record_steps

    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        lines: list = [_random_line(rng) for _ in range(rng.randint(0, 12))]
        places = _random_places(rng, lines[0] if lines else "neurotui-runner step=1")
        if lines and _chance(rng, 0.05):
            lines[rng.randrange(len(lines))] = b"bytes"
        stamps: list = [rng.choice([1000.0 + i, math.nan, math.inf]) if _chance(rng, 0.05)
                        else 1000.0 + i for i in range(len(lines))]
        start = rng.choice([0, 0, 1, -1, 2**62]) if _chance(rng, 0.1) else 0
        end = rng.choice([len(lines), len(lines) + 1, 0]) if _chance(rng, 0.1) else len(lines)
        rank = rng.choice([None, 0, 7, 16, -6, 2 ** 63, "x", *EXTREME_INTS])
        last = rng.choice([None, None, 0, 6, 15, LLONG_MAX - 1, 2**64])
        floor = rng.choice([None, None, 5, -(2**63)])
        skip = _chance(rng, 0.1)
        shrink = _chance(rng, 0.1)
        after_steps = None if _chance(rng, 0.5) else [
            rng.choice([None, 0, 5, 2**40]) for _ in range(len(lines))]

        def make(*fields: object, lines: list = lines, stamps: list = stamps,
                 after_steps: list | None = after_steps,
                 shrink: bool = shrink) -> steprecorder.StepRecord:
            if shrink:  # Python code that empties the lists under the call
                lines.clear()
                stamps.clear()
                if after_steps is not None:
                    after_steps.clear()
            return steprecorder.StepRecord(*fields)  # type: ignore[arg-type]

        given = (list(lines), list(stamps), start, end, places, rank, skip, last, floor)
        steps: list = []
        run_steps: list = []
        run_times: list = []
        try:
            got = record_steps(lines, stamps, start, end, places, rank, skip, last, floor, 0,
                               make, steps, run_steps, run_times, after_steps)
        except (ValueError, IndexError, RuntimeError, TypeError, OverflowError) as refused:
            got = refused
        calls += 1
        try:
            # (in the order it checks them)
            if not start >= 0 or end > len(given[0]):
                assert isinstance(got, IndexError), (got, given)
                continue
            if any(not -(2**63) <= p <= LLONG_MAX for p in places):
                assert isinstance(got, OverflowError), (got, given)  # (past a C ssize_t)
                continue
            valid_places = all((places[k], places[k + 1]) == (-1, -1) or
                               0 <= places[k] <= places[k + 1] for k in range(0, 8, 2))
            if not valid_places:
                assert isinstance(got, ValueError), (got, given)
                continue
            if shrink and isinstance(got, RuntimeError):
                continue  # (the lines changed under it: said so)
            try:
                want, made = _records_twin(*given)
            except ValueError:
                assert isinstance(got, ValueError), (got, given)
                continue
            if shrink and made:  # the first record emptied the lists: it says so there
                continue
            assert got == want, (got, want, given)
            assert [(s.t, s.rank, s.step, s.samples, s.loss) for s in steps] == made, given
            assert run_steps == [m[2] for m in made] and run_times == [m[0] for m in made]
            # each record names its line's probe step (stamps are 1000 + the line's index)
            named = [msgspec.UNSET if after_steps is None or
                     after_steps[int(s.t) - 1000] is None else after_steps[int(s.t) - 1000]
                     for s in steps]
            assert [s.after_step for s in steps] == named, given
        except AssertionError:
            print("record_steps differs:", file=sys.stderr)
            raise
    return calls


# -- _looker.read_looked against followedlogs._looked_stamps ----------------------------------

def fuzz_read_looked(rng: random.Random, seconds: float, folder: Path) -> int:
    from neurotui.supervisor._looker import read_looked

    path = folder / "rank.log"
    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = b"".join(b"x" * rng.randint(0, 20) + b"\n" * rng.choice([0, 1, 1, 2])
                        for _ in range(rng.randint(0, 60)))
        path.write_bytes(text)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(20):
                sizes = sorted(rng.randint(0, len(text) + 5) for _ in range(rng.randint(0, 8)))
                looks: list = [(size, 1000.0 + i) for i, size in enumerate(sizes)]
                offset = rng.randint(0, len(text) + 2)
                most = rng.choice([1 << 20, rng.randint(0, 50)])
                odd = _chance(rng, 0.25)
                fd_ = fd
                if odd:  # the callers' edge cases: answered with an error, never a crash
                    which = rng.randrange(5)
                    if which == 0:
                        fd_ = rng.choice([fd + 2**32, -1, 2**31, 2**63, fd + 2**64])
                    elif which == 1:
                        offset = rng.choice(EXTREME_INTS)
                    elif which == 2:
                        most = rng.choice(EXTREME_INTS)
                    elif which == 3:
                        looks.append((rng.choice(EXTREME_INTS), 1.0))
                    else:
                        looks.append(rng.choice([[1, 1.0], (1,), "x", (1.5, 1.0)]))
                try:
                    got = read_looked(fd_, offset, most, looks)
                except (ValueError, OverflowError, TypeError, MemoryError, OSError) as refused:
                    assert odd, (refused, fd_, offset, most, looks)
                    continue
                finally:
                    calls += 1
                data, stamps, shared = got
                if odd:
                    continue  # (an extreme that is still a read: no twin for its arguments)
                assert data == text[offset:max(offset, min(sizes[-1] if sizes else 0,
                                                           offset + most))], (offset, most)
                assert (stamps, shared) == followedlogs._looked_stamps(data, offset, looks), \
                    (offset, most, looks)
        finally:
            os.close(fd)
    return calls


# -- _looker.Looker: its calls in random order from several threads --------------------------

def fuzz_looker(rng: random.Random, seconds: float, folder: Path) -> int:
    from neurotui.supervisor._looker import Looker

    fds = [os.open(folder / f"{i}.log", os.O_RDWR | os.O_CREAT | os.O_APPEND)
           for i in range(4)]
    calls = [0]
    deadline = time.monotonic() + seconds
    failures: list[BaseException] = []

    def worker(seed: int, looker: Looker) -> None:
        own = random.Random(seed)
        try:
            while time.monotonic() < deadline:
                what = own.randrange(9)
                if what == 0:
                    logs = [(own.choice(fds), own.randint(0, 50), own.choice(
                        [0.0, -math.inf, time.time()])) for _ in range(own.randint(0, 4))]
                    taken = looker.set_logs(logs)
                    _check_taken(taken)
                elif what == 1:
                    seconds_ = own.choice(EXTREME_FLOATS)
                    try:
                        looker.set_interval(seconds_)
                    except ValueError:
                        assert not (seconds_ == 0 or 1e-3 <= seconds_ <= 3600), seconds_
                elif what == 2:
                    _check_taken(looker.take())
                elif what == 3:
                    looker.close()
                elif what == 4:
                    os.write(own.choice(fds), b"step\n" * own.randint(1, 3))
                elif what == 5:
                    stamp = own.choice([1e10, 3e10, -1e10, 0.0, time.time()])
                    with contextlib.suppress(OSError, OverflowError, ValueError):
                        os.utime(own.choice(fds), (stamp, stamp))
                elif what == 6:
                    bad = own.choice([[(-1, 0, 0.0)], [(0, -1, 0.0)], [(0, 0, math.nan)],
                                      [(2**32, 0, 0.0)], [[0, 0, 0.0]], 5])
                    try:
                        looker.set_logs(bad)  # type: ignore[arg-type]
                        raise AssertionError(f"set_logs took {bad!r}")
                    except (ValueError, OverflowError, TypeError):
                        pass
                elif what == 7:
                    assert looker.passes >= 0 and looker.shared >= 0
                else:
                    time.sleep(own.choice([0.0, 0.001]))
                calls[0] += 1
        except BaseException as failed:
            failures.append(failed)

    try:
        while time.monotonic() < deadline and not failures:
            looker = Looker()
            workers = [threading.Thread(target=worker, args=(rng.random(), looker))
                       for _ in range(3)]
            for thread in workers:
                thread.start()
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            for thread in workers:
                thread.join(60)
                assert not thread.is_alive(), "a looker call hung"
            closers = [threading.Thread(target=looker.close) for _ in range(2)]
            for thread in closers:
                thread.start()
            for thread in closers:
                thread.join(30)
                assert not thread.is_alive(), "close() hung"
            del looker
    finally:
        for fd in fds:
            os.close(fd)
    if failures:
        raise failures[0]
    return calls[0]


def _check_taken(taken: list) -> None:
    indexes = [entry[0] for entry in taken]
    assert len(indexes) == len(set(indexes)), indexes  # each log once
    for _, looks, changes, _, _, _ in taken:
        assert looks and changes >= 1 and all(b[0] >= a[0] for a, b in itertools.pairwise(looks))


# -- _procstat against host.py's Python ----------------------------------------------------

STAT = ("{pid} ({name}) S {ppid} 4242 4242 0 -1 4194560 3620 0 0 0 {utime} {stime} 0 0 20 0 1 "
        "0 {start} 15179776 {rss} 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 "
        "{cpu} 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
_NUMBERS = ["0", "1", "-1", "+5", "99999999999999999", "999999999999999999",
            "9999999999999999999", "9" * 400, "x", "1_0", "", "٣"]


def _stat_line(rng: random.Random) -> bytes:
    def number() -> str:
        return rng.choice(_NUMBERS) if _chance(rng, 0.2) else str(rng.randint(0, 10**6))

    line = STAT.format(pid=number(), name=rng.choice(["python", "a) b (c", "", "x\ty", "ü"]),
                       ppid=number(), utime=number(), stime=number(), start=number(),
                       rss=number(), cpu=number()).encode()
    if _chance(rng, 0.1):
        line = line[:rng.randint(0, len(line))]
    if _chance(rng, 0.05):
        line = line.replace(b" ", b"\t")
    return line


def fuzz_read_stats(rng: random.Random, seconds: float) -> int:
    from neurotui.collect._procstat import read_stats

    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        raws = [_stat_line(rng) for _ in range(rng.randint(0, 6))]
        fds = []
        for raw in raws:  # (in memory: a file on disk rewritten costs 3 ms)
            fd = os.memfd_create("stat")
            os.write(fd, raw)
            fds.append(fd)
        try:
            if _chance(rng, 0.1):  # a descriptor past an int: refused, never cut to another
                try:
                    read_stats([*fds, rng.choice([2 ** 32, -1, 2 ** 63])], 100, 4096)
                    raise AssertionError("read_stats took a descriptor past an int")
                except (ValueError, OverflowError):
                    pass
            got = read_stats(list(fds), host._TICKS, host._PAGE)
            calls += 1
            for raw, item in zip(raws, got, strict=True):
                if item.__class__ is bytes:
                    assert item == raw
                    host._parsed(raw)  # (Python's: never raises)
                else:
                    assert item == host._parsed(raw), (raw, item)
        finally:
            for fd in fds:
                os.close(fd)
    return calls


def fuzz_cpu_times(rng: random.Random, seconds: float) -> int:
    from neurotui.collect._procstat import cpu_times

    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        lines = []
        for i in range(rng.randint(0, 6)):
            fields = [rng.choice(_NUMBERS) if _chance(rng, 0.05) else str(rng.randint(0, 10**9))
                      for _ in range(rng.randint(0, 12))]
            lines.append(f"cpu{i} " + " ".join(fields))
        data = ("cpu  1 2 3 4 5 6 7 0 0 0\n" + "".join(f"{line}\n" for line in lines)
                + "intr 1 2\n").encode()
        fields = rng.choice([8, 10, 10, 1, 64] + ([0, -1, 65, 2**40] if _chance(rng, 0.1)
                                                 else []))
        try:
            got = cpu_times(data, fields, host._TICKS)
        except (ValueError, OverflowError):
            assert not 1 <= fields <= 64, fields
            continue
        calls += 1
        python = host._cpu_lines(data, fields)
        assert got is None or got == python, (data, fields, got, python)
    return calls


def fuzz_busy_shares(rng: random.Random, seconds: float) -> int:
    from neurotui.collect._procstat import busy_shares

    def same(a: float, b: float) -> bool:
        return a == b or (math.isnan(a) and math.isnan(b))

    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        fields = rng.choice([4, 8, 10, 10, 64])
        value: Callable[[], float] = lambda: (  # noqa: E731
            rng.choice(EXTREME_FLOATS) if _chance(rng, 0.05) else rng.randint(0, 10**9) / 100)
        before = [[value() for _ in range(fields)] for _ in range(rng.randint(0, 4))]
        now = [[value() for _ in range(fields)] for _ in range(len(before))]
        if _chance(rng, 0.05) and now:
            now[0] = now[0][:-1]  # unlike each other: refused
        try:
            got = busy_shares(before, now)
        except ValueError:
            assert any(len(a) != len(b) for a, b in zip(before, now, strict=True))
            continue
        calls += 1
        python = [host.busy_percent(a, b) for a, b in zip(before, now, strict=True)]
        assert all(same(x, y) for x, y in zip(got, python, strict=True)), (before, now)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="each function's")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    import neurotui

    print(f"neurotui from {Path(neurotui.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, run in (
                ("record_steps", lambda: fuzz_record_steps(rng, args.seconds)),
                ("read_looked", lambda: fuzz_read_looked(rng, args.seconds, folder)),
                ("Looker", lambda: fuzz_looker(rng, args.seconds, folder)),
                ("read_stats", lambda: fuzz_read_stats(rng, args.seconds)),
                ("cpu_times", lambda: fuzz_cpu_times(rng, args.seconds)),
                ("busy_shares", lambda: fuzz_busy_shares(rng, args.seconds))):
            started = time.monotonic()
            calls = run()
            print(f"{name:13s} {calls:8d} calls in {time.monotonic() - started:5.1f} s: "
                  "no difference from its twin, no crash")


if __name__ == "__main__":
    main()
