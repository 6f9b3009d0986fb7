"""Host telemetry with psutil: per-CPU use, memory, load, and the job's process tree."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

import psutil

try:  # built from _procstat.c at install (pyproject.toml); Python reads the files otherwise
    from neurotui.collect._procstat import busy_shares as _busy_shares
    from neurotui.collect._procstat import cpu_times as _read_cpu_times
    from neurotui.collect._procstat import read_stats as _read_stats
except ImportError:
    _read_stats = _read_cpu_times = _busy_shares = None

_LAUNCHER_MARKERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def host_sample() -> dict[str, Any]:
    """Fields of a `host` event. cpu_percent(percpu) measures since the previous call."""
    mem = psutil.virtual_memory()
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "cpu": psutil.cpu_percent(percpu=True),
        "mem_used": mem.total - mem.available,
        "mem_total": mem.total,
        "load": load,
    }


class HostSampler:
    """host_sample's fields, as psutil works them out, from /proc/stat and /proc/meminfo kept
    open and read again with pread: the supervisor samples every second for days, and
    psutil opens both files and parses all of each at every call (about 0.3 ms a second on
    the dev VM, with the caches cold at each sample, against a tenth of that). Where these
    files are not there or not as expected, host_sample (psutil) instead.

    cpu: each CPU's busy share since the previous sample (the first: since this was made),
    by psutil.cpu_percent's rule: the positive change of each of its time fields, the total
    without guest times (already in user and nice), busy without idle and iowait, rounded
    to 0.1."""

    _READ = 1 << 16  # the CPU lines come first in /proc/stat; long interrupt lines follow

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None
        self._fields = len(psutil.cpu_times()._fields)  # what psutil reads of each CPU line
        self._last: list[list[float]] | None = None
        with contextlib.suppress(OSError):
            stat = os.open("/proc/stat", os.O_RDONLY)
            try:
                meminfo = os.open("/proc/meminfo", os.O_RDONLY)
            except OSError:
                os.close(stat)
                raise
            self._fds = (stat, meminfo)
        self._last = self._cpu_times()

    def sample(self) -> dict[str, Any]:
        cpus, memory = self._cpu_times(), self._memory()
        if cpus is None or memory is None or self._last is None or len(cpus) != len(self._last):
            self._last = cpus
            return host_sample()
        last, self._last = self._last, cpus
        try:
            load = list(os.getloadavg())
        except OSError:
            load = None
        used, total = memory
        shares = _busy_shares(last, cpus) if _busy_shares is not None else \
            [busy_percent(before, now) for before, now in zip(last, cpus, strict=True)]
        return {"cpu": shares, "mem_used": used, "mem_total": total, "load": load}

    def _cpu_times(self) -> list[list[float]] | None:
        """Each CPU's time fields in seconds, as psutil.cpu_times(percpu=True) has them."""
        data = self._read(0)
        if data is None:
            return None
        cpus = _read_cpu_times(data, self._fields, _TICKS) if _read_cpu_times else None
        if cpus is None:  # not built, or a line it leaves to Python
            cpus = _cpu_lines(data, self._fields)
        if not cpus or len(data) >= self._READ:
            return None  # cut short, perhaps: psutil reads the whole file
        return cpus

    def _memory(self) -> tuple[int, int] | None:
        """(used, total) bytes as psutil.virtual_memory() works them out, where MemAvailable
        gives them (Linux 3.14+); None otherwise (psutil estimates then)."""
        data = self._read(1)
        if data is None:
            return None
        total = available = None
        try:
            for line in data.split(b"\n"):
                if line.startswith(b"MemTotal:"):
                    total = int(line.split()[1]) * 1024
                elif line.startswith(b"MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
        except (ValueError, IndexError):  # not a number (or past int()'s digits): psutil's
            return None
        if total is None or not available or available > total:
            return None  # psutil's own estimate (or its MemFree) then
        return total - available, total

    def _read(self, which: int) -> bytes | None:
        """/proc/stat (0) or /proc/meminfo (1) as it is now, from its start; None where it
        could not be read."""
        if self._fds is None:
            return None
        try:
            return os.pread(self._fds[which], self._READ, 0)
        except OSError:
            return None

    def close(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                _close(fd)
            self._fds = None


def _cpu_lines(data: bytes, fields: int) -> list[list[float]] | None:
    """Each CPU line's first `fields` time fields in seconds (the first line, all CPUs
    together, left out); None where a line has fewer, or one that is not a number."""
    cpus = []
    for line in data.split(b"\n")[1:]:
        if not line.startswith(b"cpu"):
            break
        values = line.split()[1:fields + 1]
        if len(values) != fields:
            return None
        try:  # (a huge number is inf: float() does not overflow)
            cpus.append([float(value) / _TICKS for value in values])
        except ValueError:
            return None
    return cpus


def busy_percent(before: list[float], now: list[float]) -> float:
    """psutil.cpu_percent's share of one CPU between two readings of its time fields (user,
    nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice: as many as the
    kernel gives), in the same order of float operations, so the same figure."""
    # max(0, b - a), as psutil has it, without a call (ten a CPU a second: 128 CPUs on a
    # trn1.32xlarge).
    deltas = [b - a if b > a else 0 for a, b in zip(before, now, strict=True)]
    total = sum(deltas)
    if len(deltas) > 8:
        total -= deltas[8]  # guest: in user already
    if len(deltas) > 9:
        total -= deltas[9]  # guest_nice: in nice already
    busy = total - deltas[3]
    if len(deltas) > 4:
        busy -= deltas[4]  # iowait
    try:
        return round(busy / total * 100, 1)
    except ZeroDivisionError:
        return 0.0


def process_role(name: str, cmdline: str, pid: int, leader_pid: int, parents: dict[int, int],
                 launcher_is_torchrun: bool) -> str:
    """launcher / rank / worker (DataLoader or other child of a rank) / compiler."""
    if "neuronx-cc" in name or "neuronx-cc" in cmdline or "neuron-cc" in cmdline:
        return "compiler"
    if pid == leader_pid:
        return "launcher" if launcher_is_torchrun else "rank"
    depth = 0
    while pid != leader_pid and pid in parents and depth < 32:
        pid, depth = parents[pid], depth + 1
    rank_depth = 1 if launcher_is_torchrun else 0
    return "rank" if depth == rank_depth else "worker"


def _command(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()[:4])
    except psutil.Error:
        return ""


def _cpu_num(proc: psutil.Process) -> int | None:
    """The CPU the process last ran on (field 39 of /proc/PID/stat): the heat map marks the
    ranks' and workers' CPUs with it. Inside oneshot() it is the stat file already read, so it
    costs nothing; None where psutil has no such call (macOS)."""
    get = getattr(proc, "cpu_num", None)
    if get is None:
        return None
    try:
        value = get()
    except (psutil.Error, ValueError):
        return None
    return value if isinstance(value, int) and value >= 0 else None


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What one read of /proc/PID/stat says of a process."""

    name: str  # the kernel's name for it (`comm`: at most 15 characters)
    ppid: int
    cpu_s: float  # user + system CPU seconds (its own, not its children's)
    started: int  # clock ticks after boot: with the pid, who it is
    rss: int  # bytes
    cpu_num: int | None  # the CPU it last ran on


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_HAVE_PROC = os.path.isfile("/proc/self/stat")


def read_proc_stat(pid: int) -> ProcStat | None:
    """/proc/PID/stat, read once; None when the process is gone or the file unreadable.
    (ProcessRows keeps each file open and reads it again: _read_fields.)"""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            raw = os.read(fd, 4096)
        finally:
            os.close(fd)
        return parse_proc_stat(raw)
    except (OSError, ValueError, IndexError, OverflowError):
        return None


def parse_proc_stat(raw: bytes) -> ProcStat:
    """A /proc/PID/stat line; ValueError or IndexError when it is not one, OverflowError where
    its CPU ticks are past a float."""
    return ProcStat(*_stat_fields(raw))


_StatFields = tuple[str, int, float, int, int, "int | None"]
"""ProcStat's fields as a plain tuple: ProcessRows reads one a second for each of the job's
processes, hundreds with DataLoader workers, and a frozen dataclass's construction was half
of a line's parse."""


def _stat_fields(raw: bytes) -> _StatFields:
    # The name is in parentheses and may hold any character, ")" and spaces too.
    close = raw.rindex(b")")
    # fields[0] is field 3 of proc(5), the state: ppid is field 4, utime and stime 14 and
    # 15, starttime 22, rss 24 (pages), processor 39 (absent before Linux 2.2.8). The
    # fields after it are not split off.
    fields = raw[close + 2:].split(None, 37)
    return (raw[raw.index(b"(") + 1:close].decode("utf-8", "replace"), int(fields[1]),
            (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[19]),
            int(fields[21]) * _PAGE, int(fields[36]) if len(fields) > 36 else None)


class ProcessRows:
    """Rows of `procs` events, one per process of the job; cpu is percent of one core since
    the previous sample, cpu_num the CPU it last ran on. A process's role is worked out once
    (its command line read once), not at every sample: with 32 ranks and their workers that
    was most of a sample's cost.

    On Linux each process costs one read of /proc/PID/stat (about 10 us): psutil's calls
    checked the pid was not reused at each one, re-reading the file, about 100 us a process
    and 1% of a core at 32 ranks with their DataLoader workers. psutil elsewhere."""

    def __init__(self) -> None:
        self._roles: dict[tuple[int, float, str], str] = {}
        self._torchrun: dict[tuple[int, float], bool] = {}
        self._cpu: dict[tuple[int, int], tuple[float, float]] = {}  # (cpu_s, at) last seen
        self._names: dict[tuple[int, int], str] = {}  # names longer than `comm` holds
        self._fds: dict[int, tuple[int | None, psutil.Process]] = {}
        """Each process's /proc/PID/stat, kept open (read again with pread, a third cheaper
        than opening it at every sample), with the process it was opened for; None once
        that process ended."""

    def sample(self, procs: list[psutil.Process], leader_pid: int) -> list[dict[str, Any]]:
        seen = self._from_proc(procs) if _HAVE_PROC else self._from_psutil(procs)
        rows, known, roles = [], self._roles, {}
        unknown = []  # (row, process, key): the processes whose role is to be worked out
        for proc, pid, ppid, name, cpu, rss, created, cpu_num in seen:
            # A process that execs (a worker becoming neuronx-cc) keeps its pid and start
            # time but not its name: the role is asked again then.
            key = (pid, created, name)
            role = known.get(key)
            if cpu_num is None:
                row = {"pid": pid, "ppid": ppid, "name": name, "role": role, "cpu": cpu,
                       "rss": rss}
            else:
                row = {"pid": pid, "ppid": ppid, "name": name, "role": role, "cpu": cpu,
                       "rss": rss, "cpu_num": cpu_num}
            if role is None:
                unknown.append((row, proc, key))
            else:
                roles[key] = role
            rows.append(row)
        if unknown:
            parents = {pid: ppid for _, pid, ppid, *_ in seen}
            launcher_is_torchrun = self._launcher_is_torchrun(seen, leader_pid)
            for row, proc, key in unknown:
                row["role"] = roles[key] = process_role(
                    row["name"], _command(proc), row["pid"], leader_pid, parents,
                    launcher_is_torchrun)
        self._roles = roles  # only the living are remembered
        return rows

    def _launcher_is_torchrun(self, seen: list[tuple[Any, ...]], leader_pid: int) -> bool:
        """Whether the job's leader (among `seen`) is torchrun: its command line read once."""
        for proc, pid, _, _, _, _, created, _ in seen:
            if pid == leader_pid:
                key = (pid, created)
                if key not in self._torchrun:
                    leader_cmd = _command(proc)
                    self._torchrun[key] = any(m in leader_cmd for m in _LAUNCHER_MARKERS)
                return self._torchrun[key]
        return False

    def _from_proc(self, procs: list[psutil.Process]) -> list[tuple[Any, ...]]:
        """(process, pid, ppid, name, cpu, rss, start, cpu_num) of each living one."""
        now = time.monotonic()
        fds, self._fds = self._fds, {}
        kept = self._fds
        opened = []  # (process, pid, its stat file, whether it was open before)
        for proc in procs:
            pid = proc.pid  # (a property of psutil's: read once)
            kept_open = fds.pop(pid, None)
            if kept_open is not None and kept_open[1] is proc:
                fd = kept_open[0]
                if fd is None:  # ended, as its open file said at an earlier sample
                    kept[pid] = (None, proc)
                    continue
                opened.append((proc, pid, fd, True))
            else:  # a first sample (or of a new process the tree found with this pid)
                if kept_open is not None:
                    _close(kept_open[0])
                fd = _open_stat(pid)
                if fd is not None:  # (None: ended since the tree was scanned)
                    opened.append((proc, pid, fd, False))
        for fd, _ in fds.values():  # processes no longer in the tree
            _close(fd)
        seen, cpu_seen, names = [], {}, {}
        last_cpu, last_names = self._cpu, self._names
        for (proc, pid, fd, was_open), fields in zip(opened, _read_all(opened), strict=True):
            if fields is None:
                _close(fd)
                if was_open:
                    # Ended: its open file says so (ESRCH) even when its pid was given to a
                    # new process since. Remembered so until the tree's scan drops it.
                    kept[pid] = (None, proc)
                continue
            kept[pid] = (fd, proc)
            name, ppid, cpu_s, started, rss, cpu_num = fields
            key = (pid, started)
            last = last_cpu.get(key)
            # As psutil's cpu_percent: 0.0 at a process's first sample, then its share of
            # one core since the one before, to one decimal.
            if last is None or now <= last[1]:
                cpu = 0.0
            else:  # (max(0.0, used) without the call: hundreds of processes a second)
                used = cpu_s - last[0]
                cpu = round((used if used > 0.0 else 0.0) / (now - last[1]) * 100, 1)
            cpu_seen[key] = (cpu_s, now)
            if len(name) >= 15:  # `comm` is cut at 15: psutil's name() reads the whole one
                name = last_names.get(key) or _full_name(proc, name)
                names[key] = name
            seen.append((proc, pid, ppid, name, cpu, rss, started, cpu_num))
        self._cpu, self._names = cpu_seen, names
        return seen

    def close(self) -> None:
        for fd, _ in self._fds.values():
            _close(fd)
        self._fds = {}

    @staticmethod
    def _from_psutil(procs: list[psutil.Process]) -> list[tuple[Any, ...]]:
        seen = []
        for proc in procs:
            try:
                with proc.oneshot():  # one read of /proc/PID/stat for all of these
                    seen.append((proc, proc.pid, proc.ppid(), proc.name(), proc.cpu_percent(),
                                 proc.memory_info().rss, proc.create_time(), _cpu_num(proc)))
            except psutil.Error:
                continue
        return seen


def _read_all(opened: list[tuple[Any, int, int, bool]]) -> list[_StatFields | None]:
    """Each stat file of `opened` (its third item) read again: its fields, None where its
    process ended. All in one call where _procstat.c was built (what Python reads it does
    not is handed back as bytes), each from Python otherwise."""
    if _read_stats is None:
        return [_read_fields(fd) for _, _, fd, _ in opened]
    return [_parsed(got) if got.__class__ is bytes else got
            for got in _read_stats([fd for _, _, fd, _ in opened], _TICKS, _PAGE)]


def _read_fields(fd: int) -> _StatFields | None:
    """The stat file kept open as `fd`, read again; None when its process ended."""
    try:
        return _parsed(os.pread(fd, 4096, 0))
    except OSError:
        return None


def _parsed(raw: bytes) -> _StatFields | None:
    """_stat_fields, None where `raw` is not a stat line (a process that ended as it was
    read leaves an empty file), or one whose CPU ticks are past a float (int / int raises
    OverflowError: the job's own process may write anything where it runs as root, or a
    stand-in does)."""
    try:
        return _stat_fields(raw)
    except (ValueError, IndexError, OverflowError):
        return None


def _open_stat(pid: int) -> int | None:
    try:
        return os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None


def _close(fd: int | None) -> None:
    """Close `fd` (None: a file not open, or no longer)."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.close(fd)


def _full_name(proc: psutil.Process, short: str) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return short
