"""layout.ProbeFolder: the probe files as probe_files lists them, listed again only when the
probe folder changed (or changed in the last seconds: a folder's time stamp may be coarse)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from neurotui.session import layout


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def _age(folder: Path, seconds: float) -> int:
    """Set the folder's modification time `seconds` back; returns it (ns)."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(folder, ns=(then, then))
    return then


def test_it_lists_what_probe_files_lists(tmp_path: Path) -> None:
    folder = layout.ProbeFolder(tmp_path)
    assert folder.files() == {} and folder.files(auto=True) == {}  # no probe folder yet
    _touch(tmp_path / "probe" / "rank-0.jsonl")
    _touch(tmp_path / "probe" / "auto-rank-3.jsonl")
    _touch(tmp_path / "probe" / "notes.txt")
    assert folder.files() == layout.probe_files(tmp_path) == {0: tmp_path / "probe" /
                                                              "rank-0.jsonl"}
    assert folder.files(auto=True) == {3: tmp_path / "probe" / "auto-rank-3.jsonl"}


def test_a_settled_unchanged_folder_is_not_listed_again(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    _touch(probe / "rank-0.jsonl")
    listed_at = _age(probe, 60)
    folder = layout.ProbeFolder(tmp_path)
    assert list(folder.files()) == [0]
    # A file added behind the folder's back (its time stamp put back as it was): the cached
    # listing stands, which is what spares the glob at every look.
    _touch(probe / "rank-1.jsonl")
    os.utime(probe, ns=(listed_at, listed_at))
    assert list(folder.files()) == [0]
    _age(probe, 30)  # the folder changed: listed again
    assert sorted(folder.files()) == [0, 1]


def test_a_folder_changed_in_the_last_seconds_is_listed_at_every_look(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    _touch(probe / "rank-0.jsonl")
    recent = _age(probe, 0.5)
    folder = layout.ProbeFolder(tmp_path)
    assert list(folder.files()) == [0]
    _touch(probe / "rank-1.jsonl")  # made in the same (coarse) tick as the listing
    os.utime(probe, ns=(recent, recent))
    assert sorted(folder.files()) == [0, 1]
