"""collect/_procstat.c against the Python it stands in for. read_stats against
host._stat_fields: the same fields from every process's real stat file and from lines made to
be odd, None where a file cannot be read, the bytes handed back where Python is to parse
them; ProcessRows' rows the same both ways. cpu_times and busy_shares against
host._cpu_lines and busy_percent (psutil's figure): HostSampler's the same both ways."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurotui.collect import host
from neurotui.collect.host import HostSampler, ProcessRows

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
    fds = []
    for pid in psutil.pids():
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            continue
        fds.append(fd)
    try:
        # Read by Python before and after: a process that ran (cpu_num), exec'd (its name) or
        # ended between the reads (other tests fork and exec all the time) is not compared.
        before = [host._read_fields(fd) for fd in fds]
        got = read_stats(fds, host._TICKS, host._PAGE)
        after = [host._read_fields(fd) for fd in fds]
    finally:
        for fd in fds:
            os.close(fd)
    assert len(got) == len(fds) > 5
    compared = 0
    for item, first, last in zip(got, before, after, strict=True):
        if item is not None:
            assert type(item) is tuple and type(item[2]) is float and type(item[4]) is int
        if first is None or last is None or item is None:
            continue  # (ended between the reads)
        steady = (first[0], first[1], first[3], first[5])
        if steady != (last[0], last[1], last[3], last[5]):
            continue
        # cpu_s and rss may move between the reads; the rest may not.
        assert (item[0], item[1], item[3], item[5]) == steady
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


# -- the host's CPU lines (HostSampler) ------------------------------------------------------

ticks = st.lists(st.integers(0, 10**9), min_size=10, max_size=10)


@built
@given(st.lists(st.tuples(ticks, ticks), min_size=1, max_size=4))
def test_busy_shares_are_busy_percents_to_the_last_digit(
        readings: list[tuple[list[int], list[int]]]) -> None:
    """busy_percent is psutil's figure (test_host_sampler); busy_shares is busy_percent's,
    every CPU's, with some fields falling and some not moving."""
    fields = len(psutil.cpu_times()._fields)
    before = [[v / host._TICKS for v in a[:fields]] for a, _ in readings]
    now = [[max(0, v + s - 5 * 10**8) / host._TICKS if s % 3 else v / host._TICKS
            for v, s in zip(a[:fields], b[:fields], strict=True)] for a, b in readings]
    assert host._busy_shares(before, now) == \
        [host.busy_percent(x, y) for x, y in zip(before, now, strict=True)]


@built
def test_busy_shares_refuse_readings_unlike_each_other() -> None:
    one = [[1.0] * 10]
    with pytest.raises(ValueError):
        host._busy_shares(one, [])
    with pytest.raises(ValueError):
        host._busy_shares(one, [[1.0] * 9])
    with pytest.raises(TypeError):
        host._busy_shares(one, [[1] * 10])  # ints: not what either reader makes
    assert host._busy_shares(one, one) == [0.0]  # no time passed: ZeroDivisionError's 0.0


def _stat_with(cpu_lines: list[str]) -> bytes:
    return ("cpu  1 2 3 4 5 6 7 0 0 0\n" + "".join(f"{line}\n" for line in cpu_lines)
            + "intr 12345 0 0 0\nctxt 99\nbtime 1700000000\n").encode()


@built
@linux
def test_this_hosts_cpu_lines_read_as_python_reads_them() -> None:
    with open("/proc/stat", "rb") as f:
        data = f.read()
    fields = len(psutil.cpu_times()._fields)
    assert host._read_cpu_times(data, fields, host._TICKS) == host._cpu_lines(data, fields)


@built
@pytest.mark.parametrize("lines", [
    [f"cpu{i} {i * 1000} 0 {i} 99999999 12 0 3 0 0 0" for i in range(128)],  # a trn1.32xlarge
    ["cpu0 1 2 3 4 5 6 7 8 9 10 11 12"],  # more fields than read
    ["cpu0\t1  2 3 4 5 6 7 8 9 10   "],
    ["cpu0 123456789012345 0 0 0 0 0 0 0 0 0"],
])
def test_cpu_lines_read_as_python_reads_them(lines: list[str]) -> None:
    data = _stat_with(lines)
    for fields in (8, 10):
        got = host._read_cpu_times(data, fields, host._TICKS)
        assert got == host._cpu_lines(data, fields) and got
        assert all(type(v) is float for cpu in got for v in cpu)


@built
@pytest.mark.parametrize("lines", [
    ["cpu0 1 2 3"],  # too few fields: Python's None
    ["cpu0 1 2 3 4 5 6 7 8 9 -0"],  # float("-0") is -0.0
    ["cpu0 1 2 3 4 5 6 7 8 9 1e3"],
    ["cpu0 1 2 3 4 5 6 7 8 9 1234567890123456"],  # past what is surely a double
])
def test_cpu_lines_it_does_not_read_are_left_to_python(lines: list[str]) -> None:
    assert host._read_cpu_times(_stat_with(lines), 10, host._TICKS) is None


@built
def test_a_host_sample_of_many_cpus_is_the_same_both_ways(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HostSampler on a /proc/stat of 128 CPUs, read twice, with and without the module."""
    first = [f"cpu{i} {i * 7} {i} {i * 3} 1000 {i % 5} 0 1 0 0 0" for i in range(128)]
    second = [f"cpu{i} {i * 9} {i} {i * 5} {1000 + i} {i % 7} 0 2 0 0 0" for i in range(128)]
    stat, meminfo = tmp_path / "stat", tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    6000000 kB\n")
    samples = []
    for native in (True, False):
        monkeypatch.setattr(host, "_read_cpu_times", host._read_cpu_times if native else None)
        monkeypatch.setattr(host, "_busy_shares", host._busy_shares if native else None)
        stat.write_bytes(_stat_with(first))
        sampler = HostSampler()
        sampler.close()
        sampler._fds = (os.open(stat, os.O_RDONLY), os.open(meminfo, os.O_RDONLY))
        sampler._last = sampler._cpu_times()
        stat.write_bytes(_stat_with(second))
        samples.append(sampler.sample()["cpu"])
        sampler.close()
    assert samples[0] == samples[1] and len(samples[0]) == 128 and any(samples[0])


# -- its callers' edge cases (issue #63) ----------------------------------------------------

def _isolated(code: str) -> str:
    """`code` run by a new Python (with `_procstat` imported as `native`); its output. A crash
    or an uncaught error fails the test instead of stopping pytest."""
    prelude = "import os\nfrom neurotui.collect import _procstat as native\n"
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


@built
def test_read_stats_is_safe_from_a_list_changed_as_it_reads() -> None:
    """A descriptor's int may be Python code (__index__), which may empty the caller's list:
    the list was read past its end after it."""
    out = _isolated("""
        fds = []
        class Fd:
            def __index__(self):
                fds.clear()
                return os.open("/proc/self/stat", os.O_RDONLY)
        fds += [Fd(), Fd(), Fd()]
        got = native.read_stats(fds, 100, 4096)
        print(len(got), all(type(item) is tuple for item in got))
    """)
    assert out.split() == ["3", "True"]


@built
def test_descriptors_and_fields_out_of_range_are_refused() -> None:
    fd = os.open("/proc/self/stat", os.O_RDONLY)
    try:
        with pytest.raises(ValueError, match="out of range"):
            read_stats([fd + 2**32], host._TICKS, host._PAGE)  # not cut to `fd`
        with pytest.raises(OverflowError):
            read_stats([2**64], host._TICKS, host._PAGE)
    finally:
        os.close(fd)
    data = _stat_with(["cpu0 1 2 3 4 5 6 7 8 9 10"])
    for fields in (0, -1, 65, 10**9):
        with pytest.raises(ValueError, match="cpu_times"):
            host._read_cpu_times(data, fields, host._TICKS)
    assert host._read_cpu_times(data, 64, host._TICKS) is None  # too few: Python's None
    assert host._read_cpu_times(data, 10, host._TICKS) == host._cpu_lines(data, 10)


HUGE = b"9" * 400


@linux
@pytest.mark.parametrize("native", [True, False])
def test_a_huge_number_in_a_stat_file_is_an_unreadable_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    """CPU ticks past a float made (int + int) / int raise OverflowError out of the Python
    reader (the native one hands such a line to it): now the line is one it cannot read,
    and the process counts as ended, as for any line it cannot read."""
    if native and read_stats is None:
        pytest.skip("_procstat.c was not built")
    monkeypatch.setattr(host, "_read_stats", read_stats if native else None)
    raw = STAT.replace(b"%d %d 0 0 20", HUGE + b" %d 0 0 20") % (7, b"x", 5, 98765, 3700, 1)
    assert host._parsed(raw) is None
    path = tmp_path / "stat"
    path.write_bytes(raw)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert host._read_all([(None, 7, fd, True)]) == [None]
    finally:
        os.close(fd)
    assert host.read_proc_stat(os.getpid()) is not None  # (a real one still reads)


@pytest.mark.parametrize("native", [True, False])
def test_the_host_sampler_takes_huge_or_odd_numbers_without_raising(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    """A huge tick count is infinite seconds (float() does not overflow); a field that is
    not a number, in /proc/stat or /proc/meminfo, is psutil's to read (host_sample)."""
    if native and host._read_cpu_times is None:
        pytest.skip("_procstat.c was not built")
    if not native:
        monkeypatch.setattr(host, "_read_cpu_times", None)
        monkeypatch.setattr(host, "_busy_shares", None)
    stat, meminfo = tmp_path / "stat", tmp_path / "meminfo"
    good_memory = b"MemTotal:       16000000 kB\nMemAvailable:    6000000 kB\n"
    cases = [
        (_stat_with(["cpu0 " + "9" * 400 + " 0 0 0 0 0 0 0 0 0"]), good_memory),
        (_stat_with(["cpu0 1 2 3 x 5 6 7 8 9 10"]), good_memory),
        (_stat_with(["cpu0 1 2 3 4 5 6 7 8 9 10"]), b"MemTotal: " + b"9" * 5000 + b" kB\n"),
        (_stat_with(["cpu0 1 2 3 4 5 6 7 8 9 10"]), b"MemTotal: lots\nMemAvailable: 1 kB\n"),
        (_stat_with(["cpu0 1 2 3 4 5 6 7 8 9 10"]), b"MemTotal:\n"),
    ]
    for stat_bytes, memory in cases:
        stat.write_bytes(_stat_with(["cpu0 1 2 3 4 5 6 7 8 9 10"]))
        meminfo.write_bytes(good_memory)
        sampler = HostSampler()
        sampler.close()
        sampler._fds = (os.open(stat, os.O_RDONLY), os.open(meminfo, os.O_RDONLY))
        try:
            sampler._last = sampler._cpu_times()
            stat.write_bytes(stat_bytes)
            meminfo.write_bytes(memory)
            sample = sampler.sample()  # (psutil's, where these files are not read)
        finally:
            sampler.close()
        assert set(sample) == {"cpu", "mem_used", "mem_total", "load"}
        assert all(isinstance(share, float) for share in sample["cpu"])
