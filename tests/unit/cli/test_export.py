"""`neurotui export`: steps, telemetry and events as CSV or Parquet, values checked."""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from neurotui import export
from neurotui.session import layout
from neurotui.session.writer import FORMAT_VERSION, write_json_atomic

NAME = "20260101-000000-vit"


def line(**record: object) -> str:
    return json.dumps(record) + "\n"


@pytest.fixture
def session(tmp_path: Path) -> Path:
    d = tmp_path / "sessions" / NAME
    (d / layout.PROBE_DIR).mkdir(parents=True)
    write_json_atomic(d / layout.META, {
        "format": FORMAT_VERSION, "id": NAME, "started_at": 100.0, "ended_at": 130.0,
        "exit": {"code": 1, "signal": None, "reason": "failed", "attempts": 1}})
    for r in (0, 1):
        layout.probe_path(d, r).write_text("".join(
            line(t=110.0 + i + r / 10, kind="step", rank=r, step=i, samples=16,
                 loss=None if i == 2 else 1.0 / i, dt=0.5,
                 phases={"data": 0.1, "forward": 0.3} if r == 0 else None, src="probe",
                 attempt=0) for i in (1, 2, 3)))
    (d / layout.EVENTS).write_text("".join([
        line(t=101.0, kind="proc_start", attempt=0, pid=4242, pgid=4242, argv=["torchrun"]),
        line(t=102.0, kind="compile", rank=None, what="compile", line="neuronx-cc --target"),
        line(t=103.0, kind="host", cpu=[10.0, 30.0, 50.0], mem_used=3 * 2**30,
             mem_total=8 * 2**30, load=[1.5, 1.0, 0.5]),
        line(t=103.5, kind="procs", procs=[
            {"pid": 4242, "ppid": 1, "name": "torchrun", "role": "launcher", "cpu": 2.0,
             "rss": 100},
            {"pid": 4243, "ppid": 4242, "name": "python", "role": "rank", "cpu": 98.0,
             "rss": 900},
            {"pid": 4244, "ppid": 4243, "name": "pt_data_worker", "role": "worker", "cpu": None,
             "rss": 50}]),
        line(t=104.0, kind="neuron", cores=[
            {"core": 0, "pid": 4243, "util": 87.5, "flops": None, "mem_device": 2048},
            {"core": 1, "pid": 4244, "util": 12.0, "flops": None, "mem_device": 1024}],
             host_mem_used=5, instance_type="trn1.2xlarge", errors=[]),
        line(t=105.0, kind="gpu", gpus=[{"index": 0, "name": "A10G", "util": 55.0,
                                         "mem_used": 7, "mem_total": 24, "power_w": 150.0}]),
        line(t=129.0, kind="proc_exit", attempt=0, pid=4242, code=1, signal=None,
             tail={"0": ["Traceback", "RuntimeError: boom"]}),
    ]))
    return d


def cli(root: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="neurotui")
    export.add_parser(parser.add_subparsers(dest="command"))
    code = export.run(parser.parse_args(["export", *argv]), root)
    out, err = capsys.readouterr()
    return code, out, err


def test_steps_as_csv_on_stdout(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(session.parent, "vit", "--out", "-", capsys=capsys)
    assert code == 0
    df = pd.read_csv(io.StringIO(out))
    assert list(df.columns) == ["t", "rank", "step", "samples", "loss", "dt", "src", "attempt",
                                "phase_data", "phase_forward"]
    assert len(df) == 6 and list(df["rank"]) == [0, 1, 0, 1, 0, 1]
    assert df["samples"].sum() == 96 and set(df["src"]) == {"probe"}
    first = df.iloc[0]
    assert (first["t"], first["loss"], first["phase_data"], first["phase_forward"]) == \
        (111.0, 1.0, 0.1, 0.3)
    # An unknown loss and rank 1's missing phases are empty fields, never 0.
    assert out.splitlines()[3].split(",")[4] == ""
    assert math.isnan(df.iloc[1]["phase_data"])


def test_steps_as_parquet_keep_their_types(session: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "steps.parquet"
    code, _, err = cli(session.parent, NAME, "--format", "parquet", "--out", str(out),
                       capsys=capsys)
    assert code == 0 and f"wrote 6 steps rows to {out}" in err
    df = pd.read_parquet(out)
    assert df["rank"].dtype == "int64" and df["step"].dtype == "int64"
    assert df["t"].dtype == "float64" and list(df["t"][:2]) == [111.0, 111.1]
    assert df["loss"].isna().sum() == 2 and df["phase_forward"].notna().sum() == 3


def test_default_output_goes_to_the_current_folder(session: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, _ = cli(session.parent, "vit", "--what", "events", capsys=capsys)
    assert code == 0
    df = pd.read_csv(tmp_path / f"{NAME}-events.csv")
    assert list(df["kind"]) == ["proc_start", "compile", "proc_exit"]


def test_telemetry_is_flattened(session: Path) -> None:
    df, problems = export.export_table(session, "telemetry")
    assert problems is None
    assert list(df["kind"]) == ["host", "procs", "neuron", "gpu"]
    host, procs, neuron, gpu = (df.iloc[i] for i in range(4))
    assert (host["cpu_count"], host["cpu_mean"], host["cpu_max"]) == (3, 30.0, 50.0)
    assert (host["load_1"], host["load_15"], host["mem_total"]) == (1.5, 0.5, 8 * 2**30)
    assert (procs["procs"], procs["procs_ranks"], procs["procs_workers"]) == (3, 1, 1)
    assert procs["procs_cpu"] == 100.0 and procs["procs_rss"] == 1050
    assert (neuron["nc0_util"], neuron["nc1_util"], neuron["nc1_mem_device"]) == \
        (87.5, 12.0, 1024)
    assert neuron["instance_type"] == "trn1.2xlarge" and pd.isna(neuron["nc0_flops"])
    assert (gpu["gpu0_util"], gpu["gpu0_power_w"], gpu["gpu0_name"]) == (55.0, 150.0, "A10G")
    assert pd.isna(host["nc0_util"])  # not a NeuronCore sample: missing, not 0


def test_telemetry_export_reads_all_of_it_not_the_live_window(session: Path) -> None:
    with open(session / layout.EVENTS, "a") as f:
        f.writelines(line(t=200.0 + k, kind="host", cpu=[1.0], mem_used=1, mem_total=2,
                          load=None) for k in range(4000))
    df, _ = export.export_table(session, "telemetry")
    assert (df["kind"] == "host").sum() == 4001


def test_events_keep_whole_numbers_and_nested_fields_as_json(session: Path, tmp_path: Path
                                                             ) -> None:
    df, _ = export.export_table(session, "events")
    assert list(df.columns[:2]) == ["t", "kind"]
    assert str(df["pid"].dtype) == "Int64" and df["pid"].tolist()[0] == 4242
    assert pd.isna(df["pid"][1])
    assert json.loads(df["tail"][2]) == {"0": ["Traceback", "RuntimeError: boom"]}
    out = tmp_path / "events.parquet"
    export.write_table(df, "parquet", out)
    back = pd.read_parquet(out)
    assert back["code"].tolist()[2] == 1 and back["what"].tolist()[1] == "compile"


def test_parquet_accepts_a_field_that_differs_between_events(tmp_path: Path) -> None:
    df = pd.DataFrame({"t": [1.0, 2.0], "source": ["neuron-monitor", 7]})
    export.write_table(df, "parquet", tmp_path / "x.parquet")
    assert pd.read_parquet(tmp_path / "x.parquet")["source"].tolist() == ["neuron-monitor", "7"]


def test_a_corrupt_line_is_named_and_the_rest_exported(session: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    probe = layout.probe_path(session, 1)
    probe.write_text(probe.read_text() + '{"t": 120, "kind": "step", "rank": 1, "step": "x"}\n'
                     + '{"t": 121, "kind": "st')
    code, out, err = cli(session.parent, "vit", "--out", "-", capsys=capsys)
    assert code == 0 and len(pd.read_csv(io.StringIO(out))) == 6
    assert "probe/rank-1.jsonl:4 (bad step)" in err and "1 truncated last line(s)" in err


def test_a_session_still_running_exports_its_complete_lines(session: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    meta = json.loads((session / layout.META).read_text())
    write_json_atomic(session / layout.META, {**meta, "ended_at": None, "exit": None})
    with open(layout.probe_path(session, 0), "a") as f:
        f.write(line(t=114.0, kind="step", rank=0, step=4, samples=16, loss=0.2, dt=0.5,
                     phases=None, src="probe", attempt=0) + '{"t": 115.0, "ki')
    code, out, err = cli(session.parent, "vit", "--out", "-", capsys=capsys)
    assert code == 0 and err == ""  # the half-written line is no error: it is being written
    assert pd.read_csv(io.StringIO(out))["step"].max() == 4


def test_unreadable_meta_and_unknown_sessions_fail_clearly(session: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    code, _, err = cli(session.parent, "nothing-like-it", capsys=capsys)
    assert code == 2 and "no session matching 'nothing-like-it'" in err
    (session / layout.META).write_text("{")
    code, _, err = cli(session.parent, str(session), "--out", "-", capsys=capsys)
    assert code == 2 and f"{session / layout.META}: unreadable" in err


def test_parquet_needs_a_file_and_an_unwritable_one_is_reported(
        session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(session.parent, "vit", "--format", "parquet", "--out", "-",
                       capsys=capsys)
    assert code == 2 and "only CSV can go to stdout" in err
    code, _, err = cli(session.parent, "vit", "--out", str(tmp_path / "no" / "such" / "x.csv"),
                       capsys=capsys)
    assert code == 2 and "cannot write" in err


def test_a_session_without_records_exports_an_empty_table(tmp_path: Path) -> None:
    d = tmp_path / "20260101-000000-empty"
    d.mkdir()
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "exit": None})
    for what in export.WHATS:
        df, problems = export.export_table(d, what)
        assert len(df) == 0 and "t" in df.columns and problems is None


def test_nested_fields_are_exported_as_strict_json(session: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with open(session / layout.EVENTS, "a") as f:  # as older sessions hold it: a bare NaN
        f.write(line(t=129.5, kind="warning", source="probe", message="odd",
                     figures={"loss": math.nan, "rates": [1.0, math.inf]}))
    out = tmp_path / "events.csv"
    code, _, err = cli(session.parent, "vit", "--what", "events", "--out", str(out),
                       capsys=capsys)
    assert code == 0, err
    cell = pd.read_csv(out)["figures"].dropna().tolist()
    assert len(cell) == 1

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    assert json.loads(cell[0], parse_constant=refuse) == {
        "loss": None, "rates": [1.0, None],
        "nonfinite": {"loss": "nan", "rates.1": "inf"}}
