"""Neuron telemetry scraped from a Prometheus `/metrics` URL, for hosts without neuron-monitor.

`ObserverCollector(url, writer)` offers what the neuron-monitor collector offers (`poll(now)`,
`close()`, `instance_type`) and writes the same `neuron` events, built by
`sources.neuron_observer`. The page is fetched with urllib (http and https only, never a
shell) by a worker thread, one fetch at a time, so a slow endpoint never holds up the
supervisor's loop. An endpoint that cannot be reached, or a page that is not Prometheus text,
is a `source_status` event with the reason, written when the state changes, not every poll.
"""

from __future__ import annotations

import base64
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from neurotui.session.writer import EventWriter
from neurotui.sources import neuron_observer
from neurotui.sources.parse_errors import TelemetryParseError

SOURCE = "neuron-metrics-url"
# neuron-monitor-prometheus.py refreshes its page every 5 s (its update loop sleeps 5 s):
# scraping faster reads the same page again, whose counters then show no growth.
DEFAULT_PERIOD_S = 5.0
DEFAULT_TIMEOUT_S = 2.0
# A trn2.48xlarge page with a runtime per rank is a few MB; far more is not a metrics page.
MAX_PAGE_BYTES = 32 * 1024 * 1024
# Ask for the classic text format (what the parser reads), not OpenMetrics.
_ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"


class BadMetricsURL(ValueError):
    """The URL given is not an http(s) URL with a host."""


def check_url(url: str) -> str:
    """The URL as given, if it is http(s) with a host; BadMetricsURL says what is wrong."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise BadMetricsURL(f"{redact(url)}: only http:// and https:// metrics URLs are read")
    if not parts.hostname:
        raise BadMetricsURL(f"{redact(url)}: the URL names no host")
    return url.strip()


def redact(url: str) -> str:
    """The URL without a user:password part, for messages and session events."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def _opener() -> urllib.request.OpenerDirector:
    """http(s) only, redirects included, no proxy: a node's metrics endpoint is reached
    directly, and a redirect cannot lead the fetch to a file:// or ftp:// URL."""
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.HTTPHandler(), urllib.request.HTTPSHandler(),
                    urllib.request.HTTPRedirectHandler(), urllib.request.HTTPErrorProcessor(),
                    urllib.request.HTTPDefaultErrorHandler()):
        opener.add_handler(handler)
    return opener


_OPENER = _opener()


@dataclass(frozen=True)
class Scrape:
    """One fetch: the page text, or why there is none."""

    started: float
    text: str | None
    failure: str | None


def fetch_page(url: str, timeout_s: float = DEFAULT_TIMEOUT_S,
               max_bytes: int = MAX_PAGE_BYTES) -> Scrape:
    """GET the page; every failure (refused, timed out, HTTP error, too big) is a reason."""
    started = time.time()
    headers = {"Accept": _ACCEPT}
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None:
        # urllib would send user:password@ as part of the host name; HTTP wants a header.
        user = urllib.parse.unquote(parts.username)
        pair = f"{user}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    request = urllib.request.Request(redact(url), headers=headers)
    where = redact(url)
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            body = response.read(max_bytes + 1)
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        return Scrape(started, None, f"{where} answered HTTP {exc.code} {exc.reason}")
    except urllib.error.URLError as exc:
        return Scrape(started, None, f"{where} unreachable: {exc.reason}")
    except (OSError, ValueError) as exc:  # timeouts, resets, malformed responses
        return Scrape(started, None, f"{where} unreachable: {exc or type(exc).__name__}")
    if len(body) > max_bytes:
        return Scrape(started, None, f"{where} sent more than {max_bytes} bytes: "
                                     "not a metrics page")
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        text = body.decode("utf-8", errors="replace")
    return Scrape(started, text, None)


class ObserverCollector:
    """Scrapes `url` every `period_s` and writes each page as a `neuron` event."""

    def __init__(self, url: str, writer: EventWriter, period_s: float = DEFAULT_PERIOD_S,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = check_url(url)
        self.writer = writer
        self.period_s = period_s
        # A fetch never outlasts its period, so fetches cannot pile up behind a slow endpoint.
        self.timeout_s = min(timeout_s, max(period_s, 0.5))
        self.instance_type: str | None = None
        self._results: queue.Queue[Scrape] = queue.Queue()
        self._in_flight = False
        self._next_at = 0.0
        self._closed = False
        self._previous: neuron_observer.MetricsPage | None = None
        self._previous_at: float | None = None
        self._state: tuple[bool, str] | None = None

    def poll(self, now: float) -> None:
        while True:
            try:
                scrape = self._results.get_nowait()
            except queue.Empty:
                break
            self._in_flight = False
            self._handle(scrape, now)
        if not self._closed and not self._in_flight and now >= self._next_at:
            self._in_flight = True
            self._next_at = now + self.period_s
            threading.Thread(target=self._fetch, daemon=True, name="neuron-metrics-url").start()

    def close(self) -> None:
        # A fetch still running ends within its timeout; its result is dropped.
        self._closed = True

    def _fetch(self) -> None:
        self._results.put(fetch_page(self.url, self.timeout_s))

    def _handle(self, scrape: Scrape, now: float) -> None:
        if scrape.failure is not None:
            self._status(now, False, scrape.failure)
            return
        assert scrape.text is not None
        try:
            page = neuron_observer.parse_metrics(scrape.text)
        except TelemetryParseError as exc:
            self._status(now, False, f"{redact(self.url)}: page not understood: {exc}")
            return
        period = None if self._previous_at is None else scrape.started - self._previous_at
        summary = neuron_observer.observer_summary(page, self._previous, period)
        self._previous, self._previous_at = page, scrape.started
        if summary["errors"] and not page.samples.keys() & neuron_observer.KNOWN:
            # Reachable, but not a page of Neuron metrics this parser knows: say so, record
            # nothing that would read as an idle accelerator.
            self._status(now, False, f"{redact(self.url)}: {summary['errors'][0]}")
            return
        self._status(now, True, f"scraping {redact(self.url)} every {self.period_s:g} s")
        self.instance_type = self.instance_type or summary.get("instance_type")
        summary["source"] = f"{neuron_observer.SOURCE} {redact(self.url)}"
        self.writer.write("neuron", t=now, **summary)

    def _status(self, now: float, ok: bool, message: str) -> None:
        if self._state == (ok, message):
            return
        self._state = (ok, message)
        self.writer.write("source_status", t=now, source=SOURCE, ok=ok, message=message)
