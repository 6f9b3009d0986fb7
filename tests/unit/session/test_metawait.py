"""MetaWait: a follower's sleep ends when meta.json is replaced (the run's end is written
there), by the kernel's word (inotify) or, without it, by looking at the file's time."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from neurotui.session.metawait import MetaWait
from neurotui.session.writer import write_json_atomic


def _later(seconds: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("kernel", [True, False], ids=["inotify", "looking"])
def test_the_wait_ends_when_meta_is_replaced(tmp_path: Path, monkeypatch, kernel: bool) -> None:
    meta = tmp_path / "meta.json"
    write_json_atomic(meta, {"exit": None})
    if not kernel:
        monkeypatch.setitem(sys.modules, "inotify_simple", None)  # its import fails
    wait = MetaWait(meta)
    assert wait.kernel_says is (kernel and sys.platform == "linux")
    writer = _later(0.2, lambda: write_json_atomic(meta, {"exit": {"code": 0}}))
    started = time.monotonic()
    assert wait.wait(5.0)
    assert time.monotonic() - started < 1.0
    writer.join()
    wait.close()


def test_other_files_of_the_folder_do_not_end_it(tmp_path: Path) -> None:
    """The cache and the keeper's temporary files are written beside meta.json."""
    meta = tmp_path / "meta.json"
    write_json_atomic(meta, {"exit": None})
    wait = MetaWait(meta)

    def others() -> None:
        (tmp_path / "events.cache").write_bytes(b"x")
        write_json_atomic(tmp_path / "cache.json", {"rows": 1})

    writer = _later(0.1, others)
    started = time.monotonic()
    assert not wait.wait(0.5)
    assert time.monotonic() - started >= 0.5
    writer.join()
    wait.close()


def test_a_missing_folder_is_waited_out_by_looking(tmp_path: Path) -> None:
    wait = MetaWait(tmp_path / "gone" / "meta.json")
    assert not wait.kernel_says
    started = time.monotonic()
    assert not wait.wait(0.2)
    assert time.monotonic() - started >= 0.2
