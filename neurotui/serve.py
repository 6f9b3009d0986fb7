"""`neurotui serve`: the dashboard in a browser, for people without SSH access to the instance.

`neurotui serve [--host 127.0.0.1] [--port 8000] [--allow-control]`

textual-serve runs plain `neurotui` on the same sessions folder once per browser tab, with
Textual's web driver drawing into the page (xterm.js) instead of a terminal: the same app, the
same screens, the same keys. Bound to this machine only unless --host says otherwise (then a
warning: there is no password). The views it launches are read-only (terminal.READ_ONLY_ENV:
no stop, no adopt) unless --allow-control.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

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
                        "interface, and anyone who can reach it sees the runs")
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
            f"can reach {url} sees every run in this sessions folder (commands, logs, costs), "
            "without a password or encryption"
            + ("; with --allow-control, they can also stop training." if allow_control else
               ". Use --host 127.0.0.1 and an SSH tunnel to keep it private."))


def served_command(root: Path) -> str:
    """Plain `neurotui` on this sessions folder, the interpreter running us included.
    textual-serve runs its command through a shell, so each argument is quoted."""
    return shlex.join([sys.executable, "-m", "neurotui", "--sessions-dir", str(root)])


def run(args: argparse.Namespace, root: Path) -> int:
    try:
        from textual_serve.server import Server
    except ImportError:
        print("neurotui: serve needs textual-serve (pip install textual-serve)",
              file=sys.stderr)
        return 2
    url = args.public_url or public_url(args.host, args.port)
    if not is_local(args.host):
        print(exposure_warning(args.host, url, allow_control=args.allow_control),
              file=sys.stderr, flush=True)
    # textual-serve gives each app it launches a copy of our environment: the flag travels
    # there, and the served command stays plain `neurotui`.
    os.environ[READ_ONLY_ENV] = "0" if args.allow_control else "1"
    print(f"neurotui: serving the sessions in {root} on {url} ("
          + ("the browser may stop training" if args.allow_control else
             "read-only; --allow-control lets the browser stop training") + ")", flush=True)
    server = Server(served_command(root), host=args.host, port=args.port, title="neurotui",
                    public_url=url)
    try:
        server.serve()
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        print(f"neurotui: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0
