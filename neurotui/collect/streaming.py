"""A long-lived tool that prints one record per line (neuron-monitor, nvidia-smi -l).

Run as an argv list, read by a thread (a slow or silent tool never blocks the supervisor's
loop), restarted with doubling backoff when it dies. Its failures become `source_status`
events, never exceptions: training never stops because a monitor failed.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from neurotui.session.writer import EventWriter

MIN_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
_MAX_LINES_PER_POLL = 1000


class StreamingTool:
    def __init__(self, source: str, argv: list[str], writer: EventWriter,
                 on_line: Callable[[str, float], None], *, stderr_path: Path | None = None) -> None:
        self.source = source
        self.argv = argv
        self.writer = writer
        self.on_line = on_line
        self.stderr_path = stderr_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._lines: queue.Queue[bytes] = queue.Queue(maxsize=10_000)
        self._backoff = MIN_BACKOFF_S
        self._restart_at: float | None = 0.0
        self._got_line_since_start = False

    def poll(self, now: float) -> None:
        if self.proc is None and self._restart_at is not None and now >= self._restart_at:
            self._start(now)
        for _ in range(_MAX_LINES_PER_POLL):
            try:
                raw = self._lines.get_nowait()
            except queue.Empty:
                break
            self._got_line_since_start = True
            self.on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"), now)
        if self.proc is not None and self.proc.poll() is not None and self._lines.empty():
            self._died(now)

    def close(self) -> None:
        self._restart_at = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _start(self, now: float) -> None:
        stderr = subprocess.DEVNULL
        err_file = None
        if self.stderr_path is not None:
            err_file = open(self.stderr_path, "ab")  # noqa: SIM115 - handed to the child
            stderr = err_file
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=stderr)
        except OSError as exc:
            self.writer.write("source_status", t=now, source=self.source, ok=False,
                              message=f"{self.source} could not start: {exc}")
            self._schedule_restart(now)
            return
        finally:
            if err_file is not None:
                err_file.close()
        self._got_line_since_start = False
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True,
                         name=f"{self.source}-reader").start()
        self.writer.write("source_status", t=now, source=self.source, ok=True,
                          message=f"{self.source} running (pid {self.proc.pid})")

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for raw in proc.stdout:
                self._lines.put(raw)

    def _died(self, now: float) -> None:
        assert self.proc is not None
        code = self.proc.returncode
        self.proc = None
        if self._got_line_since_start:
            self._backoff = MIN_BACKOFF_S  # it worked for a while: retry soon
        self._schedule_restart(now, f"{self.source} exited with code {code}")

    def _schedule_restart(self, now: float, why: str | None = None) -> None:
        if self._restart_at is None:
            return
        delay = self._backoff
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        self._restart_at = now + delay
        self.restarts += 1
        if why:
            self.writer.write("source_status", t=now, source=self.source, ok=False,
                              message=f"{why}; restarting in {delay:.0f} s")
