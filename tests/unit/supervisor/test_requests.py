"""Stop and restart requests left in a session folder (supervisor/requests.py): how a job of
many nodes is stopped from any node."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from neurotui.supervisor.requests import (
    REQUEST_FILE,
    RequestInbox,
    post_request,
    request_pending,
)


def test_a_request_is_taken_once_and_its_file_removed(tmp_path: Path) -> None:
    inbox = RequestInbox(tmp_path, since=time.time() - 1)
    assert inbox.take() is None
    request_id = post_request(tmp_path, "restart", by="cli")
    assert request_pending(tmp_path)
    request = inbox.take()
    assert request is not None and (request["cmd"], request["id"]) == ("restart", request_id)
    assert not request_pending(tmp_path)  # the sender's sign it was taken
    assert inbox.take() is None
    assert not list(tmp_path.iterdir())  # no temporary file left either


def test_a_request_from_before_the_supervisor_started_is_not_acted_on(tmp_path: Path) -> None:
    post_request(tmp_path, "stop", by="cli")
    assert RequestInbox(tmp_path, since=time.time() + 60).take() is None
    assert not request_pending(tmp_path)  # and not left for the next one either


@pytest.mark.parametrize("text", ["", "{half", "[]", json.dumps({"cmd": "rm -rf", "t": 1e12})])
def test_garbage_in_the_request_file_is_no_request(tmp_path: Path, text: str) -> None:
    (tmp_path / REQUEST_FILE).write_text(text)
    assert RequestInbox(tmp_path, since=0).take() is None


def test_only_stop_and_restart_can_be_asked(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        post_request(tmp_path, "exec", by="cli")
