"""`neurotui serve` in a real browser: a real supervised torchrun run, the real server, and
Debian's Chromium (headless) opening the page. The figures the page shows are read from the
page's own terminal and checked against the session's records; the stop key is refused when
served read-only and stops training with --allow-control; a screenshot is taken.

NEUROTUI_SAVE_SCREENSHOTS=1 also writes the screenshot docs/serve.md shows
(tests/e2e/__screenshots__/serve_dashboard.png).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from neurotui import fmt
from neurotui.session.meta import load_meta
from tests.e2e.browser import CHROMIUM, Chromium
from tests.e2e.conftest import (
    REPO,
    neurotui_argv,
    only_session,
    probe_step_count,
    run_cli,
    torchrun_vit,
    wait_for,
)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (Debian's package; "
                                                          ".ci/run installs it)")]

SCREENSHOTS = Path(__file__).with_name("__screenshots__")
SAVE = os.environ.get("NEUROTUI_SAVE_SCREENSHOTS") == "1"
WIDTH, HEIGHT = 1400, 900


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def shown_step(screen: str) -> int:
    """The header's step count (0 before one is shown)."""
    found = re.search(r"^ step ([\d,]+)", screen, re.MULTILINE)
    return int(found[1].replace(",", "")) if found else 0


def steady_for(screen: str) -> int:
    """The header's elapsed seconds while the phase is STEADY (else 0)."""
    found = re.search(r"(\d+):(\d\d):(\d\d)\s+STEADY", screen)
    return int(found[1]) * 3600 + int(found[2]) * 60 + int(found[3]) if found else 0


def events(session: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()
            if line.strip()]


def start_serve(sessions: Path, log: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """`neurotui serve` on a free port, once it listens; and the address it printed (the
    page's, with this start's token: without it the server answers 403)."""
    port = free_port()
    with log.open("w") as out:
        server = subprocess.Popen(neurotui_argv(sessions, "serve", "--port", str(port), *args),
                                  stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    wait_for(lambda: listening(port) or server.poll() is not None, 60, "the server")
    assert server.poll() is None, log.read_text()
    printed = re.search(rf"on (http://127\.0\.0\.1:{port}/\?token=[\w-]+) \(", log.read_text())
    assert printed, log.read_text()
    return server, printed[1]


async def test_the_dashboard_of_a_running_session_in_a_real_browser(sessions: Path,
                                                                    tmp_path: Path) -> None:
    started = time.monotonic()
    # Longer than the test: it ends when the browser stops it.
    assert run_cli(sessions, "run", "--detach", "--name", "browser", "--",
                   *torchrun_vit("--steps", "1000000")).returncode == 0
    session = only_session(sessions)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        server, url = start_serve(sessions, tmp_path / "serve.log")
        servers.append(server)
        async with Chromium(tmp_path / "chromium") as browser:
            page = await browser.page()
            await page.open(url, WIDTH, HEIGHT)

            # Live: the session's header, its phase, steps and throughput, as they come (for
            # docs/serve.md's picture, 45 s in: its charts then have some history).
            steady_s = 45 if SAVE else 1
            live = await page.wait_text(
                lambda s: session.name in s and steady_for(s) >= steady_s and shown_step(s) > 0
                and re.search(r"now [\d,.]+ samples/s", s), 300,
                "the dashboard in steady state")
            assert shown_step(live) <= probe_step_count(session) // 2 + 1  # (2 ranks)
            assert "Throughput" in live and "Host: " in live and "Processes: " in live
            await page.screenshot(tmp_path / "live.png")

            # Read-only (no --allow-control): the stop key, then what would confirm it.
            before = probe_step_count(session)
            await page.press("S")
            await page.wait_text(lambda s: "Control is off" in s, 30, "the read-only note")
            await page.press("y")
            await asyncio.sleep(3)
            assert f"Stop training {session.name}?" not in await page.screen_text()
            assert probe_step_count(session) > before, "training stopped"
            assert not any(e.get("kind") == "stop_request" for e in events(session))

            # With --allow-control, the same keys stop training, and the page then shows the
            # run's final figures: the ones its own record gives.
            server, url = start_serve(sessions, tmp_path / "serve-control.log",
                                      "--allow-control")
            servers.append(server)
            await page.open(url, WIDTH, HEIGHT)
            await page.wait_text(lambda s: "STEADY" in s and shown_step(s) > 0, 60,
                                 "the dashboard again")
            await page.press("S")
            await page.wait_text(lambda s: f"Stop training {session.name}?" in s, 30,
                                 "the stop prompt")
            await page.press("y")
            wait_for(lambda: "summary" in load_meta(session), 120, "the run's summary")
            summary = load_meta(session)["summary"]
            steady = f"steady {fmt.rate(summary['steady_samples_per_s'], '/s')}"
            final = await page.wait_text(
                lambda s: "STOPPED" in s and steady in s, 60,
                f"the stopped run's figures ({steady})")
            assert f"step {summary['steps']:,}" in final, summary["steps"]
            picture = await page.screenshot(tmp_path / "stopped.png")
        assert [e.get("by") for e in events(session) if e.get("kind") == "stop_request"] \
            == ["dashboard"]
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
    assert picture.stat().st_size > 20_000  # a drawn dashboard, not a blank page
    if SAVE:
        SCREENSHOTS.mkdir(exist_ok=True)
        shutil.copy(tmp_path / "live.png", SCREENSHOTS / "serve_dashboard.png")
    print(f"browser test: {time.monotonic() - started:.0f}s")
