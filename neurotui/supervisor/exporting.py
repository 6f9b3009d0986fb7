"""The Prometheus exporter beside the job (`neurotui run --metrics-port`), from the supervisor.

The exporter is a view of the session, in a process of its own (neurotui/exporter/): it
computes the figures when scraped, with numpy and the reader the supervisor must not load.
The supervisor only starts it, looks once a tick whether it is still there (a waitpid), and
ends it when supervision ends; the exporter also ends by itself if the supervisor is killed.
Its failure (port taken, a crash, a kill) is recorded as a `warning` event and in meta.json's
`metrics`, once, with its real reason: its exit code or the signal that ended it, and the last
lines it wrote since it started (not its start-up line, nor an earlier exporter's lines in the
same log). Training and supervision go on, the exporter is not restarted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from neurotui.exporter.options import STARTED_LINE
from neurotui.session import layout
from neurotui.session.writer import EventWriter

EXPORTER_MODULE = "neurotui.exporter"
EXIT_WAIT_S = 2.0
REASON_LINES = 3
"""How many of the exporter's last lines say why it ended (a traceback's last three: its
place, its code, the exception)."""
REASON_LINE_CHARS = 300


class MetricsExporter:
    """`start()` once, `check()` from the supervisor's timed work, `close()` at its end."""

    def __init__(self, session_dir: Path, host: str, port: int, writer: EventWriter,
                 save_meta: Callable[..., bool]) -> None:
        self.dir = session_dir
        self.host, self.port = host, port
        self.writer = writer
        self.save_meta = save_meta
        self.child: subprocess.Popen[bytes] | None = None
        self.failed: str | None = None
        self._log_start = 0
        """Where this exporter's output begins in the log (an adopted run's has more)."""

    @classmethod
    def of_config(cls, session_dir: Path, config: Mapping[str, Any], writer: EventWriter,
                  save_meta: Callable[..., bool]) -> MetricsExporter | None:
        """The exporter the run's config asks for (`metrics`: {host, port}), or None."""
        wanted = config.get("metrics") or {}
        if not wanted.get("port"):
            return None
        return cls(session_dir, str(wanted.get("host") or "127.0.0.1"), int(wanted["port"]),
                   writer, save_meta)

    @property
    def record(self) -> dict[str, Any]:
        """meta.json's `metrics`: where the figures are served."""
        return {"host": self.host, "port": self.port,
                "url": metrics_url(self.host, self.port),
                "pid": self.child.pid if self.child is not None else None,
                **({"error": self.failed} if self.failed else {})}

    def start(self) -> None:
        try:
            with open(self.dir / layout.EXPORTER_LOG, "ab") as log:
                self._log_start = os.fstat(log.fileno()).st_size
                self.child = subprocess.Popen(  # an argv list: no shell
                    [sys.executable, "-m", EXPORTER_MODULE, str(self.dir), "--host", self.host,
                     "--port", str(self.port), "--until-pid", str(os.getpid())],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    close_fds=True)
        except OSError as exc:
            self._fail(f"cannot start: {exc}")
            return
        self.save_meta(metrics=self.record)

    def check(self) -> None:
        """Cheap: one waitpid. A dead exporter is told once, then forgotten."""
        if self.child is None or (code := self.child.poll()) is None:
            return
        self.child = None
        self._fail(f"{ended_how(code)}: {self._last_lines()}")

    def _fail(self, why: str) -> None:
        self.failed = why
        self.writer.write("warning", source="exporter", message=(
            f"the Prometheus exporter on {self.host}:{self.port} {why}; training goes on "
            f"without it (see {layout.EXPORTER_LOG})"))
        self.save_meta(metrics=self.record)

    def _last_lines(self) -> str:
        """The last lines this exporter wrote, but the one saying it serves: why it ended."""
        try:
            with open(self.dir / layout.EXPORTER_LOG, "rb") as log:
                start = max(self._log_start, log.seek(0, os.SEEK_END) - 8192)
                log.seek(start)
                text = log.read()
        except OSError as exc:
            return f"its log cannot be read ({exc})"
        lines = [ln.strip()[:REASON_LINE_CHARS]
                 for ln in text.decode("utf-8", "replace").splitlines()
                 if ln.strip() and not ln.startswith(STARTED_LINE)]
        if start > self._log_start and lines:
            lines = lines[1:]  # cut by the 8 KiB read: not a whole line
        return " / ".join(lines[-REASON_LINES:]) or "no error output"

    def close(self) -> None:
        """End the exporter with supervision (SIGTERM, then SIGKILL)."""
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def ended_how(code: int) -> str:
    """A child's end as Popen.returncode gives it: an exit code, or (negative) a signal."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was ended by {name}"


def metrics_url(host: str, port: int) -> str:
    """Where a scraper finds the figures: a wildcard address is none to connect to, so the
    machine's name instead."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
