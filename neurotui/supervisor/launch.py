"""Turning the user's command into the argv the supervisor runs."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from neurotui.session import layout

_TORCHRUN_NAMES = {"torchrun"}
_TORCHRUN_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
# Flags that mean the user already chose where torchrun's per-rank output goes.
_USER_LOG_FLAGS = ("--log-dir", "--log_dir", "--redirects", "-r", "--tee", "-t")


def torchrun_position(argv: list[str]) -> int | None:
    """Index just after `torchrun` / `python -m torch.distributed.run`, where its flags go."""
    if not argv:
        return None
    if Path(argv[0]).name in _TORCHRUN_NAMES:
        return 1
    if Path(argv[0]).name.startswith("python") and len(argv) >= 3 and argv[1] == "-m" \
            and argv[2] in _TORCHRUN_MODULES:
        return 3
    return None


def job_argv(user_argv: list[str], session_dir: Path, *, shell: bool = False) -> list[str]:
    """The argv to launch: per-rank log capture added to torchrun; a shell only when asked."""
    if shell:
        return [os.environ.get("SHELL", "/bin/sh"), "-c", shlex.join(user_argv)
                if len(user_argv) > 1 else user_argv[0]]
    argv = list(user_argv)
    at = torchrun_position(argv)
    if at is None or any(a.split("=", 1)[0] in _USER_LOG_FLAGS for a in argv[at:]):
        return argv
    # torchrun writes each rank's stdout/stderr to its own files (no interleaving) and, with
    # --tee, also to its console, which the supervisor saves as launcher.log.
    log_dir = session_dir / layout.TORCHRUN_LOG_DIR
    return [*argv[:at], "--log-dir", str(log_dir), "--redirects", "3", "--tee", "3", *argv[at:]]


def resolve_executable(argv: list[str]) -> list[str]:
    """`torchrun` from the same environment as neurotui when it is not on PATH."""
    if argv and argv[0] == "torchrun":
        sibling = Path(sys.executable).with_name("torchrun")
        from shutil import which

        if which("torchrun") is None and sibling.exists():
            return [str(sibling), *argv[1:]]
    return argv
