"""A node's local -> global ranks, read from the rank processes' environments."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import psutil

from neurotui.supervisor.globalranks import GlobalRanks

# A process that starts with its parent's environment and then execs into one with RANK and
# LOCAL_RANK: what a rank looks like between torchrun's fork and its exec (same pid, same
# start time), and after.
_EXECS_LATER = textwrap.dedent("""
    import os, sys, time
    time.sleep(float(sys.argv[1]))
    env = {**os.environ, "RANK": "3", "LOCAL_RANK": "1"}
    os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)"], env)
""")


def test_a_rank_read_before_its_exec_is_read_again_after() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    proc = subprocess.Popen([sys.executable, "-c", _EXECS_LATER, "1.0"], env=env)
    try:
        ranks = GlobalRanks()
        rank = psutil.Process(proc.pid)
        assert not ranks.learn([rank])  # not exec'd yet: no RANK in its environment
        assert ranks.mapping == {}
        deadline = time.time() + 20
        while time.time() < deadline and not ranks.learn([psutil.Process(proc.pid)]):
            time.sleep(0.1)
        assert ranks.mapping == {1: 3}
        assert not ranks.learn([rank])  # read once it said: not again
    finally:
        proc.kill()
        proc.wait()
