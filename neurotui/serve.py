"""`neurotui serve`: the dashboard in a browser, for people without SSH access to the instance.

`neurotui serve [--host 127.0.0.1] [--port 8000] [--allow-control]`

textual-serve runs plain `neurotui` on the same sessions folder once per browser tab, with
Textual's web driver drawing into the page (xterm.js) instead of a terminal: the same app, the
same screens, the same keys. Bound to this machine only unless --host says otherwise (then a
warning: nothing is encrypted). The views it launches are read-only (terminal.READ_ONLY_ENV:
no stop, no adopt) unless --allow-control.

Who may connect: whoever has the secret made at each start, which only the address printed on
our stdout carries (`?token=...`); opening it sets a cookie (HttpOnly, SameSite=Strict) that
the page's own websocket and assets then send. So another local user, who can reach the port
but not read our output, gets 403, and so does any other web page open in the same browser:
a request whose Origin is not this server's is refused even with the secret.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from neurotui.listening import LOOPBACK, is_local, port_number
from neurotui.terminal import READ_ONLY_ENV

DEFAULT_HOST = LOOPBACK
DEFAULT_PORT = 8000


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="show the dashboard in a browser (textual-serve)",
        description="Serve the dashboard to browsers: each tab that opens the page runs "
                    "`neurotui` on this sessions folder. Read-only unless --allow-control.")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="address to listen on (default 127.0.0.1: this machine only, e.g. "
                        "through `ssh -L 8000:127.0.0.1:8000`); 0.0.0.0 means every "
                        "interface, and anyone who can reach it and has the address printed at "
                        "start (its token) sees the runs")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT, help="default 8000")
    p.add_argument("--public-url", metavar="URL",
                   help="the address browsers open, when it is not http://HOST:PORT (a "
                        "reverse proxy, a tunnel to another port)")
    p.add_argument("--allow-control", action="store_true",
                   help="let the browser stop training and adopt jobs (default: read-only)")
    return p


def public_url(host: str, port: int) -> str:
    """Where browsers find the page (textual-serve writes it into the page, websocket
    included): a wildcard address is no address to open, so the machine's name instead."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def exposure_warning(host: str, url: str, *, allow_control: bool) -> str:
    return (f"neurotui: WARNING: listening on {host}, not only on this machine. Anyone who "
            f"can reach {url} and sees its token (printed below; sent unencrypted) sees every "
            "run in this sessions folder (commands, logs, costs)"
            + ("; with --allow-control, they can also stop training." if allow_control else
               ". Use --host 127.0.0.1 and an SSH tunnel to keep it private."))


def served_command(root: Path) -> str:
    """Plain `neurotui` on this sessions folder, the interpreter running us included.
    textual-serve runs its command through a shell, so each argument is quoted."""
    return shlex.join([sys.executable, "-m", "neurotui", "--sessions-dir", str(root)])


def origin_of(url: str) -> str:
    """scheme://host[:port] of an address, as browsers write it in an Origin header."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def cookie_name(port: int) -> str:
    """Cookies are shared by every port of a host: one name per port keeps two servers on
    one machine from overwriting each other's secret."""
    return f"neurotui-serve-{port}"


Handler = Callable[[Any], Awaitable[Any]]


def access_guard(token: str, public: str, port: int) -> Callable[[Any, Handler], Awaitable[Any]]:
    """aiohttp middleware: 403 unless the request comes from this server's own page (or no
    page: a browser sends Origin on every websocket and cross-site request) and carries the
    secret, as `?token=` or as the cookie that setting it there leaves."""
    from aiohttp import web

    allowed_origin = origin_of(public)
    cookie = cookie_name(port)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in (
                allowed_origin, f"{request.scheme}://{request.host}".lower()):
            return web.Response(status=403, text="neurotui: requests from another site are "
                                                 "refused\n")
        given = request.query.get("token")
        if given is not None and secrets.compare_digest(given.encode(), token.encode()):
            response = await handler(request)
            if isinstance(response, web.StreamResponse) and not response.prepared:
                response.set_cookie(cookie, token, httponly=True, samesite="Strict",
                                    path="/")
            return response
        kept = request.cookies.get(cookie)
        if kept is not None and secrets.compare_digest(kept.encode(), token.encode()):
            return await handler(request)
        return web.Response(status=403, text="neurotui: open the address `neurotui serve` "
                                             "printed (it carries this start's token)\n")

    return guard


def run(args: argparse.Namespace, root: Path) -> int:
    try:
        from textual_serve.server import Server
    except ImportError:
        print("neurotui: serve needs textual-serve (pip install textual-serve)",
              file=sys.stderr)
        return 2

    class GuardedServer(Server):  # type: ignore[misc]
        """textual-serve's server with the guard in front of every route."""

        async def _make_app(self) -> Any:
            app = await super()._make_app()
            app.middlewares.append(access_guard(token, self.public_url, args.port))
            return app

        async def on_startup(self, app: Any) -> None:
            # Not textual-serve's banner: its address lacks the token, and would get 403.
            self.console.print("Press Ctrl+C to quit", highlight=False)

    url = (args.public_url or public_url(args.host, args.port)).rstrip("/")
    token = secrets.token_urlsafe(32)
    if not is_local(args.host):
        print(exposure_warning(args.host, url, allow_control=args.allow_control),
              file=sys.stderr, flush=True)
    # textual-serve gives each app it launches a copy of our environment: the flag travels
    # there, and the served command stays plain `neurotui`. The token does not.
    os.environ[READ_ONLY_ENV] = "0" if args.allow_control else "1"
    print(f"neurotui: serving the sessions in {root} on {url}/?token={token} ("
          + ("the browser may stop training" if args.allow_control else
             "read-only; --allow-control lets the browser stop training") + ")", flush=True)
    server = GuardedServer(served_command(root), host=args.host, port=args.port,
                           title="neurotui", public_url=url)
    try:
        server.serve()
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        print(f"neurotui: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0
