"""Turning the user's command into the argv the supervisor runs."""

from __future__ import annotations

import os
import shlex
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from neurotui.session import layout

_TORCHRUN_NAMES = {"torchrun"}
_TORCHRUN_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
# Flags that mean the user already chose where torchrun's per-rank output goes.
_USER_LOG_FLAGS = ("--log-dir", "--log_dir", "--redirects", "-r", "--tee", "-t")
# Flags (and torchrun's PET_* variables) that mean the user chose the rendezvous themselves.
_USER_RENDEZVOUS_FLAGS = ("--master-port", "--master_port", "--rdzv-endpoint", "--rdzv_endpoint",
                          "--rdzv-backend", "--rdzv_backend", "--standalone", "--nnodes")
_USER_RENDEZVOUS_ENV = ("PET_MASTER_PORT", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND",
                        "PET_STANDALONE", "PET_NNODES")


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


def job_argv(user_argv: list[str], logs_root: Path, *, shell: bool = False,
             free_port: Callable[[], int] | None = None) -> list[str]:
    """The argv to launch: per-rank log capture (under `logs_root`: the spool, or the
    session's logs/) and a free rendezvous port added to torchrun (unless the user chose
    them); a shell only when asked."""
    if shell:
        return [os.environ.get("SHELL", "/bin/sh"), "-c", shlex.join(user_argv)
                if len(user_argv) > 1 else user_argv[0]]
    argv = list(user_argv)
    at = torchrun_position(argv)
    if at is None:
        return argv
    flags = {a.split("=", 1)[0] for a in argv[at:]}
    added: list[str] = []
    if not flags & set(_USER_LOG_FLAGS):
        # torchrun writes each rank's stdout/stderr to its own files (no interleaving), which
        # the supervisor follows; its console (launcher.log) keeps torchrun's own messages.
        # Not --tee: torchrun then tails every rank log in a thread of its own that polls the
        # file ten times a second (64 threads and 3.5% of a core at 32 ranks x 10 lines/s on
        # the dev VM, against 0.3% without: tests/bench/bench_log_follow.py), taken from the
        # training for a second copy of what the rank logs hold.
        log_dir = logs_root / layout.TORCHRUN_LOG_NAME
        added += ["--log-dir", str(log_dir), "--redirects", "3"]
    if not flags & set(_USER_RENDEZVOUS_FLAGS) and \
            not any(name in os.environ for name in _USER_RENDEZVOUS_ENV):
        # torchrun's default port is 29500 for every job: a second run on the same machine
        # (1 vs 2 workers side by side) would fail to bind it.
        added += ["--master-port", str((free_port or _free_port)())]
    return [*argv[:at], *added, *argv[at:]]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))  # as torchrun's store listens: on every interface
        return int(s.getsockname()[1])


def resolve_executable(argv: list[str]) -> list[str]:
    """`torchrun` from the same environment as neurotui when it is not on PATH."""
    if argv and argv[0] == "torchrun":
        sibling = Path(sys.executable).with_name("torchrun")
        from shutil import which

        if which("torchrun") is None and sibling.exists():
            return [str(sibling), *argv[1:]]
    return argv
