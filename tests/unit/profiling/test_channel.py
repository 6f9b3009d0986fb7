"""The profile request channel: the request file the command leaves, and a real Python
process under the automatic probe taking it at its next optimizer step, writing its trace and
its `profile` records, and going on training whatever happens to the capture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from neurotui import autoprobe
from neurotui.profiling.channel import (
    ProfileAnswers,
    ProfileRequest,
    pending_request,
    post_request,
    request_path,
    withdraw,
)
from neurotui.profiling.trace import load_trace, operator_times
from neurotui.session import layout

pytest.importorskip("torch")

# Trains until told to stop (a file), one optimizer step every few milliseconds.
TRAINING = """
import os, time, torch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
deadline = time.time() + 90
while not os.path.exists("stop") and time.time() < deadline:
    loss = model(torch.randn(16, 32)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.005)
"""


class Job:
    def __init__(self, tmp_path: Path, rank: int = 0) -> None:
        self.dir = tmp_path
        self.session = tmp_path / "session"
        (self.session / layout.PROBE_DIR).mkdir(parents=True)
        base = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
        env = autoprobe.job_env({**base, "NEUROTUI_SESSION": str(self.session),
                                 "RANK": str(rank)}, True)
        self.proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(TRAINING)],
                                     env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.probe_file = self.session / layout.PROBE_DIR / f"auto-rank-{rank}.jsonl"
        wait_until(self.probe_file.exists, "the probe's first step")

    def finish(self) -> list[dict]:
        (self.dir / "stop").touch()
        _out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return [json.loads(line) for line in self.probe_file.read_text().splitlines()]


def wait_until(predicate, what: str, timeout: float = 60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def leave_request(session: Path, **fields) -> None:
    """A request written by hand (the probe's view of the file), renamed into place."""
    folder = session / "profiles"
    folder.mkdir(exist_ok=True)
    (folder / ".tmp").write_text(json.dumps({"steps": 3, "ranks": None,
                                             "expires": time.time() + 60, **fields}))
    os.replace(folder / ".tmp", folder / "request.json")


def test_a_rank_profiles_its_next_steps_and_trains_on(tmp_path: Path) -> None:
    job = Job(tmp_path)
    try:
        answers = ProfileAnswers(job.session)
        request = post_request(job.session, steps=3, ranks=None, memory=False,
                               device_trace=False, timeout_s=60)
        ended = wait_until(lambda: (answers.poll(), answers.of(request).get(0))[1]
                           and answers.of(request)[0].ended, "the rank's trace")
        wait_until(lambda: f'"step":{ended["last_step"] + 6},' in job.probe_file.read_text(),
                   "steps after the capture")
    finally:
        records = job.finish()
    assert ended["what"] == "done", ended
    assert ended["last_step"] - ended["first_step"] == 2
    trace = load_trace(job.session / ended["file"])
    names = {op.name for op in operator_times(trace["traceEvents"])}
    assert {"aten::addmm", "aten::relu"} <= names, sorted(names)
    started = [r for r in records if r["kind"] == "profile" and r["what"] == "started"]
    assert len(started) == 1 and started[0]["activities"] == ["CPU"]
    # Steps recorded on both sides of the capture, numbered on without a gap.
    steps = [r["step"] for r in records if r["kind"] == "step"]
    assert steps == list(range(1, len(steps) + 1))
    assert steps[-1] > ended["last_step"] + 5
    # Taken once: the request file's next look finds the same file and leaves it.
    assert sum(r["kind"] == "profile" for r in records) == 2


def test_a_failed_capture_is_recorded_and_training_goes_on(tmp_path: Path) -> None:
    job = Job(tmp_path)
    try:
        (job.session / "profiles").mkdir()
        (job.session / "profiles" / "blocked").write_text("a file where the folder goes")
        leave_request(job.session, id="blocked")
        probe_file = job.probe_file
        failed = wait_until(lambda: [r for r in map(json.loads, probe_file.read_text()
                                                    .splitlines()) if r["kind"] == "profile"],
                            "the failed record")
        steps_then = sum(1 for _ in probe_file.open())
        wait_until(lambda: sum(1 for _ in probe_file.open()) > steps_then + 20,
                   "steps after the failure")
    finally:
        records = job.finish()
    assert failed[0]["what"] == "failed" and "FileExistsError" in failed[0]["error"]
    assert failed[0]["id"] == "blocked" and failed[0]["rank"] == 0
    assert [r["what"] for r in records if r["kind"] == "profile"] == ["failed"]


def test_requests_for_other_ranks_expired_or_malformed_are_left(tmp_path: Path) -> None:
    job = Job(tmp_path, rank=2)
    try:
        for fields in ({"id": "others", "ranks": [0, 1]},
                       {"id": "expired", "expires": time.time() - 1},
                       {"id": "../escape"},
                       {"id": "toomany", "steps": 10**6}):
            leave_request(job.session, **fields)
            time.sleep(0.8)  # longer than the probe's half second between looks
        leave_request(job.session, id="mine", ranks=[2], steps=2)
        wait_until(lambda: b'"done"' in job.probe_file.read_bytes(), "the rank's own request")
    finally:
        records = job.finish()
    taken = {r["id"] for r in records if r["kind"] == "profile"}
    assert taken == {"mine"}
    assert (job.session / "profiles" / "mine" / "rank-2.json.gz").is_file()
    assert not (job.session / "escape").exists()


def test_the_request_file_is_written_whole_and_withdrawn_only_by_its_sender(
        tmp_path: Path) -> None:
    first = post_request(tmp_path, steps=5, ranks=(0, 3), memory=True, device_trace=False,
                         timeout_s=30)
    written = json.loads(request_path(tmp_path).read_text())
    assert written["ranks"] == [0, 3] and written["steps"] == 5 and written["memory"] is True
    assert written["id"] == first.id and written["expires"] == pytest.approx(first.expires)
    assert [p.name for p in (tmp_path / "profiles").iterdir()] == ["request.json"]
    assert pending_request(tmp_path)["id"] == first.id
    other = ProfileRequest("someoneelse", 5, None, False, False, 0.0, 0.0)
    withdraw(tmp_path, other)
    assert request_path(tmp_path).exists()
    withdraw(tmp_path, first)
    assert not request_path(tmp_path).exists() and pending_request(tmp_path) is None
    post_request(tmp_path, steps=1, ranks=None, memory=False, device_trace=False,
                 timeout_s=-1)
    assert pending_request(tmp_path) is None  # expired: no one waits on it
    with pytest.raises(ValueError):
        post_request(tmp_path, steps=0, ranks=None, memory=False, device_trace=False,
                     timeout_s=30)


def test_answers_are_read_from_where_the_files_ended_and_half_lines_wait(
        tmp_path: Path) -> None:
    probe = tmp_path / layout.PROBE_DIR
    probe.mkdir()
    rank0 = probe / "auto-rank-0.jsonl"
    old = {"t": 1.0, "kind": "profile", "what": "done", "id": "r1", "rank": 0,
           "file": "profiles/r1/rank-0.json.gz"}
    rank0.write_text(json.dumps(old) + "\n")
    answers = ProfileAnswers(tmp_path)
    request = ProfileRequest("r1", 5, None, False, False, 0.0, 0.0)
    answers.poll()
    assert answers.of(request) == {}  # written before the answers were awaited
    started = json.dumps({**old, "what": "started", "t": 2.0})
    with rank0.open("a") as f:
        f.write('{"t": 2.0, "kind": "step", "rank": 0, "step": 1}\n' + started[:20])
    (probe / "auto-rank-1.jsonl").write_text(json.dumps({**old, "rank": 1}) + "\n")
    answers.poll()
    assert {rank: a.state for rank, a in answers.of(request).items()} == {1: "done"}
    with rank0.open("a") as f:
        f.write(started[20:] + "\n")
    answers.poll()
    assert {rank: a.state for rank, a in answers.of(request).items()} == {0: "started",
                                                                          1: "done"}
