"""`neurotui compare`: the reference study's figures, checked by hand, in every format.

trn1.2xlarge: 2 ranks x 16 samples at 0.1 s/step = 320 samples/s; at $1.34375/h that is
320 x 3600 / 1.34375 = 857,302 samples per dollar. inf2.xlarge at 0.1275 s/step: 250.98
samples/s at $0.7582/h = 1,191,677 samples per dollar, 1.39x trn1's.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

from neurotui import compare
from neurotui.compare import command as compare_command
from neurotui.session import layout
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

STARTED = 1000.0
FIRST = 1010.0  # 10 s of start-up and compile before the first step's work


def make_session(root: Path, name: str, *, instance: str | None, price: float | None,
                 dt: float, ranks: int = 2, batch: int = 16, steps: int = 50,
                 workers: int | None = None, exit: dict[str, Any] | None = None,
                 running: bool = False, phases: dict[str, float] | None = None,
                 **meta: Any) -> Path:
    d = root / name
    (d / layout.PROBE_DIR).mkdir(parents=True)
    end = FIRST + steps * dt
    command = ["torchrun", f"--nproc_per_node={ranks}", "train_vit.py", "--batch-size", "16"]
    if workers is not None:
        command += ["--workers", str(workers)]
    write_json_atomic(d / layout.META, {
        "format": FORMAT_VERSION, "id": name, "name": name, "user_command": command,
        "started_at": STARTED, "ended_at": None if running else end,
        "exit": None if running else (exit or {"code": 0, "signal": None,
                                               "reason": "completed", "attempts": 1}),
        "instance": {"type": instance, "source": "test", "region": "us-east-1"}
        if instance else None,
        "price": {"usd_per_hour": price, "source": "test", "as_of": "2026-07-20", "spot": False}
        if price else None, **meta})
    for r in range(ranks):
        layout.probe_path(d, r).write_text("".join(
            json.dumps({"t": FIRST + i * dt, "kind": "step", "rank": r, "step": i,
                        "samples": batch, "loss": 1.0, "dt": dt, "phases": phases,
                        "src": "probe", "attempt": 0}) + "\n" for i in range(1, steps + 1)))
    (d / layout.EVENTS).write_text(
        json.dumps({"t": STARTED + 1, "kind": "proc_start", "attempt": 0, "pid": 1, "pgid": 1,
                    "argv": command}) + "\n"
        + json.dumps({"t": STARTED + 2, "kind": "compile", "rank": None, "what": "compile",
                      "line": "neuronx-cc"}) + "\n")
    return d


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "sessions"
    make_session(r, "20260101-100000-trn1", instance="trn1.2xlarge", price=1.34375, dt=0.1,
                 workers=4)
    make_session(r, "20260101-110000-inf2", instance="inf2.xlarge", price=0.7582, dt=0.1275,
                 workers=2)
    make_session(r, "20260101-120000-laptop", instance=None, price=None, dt=0.05)
    return r


def cli(root: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="neurotui")
    compare_command.add_parser(parser.add_subparsers(dest="command"))
    code = compare_command.run(parser.parse_args(["compare", *argv]), root)
    out, err = capsys.readouterr()
    return code, out, err


def test_rows_hold_the_reference_study_figures(root: Path) -> None:
    trn1, inf2, laptop = compare.compare_rows(sorted(root.iterdir()))
    assert trn1["instance_type"] == "trn1.2xlarge" and trn1["accelerator"] == "1x Trainium"
    assert inf2["accelerator"] == "1x Inferentia2"
    assert trn1["cores_used"] == 2 and trn1["cores_available"] == 2
    assert trn1["global_batch"] == 32
    assert (trn1["workers"], inf2["workers"], laptop["workers"]) == (4, 2, None)
    assert trn1["time_to_first_step_s"] == pytest.approx(10.1)
    assert trn1["step_time_median_s"] == pytest.approx(0.1)
    assert trn1["step_time_p90_s"] == pytest.approx(0.1)
    assert trn1["samples_per_s"] == pytest.approx(320.0)
    assert trn1["usd_per_hour"] == 1.34375
    assert trn1["samples_per_dollar_steady"] == pytest.approx(857_302.3, abs=0.1)
    # All-in: 50 steps x 32 samples over the whole 15 s bill (compile included).
    assert trn1["samples_per_dollar_all_in"] == pytest.approx(1600 / (15 / 3600 * 1.34375))
    assert inf2["samples_per_s"] == pytest.approx(32 / 0.1275)
    assert inf2["samples_per_dollar_steady"] == pytest.approx(1_191_676.9, abs=0.1)
    assert trn1["relative_price_performance"] == 1.0 and trn1["baseline"]
    assert inf2["relative_price_performance"] == pytest.approx(1.39, abs=0.001)
    assert trn1["state"] == "completed"


def test_unknown_figures_are_missing_never_zero(root: Path) -> None:
    laptop = compare.compare_rows([root / "20260101-120000-laptop"])[0]
    assert laptop["samples_per_s"] == pytest.approx(640.0)
    for key in ("instance_type", "accelerator", "cores_available", "workers", "usd_per_hour",
                "samples_per_dollar_steady", "samples_per_dollar_all_in",
                "relative_price_performance"):
        assert laptop[key] is None, key


def test_a_session_without_steps(tmp_path: Path) -> None:
    d = make_session(tmp_path, "20260101-000000-empty", instance="trn1.2xlarge", price=1.34375,
                     dt=0.1, steps=0)
    row = compare.compare_rows([d])[0]
    for key in ("cores_used", "global_batch", "time_to_first_step_s", "step_time_median_s",
                "samples_per_s", "samples_per_dollar_steady", "samples_per_dollar_all_in",
                "relative_price_performance"):
        assert row[key] is None, key
    assert row["usd_per_hour"] == 1.34375


def test_table(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(root, "trn1", "inf2", "laptop", capsys=capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "STATE", "INSTANCE", "ACCELERATOR"]
    # No neuron sample: FLOPS UTIL and EXEC ERRORS unknown.
    assert lines[1].split() == [
        "20260101-100000-trn1", "completed", "trn1.2xlarge", "1x", "Trainium", "2/2", "32", "4",
        "10.1", "s", "8.1", "s", "0", "$0.003023", "100.0", "ms", "100.0", "ms", "320.0",
        "$1.34375", "857,302", "285,767", "1.00x", "n/a", "n/a", "n/a"]
    assert lines[2].split() == [
        "20260101-110000-inf2", "completed", "inf2.xlarge", "1x", "Inferentia2", "2/2", "32",
        "2", "10.1", "s", "8.1", "s", "0", "$0.001712", "127.5", "ms", "127.5", "ms", "251.0",
        "$0.7582", "1,191,677", "463,935", "1.39x", "n/a", "n/a", "n/a"]
    assert lines[3].split() == [
        "20260101-120000-laptop", "completed", "n/a", "n/a", "2", "32", "n/a", "10.0", "s",
        "8.0", "s", "0", "n/a",  # a compile line 2 s in, its end not printed: to the 1st step
        "50.0", "ms", "50.0", "ms", "640.0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"]
    assert "against 20260101-100000-trn1" in out


def test_alerts_and_losses_the_session_recorded_are_counted(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = make_session(root, "20260101-130000-stalled", instance=None, price=None, dt=0.1,
                     records_alerts=True)
    with open(d / layout.EVENTS, "a") as f:
        for t, state in ((1003.0, "start"), (1004.0, "end"), (1005.0, "start"),
                         (1005.5, "start"), (1006.0, "end")):
            f.write(json.dumps({"t": t, "kind": "alert", "key": "stalled", "state": state,
                                "severity": "error", "title": "no progress"}) + "\n")
        f.write(json.dumps({"t": 1007.0, "kind": "lost", "what": "events", "count": 12,
                            "from": 1005.0, "to": 1006.0, "error": "No space left on device"})
                + "\n")
    code, out, _ = cli(root, "stalled", "laptop", "--format", "json", capsys=capsys)
    assert code == 0
    stalled, laptop = json.loads(out)
    assert stalled["alerts"] == 2 and stalled["alerts_by_key"] == "stalled x2"
    assert stalled["lost"].startswith("lost 12 events (No space left on device, ")
    assert laptop["alerts"] is None and laptop["lost"] is None  # recorded before alerts were
    code, out, _ = cli(root, "stalled", capsys=capsys)
    assert "20260101-130000-stalled: alerts: stalled x2; lost 12 events" in out


def test_markdown(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(root, "trn1", "inf2", "laptop", "--format", "markdown", capsys=capsys)
    assert code == 0
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in out.splitlines() if line.startswith("|")]
    header, rule, trn1, inf2, laptop = rows
    assert header[0] == "session"
    assert header[-4:] == ["relative", "flops util", "exec errors", "alerts"]
    assert rule[0] == "---" and rule[-2] == "---:"
    cells = dict(zip(header, inf2, strict=True))
    assert cells["samples/$"] == "1,191,677" and cells["relative"] == "1.39x"
    assert cells["price/h"] == "$0.7582" and cells["step median"] == "127.5 ms"
    assert dict(zip(header, trn1, strict=True))["samples/s"] == "320.0"
    assert dict(zip(header, laptop, strict=True))["price/h"] == "n/a"
    assert "- RELATIVE: samples per dollar (steady state) against 20260101-100000-trn1" in out


def test_csv(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(root, "trn1", "inf2", "laptop", "--format", "csv", capsys=capsys)
    assert code == 0
    trn1, inf2, laptop = csv.DictReader(io.StringIO(out))
    assert float(trn1["samples_per_s"]) == pytest.approx(320.0)
    assert float(trn1["samples_per_dollar_steady"]) == pytest.approx(857_302.3, abs=0.1)
    assert float(inf2["samples_per_dollar_steady"]) == pytest.approx(1_191_676.9, abs=0.1)
    assert float(inf2["relative_price_performance"]) == pytest.approx(1.39, abs=0.001)
    assert float(inf2["step_time_median_s"]) == pytest.approx(0.1275)
    assert (trn1["cores_used"], trn1["global_batch"], trn1["workers"]) == ("2", "32", "4")
    assert trn1["baseline"] == "True" and inf2["baseline"] == "False"
    for key in ("usd_per_hour", "samples_per_dollar_steady", "relative_price_performance",
                "workers", "instance_type"):
        assert laptop[key] == "", key  # missing: empty, not 0


def test_a_column_per_step_phase(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each phase the runs reported: its median over the steady steps (ms), in the last columns; a
    run that reported none shows n/a (never a guess) and the footnote says how to add them."""
    make_session(root, "20260101-130000-starved", instance=None, price=None, dt=0.1,
                 phases={"data": 0.06, "forward": 0.01, "backward": 0.02, "optimizer": 0.005})
    make_session(root, "20260101-140000-auto", instance=None, price=None, dt=0.1,
                 phases={"data": 0.002, "step": 0.098})
    code, out, _ = cli(root, "starved", "auto", "laptop", capsys=capsys)
    assert code == 0
    lines = out.splitlines()
    header = lines[0].split()
    assert header[-7:] == ["ALERTS", "DATA", "FORWARD", "BACKWARD", "OPTIMIZER", "STEP",
                           "PHASE"]
    starved, auto, laptop = (line.split() for line in lines[1:4])
    assert starved[-9:] == ["60.0", "ms", "10.0", "ms", "20.0", "ms", "5.0", "ms", "n/a"]
    assert auto[-7:] == ["2.0", "ms", "n/a", "n/a", "n/a", "98.0", "ms"]
    assert laptop[-5:] == ["n/a"] * 5
    assert "no step phases recorded in 20260101-120000-laptop: one call per step, " \
           'probe.step(samples=16, phases={"data": 0.01, "forward": 0.05})' in out
    code, out, _ = cli(root, "starved", "laptop", "--format", "csv", capsys=capsys)
    starved_row, laptop_row = csv.DictReader(io.StringIO(out))
    assert float(starved_row["phase_data_s"]) == pytest.approx(0.06)
    assert laptop_row["phase_data_s"] == "" and "phase_step_s" not in laptop_row
    code, out, _ = cli(root, "starved", "laptop", "--format", "json", capsys=capsys)
    starved_json, laptop_json = json.loads(out)
    assert starved_json["phase_optimizer_s"] == pytest.approx(0.005)
    assert laptop_json["phase_optimizer_s"] is None
    frame = compare.compare_frame([root / "20260101-130000-starved",
                                   root / "20260101-120000-laptop"])
    assert frame["phase_backward_s"].tolist()[0] == pytest.approx(0.02)
    assert math.isnan(frame["phase_backward_s"].tolist()[1])


def test_an_epoch_on_each_instance(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--dataset-size: what an epoch takes and costs on each instance at its steady rate (an
    ImageNet epoch: 4,004 s and $1.49 on trn1.2xlarge, 5,104 s and $1.08 on inf2.xlarge)."""
    code, out, err = cli(root, "trn1", "inf2", "laptop", "--dataset-size", "1281167",
                         capsys=capsys)
    assert code == 0 and err == ""
    assert "20260101-100000-trn1: an epoch of 1,281,167 samples at the steady rate: 1h06m, " \
           "$1.49" in out
    assert "20260101-110000-inf2: an epoch of 1,281,167 samples at the steady rate: 1h25m, " \
           "$1.08" in out
    assert "20260101-120000-laptop: an epoch of 1,281,167 samples at the steady rate: 33m21s " \
           "(no price)" in out
    code, out, _ = cli(root, "trn1", "inf2", "--dataset-size", "1281167", "--format", "csv",
                       capsys=capsys)
    trn1, inf2 = csv.DictReader(io.StringIO(out))
    assert float(trn1["epoch_s"]) == pytest.approx(1_281_167 / 320)
    assert float(trn1["usd_per_epoch"]) == pytest.approx(1.49441680)
    assert float(inf2["usd_per_epoch"]) == pytest.approx(1_281_167 / (32 / 0.1275) / 3600
                                                         * 0.7582)
    # Without it, a run's own --dataset-size, and nothing for runs that gave none.
    make_session(root, "20260101-130000-sized", instance="trn1.2xlarge", price=1.34375,
                 dt=0.1, config={"dataset_size": 32_000})
    code, out, _ = cli(root, "sized", "inf2", capsys=capsys)
    assert "20260101-130000-sized: an epoch of 32,000 samples at the steady rate: 1m40s" in out
    assert "inf2: an epoch" not in out
    code, _, err = cli(root, "trn1", "--dataset-size", "0", capsys=capsys)
    assert code == 2 and "above 0" in err


def test_json(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(root, "trn1", "inf2", "laptop", "--format", "json", capsys=capsys)
    assert code == 0
    trn1, inf2, laptop = json.loads(out)
    assert trn1["samples_per_s"] == pytest.approx(320.0)
    assert trn1["cores_used"] == 2 and trn1["global_batch"] == 32 and trn1["workers"] == 4
    assert inf2["samples_per_dollar_steady"] == pytest.approx(1_191_676.9, abs=0.1)
    assert inf2["relative_price_performance"] == pytest.approx(1.39, abs=0.001)
    assert laptop["usd_per_hour"] is None and laptop["relative_price_performance"] is None
    assert laptop["accelerator"] is None and laptop["problems"] is None


def test_baseline_option_and_a_baseline_not_listed(root: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(root, "trn1", "inf2", "--baseline", "inf2", "--format", "json",
                    capsys=capsys)
    trn1, inf2 = json.loads(out)
    assert inf2["baseline"] and inf2["relative_price_performance"] == 1.0
    assert trn1["relative_price_performance"] == pytest.approx(1 / 1.39, abs=0.001)
    _, out, _ = cli(root, "trn1", "--baseline", "inf2", "--format", "json", capsys=capsys)
    assert [r["session"] for r in json.loads(out)] == ["20260101-110000-inf2",
                                                       "20260101-100000-trn1"]


def test_a_name_matching_nothing_or_several(root: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(root, "trn1", "nope", capsys=capsys)
    assert code == 2 and out == "" and "no session matching 'nope'" in err
    code, _, err = cli(root, "2026", capsys=capsys)
    assert code == 2 and "3 sessions match" in err


def test_a_crashed_run(tmp_path: Path) -> None:
    d = make_session(tmp_path, "20260101-000000-crash", instance="trn1.2xlarge", price=1.34375,
                     dt=0.1, exit={"code": -9, "signal": "SIGKILL", "reason": "killed by SIGKILL",
                                   "attempts": 1})
    row = compare.compare_rows([d])[0]
    assert row["state"] == "failed"
    assert row["samples_per_dollar_steady"] == pytest.approx(857_302.3, abs=0.1)


def test_a_run_in_progress_is_costed_up_to_now(tmp_path: Path) -> None:
    me = psutil.Process()  # this test process stands in for the live training job
    d = make_session(tmp_path, "20260101-000000-live", instance="trn1.2xlarge", price=1.34375,
                     dt=0.1, running=True, job_pid=me.pid, job_create_time=me.create_time())
    row = compare.compare_rows([d], now=FIRST + 5.0 + 15.0)[0]
    assert row["state"] == "unsupervised"
    assert row["samples_per_s"] == pytest.approx(320.0)
    assert row["samples_per_dollar_all_in"] == pytest.approx(1600 / (30 / 3600 * 1.34375))


def test_a_run_whose_supervisor_died_is_costed_to_its_last_record(tmp_path: Path) -> None:
    d = make_session(tmp_path, "20260101-000000-lost", instance="trn1.2xlarge", price=1.34375,
                     dt=0.1, running=True)
    row = compare.compare_rows([d], now=time.time())[0]
    assert row["state"] == "lost"
    # Billed until the last step (t = 1015), not until today.
    assert row["samples_per_dollar_all_in"] == pytest.approx(1600 / (15 / 3600 * 1.34375))


def test_a_corrupt_session_names_the_file_and_line(root: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    events = root / "20260101-110000-inf2" / layout.EVENTS
    lines = events.read_text().splitlines(keepends=True)
    events.write_text(lines[0] + "\x00\x00garbage\n" + "".join(lines[1:]))
    code, out, err = cli(root, "trn1", "inf2", "--format", "json", capsys=capsys)
    assert code == 0
    assert "events.jsonl:2 (not JSON)" in err and "20260101-110000-inf2" in err
    inf2 = json.loads(out)[1]
    assert "events.jsonl:2 (not JSON)" in inf2["problems"]
    assert inf2["relative_price_performance"] == pytest.approx(1.39, abs=0.001)
    _, out, _ = cli(root, "trn1", "inf2", capsys=capsys)
    assert "20260101-110000-inf2: 1 unreadable line(s) skipped" in out  # a table footnote


def test_an_unreadable_meta_json_is_named_and_the_rest_still_compared(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "20260101-110000-inf2" / layout.META).write_text("{half a json")
    code, out, err = cli(root, "trn1", "inf2", "laptop", "--format", "json", capsys=capsys)
    assert code == 1
    assert "20260101-110000-inf2" in err and "meta.json: unreadable" in err
    assert [r["session"] for r in json.loads(out)] == ["20260101-100000-trn1",
                                                       "20260101-120000-laptop"]


def test_compare_frame_for_the_dashboard(root: Path) -> None:
    df = compare.compare_frame(sorted(root.iterdir()), baseline=1)
    assert list(df["session"]) == sorted(p.name for p in root.iterdir())
    assert str(df["cores_used"].dtype) == "Int64" and str(df["workers"].dtype) == "Int64"
    assert df["workers"].isna().tolist() == [False, False, True]
    assert df["samples_per_s"].dtype == "float64"
    assert df.loc[1, "relative_price_performance"] == 1.0 and bool(df.loc[1, "baseline"])
    assert df.loc[0, "relative_price_performance"] == pytest.approx(1 / 1.39, abs=0.001)
    assert math.isnan(df.loc[2, "usd_per_hour"])
    assert list(df.columns[:3]) == ["session", "state", "instance_type"]


def test_throughput_overlay(root: Path) -> None:
    sessions = [compare.load_session(root / "20260101-100000-trn1"),
                compare.load_session(root / "20260101-110000-inf2")]
    df = compare.throughput_overlay(sessions, bucket_s=1.0)
    assert list(df.columns) == ["session", "t_s", "samples_per_s"]
    trn1 = df[df["session"] == "20260101-100000-trn1"].set_index("t_s")["samples_per_s"]
    assert trn1.index[0] == 0.0 and trn1.index[-1] == 14.0
    assert (trn1.loc[:9.0] == 0).all()  # compile: nothing before the first step
    assert trn1.loc[11.0:13.0].to_numpy() == pytest.approx([320.0] * 3, rel=0.11)
    inf2 = df[df["session"] == "20260101-110000-inf2"].set_index("t_s")["samples_per_s"]
    assert inf2.loc[11.0:14.0].mean() == pytest.approx(32 / 0.1275, rel=0.1)
    auto = compare.throughput_overlay(sessions)
    assert set(auto["t_s"]) == {0.0, 10.0}  # 10 s buckets: the smallest round size


def test_overlay_bucket_is_round_and_gives_a_few_hundred_points() -> None:
    assert compare.overlay_bucket_s([15.0, None]) == 10.0
    assert compare.overlay_bucket_s([86_400.0]) == 300.0
    assert compare.overlay_bucket_s([]) == 10.0


@pytest.mark.parametrize(("command", "shell", "workers"), [
    (["torchrun", "x.py", "--workers", "4"], False, 4),
    (["python", "x.py", "--workers=8"], False, 8),
    (["python", "x.py", "--num_workers", "2", "--workers", "3"], False, 3),
    (["torchrun x.py --workers 6"], True, 6),
    (["python", "x.py", "--workers", "many"], False, None),
    (["python", "x.py"], False, None),
])
def test_dataloader_workers_from_the_command(command: list[str], shell: bool,
                                             workers: int | None) -> None:
    assert compare.dataloader_workers({"user_command": command, "shell": shell}) == workers


def test_global_batch_sums_each_ranks_median_in_the_latest_attempt() -> None:
    steps = pd.DataFrame({"t": [1, 2, 3, 4, 5, 6], "rank": [0, 0, 0, 1, 1, 0],
                          "step": [1, 2, 3, 1, 2, 1], "samples": [16, 16, 8, 32, 32, 99],
                          "attempt": [1, 1, 1, 1, 1, 0]})
    assert compare.global_batch(steps) == 48
    steps.loc[3, "samples"] = float("nan")
    steps.loc[4, "samples"] = float("nan")
    assert compare.global_batch(steps) is None


def test_format_value() -> None:
    assert compare.format_value(21.5, "usd") == "$21.50"
    assert compare.format_value(55.04, "usd") == "$55.04"
    assert compare.format_value(float("nan"), "rate") == "n/a"
    assert compare.format_value(None, "count") == "n/a"
    assert compare.format_value(pd.NA, "int") == "n/a"
    assert compare.format_value(0.0, "rate") == "0.0"  # a real zero stays a zero


def test_no_session_named_or_no_terminal_for_the_screen(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(root, capsys=capsys)
    assert code == 2 and out == "" and "compare needs at least one SESSION" in err
    code, out, err = cli(root, "trn1", "--tui", capsys=capsys)  # captured: not a terminal
    assert code == 2 and "compare --tui needs a terminal" in err
    code, out, err = cli(root, "nope", "--tui", capsys=capsys)
    assert code == 2 and "no session matching 'nope'" in err
