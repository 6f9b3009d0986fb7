"""A loopback HTTP server serving a Prometheus page, as neuron-monitor-prometheus.py serves its
/metrics: the real capture's bytes (or a damaged page) through the real urllib scrape path."""

from __future__ import annotations

import http.server
import threading
import time


class MetricsPage:
    """Answers every GET with `body` (after `delay_s`, with `status`); keeps each request's
    Authorization header in `auth`."""

    def __init__(self, body: bytes, status: int = 200, delay_s: float = 0.0) -> None:
        self.auth: list[str | None] = []
        seen = self.auth

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization"))
                time.sleep(delay_s)  # a slow exporter (0: none)
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
