"""A real supervisor keeps the session's cache current while the job records, a supervisor that
adopts the job after the first one was killed goes on from its stamp, and no keeper outlives
them. The keeper's pace and threshold are lowered (a minute and 8 MiB in real runs) by setting
the module constants in the supervisor's own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from neurotui.cli import create_session
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from tests.e2e.conftest import REPO, meta, wait_for

pytestmark = pytest.mark.slow

SUPERVISOR = """
import sys
from neurotui.session import layout
from neurotui.supervisor import cachekeeping, core
cachekeeping.KEEP_EVERY_S = 1.0
layout.CACHE_MIN_SOURCE_BYTES = 20_000
sys.exit(core.main(sys.argv[1:]))
"""

JOB = """
import sys, time
from pathlib import Path
from neurotui import probe
control = Path(sys.argv[1])
i = 0
while not (control / "stop").exists():
    if (control / "pause").exists():
        time.sleep(0.05)
        continue
    i += 1
    probe.step(samples=16, loss=1.0 / i, phases={"data": 0.001, "forward": 0.002})
    if i % 50 == 0:
        print(f"step {i} loss {1.0 / i:.5f}", flush=True)
    time.sleep(0.002)
"""


def start_supervisor(session: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(session / layout.SUPERVISOR_LOG, "ab") as log:
        return subprocess.Popen([sys.executable, "-c", SUPERVISOR, *args, str(session)],
                                cwd=REPO, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def cached_rows(session: Path) -> int:
    try:
        return int(json.loads((session / ".cache" / "stamp.json").read_text())["rows"]["steps"])
    except (OSError, ValueError, KeyError):
        return 0


def cached_probe_bytes(session: Path) -> int:
    stamp = json.loads((session / ".cache" / "stamp.json").read_text())
    return sum(s["offset"] for s in stamp["sources"] if s["name"].startswith("probe/"))


def probe_bytes(session: Path) -> int:
    return sum(p.stat().st_size for p in (session / layout.PROBE_DIR).glob("*.jsonl"))


def keepers(session: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if "neurotui.session.keeper" in cmdline and str(session) in cmdline:
            found.append(p)
    return found


def assert_restored_as_a_whole_read(session: Path, events: bool = True) -> None:
    """`events=False`: while the supervisor still writes telemetry (the two reads end at
    different lines of events.jsonl)."""
    kept = SessionReader(session, telemetry_history=None)
    kept.poll()
    whole = SessionReader(session, telemetry_history=None, use_cache=False)
    whole.poll()
    assert kept.cache_state.startswith("restored")
    for a, b in ((kept.step_columns(), whole.step_columns()),
                 (kept.phase_columns(), whole.phase_columns())):
        assert a.columns == b.columns and len(a) == len(b)
        for name in a.columns:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert kept.samples_from == whole.samples_from
    if events:
        assert {k: list(v) for k, v in kept.events.items()} == \
            {k: list(v) for k, v in whole.events.items()}
        assert kept.problems == whole.problems


def test_the_cache_is_kept_while_recording_and_after_an_adoption(sessions: Path,
                                                                 tmp_path: Path) -> None:
    control = tmp_path / "control"
    control.mkdir()
    session = create_session(sessions, "kept", [sys.executable, "-c", JOB, str(control)],
                             shell=False, config={"auto_probe": False})
    first = start_supervisor(session)
    adopting: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: cached_rows(session) > 0, 60, "the first cache")
        built = cached_rows(session)
        wait_for(lambda: cached_rows(session) > built, 30, "an append")
        os.kill(first.pid, signal.SIGKILL)  # the job runs on, unsupervised
        first.wait(10)
        appended = cached_rows(session)
        time.sleep(1.5)
        adopting = start_supervisor(session, "--adopt")
        wait_for(lambda: cached_rows(session) > appended, 60, "the adopter's keeper")
        # Every step is in the cache once a keeper ran after the job paused.
        (control / "pause").touch()
        time.sleep(0.5)
        wait_for(lambda: cached_probe_bytes(session) == probe_bytes(session), 30,
                 "a keeper run after the pause")
        assert_restored_as_a_whole_read(session, events=False)
        (control / "stop").touch()
        wait_for(lambda: meta(session).get("exit"), 60, "the end of the run")
        assert adopting.wait(30) is not None
    finally:
        (control / "stop").touch()
        for p in (first, adopting):
            if p is not None and p.poll() is None:
                p.kill()
    wait_for(lambda: not keepers(session), 10, "no keeper left")
    assert_restored_as_a_whole_read(session)
    said = [line for line in (session / layout.SUPERVISOR_LOG).read_text().splitlines()
            if "cache keeper" in line]
    assert said and all("built the cache (no valid cache)" in line for line in said), said
