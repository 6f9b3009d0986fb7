"""Who may use `neurotui serve`: raw HTTP and websocket requests against the real server.

Only the address it prints (its per-start token) lets a browser in; another site's page is
refused even with the token; another local user, who cannot read the server's output, is
refused too (uid 65534 through setpriv, as in test_other_users: needs root)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.conftest import REPO, neurotui_argv, wait_for
from tests.e2e.test_other_users import OTHER_PYTHON, as_other


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    token: str
    port: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A real `neurotui serve` on a free port, listening; its printed address read back."""
    port = free_port()
    proc = subprocess.Popen(neurotui_argv(tmp_path / "sessions", "serve", "--port", str(port)),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=REPO)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/\?token=([\w-]+) \(", first)
        assert found, first
        wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 30,
                 "the server to listen")
        yield Served(found[1], found[2], port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def status_of(served: Served, path: str, *, headers: dict[str, str] | None = None,
                    cookies: dict[str, str] | None = None) -> int:
    async with aiohttp.ClientSession(cookies=cookies) as http, \
            http.get(served.base + path, headers=headers or {}) as response:
        return response.status


async def websocket_status(served: Served, query: str = "", *, origin: str | None = None,
                           cookies: dict[str, str] | None = None) -> int:
    """101 when the upgrade is accepted (then the served app's first bytes are awaited),
    else the refusal's status."""
    async with aiohttp.ClientSession(cookies=cookies) as http:
        try:
            async with http.ws_connect(f"{served.base}/ws{query}", origin=origin) as ws:
                message = await ws.receive(timeout=60)
                assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), \
                    message
                return 101
        except aiohttp.WSServerHandshakeError as refused:
            return refused.status


async def test_without_the_token_everything_is_refused(served: Served) -> None:
    assert await status_of(served, "/") == 403
    assert await status_of(served, "/static/js/textual.js") == 403
    assert await status_of(served, "/?token=" + "x" * len(served.token)) == 403
    assert await status_of(served, "/", cookies={f"neurotui-serve-{served.port}": "guess"}) \
        == 403
    assert await websocket_status(served, origin=served.base) == 403


async def test_another_sites_page_is_refused_even_with_the_token(served: Served) -> None:
    evil = {"Origin": "http://evil.example"}
    assert await status_of(served, f"/?token={served.token}", headers=evil) == 403
    assert await websocket_status(served, f"?token={served.token}",
                                  origin="http://evil.example") == 403
    cookie = {f"neurotui-serve-{served.port}": served.token}
    assert await websocket_status(served, origin="http://evil.example", cookies=cookie) == 403


async def test_the_printed_address_opens_the_page_and_its_websocket(served: Served) -> None:
    # (unsafe=True: aiohttp's jar keeps no cookie from an IP address otherwise; browsers do)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{served.base}/?token={served.token}") as page:
            assert page.status == 200
            assert "data-session-websocket-url" in await page.text()
            set_cookie = page.headers["Set-Cookie"]
        assert f"neurotui-serve-{served.port}={served.token}" in set_cookie
        assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
        # The cookie kept from the page lets in its assets and its websocket (which the page
        # opens without the token), from the page's own origin.
        async with http.get(f"{served.base}/static/js/textual.js") as asset:
            assert asset.status == 200
        async with http.ws_connect(f"{served.base}/ws", origin=served.base) as ws:
            message = await ws.receive(timeout=60)
            assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message


OTHER_CLIENT = """
import http.client, sys
port = int(sys.argv[1])
for path, headers in (("/", {}), ("/ws", {"Connection": "Upgrade", "Upgrade": "websocket",
                                          "Sec-WebSocket-Version": "13",
                                          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers=headers)
    print(path, conn.getresponse().status)
    conn.close()
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to act as a second user")
def test_another_local_user_reaches_the_port_but_is_refused(served: Served) -> None:
    tried = as_other(OTHER_PYTHON, "-c", OTHER_CLIENT, str(served.port))
    assert tried.returncode == 0, tried.stderr
    assert tried.stdout.split("\n")[:2] == ["/ 403", "/ws 403"]
