"""Write docs/dashboard.svg: the real dashboard replaying the shipped XLA sample session.

Run from the repository root: `.venv/bin/python docs/make_screenshot.py`. It opens
`neurotui replay sample-xla-cpu --at end --paused` headless at 120x36 (Textual's run_test) and
saves what the screen shows, so the README's picture is the app's own output, never a mock-up.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from neurotui.ui.replay import ReplayApp

ROOT = Path(__file__).resolve().parents[1]
SESSION = ROOT / "sessions" / "sample-xla-cpu"
OUT = ROOT / "docs" / "dashboard.svg"


async def main() -> None:
    os.environ["TEXTUAL_ANIMATIONS"] = "none"
    app = ReplayApp(SESSION, at="end", paused=True, interval_s=3600.0, ascii_mode=False)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(5):  # let the poll worker finish and its frame be drawn
            await pilot.app.workers.wait_for_complete()
            await pilot.pause(0.2)
        pilot.app.screen.set_focus(None)
        await pilot.pause(0.2)
        app.save_screenshot(filename=OUT.name, path=str(OUT.parent))
    print(OUT)


if __name__ == "__main__":
    asyncio.run(main())
