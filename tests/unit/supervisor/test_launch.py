"""What the supervisor runs: the user's torchrun command with log capture and a free port."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui.supervisor.launch import _free_port, job_argv

LOGS_ROOT = Path("/s/logs")
LOGS = ["--log-dir", "/s/logs/torchrun", "--redirects", "3"]  # no --tee (launch.py)


def argv(*user: str) -> list[str]:
    return job_argv(list(user), LOGS_ROOT, free_port=lambda: 40123)


def test_torchrun_gets_log_capture_and_a_free_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PET_MASTER_PORT", raising=False)
    assert argv("torchrun", "--nproc_per_node=2", "train.py", "--lr", "1") == [
        "torchrun", *LOGS, "--master-port", "40123", "--nproc_per_node=2", "train.py",
        "--lr", "1"]
    assert argv("python3", "-m", "torch.distributed.run", "train.py")[3:] == [
        *LOGS, "--master-port", "40123", "train.py"]


@pytest.mark.parametrize("chosen", [["--master-port=29600"], ["--master_port", "29600"],
                                    ["--standalone"], ["--rdzv-endpoint=host:1"],
                                    ["--nnodes=2"]])
def test_a_rendezvous_the_user_chose_is_left_alone(chosen: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PET_MASTER_PORT", raising=False)
    assert argv("torchrun", *chosen, "train.py") == ["torchrun", *LOGS, *chosen, "train.py"]


def test_torchruns_own_environment_variable_is_respected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PET_MASTER_PORT", "29700")
    assert "--master-port" not in argv("torchrun", "train.py")


def test_user_log_flags_and_other_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PET_MASTER_PORT", raising=False)
    assert argv("torchrun", "--log-dir", "/mine", "train.py") == [
        "torchrun", "--master-port", "40123", "--log-dir", "/mine", "train.py"]
    assert argv("python", "train.py") == ["python", "train.py"]


def test_the_free_port_is_free() -> None:
    import socket

    port = _free_port()
    with socket.socket() as s:
        s.bind(("", port))  # raises if something holds it
