"""Every writer of a session drops and counts instead of failing when the disk refuses, and
says what it lost once it can. The refusals are injected at os.write (the end-to-end test on
a real full tmpfs is tests/e2e/test_full_disk.py)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from neurotui.autoprobe.site import neurotui_autoprobe
from neurotui.autoprobe.site.neurotui_autoprobe import RecordFile
from neurotui.session import writer as writer_module
from neurotui.session.writer import RESERVE, EventWriter
from neurotui.supervisor import spool

_real_write = os.write


class Disk:
    """os.write that refuses (ENOSPC) while `full`, after writing `partial` bytes."""

    def __init__(self) -> None:
        self.full = False
        self.partial = 0

    def write(self, fd: int, data: bytes) -> int:
        if not self.full:
            return _real_write(fd, data)
        if self.partial:
            written = _real_write(fd, bytes(data[:self.partial]))
            self.partial = 0
            return written
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    fake = Disk()
    monkeypatch.setattr(os, "write", fake.write)
    return fake


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_events_lost_on_a_full_disk_are_counted_and_said_once_there_is_room(
        tmp_path: Path, disk: Disk) -> None:
    writer = EventWriter(tmp_path / "events.jsonl")
    writer.write("host", t=1.0)
    writer.flush()
    disk.full, disk.partial = True, 10  # half a record, then ENOSPC: taken back
    writer.write("host", t=2.0)
    writer.write("step", t=2.1, rank=0, step=1)
    writer.flush()
    writer.write("procs", t=3.0)
    writer.flush()
    assert writer.failing and writer.failed_writes == 3
    disk.full = False
    writer.write("host", t=4.0)
    writer.flush()
    writer.close()
    got = records(tmp_path / "events.jsonl")  # every line whole: the partial one is gone
    assert [r["kind"] for r in got] == ["host", "lost", "host"]
    lost = got[1]
    assert lost["what"] == "events" and lost["count"] == 3
    assert lost["by_kind"] == {"host": 1, "step": 1, "procs": 1}
    assert lost["from"] <= lost["to"] <= lost["t"] and lost["error"] == "No space left on device"
    assert not writer.failing


def test_the_reserve_makes_room_for_the_runs_end(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    reserve = tmp_path / RESERVE
    writer = EventWriter(tmp_path / "events.jsonl", reserve=True)
    assert reserve.stat().st_size == writer_module.RESERVE_BYTES

    def full_while_reserved(fd: int, data: bytes) -> int:
        if reserve.exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return _real_write(fd, data)

    monkeypatch.setattr(os, "write", full_while_reserved)
    writer.write("host", t=1.0)
    writer.flush()  # an ordinary flush does not touch the reserve
    assert reserve.exists() and writer.failed_writes == 1
    writer.write("proc_exit", t=2.0, code=0)
    writer.flush(final=True)  # the end's records: the reserve is given back for them
    assert not reserve.exists()
    assert [r["kind"] for r in records(tmp_path / "events.jsonl")] == ["lost", "proc_exit"]


def test_a_log_copy_drops_bytes_and_marks_where(tmp_path: Path, disk: Disk) -> None:
    """Bytes wait for the follower's poll (`flush`); those the disk refuses then are counted,
    and the first flush that works says where they went missing."""
    copy = spool.Copy(tmp_path / "logs" / "launcher.log")
    copy.write(b"line 1\n", 1.0)
    copy.flush(1.0)  # as the follower's poll does
    disk.full = True
    copy.write(b"line 2\n", 2.0)
    copy.flush(2.0)  # as the follower's poll does
    copy.write(b"line 3\n", 3.0)
    copy.flush(3.0)  # as the follower's poll does
    assert copy.take_loss() is None  # not said while the disk still refuses
    disk.full = False
    copy.write(b"line 4\n", 4.0)
    copy.flush(4.0)  # as the follower's poll does
    assert copy.take_loss() == (14, 2.0, 3.0, "No space left on device")
    assert copy.take_loss() is None
    copy.close()
    assert (tmp_path / "logs" / "launcher.log").read_text() == (
        "line 1\n\n[neurotui: 14 bytes of output lost here: No space left on device]\n"
        "line 4\n")


def test_a_loss_until_the_end_is_still_said(tmp_path: Path, disk: Disk) -> None:
    copy = spool.Copy(tmp_path / "out.log")
    copy.write(b"a\n", 1.0)
    copy.flush(1.0)  # as the follower's poll does
    disk.full = True
    copy.write(b"bb\n", 2.0)
    copy.flush(2.0)  # as the follower's poll does
    assert copy.take_loss(final=True) == (3, 2.0, 2.0, "No space left on device")


def test_a_log_copy_waits_for_a_flush_or_a_batch(tmp_path: Path) -> None:
    """One write per poll, not per read; a flood is written out every COPY_BATCH_BYTES."""
    path = tmp_path / "out.log"
    copy = spool.Copy(path)
    copy.write(b"", 1.0)
    assert path.exists() and path.stat().st_size == 0  # made at once, as the spool file is
    copy.write(b"a\n", 1.0)
    copy.write(b"b\n", 1.1)
    assert path.stat().st_size == 0 and copy.waiting == 4
    copy.flush(1.2)
    assert path.read_bytes() == b"a\nb\n" and copy.size == 4 and copy.waiting == 0
    copy.write(b"x" * spool.COPY_BATCH_BYTES, 1.3)
    assert copy.size == 4 + spool.COPY_BATCH_BYTES and copy.waiting == 0
    copy.write(b"end\n", 1.4)
    copy.close()  # the last bytes too
    assert path.read_bytes()[-5:] == b"xend\n" and path.stat().st_size == copy.size


def test_a_probe_file_drops_whole_batches_and_leaves_its_count_in_the_spool(
        tmp_path: Path, disk: Disk, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(neurotui_autoprobe.SPOOL_ENV, str(tmp_path))
    path = tmp_path / "auto-rank-3.jsonl"
    probe_file = RecordFile(str(path), 3)
    probe_file.write('{"t": 1, "kind": "step", "step": 1}\n', 1, 1.0)
    disk.full, disk.partial = True, 5
    probe_file.write('{"t": 2, "kind": "step", "step": 2}\n{"t": 2.1, "kind": "step", '
                     '"step": 3}\n', 2, 2.0)
    pending = tmp_path / "lost-auto-rank-3.jsonl.json"
    assert json.loads(pending.read_text())["count"] == 2  # for the supervisor, if we end now
    disk.full = False
    probe_file.write('{"t": 4, "kind": "step", "step": 4}\n', 1, 4.0)
    got = records(path)
    assert [r.get("step") for r in got] == [1, None, 4]
    assert got[1] == {"t": 4.0, "kind": "lost", "what": "probe steps", "rank": 3, "count": 2,
                      "from": 2.0, "to": 2.0, "error": "No space left on device"}
    assert not pending.exists()


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs a RAM filesystem")
def test_read_spool_memory_is_given_back_and_the_size_kept() -> None:
    path = Path("/dev/shm") / f"neurotui-test-{os.getpid()}"
    try:
        path.write_bytes(b"x" * (256 << 10))
        before = path.stat().st_blocks
        with open(path, "r+b") as f:
            assert spool.punch_hole(f.fileno(), 0, 128 << 10)
        assert path.stat().st_size == 256 << 10
        assert path.stat().st_blocks <= before // 2 + 8
        assert path.read_bytes()[:4] == b"\0\0\0\0" and path.read_bytes()[-1:] == b"x"
    finally:
        path.unlink(missing_ok=True)
