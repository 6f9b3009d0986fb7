"""A full sessions disk never stops training, and the session says what it lost.

The sessions folder is a small tmpfs of its own (a mount namespace: `unshare`, as root or as a
user where user namespaces are allowed). While a real job runs under the real program, the disk
is filled nearly (the near-full alert), then completely, then given room again, then filled to
the end of the run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neurotui.session.reader import SessionReader
from tests.e2e.conftest import REPO

pytestmark = pytest.mark.slow
STEPS = 650  # 13 s at 20 ms a step


def _can_mount_tmpfs(tmp: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c",
                            f"mount -t tmpfs -o size=1m tmpfs {tmp}"], capture_output=True)
    return probe.returncode == 0


ORCHESTRATE = r"""
set -u
mount -t tmpfs -o size=4m tmpfs "$MNT"
"$PY" -m neurotui --sessions-dir "$MNT/sessions" run --headless --interval 1 \
    -- "$PY" "$SCRIPT" >"$OUT/headless.txt" 2>&1 &
run=$!
sleep 2.5
free_kib() { df --output=avail -k "$MNT" | tail -1 | tr -d ' '; }
# Nearly full: 150 KiB left (under 10% of 4 MiB: the near-full alert).
dd if=/dev/zero of="$MNT/filler1" bs=1k count=$(( $(free_kib) - 150 )) status=none
sleep 2.5
dd if=/dev/zero of="$MNT/filler2" bs=4k status=none 2>/dev/null  # full
echo "full at $(date +%s.%N)" >>"$OUT/phases.txt"
sleep 2.5
rm "$MNT/filler2"  # room again: the losses are recorded now
echo "room at $(date +%s.%N)" >>"$OUT/phases.txt"
sleep 2.5
dd if=/dev/zero of="$MNT/filler3" bs=4k status=none 2>/dev/null  # full until the end
echo "full at $(date +%s.%N)" >>"$OUT/phases.txt"
wait $run
echo "exit $?" >>"$OUT/phases.txt"
cp -a "$MNT/sessions" "$OUT/sessions"
"""


def test_training_finishes_on_a_full_sessions_disk(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not _can_mount_tmpfs(mnt):
        pytest.skip("cannot mount a tmpfs here (no unshare, or user namespaces refused)")
    out = tmp_path / "out"
    out.mkdir()
    truth = tmp_path / "truth"
    env = {"MNT": str(mnt), "OUT": str(out), "PY": sys.executable,
           "SCRIPT": str(REPO / "tests" / "scripts" / "chatty_probe.py"),
           "STEPS": str(STEPS), "TRUTH_FILE": str(truth), "PATH": "/usr/bin:/bin",
           # A record of the supervisor's own every 5th step (a compile-cache hit line), so
           # that its events outgrow the last page they have while the disk is full (with
           # telemetry alone, whether any is lost depends on how full that page was).
           "CACHE_HIT_EVERY": "5",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run(["unshare", "-Urm", "bash", "-c", ORCHESTRATE], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=240)
    headless = (out / "headless.txt").read_text()
    assert done.returncode == 0, (done.stdout, done.stderr, headless)
    phases = (out / "phases.txt").read_text()
    assert "exit 0" in phases, (phases, headless)

    # The job never noticed: every step done, exit 0, as bare python would have.
    assert truth.read_text() == str(STEPS)
    session = next((out / "sessions").iterdir())
    meta = json.loads((session / "meta.json").read_text())
    assert meta["exit"]["code"] == 0 and meta["exit"]["reason"] == "completed", meta["exit"]
    assert meta["exit"]["lost_events"] > 0

    reader = SessionReader(session).load()
    lost = list(reader.events.get("lost", ()))
    by_what = {record["what"] for record in lost}
    # What was lost, from when to when: the supervisor's events, the job's output, the
    # probe's steps, each said once writing worked again (or at the end, from the reserve).
    assert {"events", "log", "probe steps"} <= by_what, lost
    for record in lost:
        assert record["from"] <= record["to"] <= record["t"]
        assert record.get("count", record.get("bytes", 0)) > 0
    full_at = [float(line.split()[-1]) for line in phases.splitlines()
               if line.startswith("full at")]
    room_at = [float(line.split()[-1]) for line in phases.splitlines()
               if line.startswith("room at")]
    # Losses of the first full spell are recorded before the run's end, when room came back
    # (which of the files lost data first depends on what filled its last page).
    exit_t = reader.events["proc_exit"][-1]["t"]
    assert any(full_at[0] - 1 <= r["from"] <= room_at[0] + 1 and r["t"] < exit_t
               for r in lost), (lost, phases)
    # Steps went on being recorded between the two full spells, and the run's end is there.
    steps = reader.steps()
    between = steps[(steps["t"] > room_at[0] + 0.5) & (steps["t"] < full_at[1] - 0.5)]
    assert len(between) >= 20, len(between)
    recorded_and_lost = len(steps) + sum(r["count"] for r in lost if r["what"] == "probe steps")
    assert recorded_and_lost == STEPS, (len(steps), lost)
    # The near-full alert, recorded while there was room to say it.
    alerts = [a for a in reader.events.get("alert", ()) if a["key"] == "disk-low"]
    assert alerts and alerts[0]["state"] == "start", alerts
    # The session's copy of the job's output says where bytes were lost.
    launcher = (session / "logs" / "launcher.log").read_text(errors="replace")
    assert "bytes of output lost here: No space left on device" in launcher
    assert "completed (exit code 0)" in headless
