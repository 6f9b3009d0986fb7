"""The log panel shows each line once: a real run that prints, pauses and prints again, followed
by the real app (plain `neurotui`'s, NeurotuiApp) driven by Pilot.

Textual calls a message's handler of every class on the app's MRO; a subclass's handler that
also called its base's drew every batch of lines after the first twice (the first, a reset,
was cleared and drawn again, so it looked right). The app's on_mount did the same: it
started following twice."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from textual.pilot import Pilot

from neurotui.ui.widgets.logs import LogPanel
from tests.e2e.conftest import REPO, meta, neurotui_argv, only_session, wait_for

# Each pause lasts until the test makes the file it waits for (the app polls in between), or
# two minutes: a test that failed leaves no run behind for long.
SCRIPT = """
import os, sys, time
here = sys.argv[1]
def after(name):
    given_up = time.monotonic() + 120
    while not os.path.exists(os.path.join(here, name)):
        if time.monotonic() > given_up:
            sys.exit(3)
        time.sleep(0.05)
for i in range(5):
    print(f"first {i}", flush=True)
after("go1")
for i in range(5):
    print(f"second {i}", flush=True)
after("go2")
print("third 0")
print("third 1", flush=True)
after("go3")
"""
EXPECTED = [f"first {i}" for i in range(5)] + [f"second {i}" for i in range(5)] + [
    "third 0", "third 1"]


def shown_lines(pilot: Pilot[object]) -> list[str]:
    panel = pilot.app.screen.query_one(LogPanel)
    return [strip.text.rstrip() for strip in panel.lines]


async def until_shown(pilot: Pilot[object], line: str, polls: int = 3,
                      timeout: float = 60) -> list[str]:
    """Until `line` is in the panel, and `polls` more frames after it (where a line drawn
    twice would show)."""
    deadline = time.monotonic() + timeout
    while line not in shown_lines(pilot):
        assert time.monotonic() < deadline, f"{line!r} never shown: {shown_lines(pilot)}"
        await pilot.pause(0.1)
    for _ in range(polls):
        await pilot.pause(0.3)
    return shown_lines(pilot)


async def test_each_line_of_a_live_run_is_shown_once(tmp_path: Path) -> None:
    from neurotui.ui.home_app import NeurotuiApp

    class CountedApp(NeurotuiApp):
        """The real app, counting how often it starts following (on_mount's work, which
        was done twice the same way)."""

        followings = 0

        def _start_following(self) -> None:
            CountedApp.followings += 1
            super()._start_following()

    sessions = tmp_path / "sessions"
    started = subprocess.run(neurotui_argv(sessions, "run", "--detach", "--", sys.executable,
                                           "-c", SCRIPT, str(tmp_path)),
                             capture_output=True, text=True, timeout=120, cwd=REPO)
    assert started.returncode == 0, started.stderr
    session = only_session(sessions)
    try:
        app = CountedApp(sessions, session, interval_s=0.1, ascii_mode=False)
        async with app.run_test(size=(120, 50)) as pilot:
            assert await until_shown(pilot, "first 4") == EXPECTED[:5]
            (tmp_path / "go1").touch()
            assert await until_shown(pilot, "second 4") == EXPECTED[:10]
            (tmp_path / "go2").touch()
            assert await until_shown(pilot, "third 1") == EXPECTED
            assert CountedApp.followings == 1
    finally:
        for name in ("go1", "go2", "go3"):
            (tmp_path / name).touch()
        wait_for(lambda: meta(session).get("exit"), 60, "the run's end")
    assert (session / "logs" / "launcher.log").read_text().splitlines() == EXPECTED
