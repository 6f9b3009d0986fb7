"""The dashboard in a real terminal (tmux): live steps and phase, detaching, literal logs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from neurotui import fmt
from neurotui.session.timeline import Timeline
from tests.ui.sessions import recorded_job, reference_session

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Tmux:
    """One tmux server of our own (its own socket), one window of a fixed size."""

    def __init__(self, name: str) -> None:
        self.socket = f"neurotui-test-{os.getpid()}-{name}"
        self.target = name

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "-f", os.devnull, *args],
                              capture_output=True,
                              text=True, timeout=30).stdout

    def start(self, command: str, cols: int = 100, rows: int = 30) -> None:
        # COLUMNS/LINES (set by pytest) would override the real terminal size.
        env = ("unset COLUMNS LINES; export TERM=xterm-256color LANG=C.UTF-8 "
               "NEUROTUI_INTERVAL=0.5; ")
        # The shell stays after the command, so what it printed on exit can be read.
        self.tmux("new-session", "-d", "-s", self.target, "-x", str(cols), "-y", str(rows),
                  f"{env}{command}; echo '[exited]'; sleep 600")
        self.tmux("set-option", "-t", self.target, "window-size", "manual")
        self.tmux("resize-window", "-t", self.target, "-x", str(cols), "-y", str(rows))

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.target)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.target, *keys)

    def wait(self, predicate: Callable[[str], object], timeout: float, what: str) -> str:
        deadline = time.time() + timeout
        screen = ""
        while time.time() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            if "[exited]" in screen and "[exited]" not in what:
                break
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    term = Tmux(request.node.name[:20].replace("[", "_"))
    yield term
    term.close()


def test_log_markup_and_escapes_stay_literal_in_a_real_terminal(tmp_path: Path,
                                                                tmux: Tmux) -> None:
    session = reference_session(tmp_path)
    tmux.start(f"{shlex.quote(sys.executable)} -m neurotui.ui.app {shlex.quote(str(session))}",
               cols=160, rows=48)
    screen = tmux.wait(lambda s: "not markup" in s, 60, "the log line")
    assert "[bold red]not markup[/] \\x1b[31mred?\\x1b[0m \\x1b]0;title\\x07" in screen
    assert "[link=http://x]click[/link] bell\\x07 done" in screen
    assert tmux.tmux("display-message", "-p", "-t", tmux.target, "#{pane_title}").strip() \
        != "title"  # the OSC title sequence never reached the terminal
    tmux.keys("q")
    tmux.wait(lambda s: "[exited]" in s, 30, "the dashboard to quit ([exited])")


@pytest.mark.slow
def test_real_run_steps_rise_phase_changes_and_detach_leaves_training(tmp_path: Path,
                                                                     tmux: Tmux) -> None:
    sessions = tmp_path / "sessions"
    py = shlex.quote(sys.executable)
    train = [py, "-m", "torch.distributed.run", "--nproc_per_node=2",
             str(REPO / "runner" / "train_vit.py"), "--model", "vit-micro", "--image-size",
             "32", "--batch-size", "8", "--workers", "0", "--device", "cpu", "--steps", "4000"]
    tmux.start(f"cd {shlex.quote(str(REPO))} && {py} -m neurotui --sessions-dir "
               f"{shlex.quote(str(sessions))} run -- {' '.join(train)}")
    session: Path | None = None
    try:
        seen: list[tuple[str, int | None]] = []

        def progress(screen: str) -> bool:
            phase = re.search(r"\b(STARTING|COMPILING|WARM-UP|STEADY|FINISHED|CRASHED)\b",
                              screen)
            step = re.search(r"^ step ([\d,]+)", screen, re.MULTILINE)
            if phase:
                seen.append((phase.group(1), int(step.group(1).replace(",", ""))
                             if step else None))
            steps = [s for p, s in seen if s is not None and p == "STEADY"]
            return len(set(steps)) >= 3 and steps == sorted(steps)

        tmux.wait(progress, 240, "steps rising in steady state")
        phases = [p for p, _ in seen]
        assert phases[0] in ("STARTING", "WARM-UP") and phases[-1] == "STEADY", phases
        session = next(p for p in sessions.iterdir() if (p / "meta.json").exists())
        assert "q closes" in tmux.screen()  # the screen says quitting leaves training on

        tmux.keys("q")
        tmux.wait(lambda s: "dashboard closed; training goes on" in s, 30, "the detach note")
        before = _probe_steps(session)
        time.sleep(3)
        assert _probe_steps(session) > before, "training stopped when the dashboard closed"
    finally:
        if session is not None:
            subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions),
                            "stop", session.name], capture_output=True, timeout=120, cwd=REPO)


def _probe_steps(session: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (session / "probe").glob("*.jsonl"))


def test_replay_plays_to_the_end_in_a_real_terminal(tmp_path: Path, tmux: Tmux) -> None:
    """`neurotui replay` as a user runs it: a shipped sample, ASCII mode, played as fast as
    possible to its end, then back to a step with "go to"."""
    sessions = shlex.quote(str(REPO / "sessions"))
    tmux.start(f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m neurotui "
               f"--sessions-dir {sessions} replay sample-cpu --speed max --ascii; "
               "echo exit=$?", cols=100, rows=30)
    timeline = Timeline(REPO / "sessions" / "sample-cpu-gloo")
    span = fmt.duration(timeline.end - timeline.start)
    timeline.close()
    # Paused at the end, ASCII. Waited for whole: a capture can come while a frame is half
    # drawn (the header's FINISHED and the status line there, the bar not yet).
    bar = f"|| max  {span} / {span}  step 600  ###"
    tmux.wait(lambda s: "FINISHED" in s and "step 600/600" in s and bar in s, 90, "the end")
    tmux.keys("g")
    tmux.wait(lambda s: "Go to a time" in s, 30, "the go-to prompt")
    tmux.keys("step 300", "Enter")
    screen = tmux.wait(lambda s: "step 300/600" in s, 30, "step 300")
    assert "FINISHED" not in screen
    tmux.keys("q")
    screen = tmux.wait(lambda s: "exit=" in s, 30, "[exited]")
    assert "exit=0" in screen


def test_compare_screen_in_a_real_terminal(tmp_path: Path, tmux: Tmux) -> None:
    """`neurotui compare --tui` on the shipped samples: the study's table on screen."""
    sessions = shlex.quote(str(REPO / "sessions"))
    tmux.start(f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m neurotui "
               f"--sessions-dir {sessions} compare --tui sample-cpu sample-xla; echo exit=$?",
               cols=160, rows=40)
    screen = tmux.wait(lambda s: "2,573.2" in s and "990.7" in s, 60, "both samples' rows")
    assert "sample-cpu-gloo" in screen and "sample-xla-cpu" in screen
    tmux.keys("q")
    screen = tmux.wait(lambda s: "exit=" in s, 30, "[exited]")
    assert "exit=0" in screen


def _voluntary_switches(pid: int) -> int:
    """How often the threads of `pid` went to sleep (each a wakeup after)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as status:
            total += sum(int(line.split()[1]) for line in status
                         if line.startswith("voluntary_ctxt_switches"))
    return total


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_an_idle_dashboard_sleeps_and_escape_still_works(tmp_path: Path, tmux: Tmux) -> None:
    """With no frame due and no key pressed, the dashboard's process does not wake at all
    (Textual's own input thread wakes ten times a second: 30 wakeups in 3 s); a lone escape,
    which needs the key parser's timeout, still closes the heat-map screen."""
    import psutil

    session = reference_session(tmp_path)
    tmux.start(f"NEUROTUI_INTERVAL=3600 {shlex.quote(sys.executable)} -m neurotui.ui.app "
               f"{shlex.quote(str(session))}", cols=120, rows=36)
    tmux.wait(lambda s: "Throughput" in s and "Host" in s, 30, "the dashboard")
    time.sleep(2)  # its first frame drawn, its workers gone
    shell = psutil.Process(int(tmux.tmux("list-panes", "-t", tmux.target, "-F",
                                         "#{pane_pid}").strip()))
    app = next(p for p in shell.children(recursive=True)
               if "neurotui.ui.app" in " ".join(p.cmdline()))
    before = _voluntary_switches(app.pid)
    time.sleep(3)
    assert _voluntary_switches(app.pid) - before <= 5
    tmux.keys("h")
    tmux.wait(lambda s: "CPU heat map" in s, 10, "the heat-map screen")
    tmux.keys("Escape")
    tmux.wait(lambda s: "CPU heat map" not in s and "Host" in s, 10,
              "the dashboard again after escape")
    tmux.keys("q")
    tmux.wait(lambda s: "[exited]" in s, 10, "[exited]")


def test_plain_neurotui_lists_recorded_sessions_and_opens_one(tmp_path: Path,
                                                             tmux: Tmux) -> None:
    """Plain `neurotui` on a folder of recorded sessions, none running: the home screen's
    table (a corrupt session with its problem), Enter replays one, `l` comes back."""
    from neurotui.compare import compare_rows
    from tests.ui.home_sessions import CORRUPT, mixed_folder

    root = mixed_folder(tmp_path / "sessions")
    crashed = "20260101-120000-vit-b16"
    per_dollar = f"{compare_rows([root / crashed])[0]['samples_per_dollar_steady']:,.0f}"
    tmux.start(f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m neurotui "
               f"--sessions-dir {shlex.quote(str(root))}", cols=140, rows=30)
    screen = tmux.wait(lambda s: "6 sessions" in s and per_dollar in s, 60,
                       "the home screen with the crashed run's figures read")
    assert re.search(r"completed\s+sample-cpu-gloo\s+n/a\s+.*\s13s\s+2,573\.2\s+n/a", screen)
    assert re.search(rf"unreadable\s+{CORRUPT}\s+.*meta\.json: unreadable", screen)
    tmux.keys("Down", "Down", "Enter")  # newest first: the two samples, then the crash
    tmux.wait(lambda s: "replay" in s and "Throughput" in s, 60, "its replay")
    tmux.keys("l")
    tmux.wait(lambda s: "6 sessions" in s and "STATE" in s, 30, "the home screen again")
    tmux.keys("q")
    tmux.wait(lambda s: "[exited]" in s, 30, "[exited]")


def test_a_job_of_two_nodes_in_a_real_terminal(tmp_path: Path, tmux: Tmux) -> None:
    """`neurotui attach JOB`: the job as one run, a row per node, its lost node shown lost;
    `]` to the job's rank 3 brings up its node's log and machine panels; `q` leaves."""
    root = recorded_job(tmp_path / "sessions")
    tmux.start(f"{shlex.quote(sys.executable)} -m neurotui --sessions-dir "
               f"{shlex.quote(str(root))} attach J", cols=140, rows=44)
    # (The header says "reading the session..." until the first figures; the nodes' panel
    # may be drawn before it goes.)
    screen = tmux.wait(lambda s: "Nodes of job J: 2, 1 lost" in s and "job J, 2 nodes" in s,
                       30, "the job's nodes and header")
    assert "2 x trn1.32xlarge" in screen
    assert re.search(r"nB\s+lost\s+2 .*slowest", screen), screen
    for _ in range(3):  # from rank 0 to the job's rank 3: nB's local rank 1
        tmux.keys("]")
        time.sleep(0.3)
    screen = tmux.wait(lambda s: "nB local 1 is global rank 3" in s, 20, "rank 3's log")
    tmux.wait(lambda s: "node nB" in s, 20, "the machine panels on node nB")
    tmux.keys("q")
    tmux.wait(lambda s: "[exited]" in s, 20, "[exited]")
