"""Another local user can neither read a session nor answer or command its supervisor.

The other user is uid 65534 (nobody), entered with util-linux's setpriv; these tests need
root for that, as CI runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from neurotui.session.reader import SessionReader
from tests.e2e.conftest import meta, only_session, run_cli, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                 reason="needs root and setpriv to act as a second user")]

OTHER = 65534
# An interpreter the other user may run (a pyenv under /root is not one): the system's.
OTHER_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3")
                     if os.access(p, os.X_OK)), "python3")
SLEEPER = [sys.executable, "-c", "import time; print('token=SECRET-42', flush=True); "
                                 "time.sleep(120)"]


def as_other(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=30, env=env)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user can enter (pytest's own tmp folders are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="neurotui-users-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_another_user_cannot_read_a_sessions_logs(open_dir: Path) -> None:
    sessions = open_dir / "sessions"
    sessions.mkdir(mode=0o755)
    result = run_cli(sessions, "run", "--headless", "--", sys.executable, "-c",
                     "print('token=SECRET-42')")
    assert result.returncode == 0, result.stderr
    session = only_session(sessions)
    assert (session / "logs" / "launcher.log").read_text().strip() == "token=SECRET-42"
    assert session.stat().st_mode & 0o777 == 0o700
    tried = as_other("cat", str(session / "logs" / "launcher.log"))
    assert tried.returncode != 0 and "SECRET" not in tried.stdout
    assert "Permission denied" in tried.stderr


def test_group_readable_sessions_let_the_group_in(open_dir: Path) -> None:
    sessions = open_dir / "sessions"
    result = run_cli(sessions, "run", "--headless", "--group-readable", "--",
                     sys.executable, "-c", "print('shared')")
    assert result.returncode == 0, result.stderr
    assert only_session(sessions).stat().st_mode & 0o777 == 0o750


def test_a_control_folder_made_by_another_user_is_never_used(open_dir: Path) -> None:
    # The session path is too long for a unix socket address: the socket goes to a short
    # private folder, /tmp/neurotui-<uid>, which the other user made first, open to all.
    tmp = open_dir / "tmp"
    tmp.mkdir(mode=0o1777)
    tmp.chmod(0o1777)
    planted = tmp / f"neurotui-{os.getuid()}"
    made = as_other("mkdir", "-m", "777", str(planted))
    assert made.returncode == 0, made.stderr
    sessions = open_dir / ("long-" * 20) / "sessions"
    env = {"TMPDIR": str(tmp)}
    assert run_cli(sessions, "run", "--detach", "--stop-timeout", "5", "--", *SLEEPER,
                   env=env).returncode == 0
    session = only_session(sessions)
    wait_for(lambda: meta(session).get("control_socket"), 30, "the supervisor to listen")
    socket_at = Path(meta(session)["control_socket"])
    assert planted not in socket_at.parents
    assert socket_at.parent.stat().st_uid == os.getuid()
    assert socket_at.parent.stat().st_mode & 0o077 == 0
    assert list(planted.iterdir()) == []
    stopped = run_cli(sessions, "stop", env=env, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopping the job directly" not in stopped.stderr, "the supervisor was asked"
    wait_for(lambda: meta(session).get("exit"), 30, "the job's end")
    assert meta(session)["exit"]["reason"] == "stopped"


CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b'{"cmd": "stop", "by": "cli"}\\n')
data = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(data.decode())
"""


def test_the_supervisor_answers_only_its_own_user(open_dir: Path) -> None:
    sessions = open_dir / "sessions"
    assert run_cli(sessions, "run", "--detach", "--stop-timeout", "5", "--",
                   *SLEEPER).returncode == 0
    session = only_session(sessions)
    wait_for(lambda: meta(session).get("control_socket"), 30, "the supervisor to listen")
    socket_at = Path(meta(session)["control_socket"])
    # A folder and socket opened to all by mistake: the supervisor still asks who it is.
    session.chmod(0o755)
    socket_at.chmod(0o777)
    tried = as_other(OTHER_PYTHON, "-c", CLIENT, str(socket_at))
    assert tried.returncode == 0, tried.stderr
    assert json.loads(tried.stdout) == {"ok": False, "error": "not the session's user"}
    time.sleep(1.0)
    assert meta(session)["exit"] is None, "training runs on"
    warnings = SessionReader(session).load().events.get("warning", [])
    assert any(f"user id {OTHER}" in w["message"] for w in warnings)
    assert run_cli(sessions, "stop", timeout=60).returncode == 0
    wait_for(lambda: meta(session).get("exit"), 30, "the job's end")


IMPOSTOR = """
import os, socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(4)
print("listening", flush=True)
while True:
    conn, _ = s.accept()
    conn.recv(4096)
    conn.sendall(b'{"ok": true}\\n')
    conn.close()
"""


def test_stop_does_not_trust_a_socket_served_by_another_user(open_dir: Path) -> None:
    sessions = open_dir / "sessions"
    assert run_cli(sessions, "run", "--detach", "--stop-timeout", "5", "--",
                   *SLEEPER).returncode == 0
    session = only_session(sessions)
    wait_for(lambda: meta(session).get("control_socket"), 30, "the supervisor to listen")
    fake = open_dir / "impostor.sock"
    impostor = subprocess.Popen(["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}",
                                 "--clear-groups", OTHER_PYTHON, "-c", IMPOSTOR, str(fake)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert impostor.stdout is not None and impostor.stdout.readline() == "listening\n"
        m = meta(session)
        m["control_socket"] = str(fake)  # as if it had taken the supervisor's place
        (session / "meta.json").write_text(json.dumps(m))
        result = run_cli(sessions, "stop", timeout=90)
    finally:
        impostor.kill()
    assert "not to be trusted" in result.stderr and f"user id {OTHER}" in result.stderr
    assert "stopping the job directly" in result.stderr
    wait_for(lambda: not psutil_alive(meta(session)["job_pid"]), 30, "the job to be stopped")


def psutil_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
