"""`neurotui import`: runs made without neurotui, through the real program.

TensorBoard scalars written by torch's own SummaryWriter with explicit wall times; a
torch-neuronx log re-timed from the real capture (tests/fixtures/steplogs/SOURCES.md); a
torchrun log folder from a real torchrun run; a CloudWatch export in the API's own shape; then
replay, compare against a recorded run, and bad input."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, meta, only_session, run_cli

CAPTURE = REPO / "tests" / "fixtures" / "steplogs" / "torch-neuronx_bert_torchx-eks_LOG_docs.txt"
SCRIPTS = REPO / "tests" / "scripts"
ASCTIME = "%a %b %d %H:%M:%S %Y"


def tensorboard_run(folder: Path, steps: int = 200, every_s: float = 0.25,
                    start: float = 1_700_000_000.0) -> None:
    """Scalars as a training loop logs them, at the wall times given (not the clock's)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(1, steps + 1):
        wall = start + step * every_s
        writer.add_scalar("train/loss", 4.0 / step, step, walltime=wall)
        writer.add_scalar("train/learning_rate", 3e-4, step, walltime=wall)
        writer.add_scalar("eval/loss", 5.0 / step, step, walltime=wall)
    writer.close()


def retimed_neuronx_log(path: Path, steps: int = 200, every_s: float = 1.5) -> None:
    """The real torch-neuronx capture's lines, one step every `every_s` seconds, each line's
    date printed to the second as the capture prints it (and its step number renumbered)."""
    capture = CAPTURE.read_text().splitlines()
    start = time.mktime(time.strptime("Wed Dec 21 00:51:01 2022", ASCTIME))
    lines = []
    for i in range(steps):
        stamp = time.strftime(ASCTIME, time.localtime(int(start + every_s * i)))
        line = re.sub(r"LOG \w{3} \w{3} \d\d \d\d:\d\d:\d\d \d{4}", f"LOG {stamp}",
                      capture[i % len(capture)])
        lines.append(re.sub(r"\(0, \d+\)", f"(0, {i + 1})", line))
    path.write_text("\n".join(lines) + "\n")


def compare_json(sessions: Path, *names: str) -> list[dict]:
    result = run_cli(sessions, "compare", *names, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def imported(sessions: Path, *args: str) -> Path:
    result = run_cli(sessions, "import", *args)
    assert result.returncode == 0, result.stderr + result.stdout
    name = re.search(r"imported (\S+)", result.stdout).group(1)  # type: ignore[union-attr]
    return sessions / name


def test_tensorboard_scalars_give_step_time_rate_and_samples_per_dollar(
        sessions: Path, tmp_path: Path) -> None:
    tensorboard_run(tmp_path / "tb")
    session = imported(sessions, str(tmp_path / "tb"), "--samples-per-step", "64",
                       "--instance-type", "trn1.2xlarge")
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] == pytest.approx(0.25, rel=0.02)
    assert row["samples_per_s"] == pytest.approx(256, rel=0.02)
    assert row["samples_per_dollar_steady"] > 0 and row["usd_per_hour"] > 0
    assert row["times_from"].startswith("imported (tensorboard): times from tensorboard wall")
    recorded = meta(session)
    assert recorded["imported"]["tags"]["loss"] == "train/loss"  # not eval/loss
    assert recorded["imported"]["times"] == "tensorboard wall time"
    assert recorded["instance"]["type"] == "trn1.2xlarge" and recorded["price"]["as_of"]
    steps = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    assert len(steps) == 200 and steps[0]["loss"] == 4.0 and steps[0]["lr"] == \
        pytest.approx(3e-4)
    assert not [p for p in sessions.iterdir() if p.name.startswith(".import-")]


def test_a_log_dated_to_the_second_gives_its_step_time(sessions: Path, tmp_path: Path) -> None:
    log = tmp_path / "bert.log"
    retimed_neuronx_log(log)
    session = imported(sessions, str(log), "--instance-type", "trn1.32xlarge")
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] == pytest.approx(1.5, rel=0.05)
    info = meta(session)["imported"]
    assert (info["times"], info["resolution_s"], info["kind"]) == ("printed date-time", 1.0,
                                                                   "log")
    assert info["span_steps"] >= 30  # 1 s over at least 50 s of steps
    assert (session / "logs" / "rank-0.log").read_bytes() == log.read_bytes()
    listed = run_cli(sessions, "ls").stdout
    assert "[imported, times: printed date-time]" in listed


def test_a_log_without_dates_is_timed_by_its_printed_step_time(sessions: Path,
                                                                 tmp_path: Path) -> None:
    log = tmp_path / "plain.log"
    log.write_text("".join(f"step {i} loss {3 / i:.3f} step_time 0.5s\n" for i in range(1, 61)))
    session = imported(sessions, str(log), "--started", "2024-05-01T12:00:00+00:00")
    info = meta(session)
    assert info["imported"]["times"] == "printed step time"
    assert info["started_at"] == pytest.approx(1714564800.0 + 0.5)
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] == pytest.approx(0.5)


def test_a_log_with_no_times_counts_steps_and_invents_no_rate(sessions: Path,
                                                               tmp_path: Path) -> None:
    log = tmp_path / "counted.log"
    log.write_text("".join(f"step {i} loss {3 / i:.3f}\n" for i in range(1, 41)))
    session = imported(sessions, str(log), "--samples-per-step", "8")
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] is None and row["samples_per_s"] is None
    assert "no times (steps counted, never timed)" in row["times_from"]
    assert meta(session)["summary"]["steps"] == 40


def test_cloudwatch_export_takes_each_event_time(sessions: Path, tmp_path: Path) -> None:
    """`aws logs filter-log-events` output (its fields as the CloudWatch Logs API reference's
    FilteredLogEvent gives them), the messages the real capture's lines."""
    capture = CAPTURE.read_text().splitlines()
    start_ms = 1_714_564_800_000
    events = [{"logStreamName": "algo-1-1714564790", "timestamp": start_ms + i * 750,
               "message": re.sub(r"\(0, \d+\)", f"(0, {i + 1})",
                                 capture[i % 3].removeprefix("[0]:")) + "\n",
               "ingestionTime": start_ms + i * 750 + 180, "eventId": str(36000000 + i)}
              for i in range(80)]
    export = tmp_path / "training-job.json"
    export.write_text(json.dumps({"events": events, "searchedLogStreams": []}))
    session = imported(sessions, str(export))
    info = meta(session)["imported"]
    assert (info["kind"], info["times"], info["resolution_s"]) == (
        "cloudwatch", "cloudwatch timestamp", 0.001)
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] == pytest.approx(0.75)


@pytest.mark.slow
def test_torchrun_log_folder_one_rank_per_file(sessions: Path, tmp_path: Path) -> None:
    import subprocess

    logs = tmp_path / "torchrun-logs"
    truth = tmp_path / "truth"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
         "--log-dir", str(logs), "--redirects", "3", str(SCRIPTS / "neuronx_lines.py")],
        env={"PATH": "/usr/bin:/bin", "STEP_S": "0.25", "STEPS": "60",
             "TRUTH_FILE": str(truth)}, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(logs.rglob("attempt_0/1/stdout.log"))
    session = imported(sessions, str(logs), "--samples-per-step", "32")
    steps = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()
             if '"step"' in line]
    assert sorted({s["rank"] for s in steps}) == [0, 1]
    assert sum(1 for s in steps if s["rank"] == 1) == 60
    info = meta(session)["imported"]
    assert info["kind"] == "torchrun" and info["times"] == "printed date-time"
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] == pytest.approx(0.25, rel=0.1)
    assert row["cores_used"] == 2


@pytest.mark.slow
def test_compare_imported_against_recorded(sessions: Path, tmp_path: Path) -> None:
    recorded = run_cli(sessions, "run", "--headless", "--no-auto-probe", "--interval", "5",
                       "--instance-type", "inf2.xlarge", "--samples-per-step", "16", "--",
                       sys.executable, str(SCRIPTS / "neuronx_lines.py"),
                       env={"STEP_S": "0.1", "STEPS": "40", "TRUTH_FILE": str(tmp_path / "t")})
    assert recorded.returncode == 0, recorded.stderr
    live = only_session(sessions)
    tensorboard_run(tmp_path / "tb")
    session = imported(sessions, str(tmp_path / "tb"), "--samples-per-step", "64",
                       "--instance-type", "trn1.2xlarge")
    table = run_cli(sessions, "compare", live.name, session.name)
    assert table.returncode == 0, table.stderr
    assert f"{live.name}: recorded live" in table.stdout
    assert f"{session.name}: imported (tensorboard): times from tensorboard wall time" in \
        table.stdout
    rows = compare_json(sessions, live.name, session.name)
    assert [r["imported"] for r in rows] == [False, True]
    assert all(r["samples_per_dollar_steady"] for r in rows)
    assert rows[1]["relative_price_performance"] > 0


async def test_replay_of_an_imported_session(sessions: Path, tmp_path: Path) -> None:
    from neurotui.ui.replay import ReplayApp
    from tests.ui.conftest import screen_text, settle

    log = tmp_path / "bert.log"
    retimed_neuronx_log(log, steps=60)
    session = imported(sessions, str(log), "--instance-type", "trn1.32xlarge")
    app = ReplayApp(session, paused=True, interval_s=3600.0, ascii_mode=False)
    async with app.run_test(size=(110, 32)) as pilot:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        text = screen_text(app)
        assert "step 60" in text and "ENDED" in text
        assert "step 1.50s median" in text  # the printed dates' step time, over spans


@pytest.mark.parametrize(("what", "said"), [
    ("missing", "no such file or folder"),
    ("empty", "an empty log"),
    ("no steps", "no step line recognised"),
    ("folder", "nothing recognised in this folder"),
    ("bad json", "no event holding both `timestamp` and `message`"),
    ("fifo", "not a regular file"),
])
def test_bad_input_says_why_and_leaves_no_session(sessions: Path, tmp_path: Path, what: str,
                                                  said: str) -> None:
    target = tmp_path / "input"
    if what == "empty":
        target.write_text("\n\n")
    elif what == "no steps":
        target.write_text("Downloading model...\nloading checkpoint shards 100%\n")
    elif what == "folder":
        target.mkdir()
        (target / "a.log").write_text("x\n")
        (target / "b.log").write_text("y\n")
    elif what == "bad json":
        target.write_text(json.dumps({"events": [{"message": "step 1 loss 2"}]}))
    elif what == "fifo":  # a pipe in a log's place: refused without waiting on it
        os.mkfifo(target)
    result = run_cli(sessions, "import", str(target))
    assert result.returncode == 2
    assert said in result.stderr and "nothing imported" in result.stderr
    if what == "no steps":
        assert "neurotui patterns FILE" in result.stderr
    assert list(sessions.iterdir()) == []


def test_the_same_run_is_not_imported_twice_unless_forced(sessions: Path,
                                                           tmp_path: Path) -> None:
    log = tmp_path / "bert.log"
    retimed_neuronx_log(log, steps=30)
    first = imported(sessions, str(log))
    again = run_cli(sessions, "import", str(log))
    assert again.returncode == 2 and f"already imported as {first.name}" in again.stderr
    second = imported(sessions, str(log), "--force")
    assert second != first and meta(second)["id"] == second.name


def test_without_tensorboard_the_message_names_the_extra(sessions: Path, tmp_path: Path) -> None:
    import subprocess

    tensorboard_run(tmp_path / "tb", steps=5)
    # The real program, in a Python where TensorBoard cannot be imported.
    code = ("import sys; sys.modules['tensorboard'] = None; from neurotui.cli import main; "
            f"sys.exit(main(['--sessions-dir', {str(sessions)!r}, 'import', "
            f"{str(tmp_path / 'tb')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "pip install 'neurotui[import]'" in done.stderr
    assert list(sessions.iterdir()) == []


def test_a_diverged_loss_is_kept_as_nan(sessions: Path, tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in range(1, 6):
        writer.add_scalar("loss", float("nan") if step == 3 else 1.0, step, walltime=10.0 + step)
    writer.close()
    session = imported(sessions, str(tmp_path / "tb"))
    steps = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5]
    assert steps[2]["loss"] is None and steps[2]["nonfinite"] == {"loss": "nan"}
    assert steps[3]["loss"] == 1.0 and "nonfinite" not in steps[3]


def test_logging_stamps_to_the_millisecond_and_ranks_after_them(sessions: Path,
                                                                 tmp_path: Path) -> None:
    """Python logging's dates (read the short way) and a launcher's rank after them: each
    rank's steps, at its stamps."""
    log = tmp_path / "train.log"
    lines = []
    for step in range(1, 61):
        for rank in (0, 1):
            at = time.localtime(1_714_564_800 + step // 4)
            lines.append(f"{time.strftime('%Y-%m-%d %H:%M:%S', at)},{(step % 4) * 250:03d} "
                         f"[rank{rank}]: step {step} loss {2 / step:.4f}")
    log.write_text("\n".join(lines) + "\n")
    session = imported(sessions, str(log), "--samples-per-step", "32")
    steps = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    assert [sum(s["rank"] == r for s in steps) for r in (0, 1)] == [60, 60]
    assert meta(session)["imported"]["resolution_s"] == 0.001
    [row] = compare_json(sessions, session.name)
    assert row["step_time_median_s"] == pytest.approx(0.25)
    assert row["samples_per_s"] == pytest.approx(128)


def test_a_torchrun_folder_with_a_restart_and_both_streams(sessions: Path,
                                                            tmp_path: Path) -> None:
    """torchrun's layout: a rank's step lines in both stdout and stderr (a logger on both)
    are its steps once; a restart's attempt_1 is kept as attempt 1."""
    def lines(first: int, last: int, start: float) -> str:
        return "".join(
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(start + i // 2))},"
            f"{(i % 2) * 500:03d} step {i} loss {1 / i:.4f}\n" for i in range(first, last + 1))

    run = tmp_path / "logs" / "4b1c_x9"
    for attempt, (first, last, start) in enumerate([(1, 40, 1.7e9), (31, 80, 1.7e9 + 100)]):
        for rank in (0, 1):
            folder = run / f"attempt_{attempt}" / str(rank)
            folder.mkdir(parents=True)
            (folder / "stdout.log").write_text(lines(first, last, start))
            (folder / "stderr.log").write_text(lines(first, last, start) if rank == 0 else "")
    session = imported(sessions, str(tmp_path / "logs"))
    steps = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    counted = {(s["rank"], s["attempt"]): 0 for s in steps}
    for s in steps:
        counted[s["rank"], s["attempt"]] += 1
    assert counted == {(0, 0): 40, (1, 0): 40, (0, 1): 50, (1, 1): 50}
    assert meta(session)["exit"]["attempts"] == 2


def test_a_sessions_folder_that_cannot_be_written_says_so(tmp_path: Path) -> None:
    log = tmp_path / "bert.log"
    retimed_neuronx_log(log, steps=30)
    not_a_folder = tmp_path / "blocked"
    not_a_folder.write_text("a file where the sessions folder should be\n")
    result = run_cli(not_a_folder, "import", str(log))
    assert result.returncode == 2 and "nothing imported" in result.stderr
    assert "Traceback" not in result.stderr


def test_several_logs_are_the_ranks_of_one_run(sessions: Path, tmp_path: Path) -> None:
    for rank in (0, 1, 2):
        (tmp_path / f"worker-rank{rank}.log").write_text("".join(
            f"2024-05-01 12:00:{i:02d},{rank * 100:03d} step {i} loss {1 / i:.3f}\n"
            for i in range(1, 41)))
    (tmp_path / "notes.txt").write_text("downloading dataset\n")
    result = run_cli(sessions, "import", *(str(tmp_path / f"worker-rank{r}.log")
                                           for r in (2, 0, 1)), str(tmp_path / "notes.txt"))
    assert result.returncode == 0, result.stderr
    assert "120 steps of 3 ranks from 3 logs" in result.stdout
    assert "1 log(s) with no step line" in result.stdout and "notes.txt" in result.stdout
    [row] = compare_json(sessions, only_session(sessions).name)
    assert row["cores_used"] == 3 and row["step_time_median_s"] == pytest.approx(1.0)
