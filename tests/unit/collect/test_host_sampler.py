"""The supervisor's host sample (collect/host.py HostSampler): psutil's figures, from /proc
files kept open."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurotui.collect import host
from neurotui.collect.host import HostSampler, busy_percent

pytestmark = pytest.mark.skipif(not os.path.isfile("/proc/stat"), reason="Linux /proc only")

_TICKS = os.sysconf("SC_CLK_TCK")


def _psutil_percent(before: list[int], after: list[int]) -> float:
    """psutil.cpu_percent's own calculation (its helpers) between two CPU lines' ticks."""
    fields = psutil.cpu_times()._fields
    t1 = type(psutil.cpu_times())(*[v / _TICKS for v in before[:len(fields)]])
    t2 = type(psutil.cpu_times())(*[v / _TICKS for v in after[:len(fields)]])
    deltas = psutil._cpu_times_deltas(t1, t2)
    try:
        return round(psutil._cpu_busy_time(deltas) / psutil._cpu_tot_time(deltas) * 100, 1)
    except ZeroDivisionError:
        return 0.0


ticks = st.lists(st.integers(0, 10**9), min_size=10, max_size=10)


@given(ticks, ticks)
def test_busy_share_is_psutils_to_the_last_digit(before: list[int], step: list[int]) -> None:
    after = [max(0, b + s - 5 * 10**8) for b, s in zip(before, step, strict=True)]  # some fall
    fields = len(psutil.cpu_times()._fields)
    mine = busy_percent([v / _TICKS for v in before[:fields]],
                        [v / _TICKS for v in after[:fields]])
    assert mine == _psutil_percent(before, after)


def _stat_text(cpus: list[list[int]]) -> str:
    total = [sum(column) for column in zip(*cpus, strict=True)]
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += [f"cpu{i} " + " ".join(map(str, c)) for i, c in enumerate(cpus)]
    lines += ["intr 12345 " + " ".join(["0"] * 5000), "ctxt 99", "btime 1700000000"]
    return "\n".join(lines) + "\n"


def _point_at(sampler: HostSampler, stat: Path, meminfo: Path) -> None:
    sampler.close()
    sampler._fds = (os.open(stat, os.O_RDONLY), os.open(meminfo, os.O_RDONLY))


def test_figures_come_from_the_files_as_psutil_reads_them(tmp_path: Path) -> None:
    fields = len(psutil.cpu_times()._fields)
    first = [[100, 5, 50, 1000, 10, 1, 2, 0, 0, 0], [200, 0, 20, 900, 0, 0, 0, 3, 0, 0]]
    second = [[160, 5, 70, 1100, 30, 1, 4, 0, 0, 0], [200, 0, 20, 1000, 0, 0, 0, 3, 0, 0]]
    stat, meminfo = tmp_path / "stat", tmp_path / "meminfo"
    stat.write_text(_stat_text(first))
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000000 kB\n"
                       "MemAvailable:    6000000 kB\nBuffers:          100 kB\n")
    sampler = HostSampler()
    try:
        _point_at(sampler, stat, meminfo)
        sampler._last = sampler._cpu_times()
        stat.write_text(_stat_text(second))  # the same file, grown: read again from 0
        sample = sampler.sample()
        assert sample["cpu"] == [_psutil_percent(a, b) for a, b in zip(first, second,
                                                                           strict=True)]
        assert sample["cpu"][1] == 0.0  # idle only
        # user 60, system 20, idle 100, iowait 20, softirq 2: busy 82 of 202.
        assert fields < 10 or sample["cpu"][0] == round(100 * 82 / 202, 1)
        assert sample["mem_total"] == 16_000_000 * 1024
        assert sample["mem_used"] == 10_000_000 * 1024
    finally:
        sampler.close()


def test_without_memavailable_psutil_works_the_figures_out(tmp_path: Path) -> None:
    stat, meminfo = tmp_path / "stat", tmp_path / "meminfo"
    stat.write_text(_stat_text([[1] * 10] * psutil.cpu_count()))
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000000 kB\n")
    sampler = HostSampler()
    try:
        _point_at(sampler, stat, meminfo)
        sample = sampler.sample()
        assert sample["mem_total"] == psutil.virtual_memory().total  # the real host's
    finally:
        sampler.close()


def test_this_host_sampled_twice() -> None:
    sampler = HostSampler()
    try:
        for _ in range(2):
            sample = sampler.sample()
            assert len(sample["cpu"]) == psutil.cpu_count()
            assert all(0.0 <= share <= 100.0 for share in sample["cpu"])
            memory = psutil.virtual_memory()
            assert sample["mem_total"] == memory.total
            assert abs(sample["mem_used"] - (memory.total - memory.available)) < \
                0.05 * memory.total
            assert sample["load"] is not None and len(sample["load"]) == 3
            assert sample.keys() == host.host_sample().keys()
    finally:
        sampler.close()
