"""A stalled rank is an alert in the session itself: printed by --headless as it starts and
ends, shown by replay at that moment, counted by compare; nobody needs to be watching.

The stall is real: the job's process is stopped with SIGSTOP, then continued."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neurotui.session.reader import SessionReader
from neurotui.ui.replay import ReplayApp
from tests.e2e.conftest import REPO, meta, neurotui_argv, only_session, wait_for
from tests.ui.conftest import screen_text, settle

pytestmark = pytest.mark.slow
STOPPED_S = 14.0  # the stall threshold is max(10 s, 10x the median step)


async def test_a_stall_is_recorded_printed_replayed_and_counted(sessions: Path,
                                                                tmp_path: Path) -> None:
    env = {**os.environ, "STEP_S": "0.05", "STEPS": "300", "TRUTH_FILE": str(tmp_path / "t")}
    headless = subprocess.Popen(
        neurotui_argv(sessions, "run", "--headless", "--interval", "30", "--",
                      sys.executable, str(REPO / "tests" / "scripts" / "chatty_probe.py")),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        session = wait_for(lambda: [p for p in sessions.iterdir() if (p / "probe").is_dir()
                                    and (p / "probe" / "rank-0.jsonl").exists()
                                    and len((p / "probe" / "rank-0.jsonl").read_bytes()
                                            .splitlines()) >= 40], 60, "40 steps")[0]
        job = meta(session)["job_pid"]
        os.kill(job, signal.SIGSTOP)
        stopped_at = time.time()
        time.sleep(STOPPED_S)
        os.kill(job, signal.SIGCONT)
        out, _ = headless.communicate(timeout=120)
    finally:
        if headless.poll() is None:
            headless.kill()
    assert headless.returncode == 0, out
    assert session == only_session(sessions)

    # --headless said it as it happened, not only in its next progress line.
    started = [line for line in out.splitlines() if "alert (error): no progress on rank(s) 0"
               in line]
    assert started, out
    assert "its median step" in started[0]
    assert "neurotui: alert over: stalled" in out

    # The session holds it: start during the stall, end once steps came again.
    reader = SessionReader(session).load()
    alerts = [a for a in reader.events["alert"] if a["key"] == "stalled"]
    assert [a["state"] for a in alerts] == ["start", "end"], alerts
    start, end = (float(a["t"]) for a in alerts)
    assert stopped_at + 10 <= start <= stopped_at + STOPPED_S
    assert stopped_at + STOPPED_S - 0.5 <= end <= stopped_at + STOPPED_S + 3

    # Replay shows it at that moment (the supervisor's record), and not before.
    began = float(meta(session)["started_at"])
    during = await _replay_text_at(session, start - began + 1.5)
    assert "no progress on rank(s) 0" in during, during
    before = await _replay_text_at(session, stopped_at - began - 1)
    assert "no progress on rank" not in before, before

    # Compare counts it, in every format.
    compared = subprocess.run(neurotui_argv(sessions, "compare", session.name, "--format",
                                            "json"), capture_output=True, text=True, cwd=REPO)
    assert compared.returncode == 0, compared.stderr
    assert '"alerts": 1' in compared.stdout and '"alerts_by_key": "stalled x1"' in compared.stdout


async def _replay_text_at(session: Path, seconds_in: float) -> str:
    app = ReplayApp(session, paused=True, interval_s=3600.0, ascii_mode=False,
                    at=f"{seconds_in:.0f}")
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot)
        return screen_text(app)
