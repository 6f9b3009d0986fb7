"""The IMDSv2 client against a local fake metadata service, a closed port, and the off switch."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from neurotui.pricing import imds
from neurotui.pricing.imds import InstanceIdentity, detect_instance, imds_disabled

TOKEN = "AQAEAFakeToken=="


class FakeIMDS(BaseHTTPRequestHandler):
    """Plays IMDSv2: a PUT with a TTL header gets a token; GETs without that token get 401."""

    instance_type = "trn1.2xlarge"
    region = "us-east-1"
    delay_s = 0.0
    release = threading.Event()
    requests: ClassVar[list[tuple[str, str, str | None]]] = []

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def _reply(self, code: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        ttl = self.headers.get(imds.TOKEN_TTL_HEADER)
        self.requests.append(("PUT", self.path, ttl))
        if self.delay_s:
            self.release.wait(self.delay_s)
        if self.path != imds.TOKEN_PATH or not ttl or not ttl.isdigit():
            self._reply(400)
            return
        self._reply(200, TOKEN)

    def do_GET(self) -> None:
        token = self.headers.get(imds.TOKEN_HEADER)
        self.requests.append(("GET", self.path, token))
        if token != TOKEN:
            self._reply(401)
            return
        answers = {imds.INSTANCE_TYPE_PATH: self.instance_type, imds.REGION_PATH: self.region}
        if self.path in answers:
            self._reply(200, answers[self.path])
        else:
            self._reply(404)


class QuietServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() waits for the handlers: no sockets left behind

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hung up first (the timeout tests): expected


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[tuple[str, type]]:
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def fake_imds() -> Iterator[tuple[str, type]]:
    handler = type("Handler", (FakeIMDS,), {"requests": []})
    yield from _serve(handler)


@pytest.fixture(autouse=True)
def _metadata_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
    monkeypatch.delenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", raising=False)


def test_token_then_instance_type_and_region(fake_imds, capsys) -> None:
    url, handler = fake_imds
    assert detect_instance(url) == InstanceIdentity("trn1.2xlarge", "us-east-1")
    methods = [(m, p) for m, p, _ in handler.requests]
    assert methods == [("PUT", imds.TOKEN_PATH), ("GET", imds.INSTANCE_TYPE_PATH),
                       ("GET", imds.REGION_PATH)]
    assert handler.requests[0][2] is not None  # the TTL header was sent
    assert all(h == TOKEN for m, _, h in handler.requests if m == "GET")
    assert capsys.readouterr() == ("", "")


def test_fake_service_really_requires_the_token(fake_imds) -> None:
    """The fake rejects a tokenless GET, so the test above proves the client sends it."""
    import urllib.error
    import urllib.request

    url, _ = fake_imds
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as err:
        opener.open(url + imds.INSTANCE_TYPE_PATH, timeout=2)
    assert err.value.code == 401
    err.value.close()


def test_endpoint_from_environment(fake_imds, monkeypatch) -> None:
    url, _ = fake_imds
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url + "/")
    assert detect_instance() == InstanceIdentity("trn1.2xlarge", "us-east-1")


def test_disabled_by_environment_asks_nothing(fake_imds, monkeypatch) -> None:
    url, handler = fake_imds
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert imds_disabled()
    assert detect_instance(url) is None
    assert handler.requests == []
    assert imds_disabled({"AWS_EC2_METADATA_DISABLED": "TRUE"})
    assert not imds_disabled({"AWS_EC2_METADATA_DISABLED": "false"})
    assert not imds_disabled({})


def test_closed_port_fails_fast_and_quietly(capsys) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    assert detect_instance(f"http://127.0.0.1:{port}", timeout_s=1.0) is None
    assert time.monotonic() - start < 1.5
    assert capsys.readouterr() == ("", "")


def test_unresponsive_service_gives_up_after_the_timeout() -> None:
    """A listener that never answers (the off-EC2 case where packets vanish)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        start = time.monotonic()
        assert detect_instance(f"http://127.0.0.1:{sock.getsockname()[1]}",
                               timeout_s=0.3) is None
        assert time.monotonic() - start < 1.5


def test_slow_token_answer_times_out() -> None:
    handler = type("Slow", (FakeIMDS,), {"requests": [], "delay_s": 5.0,
                                         "release": threading.Event()})
    for url, _ in _serve(handler):
        start = time.monotonic()
        assert detect_instance(url, timeout_s=0.2) is None
        assert time.monotonic() - start < 1.0
        handler.release.set()


def test_region_failure_keeps_the_instance_type() -> None:
    handler = type("NoRegion", (FakeIMDS,), {"requests": [], "region": "<html>oops</html>"})
    for url, _ in _serve(handler):
        assert detect_instance(url) == InstanceIdentity("trn1.2xlarge", None)


def test_garbage_instance_type_is_refused() -> None:
    handler = type("Garbage", (FakeIMDS,), {"requests": [], "instance_type": "<html>"})
    for url, _ in _serve(handler):
        assert detect_instance(url) is None


def test_not_a_url_returns_none() -> None:
    assert detect_instance("not a url", timeout_s=0.2) is None
