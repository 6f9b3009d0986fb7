"""`p` in the dashboard of a real running job (a one-process PyTorch loop under the real
supervisor): it asks first, and a yes profiles the next steps inside the rank, says where the
trace is, and leaves training running."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neurotui.session.status import session_status
from neurotui.ui.app import DashboardApp
from neurotui.ui.screens.confirm_profile import ConfirmProfile
from tests.e2e.conftest import neurotui_argv, only_session, wait_for
from tests.ui.conftest import screen_text, settle

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

TRAINING = """
import time, torch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
deadline = time.time() + 120
while time.time() < deadline:
    loss = model(torch.randn(16, 32)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.01)
"""


@pytest.fixture
def running(tmp_path: Path):
    sessions = tmp_path / "sessions"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAINING))
    started = subprocess.run(neurotui_argv(sessions, "run", "--detach", "--name", "loop", "--",
                                           sys.executable, str(script)),
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    session = only_session(sessions)
    try:
        wait_for(lambda: (session / "probe" / "auto-rank-0.jsonl").exists(), 120,
                 "the rank's first step")
        yield session
    finally:
        subprocess.run(neurotui_argv(sessions, "stop", session.name), capture_output=True,
                       timeout=120)


async def test_p_asks_first_then_profiles_the_running_job(running: Path) -> None:
    app = DashboardApp(running, interval_s=3600.0, ascii_mode=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmProfile)
        assert "Profile the next 5 steps of" in screen_text(app)
        await pilot.press("n")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmProfile)
        assert not (running / "profiles").exists()

        await pilot.press("p", "y")
        await settle(pilot)  # the profile worker waits for the rank's trace
        shown = [n.message for n in app._notifications]
    records = [json.loads(line) for line in
               (running / "probe" / "auto-rank-0.jsonl").read_text().splitlines()
               if '"profile"' in line]
    done = [r for r in records if r["what"] == "done"]
    assert len(done) == 1, records
    assert (running / done[0]["file"]).is_file()
    assert any(f"traces of rank 0 in {running / 'profiles' / done[0]['id']}" in m
               for m in shown), shown
    assert session_status(running).running  # training went on
