"""One profile taken end to end: can this session be profiled, the request, the wait for
every rank asked. What `neurotui profile` and the dashboard's `p` both call."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neurotui.profiling.channel import (
    ProfileAnswers,
    ProfileRequest,
    RankAnswer,
    pending_request,
    post_request,
    withdraw,
)
from neurotui.session import layout
from neurotui.session.meta import load_meta
from neurotui.session.status import session_status

AUTO_PROBE_ENV = "NEUROTUI_AUTO_PROBE"
POLL_S = 0.25


class CannotProfile(RuntimeError):
    """The session cannot be profiled now; the message says why."""


@dataclass(frozen=True)
class ProfileOptions:
    steps: int = 5
    ranks: tuple[int, ...] | None = None
    memory: bool = False
    device_trace: bool = False
    timeout_s: float = 120.0


@dataclass(frozen=True)
class ProfileOutcome:
    session_dir: Path
    request: ProfileRequest
    asked: tuple[int, ...]
    answers: dict[int, RankAnswer]

    @property
    def silent(self) -> list[int]:
        """Ranks asked that had not finished when the wait ended."""
        return [rank for rank in self.asked
                if rank not in self.answers or self.answers[rank].ended is None]

    @property
    def written(self) -> dict[int, Path]:
        """Rank -> its trace, for the ranks that wrote one."""
        return {rank: self.session_dir / str(answer.ended["file"])
                for rank, answer in sorted(self.answers.items())
                if answer.ended is not None and answer.ended.get("what") == "done"}

    @property
    def failed(self) -> dict[int, str]:
        return {rank: str(answer.ended.get("error"))
                for rank, answer in sorted(self.answers.items())
                if answer.ended is not None and answer.ended.get("what") == "failed"}

    @property
    def complete(self) -> bool:
        """Every rank asked wrote its trace."""
        return set(self.written) >= set(self.asked)


def probed_ranks(session_dir: Path) -> list[int]:
    """The ranks whose automatic probe has recorded (a rank that stepped an optimizer)."""
    return sorted(layout.probe_files(session_dir, auto=True))


def check_profilable(session_dir: Path, ranks: tuple[int, ...] | None) -> tuple[int, ...]:
    """The ranks to ask; CannotProfile says why the session cannot be profiled."""
    name = session_dir.name
    status = session_status(session_dir)
    if not status.running:
        raise CannotProfile(f"{name} is not running ({status.state}): only a running job "
                            "can be profiled")
    config = load_meta(session_dir).get("config") or {}
    env = config.get("env") or {}
    if config.get("auto_probe") is False or \
            (isinstance(env, dict) and env.get(AUTO_PROBE_ENV) == "0"):
        raise CannotProfile(f"{name} runs without the automatic probe (--no-auto-probe or "
                            f"{AUTO_PROBE_ENV}=0): there is nothing inside its ranks to take "
                            "a profile")
    found = probed_ranks(session_dir)
    if not found:
        raise CannotProfile(f"{name}: no rank has stepped a PyTorch optimizer under the "
                            "automatic probe yet; a job that is not PyTorch training (or has "
                            "not reached its first step) cannot be profiled")
    if ranks is not None:
        unknown = sorted(set(ranks) - set(found))
        if unknown:
            raise CannotProfile(f"{name}: no automatic probe in rank "
                                f"{', '.join(map(str, unknown))} (ranks probed: "
                                f"{', '.join(map(str, found))})")
        return tuple(sorted(set(ranks)))
    return tuple(found)


def take_profile(session_dir: Path, options: ProfileOptions,
                 progress: Callable[[str], None] = lambda _message: None) -> ProfileOutcome:
    """Ask the ranks for a profile of their next `options.steps` steps and wait until each
    asked rank wrote its trace or failed, the job ended, or `options.timeout_s` passed."""
    asked = check_profilable(session_dir, options.ranks)
    other = pending_request(session_dir)
    if other is not None:
        left_s = other["expires"] - time.time()
        raise CannotProfile(f"{session_dir.name}: profile {other.get('id')} is being taken; "
                            f"try again when it is done (within {left_s:.0f} s)")
    answers = ProfileAnswers(session_dir)  # before the request: its records come after
    request = post_request(session_dir, steps=options.steps, ranks=options.ranks,
                           memory=options.memory, device_trace=options.device_trace,
                           timeout_s=options.timeout_s)
    progress(f"asked rank{'s' if len(asked) > 1 else ''} {', '.join(map(str, asked))} for a "
             f"profile of their next {options.steps} steps (id {request.id})")
    told: set[tuple[int, str]] = set()
    try:
        deadline = request.posted + options.timeout_s
        while True:
            answers.poll()
            found = answers.of(request)
            for rank, answer in sorted(found.items()):
                if (rank, answer.state) not in told:
                    told.add((rank, answer.state))
                    progress(_said(answer))
            outcome = ProfileOutcome(session_dir, request, asked, found)
            if not outcome.silent or time.time() >= deadline:
                return outcome
            if not session_status(session_dir).running:
                time.sleep(POLL_S)  # the ranks' last records, written as they left
                answers.poll()
                return ProfileOutcome(session_dir, request, asked, answers.of(request))
            time.sleep(POLL_S)
    finally:
        withdraw(session_dir, request)


def _said(answer: RankAnswer) -> str:
    record = answer.ended or answer.started or {}
    steps = f"steps {record.get('first_step')}-{record.get('last_step')}"
    if answer.state == "started":
        return f"rank {answer.rank}: profiling {steps}"
    if answer.state == "done":
        return f"rank {answer.rank}: {steps} profiled, trace in {record.get('file')}"
    return f"rank {answer.rank}: profile failed ({record.get('error')})"
