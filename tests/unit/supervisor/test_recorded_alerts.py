"""The supervisor's own alerts: a stall judged from every step source it sees, recorded as it
starts and ends, and read back the same way by headless, the dashboard, replay and compare."""

from __future__ import annotations

import json
from pathlib import Path

from neurotui import recorded
from neurotui.defaults import DEFAULT_WARMUP_STEPS
from neurotui.session.writer import EventWriter
from neurotui.supervisor.alerting import AlertRecorder, Raised
from neurotui.supervisor.stallwatch import StallWatch


def steps(watch: StallWatch, rank: int, src: str, count: int, every: float,
          t0: float = 0.0) -> float:
    for i in range(1, count + 1):
        watch.step(rank, i, t0 + i * every, src)
    return t0 + count * every


def test_a_rank_is_stalled_after_ten_medians_and_ten_seconds(tmp_path: Path) -> None:
    watch = StallWatch(tmp_path)
    last = steps(watch, 0, "log", 30, 0.5)
    steps(watch, 1, "log", 30, 0.5)
    assert watch.stalled(last + 4.9) == {}  # 10 x 0.5 s is not yet 10 s
    got = watch.stalled(last + 10.5)
    assert set(got) == {0, 1}
    silence, median, last_step = got[0]
    assert silence == 10.5 and median == 0.5 and last_step == 30
    watch.compiled(None, last + 10.0)  # a compile (of no rank) restarts every clock
    assert watch.stalled(last + 10.5) == {}


def test_a_ranks_own_compile_restarts_its_clock_only(tmp_path: Path) -> None:
    watch = StallWatch(tmp_path)
    last = steps(watch, 0, "auto", 30, 0.5)
    steps(watch, 1, "auto", 30, 0.5)
    watch.compiled(1, last + 5.0)  # rank 1 compiles a new graph after its last step
    assert set(watch.stalled(last + 12.0)) == {0}
    got = watch.stalled(last + 15.5)
    assert set(got) == {0, 1}
    assert got[0][0] == 15.5 and got[1][0] == 10.5  # rank 1: silent since its compile


def test_the_best_source_of_a_rank_is_judged(tmp_path: Path) -> None:
    watch = StallWatch(tmp_path)
    last = steps(watch, 0, "probe", 30, 0.2)
    steps(watch, 0, "log", 5, 0.2)  # a log that stopped long ago does not make a stall
    assert watch.stalled(last + 5) == {}
    steps(watch, 1, "log", 30, 0.2)
    steps(watch, 1, "auto", 5, 0.2)  # the automatic probe's steps win over the log's
    assert set(watch.stalled(last + 6)) == {1}


def test_probe_files_are_read_on_and_other_attempts_ignored(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    empty = {"samples": None, "loss": None, "dt": None, "phases": None}  # (as written)
    lines = [{"t": float(i), "kind": "step", "rank": 2, "step": i, **empty, "src": "auto",
              "attempt": 1} for i in range(1, 21)]
    lines.append({"t": 99.0, "kind": "step", "rank": 2, "step": 50, **empty, "src": "auto",
                  "attempt": 0})
    (probe / "auto-rank-2.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in lines) + "garbage\n{\"kind\": \"step\"")
    watch = StallWatch(tmp_path, attempt=1)
    watch.read_probes()
    assert set(watch.stalled(20 + 10.5)) == {2}
    assert watch.stalled(20 + 10.5)[2][2] == 20


def test_alerts_are_written_as_they_start_change_and_end(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path / "events.jsonl")
    alerts = AlertRecorder(writer)
    one = Raised("error", "no progress on rank(s) 1", ("rank 1: no step for 12 s",))
    alerts.update("stalled", one, 1.0)
    alerts.update("stalled", Raised("error", one.title, ("rank 1: no step for 13 s",)), 2.0)
    alerts.update("stalled", Raised("error", "no progress on rank(s) 1, 2", ()), 3.0)
    alerts.update("stalled", None, 4.0)
    alerts.update("disk-low", Raised("warning", "sessions disk nearly full", ()), 5.0)
    alerts.end_all(6.0, why="the job completed")
    writer.close()
    got = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(r["t"], r["key"], r["state"]) for r in got] == [
        (1.0, "stalled", "start"), (3.0, "stalled", "start"), (4.0, "stalled", "end"),
        (5.0, "disk-low", "start"), (6.0, "disk-low", "end")]
    assert recorded.alert_episodes(got) == {"stalled": 1, "disk-low": 1}
    assert set(recorded.active_alerts(got, 3.5)) == {"stalled"}
    assert recorded.active_alerts(got, 3.5)["stalled"]["title"] == "no progress on rank(s) 1, 2"
    assert recorded.active_alerts(got) == {}
    assert recorded.notice(got[0]) == ("neurotui: alert (error): no progress on rank(s) 1: "
                                       "rank 1: no step for 12 s")
    assert recorded.notice(got[-1]) == "neurotui: alert over: disk-low (the job completed)"


def test_losses_are_summed_by_what() -> None:
    lost = [{"t": 9, "kind": "lost", "what": "events", "count": 3, "from": 1, "to": 2,
             "error": "No space left on device"},
            {"t": 9, "kind": "lost", "what": "log", "bytes": 1000, "from": 1, "to": 3,
             "error": "No space left on device"},
            {"t": 9, "kind": "lost", "what": "probe steps", "count": 7, "from": 2, "to": 3}]
    assert recorded.lost_totals(lost) == {"events": 3, "log bytes": 1000, "probe steps": 7}
    text = recorded.lost_text(lost)
    assert text is not None
    assert text.startswith("lost 3 events, 1,000 log bytes, 7 probe steps "
                           "(No space left on device, ")
    assert recorded.lost_text([]) is None


def test_probe_files_read_as_they_grow_give_the_steps_of_their_valid_lines(
        tmp_path: Path) -> None:
    """Each read's step lines are decoded together; a line being written waits for its end,
    and a read holding a line that is not one step record takes the others line by line."""
    probe = tmp_path / "probe"
    probe.mkdir()
    path = probe / "auto-rank-3.jsonl"

    def record(step: int) -> str:
        return json.dumps({"t": step * step / 10, "kind": "step", "rank": 3, "step": step,
                           "src": "auto", "attempt": 0, "phases": {"step": 0.1}})

    whole = [record(i) for i in range(1, 9)]
    pieces = [
        "".join(f"{line}\n" for line in whole[:4]),  # all steps: one decode
        whole[4][:20],  # a line cut by the writer
        whole[4][20:] + "\n" + whole[5] + "\n"
        + '{"t": 1, "kind": "probe_info", "what": "step"}\n'  # says "step", is no step
        + f"{record(90)}, {record(91)}\n"  # two records on one line: garbage
        + whole[6] + "\n",
        "\n" + whole[7] + "\n",
    ]
    watch = StallWatch(tmp_path)
    for piece in pieces:
        with path.open("a") as f:
            f.write(piece)
        watch.read_probes()
    expected = StallWatch(tmp_path / "none")
    for step in range(1, 9):
        expected.step(3, step, step * step / 10, "auto")
    got, want = watch._tracks[(3, "auto")], expected._tracks[(3, "auto")]
    assert (got.last_step, got.last_t, list(got.times)) == \
        (want.last_step, want.last_t, list(want.times))


def test_a_ranks_steps_told_in_runs_keep_the_times_between_its_advancing_steps(
        tmp_path: Path) -> None:
    # rank_steps (a run of a log's lines, StepRecorder.record; of a probe file's) against the
    # rule written out: a step's time since the one before is kept when both the step and
    # the time advanced, warm-up's times dropped at the first step past it; with steps drawn
    # again, going back (a restart's), and times that do not advance, in runs of any length;
    # and runs where each step and time advance, as most runs of a log's lines do.
    import random

    rng = random.Random(7)
    watch = StallWatch(tmp_path)
    seen: dict[int, list[tuple[int, float]]] = {}
    t, step = 100.0, 0
    for _ in range(40):
        rank = rng.randrange(3)
        run_steps, run_times = [], []
        clean = rng.random() < 0.5  # each step and time past the one before (most runs)
        for _ in range(rng.randrange(1, 12)):
            step = max(0, step + rng.choice([1, 2] if clean else [1, 1, 1, 2, 0, -3]))
            t += rng.choice([0.1, 0.25] if clean else [0.1, 0.1, 0.0, 0.25, -0.05])
            run_steps.append(step)
            run_times.append(t)
            seen.setdefault(rank, []).append((step, t))
        watch.rank_steps(rank, run_steps, run_times, "log")
    assert step > 20  # past warm-up (defaults.DEFAULT_WARMUP_STEPS)

    def by_the_rule(steps: list[tuple[int, float]]) -> tuple[float, int, list[float], bool]:
        (last_step, last_t), times, past = steps[0], [], False
        for step, t in steps[1:]:
            if step > last_step and t > last_t:
                if step > DEFAULT_WARMUP_STEPS and not past:
                    past, times = True, []
                times.append((t - last_t) / (step - last_step))
            last_t, last_step = max(last_t, t), max(last_step, step)
        return last_t, last_step, times, past

    tracks = {rank: (tr.last_t, tr.last_step, list(tr.times), tr.past_warmup)
              for (rank, _), tr in watch._tracks.items()}
    assert tracks == {rank: by_the_rule(steps) for rank, steps in seen.items()}
    assert all(past for *_, past in tracks.values())
