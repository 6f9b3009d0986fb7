"""Textual's Linux terminal driver, with an input thread that sleeps until there is input.

Textual's own input thread wakes ten times a second (a 0.1 s `select`) to see whether the
app is leaving and to time out a lone ESC key. A dashboard kept open for days beside training
pays that in CPU for nothing: about a sixth of what the whole dashboard costs when it follows
a 32-rank run. Here the thread waits in `select` until the terminal has input, the parser's
ESC timeout is due, or the app leaves (a byte on a pipe of our own wakes it), so an idle
dashboard's input thread costs nothing. Keys, mouse and resizes go through Textual's own
parser and message path unchanged.
"""

from __future__ import annotations

import contextlib
import os
import selectors
from codecs import getincrementaldecoder
from threading import Event
from typing import Any

from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

_FINAL_WAIT_S = 0.1
"""After the app leaves, input still on its way is read for this long (as Textual does)."""


class _WakingEvent(Event):
    """The driver's exit event: setting it also wakes the input thread's `select`."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # the pipe is full: the thread is awake anyway
            os.write(self._wake_fd, b"x")


class QuietLinuxDriver(LinuxDriver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self.exit_event = _WakingEvent(self._wake_write)

    def close(self) -> None:
        super().close()
        # A plain event from here on: a late set() must not write to a closed descriptor,
        # whose number another file may have by then.
        settled = Event()
        if self.exit_event.is_set():
            settled.set()
        self.exit_event = settled
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def run_input_thread(self) -> None:
        """Textual's input loop (LinuxDriver.run_input_thread), waiting without a tick."""
        parser = XTermParser(self._debug)
        if not hasattr(parser, "_timeout_time"):  # a Textual whose parser changed
            super().run_input_thread()
            return
        decode = getincrementaldecoder("utf-8")().decode
        fileno = self.fileno
        selector = selectors.SelectSelector()
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)

        def wait_s() -> float | None:
            """None (until input) unless the parser holds a lone ESC waiting to time out."""
            due: float | None = parser._timeout_time
            return None if due is None else max(0.0, due - get_time())

        def process(ready: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for key, _mask in ready:
                if key.fd == self._wake_read:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_read, 64)
                    continue
                text = decode(os.read(fileno, 1024 * 4), final=final)
                if not text:  # stdin piped and at its end
                    break
                for event in parser.feed(text):
                    self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(wait_s()))
            selector.unregister(fileno)
            process(selector.select(_FINAL_WAIT_S), final=True)
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                for _event in parser.feed(""):
                    pass


def quiet(driver_class: type[Driver]) -> type[Driver]:
    """The driver an app gets: ours where Textual picked its Linux terminal driver (not a
    driver the environment chose, nor Windows', nor the headless one of tests)."""
    return QuietLinuxDriver if driver_class is LinuxDriver else driver_class
