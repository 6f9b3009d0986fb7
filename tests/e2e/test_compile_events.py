"""torch.compile seen from inside the ranks, for real: tests/scripts/compile_loop.py (an
unmodified torch.compile loop, inductor on the CPU, its batch size changing once at step 30)
under the real `neurotui run --headless`, then `neurotui compare --format json`.

Each run gets its own empty inductor cache (TORCHINDUCTOR_CACHE_DIR), so its first compile is
a cold one, as a user's first run is: seconds long, long enough to be seen while it runs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from neurotui.session import layout
from tests.e2e.conftest import REPO, only_session, run_cli

pytestmark = pytest.mark.slow

SCRIPT = str(REPO / "tests" / "scripts" / "compile_loop.py")


def run(sessions: Path, tmp_path: Path, *command: str, preset: str | None = None
        ) -> tuple[Path, str]:
    """`neurotui run --headless` (a line a second) of `command` (or of a preset): its session
    and output."""
    how = ("--preset", preset) if preset else ("--", *command)
    result = run_cli(sessions, "run", "--headless", "--interval", "1", "--price-per-hour",
                     "3.60", *how,
                     env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
                          "OMP_NUM_THREADS": "1"}, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return only_session(sessions), result.stdout


def compile_records(session: Path) -> list[dict]:
    found = []
    for path in sorted((session / layout.PROBE_DIR).glob("auto-rank-*.jsonl")):
        found += [r for line in path.read_text().splitlines()
                  if (r := json.loads(line))["kind"] == "compile"]
    return found


def compare_row(sessions: Path, session: Path) -> dict:
    result = run_cli(sessions, "compare", session.name, "--format", "json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    return row


def test_a_batch_change_is_one_recompile_with_its_reason(sessions: Path,
                                                         tmp_path: Path) -> None:
    session, out = run(sessions, tmp_path, sys.executable, SCRIPT)
    lines = out.splitlines()
    # Headless says what compiles before the first step, not only "no step yet".
    compiling = [i for i, line in enumerate(lines)
                 if re.search(r"compiling: torch\.compile, rank 0, \d+ s so far", line)]
    stepped = [i for i, line in enumerate(lines) if re.search(r"\| step \d+ \|", line)]
    assert compiling and stepped and compiling[0] < stepped[0], out
    records = compile_records(session)
    starts = [r for r in records if r["what"] == "compile" and r["trigger"] == "dynamo"]
    assert [r["recompile"] for r in starts] == [False, True], records
    reason = starts[1]["reason"]
    assert "size mismatch at index 0" in reason and "expected 4, actual 8" in reason, reason
    assert starts[0]["function"] == "Sequential.forward", starts[0]
    ended = [r for r in records if r["what"] == "compiled"]
    assert len(ended) == sum(r["what"] == "compile" for r in records)
    assert all(r["dur_s"] > 0 for r in ended) and ended[0]["graph_breaks"] == 0
    row = compare_row(sessions, session)
    assert row["compile_s"] > 0 and row["recompiles"] == 1, row
    assert row["compile_usd"] == pytest.approx(row["compile_s"] * 3.6 / 3600)
    assert 0 < row["first_step_compile_s"] < row["time_to_first_step_s"]
    assert "expected 4, actual 8" in row["recompile_reasons"]
    assert "recompil" in (row["alerts_by_key"] or ""), row
    # Raised when the recompile ended (or, past 10 s, while it ran: then again as it ended).
    alert = [record for line in (session / layout.EVENTS).read_text().splitlines()
             if '"alert"' in line and (record := json.loads(line))["key"] == "recompile"
             and record["state"] == "start"][-1]
    assert re.match(r"rank 0 after step 30; torch\.compile recompiled Sequential\.forward",
                    alert["evidence"][0]), alert
    assert "at $3.60/h" in alert["evidence"][0] and "actual 8" in alert["evidence"][0]


def test_a_rank_that_compiles_more_graphs_is_flagged(sessions: Path, tmp_path: Path) -> None:
    session, _ = run(sessions, tmp_path, sys.executable, "-m", "torch.distributed.run",
                     "--nproc_per_node=2", SCRIPT, "--steps", "40",
                     "--extra-recompile-rank", "1")
    graphs = {rank: sum(1 for r in compile_records(session) if r["rank"] == rank and
                        r["what"] == "compile" and r["trigger"] == "dynamo")
              for rank in (0, 1)}
    assert graphs == {0: 2, 1: 3}, compile_records(session)
    row = compare_row(sessions, session)
    assert row["compile_mismatch"] is True
    assert row["compile_graphs"] == "rank 0: 2 graphs, rank 1: 3 graphs"
    assert row["recompiles"] == 2  # rank 1's: the batch change, then its batch of one
    assert "compile-mismatch" in (row["alerts_by_key"] or ""), row


def test_a_script_without_torch_compile_records_no_compile(sessions: Path,
                                                           tmp_path: Path) -> None:
    session, out = run(sessions, tmp_path, sys.executable, SCRIPT, "--no-compile")
    assert compile_records(session) == []
    assert "compiling:" not in out
    row = compare_row(sessions, session)
    assert row["compile_s"] is None and row["recompiles"] == 0 and row["compile_usd"] is None
    assert "recompil" not in (row["alerts_by_key"] or "")


def test_the_cpu_compile_preset_compiles_and_trains(sessions: Path, tmp_path: Path) -> None:
    """runner/train_vit.py --compile (inductor) on 2 CPU ranks with DDP: ~80 s on 2 cores,
    most of it compiling."""
    session, out = run(sessions, tmp_path, preset="vit-tiny-cpu-compile")
    assert "compiling: torch.compile" in out, out
    records = compile_records(session)
    assert {r["rank"] for r in records} == {0, 1}
    assert any(r["function"] == "VisionTransformer.forward" for r in records
               if r["what"] == "compile"), records
    row = compare_row(sessions, session)
    assert row["compile_s"] > 0 and row["recompiles"] == 0, row
    assert row["compile_mismatch"] is False
    assert row["first_step_compile_s"] == pytest.approx(row["compile_s"])
    assert row["cores_used"] == 2
