"""A real browser for the tests: Debian's Chromium, headless, driven through the DevTools
protocol (CDP) over aiohttp's websocket client (aiohttp comes with textual-serve).

textual-serve's page draws the terminal with xterm.js into a canvas (WebGL, else 2D), so the
page's DOM holds no text. The text the page shows is read from xterm.js's own screen buffer:
a script run before the page's own catches the Terminal as it is built, through the one
property its constructor assigns first (`_addonManager`), and the buffer is then read with
xterm.js's public API (buffer.active.getLine().translateToString()).
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, '_addonManager', {
  configurable: true,
  set(value) {
    Object.defineProperty(this, '_addonManager', {value, writable: true, configurable: true});
    window.__xterm = this;
  },
});
"""
_SCREEN_TEXT = """(() => {
  const term = window.__xterm;
  if (!term) return null;
  const buffer = term.buffer.active, rows = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : '');
  }
  return rows.join('\\n');
})()"""


class Page:
    """One browser tab, through its CDP websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._last_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._last_id += 1
        sent = self._last_id
        await self.ws.send_str(json.dumps({"id": sent, "method": method, "params": params}))
        while True:  # events (none asked for, but some come) are passed over
            message = json.loads(await self.ws.receive_str(timeout=60))
            if message.get("id") == sent:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def open(self, url: str, width: int, height: int) -> None:
        await self.call("Page.enable")  # (scripts for new documents need it)
        await self.call("Page.addScriptToEvaluateOnNewDocument", source=_CATCH_TERMINAL)
        await self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                        deviceScaleFactor=1, mobile=False)
        await self.call("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def screen_text(self) -> str:
        """The terminal's rows as the page shows them ('' before the terminal exists)."""
        return await self.evaluate(_SCREEN_TEXT) or ""

    async def wait_text(self, predicate: Callable[[str], object], timeout: float,
                        what: str) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = await self.screen_text()
            if predicate(text):
                return text
            await asyncio.sleep(0.5)
        shown = text or ("no terminal found in the page (has textual-serve's xterm.js "
                         "changed? see _CATCH_TERMINAL)")
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; the page "
                             f"shows:\n{shown}")

    async def press(self, key: str) -> None:
        """A key as a person types it (one printable character), into the terminal."""
        await self.evaluate("window.__xterm && window.__xterm.focus()")
        code = f"Key{key.upper()}" if key.isalpha() else ""
        common = {"key": key, "code": code, "windowsVirtualKeyCode": ord(key.upper()),
                  "modifiers": 8 if key.isupper() else 0}  # 8: shift
        await self.call("Input.dispatchKeyEvent", type="keyDown", text=key, **common)
        await self.call("Input.dispatchKeyEvent", type="keyUp", **common)

    async def screenshot(self, path: Path) -> Path:
        data = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(data["data"]))
        return path


class Chromium:
    """`async with Chromium(profile_dir) as browser: page = await browser.page()`."""

    def __init__(self, profile: Path) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium not found")
        self.profile = profile
        self.log = profile.with_suffix(".log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Chromium:
        # --no-sandbox: tests may run as root (in a container); --disable-gpu: no GPU there.
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
                 "--no-first-run", f"--user-data-dir={self.profile}",
                 "--remote-debugging-port=0", "about:blank"],
                stdout=log, stderr=subprocess.STDOUT)
        self.http = aiohttp.ClientSession()
        return self

    async def page(self, timeout: float = 60) -> Page:
        """The tab it opened, once its DevTools port is up (Chromium writes the port it
        picked into the profile)."""
        assert self.proc is not None and self.http is not None
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not start: "
                                   + self.log.read_text(errors="replace")[-2000:])
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as answer:
            targets = await answer.json()
        tab = next(t for t in targets if t["type"] == "page")
        ws = await self.http.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0)
        return Page(ws)

    async def __aexit__(self, *exc: object) -> None:
        if self.http is not None:
            await self.http.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
