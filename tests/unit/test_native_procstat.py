"""collect/_procstat.c's read_stats against host._stat_fields, the Python parse it stands in
for: the same fields from every process's real stat file and from lines made to be odd, None
where a file cannot be read, the bytes handed back where Python is to parse them; and
ProcessRows' rows the same both ways."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from neurotui.collect import host
from neurotui.collect.host import ProcessRows

read_stats = host._read_stats
built = pytest.mark.skipif(read_stats is None, reason="_procstat.c was not built")
linux = pytest.mark.skipif(not host._HAVE_PROC, reason="no /proc")


def test_the_stat_reader_is_built_by_the_set_up() -> None:
    """`.ci/run` (and the README's install) build it: where it was not, each process's file
    is read and parsed from Python at about twice the cost, and these tests test nothing."""
    assert read_stats is not None


def _through_c(raw: bytes) -> object:
    """`raw` as read_stats reads it, from a file holding only it."""
    with tempfile.TemporaryFile() as f:
        f.write(raw)
        f.flush()
        return read_stats([f.fileno()], host._TICKS, host._PAGE)[0]


@built
@linux
def test_every_process_on_the_host_parses_as_python_parses_it() -> None:
    fds, raws = [], []
    for pid in psutil.pids():
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            continue
        fds.append(fd)
    try:
        got = read_stats(fds, host._TICKS, host._PAGE)
        raws = [os.pread(fd, 4096, 0) for fd in fds]
    finally:
        for fd in fds:
            os.close(fd)
    assert len(got) == len(fds) > 5
    compared = 0
    for item, raw in zip(got, raws, strict=True):
        if item is None:  # ended between the reads
            continue
        expected = host._stat_fields(raw)
        # cpu_s and rss may move between the two reads; the rest may not.
        assert (item[0], item[1], item[3], item[5]) == \
            (expected[0], expected[1], expected[3], expected[5])
        assert type(item[2]) is float and type(item[4]) is int
        compared += 1
    assert compared > 5


STAT = (b"%d (%s) S 1 4242 4242 0 -1 4194560 3620 0 0 0 %d %d 0 0 20 0 1 0 %d 15179776 "
        b"%d 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 %d 0 0 0 0 0 0 0 0 0 0 0 "
        b"0 0\n")


@built
@pytest.mark.parametrize("raw", [
    STAT % (7, b"python", 1234, 567, 98765, 3700, 1),
    STAT % (7, b"a) b (c", 1, 2, 3, 4, 0),  # a name may hold anything, ")" and spaces too
    STAT % (7, "naïve".encode(), 0, 0, 1, 1, 3),
    STAT % (7, b"\xff\xfe", 0, 0, 1, 1, 3),  # not UTF-8: replaced, as Python decodes it
    STAT % (7, b"", 999999999999, 999999999999, 10 ** 17, 10 ** 15, 127),
    STAT % (7, b"x\ty", 5, 6, 7, 8, 9),
    STAT.replace(b" ", b"\t") % (7, b"tabs", 5, 6, 7, 8, 9),
    b"7 (short) S 1 4242 4242 0 -1 4194560 3620 0 0 0 11 12 0 0 20 0 1 0 300 15179776 "
    b"3700 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17",  # no processor field
])
def test_a_line_parses_as_python_parses_it(raw: bytes) -> None:
    expected = host._stat_fields(raw)
    got = _through_c(raw)
    assert got == expected and type(got) is tuple
    assert [type(v) for v in got] == [type(v) for v in expected]


@built
@pytest.mark.parametrize("raw", [
    b"",  # a process ending as its file was read
    b"7 (no close S 1 2 3",
    b"7 (short) S 1 2 3",  # too few fields: Python raises, and the process counts as ended
    STAT.replace(b" 17 %d", b" 17 1_0") % (7, b"x", 1, 2, 3, 4),  # int() reads it
    STAT % (7, b"x", 1, 2, 3, 10 ** 19, 1),  # past what this parser reads: Python's
    STAT.replace(b"%d 18446", b"+%d 18446") % (7, b"x", 1, 2, 3, 4, 1),
    STAT.replace(b"S 1 4242", b"S x 4242") % (7, b"x", 1, 2, 3, 4, 1),
])
def test_a_line_it_does_not_read_is_handed_back_to_python(raw: bytes) -> None:
    got = _through_c(raw)
    if b"+" in raw:  # a sign is read, as int() reads it
        assert got == host._stat_fields(raw)
        return
    assert got == raw  # the bytes, for Python to parse or refuse
    assert host._parsed(raw) == (None if b"S x" in raw or len(raw.split()) < 24
                                 else host._stat_fields(raw))


@built
def test_a_file_that_cannot_be_read_is_none_and_bad_arguments_raise() -> None:
    r, w = os.pipe()
    os.close(r)
    os.close(w)  # a descriptor no longer open: EBADF
    assert read_stats([r], host._TICKS, host._PAGE) == [None]
    with pytest.raises(TypeError):
        read_stats((r,), host._TICKS, host._PAGE)
    with pytest.raises(ValueError):
        read_stats([-1], host._TICKS, host._PAGE)
    with pytest.raises(ValueError):
        read_stats([], 0, host._PAGE)
    with pytest.raises(TypeError):
        read_stats(["3"], host._TICKS, host._PAGE)


@built
@linux
def test_rows_are_the_same_read_in_c_and_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's rows, sampled twice (a CPU share needs a sample before), both ways at once,
    with a process ending between the samples: equal but for the CPU shares, each sampler's
    own measure of its own interval."""
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
                for _ in range(3)]
    try:
        procs = [psutil.Process(os.getpid()), *(psutil.Process(c.pid) for c in children)]
        native, python = ProcessRows(), ProcessRows()
        for rows in (native, python):
            monkeypatch.setattr(host, "_read_stats", read_stats if rows is native else None)
            rows.sample(procs, os.getpid())
        children[0].kill()
        children[0].wait()
        time.sleep(0.2)
        sampled = {}
        for rows in (native, python):
            monkeypatch.setattr(host, "_read_stats", read_stats if rows is native else None)
            sampled[rows is native] = rows.sample(procs, os.getpid())
            rows.close()
        assert len(sampled[True]) == len(procs) - 1
        for row in [*sampled[True], *sampled[False]]:
            assert row.pop("cpu") >= 0
            if row["pid"] == os.getpid():  # (this process's memory moves between the reads)
                del row["rss"]
        assert sampled[True] == sampled[False]
    finally:
        for child in children:
            child.kill()
            child.wait()
