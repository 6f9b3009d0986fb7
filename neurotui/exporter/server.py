"""The exporter process: serve /metrics for one session until its supervisor ends.

`python -m neurotui.exporter SESSION_DIR --port P [--host H] [--until-pid PID]`

prometheus_client's WSGI app behind its threading server (a thread per scrape), but served
with no poll interval: start_http_server's serve_forever wakes twice a second to look for a
shutdown that never comes here, and between scrapes this process must sleep. The main thread
waits for process PID (the supervisor) to exit, through a pidfd: the exporter ends with the
run, even when its supervisor is killed. It runs niced: a scrape yields to training.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from neurotui.exporter.collector import SessionCollector
from neurotui.exporter.options import DEFAULT_HOST, STARTED_LINE
from neurotui.listening import port_number
from neurotui.session.meta import SessionFormatError, load_meta

NICENESS = 10
FALLBACK_CHECK_S = 5.0
"""Without pidfds (Linux before 5.3), how often the supervisor's pid is looked at."""


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No line per scrape in the log."""


def bind(host: str, port: int, registry: CollectorRegistry) -> ThreadingWSGIServer:
    """The listening server (OSError when the address is taken or not this machine's)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                flags=socket.AI_PASSIVE)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family  # an IPv6 --metrics-host needs an IPv6 socket

    return make_server(host, port, make_wsgi_app(registry), Server, handler_class=_Quiet)


def serve(server: ThreadingWSGIServer) -> threading.Thread:
    # poll_interval=None: the thread sleeps in select() until a scrape connects.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": None},
                              name="metrics", daemon=True)
    thread.start()
    return thread


def wait_for_exit(pid: int) -> None:
    """Return once process `pid` (our parent, the supervisor) has exited."""
    pidfd_open = getattr(os, "pidfd_open", None)
    fd = None
    if pidfd_open is not None:
        with contextlib.suppress(OSError):
            fd = pidfd_open(pid)
    if fd is None:
        while os.getppid() == pid:
            time.sleep(FALLBACK_CHECK_S)
        return
    try:
        # Opened, then checked: a parent that died before the pidfd was opened left us
        # to another parent, and the descriptor may name a stranger that got its pid.
        if os.getppid() == pid:
            select.select([fd], [], [])
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m neurotui.exporter", description=__doc__)
    p.add_argument("session", help="the session folder")
    p.add_argument("--port", type=port_number, required=True)
    p.add_argument("--host", default=DEFAULT_HOST)
    p.add_argument("--until-pid", type=int, metavar="PID",
                   help="end when this process (the parent) exits; default: until SIGTERM")
    args = p.parse_args(argv)
    session_dir = Path(args.session)
    try:
        load_meta(session_dir)
    except SessionFormatError as exc:
        print(f"neurotui exporter: {exc}", file=sys.stderr, flush=True)
        return 2
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    from neurotui.headless import model_for  # the dashboard's model, on the wall clock

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(model_for(session_dir)))
    try:
        server = bind(args.host, args.port, registry)
    except OSError as exc:
        print(f"neurotui exporter: cannot serve on {args.host}:{args.port}: {exc}",
              file=sys.stderr, flush=True)
        return 3
    serve(server)
    print(f"{STARTED_LINE}{session_dir.name} on {args.host}:{args.port}",
          file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, _leave)
    try:
        if args.until_pid is not None:
            wait_for_exit(args.until_pid)
        else:
            while True:
                signal.pause()
    except (KeyboardInterrupt, _Leave):
        pass
    return 0


class _Leave(Exception):
    """SIGTERM: leave the waits above and exit cleanly."""


def _leave(signum: int, frame: object) -> None:
    raise _Leave
