"""The Prometheus exporter beside the job (`neurotui run --metrics-port`), from the supervisor.

The exporter is a view of the session, in a process of its own (neurotui/exporter/): it
computes the figures when scraped, with numpy and the reader the supervisor must not load.
The supervisor only starts it, looks once a tick whether it is still there (a waitpid), and
ends it when supervision ends; the exporter also ends by itself if the supervisor is killed.
Its failure (port taken, a crash) is recorded as a `warning` event and in meta.json's
`metrics`, once: training and supervision go on, the exporter is not restarted.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from neurotui.session import layout
from neurotui.session.writer import EventWriter

EXPORTER_MODULE = "neurotui.exporter"
EXIT_WAIT_S = 2.0


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
        self._fail(f"exited with code {code}: {self._last_line()}")

    def _fail(self, why: str) -> None:
        self.failed = why
        self.writer.write("warning", source="exporter", message=(
            f"the Prometheus exporter on {self.host}:{self.port} {why}; training goes on "
            f"without it (see {layout.EXPORTER_LOG})"))
        self.save_meta(metrics=self.record)

    def _last_line(self) -> str:
        try:
            text = (self.dir / layout.EXPORTER_LOG).read_bytes()[-2000:]
        except OSError:
            return "no output"
        lines = [ln for ln in text.decode("utf-8", "replace").splitlines() if ln.strip()]
        return lines[-1].strip() if lines else "no output"

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


def metrics_url(host: str, port: int) -> str:
    """Where a scraper finds the figures: a wildcard address is none to connect to, so the
    machine's name instead."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
