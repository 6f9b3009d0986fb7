"""KeptFiles: read_new_block through descriptors kept open between reads (the stall watch reads
every probe file each second)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neurotui.session.tailing import KeptFiles, read_new_block


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reads_give_what_read_new_block_gives_as_the_file_grows(tmp_path: Path) -> None:
    path = tmp_path / "auto-rank-0.jsonl"
    kept = KeptFiles()
    offset = 0
    with open(path, "wb", buffering=0) as f:
        for piece in [b'{"a":1}\n{"b"', b':2}\n', b"", b"x" * 100 + b"\n" + b"y" * 10]:
            f.write(piece)
            assert kept.read_new_block(path, offset, 64) == read_new_block(path, offset, 64)
            offset += kept.read_new_block(path, offset, 64)[1]
    assert offset == path.stat().st_size - 10  # all but the line still being written
    kept.close()


def test_one_descriptor_a_file_kept_and_given_back(tmp_path: Path) -> None:
    paths = [tmp_path / f"{rank}.jsonl" for rank in range(3)]
    for path in paths:
        path.write_bytes(b"{}\n")
    before = open_fds()
    kept = KeptFiles()
    for _ in range(5):
        for path in paths:
            assert kept.read_new_block(path, 0) == (b"{}\n", 3)
    assert open_fds() == before + 3
    kept.close()
    assert open_fds() == before


def test_a_file_cut_short_and_written_again_reads_as_read_new_block_reads_it(
        tmp_path: Path) -> None:
    path = tmp_path / "probe.jsonl"
    path.write_bytes(b"old line one\nold line two\n")
    kept = KeptFiles()
    assert kept.read_new_block(path, 0)[1] == 26
    with open(path, "wb") as f:  # the same file, cut to nothing and written from its start
        f.write(b"new\n")
    for offset in (26, 0):
        assert kept.read_new_block(path, offset) == read_new_block(path, offset)
    assert kept.read_new_block(path, 0) == (b"new\n", 4)
    kept.close()


def test_a_file_not_there_raises_and_keeps_nothing(tmp_path: Path) -> None:
    kept = KeptFiles()
    before = open_fds()
    with pytest.raises(FileNotFoundError):
        kept.read_new_block(tmp_path / "missing.jsonl", 0)
    assert open_fds() == before
