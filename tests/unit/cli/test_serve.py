"""`neurotui serve`'s choices: what is local, where browsers go, the warning, the command."""

from __future__ import annotations

import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from neurotui import serve, terminal
from neurotui.listening import is_local

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("host", "local"), [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.0.2", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("trn1-box", False)])
def test_only_loopback_is_local(host: str, local: bool) -> None:
    assert is_local(host) is local


def test_browsers_get_an_address_they_can_open() -> None:
    assert serve.public_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert serve.public_url("::1", 8001) == "http://[::1]:8001"
    assert serve.public_url("0.0.0.0", 8000) == f"http://{socket.gethostname()}:8000"


def test_the_served_command_is_plain_neurotui_quoted_for_the_shell(tmp_path: Path) -> None:
    root = tmp_path / "my sessions; rm -rf x"
    assert shlex.split(serve.served_command(root)) == [
        sys.executable, "-m", "neurotui", "--sessions-dir", str(root)]


def test_a_served_view_counts_as_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert terminal.on_a_terminal()
    monkeypatch.setenv(terminal.READ_ONLY_ENV, "1")
    assert not terminal.control_allowed()
    monkeypatch.setenv(terminal.READ_ONLY_ENV, "0")
    assert terminal.control_allowed()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "neurotui", "--sessions-dir",
                             str(tmp_path / "sessions"), "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def until_serving(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Its first stdout line (it is listening then, or about to), then stop it; both
    streams' text."""
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    return first + out, err


@pytest.mark.parametrize("allow_control", [False, True])
def test_a_wider_address_is_warned_about(tmp_path: Path, allow_control: bool) -> None:
    port = free_port()
    out, err = until_serving(start_serve(tmp_path, "--host", "0.0.0.0", "--port", str(port),
                                         *(["--allow-control"] if allow_control else [])))
    assert "WARNING: listening on 0.0.0.0" in err
    assert (f"Anyone who can reach http://{socket.gethostname()}:{port} and sees its token"
            in err)
    assert ("can also stop training" in err) is allow_control
    assert f"on http://{socket.gethostname()}:{port}/?token=" in out


def test_localhost_is_not_warned_about_and_says_read_only(tmp_path: Path) -> None:
    port = free_port()
    out, err = until_serving(start_serve(tmp_path, "--port", str(port)))
    assert "WARNING" not in err
    assert re.search(rf"on http://127\.0\.0\.1:{port}/\?token=[\w-]{{43}} \(read-only; "
                     "--allow-control", out), out


def test_each_start_has_its_own_token(tmp_path: Path) -> None:
    tokens = {re.findall(r"token=([\w-]+)", until_serving(
        start_serve(tmp_path, "--port", str(free_port())))[0])[0] for _ in range(2)}
    assert len(tokens) == 2


def test_a_taken_port_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start_serve(tmp_path, "--port", str(port))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"neurotui: cannot serve on 127.0.0.1:{port}" in err
    assert "Traceback" not in err
