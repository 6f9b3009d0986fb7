"""The supervisor's log follower on real captured training logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor.logfollow import LogFollower

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "telemetry"


def follow(tmp_path: Path, text: bytes, chunks: int = 1) -> SessionReader:
    """`text` written to the launcher log in `chunks` pieces, a poll after each."""
    size = len(text) // chunks + 1
    # Lines split across reads must come out whole.
    return follow_writes(tmp_path, [(1000.0 + i, text[i * size:(i + 1) * size])
                                    for i in range(chunks)])


def follow_writes(tmp_path: Path, writes: list[tuple[float, bytes]],
                  final_at: float | None = None) -> SessionReader:
    """Each (time, bytes) appended to the launcher log and polled at that time; then the
    job's exit at `final_at`."""
    session = tmp_path / "s"
    (session / "logs").mkdir(parents=True)
    write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
    writer = EventWriter(session / layout.EVENTS)
    follower = LogFollower(session, writer, StepLineParser.default(), parse_launcher=True)
    log = session / layout.LAUNCHER_LOG
    for t, text in writes:
        with open(log, "ab") as f:
            f.write(text)
        follower.poll(t)
    if final_at is not None:
        follower.poll(final_at, final=True)
    writer.close()
    return SessionReader(session, telemetry_history=None).load()


def test_nxd_progress_bar_running_totals_become_per_step_samples(tmp_path: Path) -> None:
    text = (FIXTURES / "trainlog_nxdt_llama3-70B_progressbar_docs.txt").read_bytes()
    steps = follow(tmp_path, text, chunks=7).steps()
    # The bar is drawn twice for global_step 2: recorded once.
    assert list(steps["step"]) == [1, 2, 3]
    assert steps["samples"].isna().iloc[0]  # no earlier total to difference against
    assert list(steps["samples"].iloc[1:]) == [1024.0, 1024.0]
    assert list(steps["loss"]) == [6.7, 4.47, 3.35]
    assert list(steps["dt"]) == pytest.approx([321.89, 321.89, 320.22])


def test_compile_lines_and_rank_prefixes(tmp_path: Path) -> None:
    compile_log = (FIXTURES / "trainlog_torch-neuronx_mlp_trn1_first-run-compile_docs.txt")
    text = b"".join(b"[default1]:" + line + b"\n"
                    for line in compile_log.read_bytes().splitlines())
    text += b"[default0]:neurotui-runner step=1 rank=0 samples=16 loss=2.0 dt=0.5\n"
    text += b"[default1]:neurotui-runner step=1 samples=16 loss=2.1 dt=0.5\n"
    reader = follow(tmp_path, text)
    compiles = reader.frame("compile")
    assert list(compiles["what"]) == ["cache_miss", "compiled", "compiled", "cache_miss",
                                      "compiled", "compiled"]
    assert set(compiles["rank"]) == {1}
    steps = reader.steps()
    assert sorted(steps["rank"]) == [0, 1] and set(steps["src"]) == {"log"}


def test_log_offsets_mark_complete_lines_every_few_seconds_and_at_the_end(
        tmp_path: Path) -> None:
    reader = follow_writes(tmp_path, [
        (1000.0, b"one\ntw"), (1000.5, b"o\n"), (1001.0, b"three\n"), (1002.0, b"four\nfi"),
        (1003.0, b""), (1004.5, b""), (1005.0, b"ve\n")], final_at=1005.2)
    marks = [(e["t"], e["files"]) for e in reader.events["log_offsets"]]
    name = layout.LAUNCHER_LOG
    # The partial "tw" and "fi" are not counted; at most one mark per 2 s; none when
    # nothing grew (1004.5); the job's exit marks the end at once.
    assert marks == [(1000.0, {name: 4}), (1002.0, {name: 19}), (1005.2, {name: 24})]
