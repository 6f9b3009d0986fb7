"""One definition of a compile (metrics/compiles.py) for torch.compile's records and
neuronx-cc's lines, and the supervisor's alerts from them (supervisor/compiles.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neurotui.headless import progress_line
from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel
from neurotui.metrics.compiles import (
    NEURONX_CC,
    TORCH_COMPILE,
    compile_figures,
    compile_spans,
    compiling_now,
    first_steps,
)
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.steprecord import StepRecord
from neurotui.session.timeline import Timeline
from neurotui.supervisor.compiles import CompileWatch
from neurotui.supervisor.stallwatch import StallWatch
from tests.ui.conftest import make_app, screen_text, settle
from tests.ui.sessions import RUNNING, T0, Recorder


def torch_compile(t: float, what: str, rank: int = 0, cid: str = "0/0", **more: object) -> dict:
    return {"t": t, "kind": "compile", "what": what, "src": TORCH_COMPILE, "rank": rank,
            "attempt": 0, "id": cid, "trigger": more.pop("trigger", "dynamo"), **more}


def test_a_recompile_after_the_first_step_is_counted_with_its_reason() -> None:
    records = [
        torch_compile(10.0, "compile", function="forward", file="/x/model.py", line=12),
        torch_compile(18.0, "compiled", dur_s=8.0, graph_breaks=0),
        torch_compile(18.1, "compile", trigger="backward"),
        torch_compile(19.0, "compiled", trigger="backward"),
        torch_compile(30.0, "compile", cid="0/1", recompile=True,
                      reason="tensor 'x' size mismatch at index 0. expected 4, actual 8"),
        torch_compile(30.5, "compiled", cid="0/1"),
    ]
    spans = compile_spans(records)
    assert [s.backward for s in spans] == [False, True, False]
    assert spans[0].frame == "forward (model.py:12)"
    figures = compile_figures(spans, first_steps([(19.5, 0, 0), (20.0, 0, 0)]))
    assert figures.compile_s == pytest.approx(8.0 + 0.9 + 0.5)
    assert figures.before_first_step_s == pytest.approx(8.9)
    assert figures.compiles == 2
    assert figures.recompiles == 1
    assert "expected 4, actual 8" in (figures.recompile_spans[0].reason or "")
    assert not figures.mismatch
    assert figures.usd(3.6) == pytest.approx(9.4 * 3.6 / 3600)


def test_no_compile_records_no_compile_figures() -> None:
    figures = compile_figures(compile_spans([]), first_steps([(1.0, 0, 0)]))
    assert figures.compile_s is None
    assert figures.recompiles == 0  # steps were taken: none after them
    assert figures.usd(3.6) is None
    assert compile_figures([], {}).recompiles is None  # no step: unknown


def test_ranks_that_compiled_different_numbers_of_graphs_are_a_mismatch() -> None:
    records = [torch_compile(1.0, "compile", rank=0), torch_compile(2.0, "compiled", rank=0),
               torch_compile(1.0, "compile", rank=1), torch_compile(2.5, "compiled", rank=1),
               torch_compile(9.0, "compile", rank=1, cid="0/1", recompile=True),
               torch_compile(9.2, "compiled", rank=1, cid="0/1")]
    first = first_steps([(3.0, 0, 0), (3.0, 1, 0)])
    figures = compile_figures(compile_spans(records), first)
    assert figures.graphs_by_rank == {0: 1, 1: 2}
    assert figures.mismatch
    # While a rank still compiles, the counts are not judged yet.
    assert not compile_figures(compile_spans(records[:-1]), first).mismatch
    assert compile_figures(compile_spans(records), first).compile_s == pytest.approx(1.7)


def test_neuronx_cc_lines_make_the_same_spans() -> None:
    lines = [{"t": 1.0, "rank": 0, "what": "cache_miss"}, {"t": 1.1, "rank": 0, "what": "compile"},
             {"t": 61.0, "rank": 0, "what": "compiled"}, {"t": 62.0, "rank": 0,
                                                           "what": "cache_hit"},
             {"t": 100.0, "rank": 0, "what": "compile"}, {"t": 130.0, "rank": 0,
                                                          "what": "compile_failed"}]
    spans = compile_spans(lines)
    assert [(s.source, s.start, s.end, s.failed) for s in spans] == [
        (NEURONX_CC, 1.0, 61.0, False), (NEURONX_CC, 100.0, 130.0, True)]
    figures = compile_figures(spans, first_steps([(70.0, 0, 0)]))
    assert figures.compile_s == pytest.approx(90.0)
    assert figures.recompiles == 1


def test_what_compiles_now_is_named() -> None:
    spans = compile_spans([torch_compile(10.0, "compile", rank=1)])
    running = compiling_now(spans, 22.0)
    assert running is not None and running.rank == 1 and running.seconds(22.0) == 12.0
    assert compiling_now(spans, 5.0) is None


def test_the_supervisor_raises_the_recompile_alert_with_its_evidence(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps({"format": 1, "price": {
        "usd_per_hour": 3.6}}))
    watch = CompileWatch(tmp_path, last_step=lambda rank: 30)
    first = [torch_compile(10.0, "compile", function="forward", file="/m.py", line=3),
             torch_compile(18.0, "compiled")]
    watch.take_probe_lines("\n".join(json.dumps(r) for r in first).encode(), [])
    watch.first_step(0, 0, 19.0)
    assert watch.alerts(50.0) == (None, None)
    later = [torch_compile(49.5, "compile", cid="0/1", recompile=True, function="forward",
                           file="/m.py", line=3,
                           reason="0/0: tensor 'args[0]' size mismatch at index 0. "
                                  "expected 4, actual 8"),
             torch_compile(51.5, "compiled", cid="0/1")]
    steps = [StepRecord(49.2, 0, 31, src="auto"), StepRecord(52.0, 0, 32, src="auto")]
    taken = watch.take_probe_lines(
        "\n".join(json.dumps(r) for r in later).encode(), steps)
    assert len(taken) == 2
    recompile, mismatch = watch.alerts(53.0)
    assert mismatch is None
    assert recompile is not None
    assert "1 graph compiled after the first step" in recompile.title
    (told,) = recompile.evidence
    assert told.startswith("rank 0 after step 31;")
    assert "forward (m.py:3)" in told and "2.00s" in told and "$0.0020 at $3.60/h" in told
    assert "expected 4, actual 8" in told


def probe_records(session: Path, *records: dict) -> None:
    """As the automatic probe writes them (probe/auto-rank-0.jsonl)."""
    (session / layout.PROBE_DIR).mkdir(exist_ok=True)
    with open(session / layout.PROBE_DIR / "auto-rank-0.jsonl", "a") as f:
        f.writelines(json.dumps(record) + "\n" for record in records)


def test_the_live_view_and_replay_say_what_compiles(tmp_path: Path) -> None:
    # Rank 0 compiles from T0+3 (its end not written yet): the live view at T0+15.
    rec = Recorder(tmp_path, "compiling")
    rec.event(T0, "proc_start", attempt=0, pid=1, pgid=1, argv=["python", "train.py"])
    rec._events.flush()
    probe_records(rec.dir, torch_compile(T0 + 3, "compile", function="forward", file="/m.py",
                                         line=3))
    live = DashboardModel(SessionReader(rec.dir), FixedClock(T0 + 15), status=lambda: RUNNING,
                          throttle=False).refresh()
    assert live.header.phase == "compiling" and live.header.step is None
    assert live.header.compiling == "compiling: torch.compile, rank 0, 12 s so far"
    assert " | compiling: torch.compile, rank 0, 12 s so far | no step yet" in \
        progress_line(live)
    # It ends at T0+20, steps follow; the supervisor's recompile alert at T0+60. Replayed.
    probe_records(rec.dir, torch_compile(T0 + 20, "compiled", dur_s=17.0))
    for i in range(1, 40):
        rec.step(T0 + 20 + i, 0, i, 1.0)
    rec.event(T0 + 60, "alert", key="recompile", state="start", severity="warning",
              title="recompilation: 1 graph compiled after the first step (2.00s)",
              evidence=["rank 0 after step 31; torch.compile recompiled forward (m.py:3)"],
              advice=None)
    timeline = Timeline(rec.close())
    try:
        view = timeline.view()
        model = DashboardModel(view, FixedClock(T0 + 15), throttle=False,
                               status=lambda: timeline.status_at(model.clock.now()))
        for at, compiling in ((15.0, live.header.compiling), (30.0, None),
                              (8.0, "compiling: torch.compile, rank 0, 5 s so far")):
            view.seek(T0 + at)
            model.clock = FixedClock(T0 + at)
            assert model.refresh().header.compiling == compiling, at
        view.seek(T0 + 61)
        model.clock = FixedClock(T0 + 61)
        alerts = {a.key: a for a in model.refresh().alerts}
        assert "rank 0 after step 31" in alerts["recompile"].evidence[0]
    finally:
        timeline.close()


def test_a_rank_inside_a_long_compile_is_not_stalled(tmp_path: Path) -> None:
    # The supervisor's watch: rank 0 steps 30 times 0.5 s apart, then recompiles for minutes.
    probe_records(tmp_path, *({"t": 100.0 + i * 0.5, "kind": "step", "rank": 0, "step": i,
                               "samples": 4, "dt": 0.5, "src": "auto", "attempt": 0}
                              for i in range(1, 31)))
    watch = StallWatch(tmp_path)
    watch.read_probes()
    probe_records(tmp_path, torch_compile(115.2, "compile", cid="0/1", recompile=True))
    watch.read_probes()  # (read apart from the steps: its step is the rank's track's last)
    assert watch.stalled(115.0 + 300) == {}
    probe_records(tmp_path, torch_compile(415.0, "compiled", cid="0/1"))
    watch.read_probes()
    assert set(watch.stalled(415.0 + 11)) == {0}  # ended, and no step since: stalled again
    recompile, _ = watch.compiles.alerts(416.0)
    assert recompile is not None and recompile.evidence[0].startswith(
        "rank 0 after step 30; torch.compile compiled; 300s")
    # The dashboard's rule, from the same records in the session.
    records = [torch_compile(115.2, "compile", cid="0/1", recompile=True)]
    rec = Recorder(tmp_path, "long-compile")
    for i in range(1, 31):
        rec.step(T0 + i * 0.5, 0, i, 0.5)
    rec.close()
    probe_records(rec.dir, {**records[0], "t": T0 + 15.2})
    state = DashboardModel(SessionReader(rec.dir), FixedClock(T0 + 315), status=lambda: RUNNING,
                           throttle=False).refresh()
    assert state.header.compiling == "compiling: torch.compile, rank 0, 300 s so far"
    assert not any(a.key == "stalled" for a in state.alerts)


async def test_the_dashboard_header_says_what_compiles(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "compiling-dashboard")
    rec.event(T0, "proc_start", attempt=0, pid=1, pgid=1, argv=["python", "train.py"])
    session = rec.close()
    probe_records(session, torch_compile(T0 + 3, "compile", function="forward", file="/m.py",
                                         line=3))
    app = make_app(session, at=15.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        header = "\n".join(screen_text(app).splitlines()[:2])
    assert "compiling: torch.compile, rank 0, 12 s so far" in header, header
    assert "no step yet" not in header


def test_a_torch_without_compile_callbacks_is_said_once_at_the_first_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a torch before torch._dynamo.callback: the probe's steps go on, and the session
    says once why no compile is recorded (the real torch, that one attribute taken away)."""
    import torch
    import torch._dynamo

    from neurotui.autoprobe.site import neurotui_autoprobe as site

    monkeypatch.delattr(torch._dynamo, "callback")
    monkeypatch.setenv("RANK", "0")
    probe = site._Probe(str(tmp_path))
    probe.on_import("torch._dynamo", torch._dynamo)
    assert probe.compiles is not None and probe.on
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        probe.on_step(optimizer, (), {})
    probe.write_pending()
    written = [json.loads(line) for line in
               (tmp_path / layout.PROBE_DIR / "auto-rank-0.jsonl").read_text().splitlines()]
    notes = [r for r in written if r["kind"] == "probe_info" and r["what"] == "compile_hooks"]
    assert len(notes) == 1
    assert notes[0]["message"].startswith("compile hooks unavailable: no torch._dynamo.callback")
    assert sum(r["kind"] == "step" for r in written) == 3
