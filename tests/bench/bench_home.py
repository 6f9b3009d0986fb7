"""The home screen's first frame with many sessions (issue #15: 500 sessions within 0.5 s).

Generates a sessions folder of N finished runs (meta.json with the summary the supervisor
writes at a run's end, plus a few event lines each, as recordings have), then starts plain
`neurotui --sessions-dir FOLDER` as a new process in a pseudo-terminal, again and again, and
times from the moment before the process is started to the moment its output holds the
first frame of the table (the title's session count and the newest session's row). For
comparison: the same on an empty folder (the app alone), and listing the folder in-process
(session/listing.read_entries: what the sessions add).

    .venv/bin/python tests/bench/bench_home.py [--sessions 500] [--repeats 7]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from neurotui.session import layout  # noqa: E402
from neurotui.session.listing import read_entries  # noqa: E402
from tests.ui.home_sessions import finished  # noqa: E402

TARGET_S = 0.5
COLS, ROWS = 160, 40


def make_folder(root: Path, count: int) -> list[Path]:
    root.mkdir(parents=True)
    folders = [finished(root, i) for i in range(count)]
    for folder in folders:  # a recording's other files: never read by the list
        (folder / layout.EVENTS).write_text(
            '{"t": 1767268800.0, "kind": "proc_start", "attempt": 0, "pid": 1}\n' * 20)
        (folder / layout.PROBE_DIR).mkdir()
        (folder / layout.LOGS_DIR).mkdir()
    return folders


def first_frame_s(root: Path, markers: list[bytes], timeout_s: float = 30.0) -> float:
    """Seconds from starting plain `neurotui` in a pty to every marker in its output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "LANG": "C.UTF-8",
           "TEXTUAL_ANIMATIONS": "none"}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "neurotui", "--sessions-dir", str(root)],
                            stdin=slave, stdout=slave, stderr=slave, cwd=REPO, env=env,
                            start_new_session=True)
    os.close(slave)
    seen = b""
    took = None
    try:
        while time.perf_counter() - start < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                seen += os.read(master, 1 << 16)
            except OSError:
                break
            if all(m in seen for m in markers):
                took = time.perf_counter() - start
                break
        if took is None:
            raise RuntimeError(f"no first frame within {timeout_s} s; output ends with "
                               f"{seen[-800:]!r}")
        os.write(master, b"q")
        deadline = time.time() + 10
        while proc.poll() is None and time.time() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    os.read(master, 1 << 16)
                except OSError:
                    break
        return took
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        folders = make_folder(root, args.sessions)
        empty = Path(tmp) / "empty"
        empty.mkdir()
        newest = max(folders, key=lambda p: p.name).name.encode()
        count = f"{args.sessions} sessions".encode()

        listing = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            read_entries(root)
            listing.append(time.perf_counter() - t)
        first_frame_s(root, [count, newest])  # warm the file cache and .pyc files
        full, bare = [], []
        for _ in range(args.repeats):  # in turn: a busy spell of the machine hits both
            full.append(first_frame_s(root, [count, newest]))
            bare.append(first_frame_s(empty, [b"0 sessions", b"no sessions under"]))

    def line(what: str, values: list[float]) -> str:
        return (f"{what:44} median {statistics.median(values):.3f} s  "
                f"min {min(values):.3f}  max {max(values):.3f}")

    print(f"home screen, {args.sessions} finished sessions, {args.repeats} runs each, "
          f"{COLS}x{ROWS} pty, {os.cpu_count()} CPUs")
    print(line(f"listing {args.sessions} sessions (in-process)", listing))
    print(line("first frame, empty folder (new process)", bare))
    print(line(f"first frame, {args.sessions} sessions (new process)", full))
    added = [f - b for f, b in zip(full, bare, strict=True)]
    print(line(f"what {args.sessions} sessions add (paired runs)", added))
    verdict = "within" if statistics.median(full) <= TARGET_S else "OVER"
    print(f"target: {TARGET_S} s from process start: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
