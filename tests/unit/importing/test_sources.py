"""What a PATH is: a CloudWatch export in either of its shapes, or a log that only looks
like JSON (HF Trainer's loss dicts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neurotui.importing.logs import ImportProblem
from neurotui.importing.sources import CLOUDWATCH, LOG, TORCHRUN, find

STEPLOGS = Path(__file__).resolve().parents[2] / "fixtures" / "steplogs"


def test_get_log_events_output_is_a_cloudwatch_export(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps({"events": [
        {"timestamp": 1714564800123, "message": "step 1 loss 2.0\nstep 2 loss 1.5",
         "ingestionTime": 1714564800300}],
        "nextForwardToken": "f/1", "nextBackwardToken": "b/1"}))
    [part] = find([path]).logs
    assert part.kind == CLOUDWATCH
    assert part.lines == ["step 1 loss 2.0", "step 2 loss 1.5"]
    assert part.times == [1714564800.123, 1714564800.123]


def test_json_lines_of_events_are_a_cloudwatch_export(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 1000 * i, "message": f"step {i}"}) + "\n"
                            for i in range(1, 4)))
    [part] = find([path]).logs
    assert (part.kind, part.times) == (CLOUDWATCH, [1.0, 2.0, 3.0])  # ms since the epoch


def test_hf_trainer_loss_dicts_are_a_log_not_json() -> None:
    path = STEPLOGS / ("hf-trainer_loss-dicts-with-grad_norm_real-capture_"
                       "modal-llm-finetuning-pr82_EXCERPT.txt")
    assert "{'loss'" in path.read_text()
    [part] = find([path]).logs
    assert part.kind == LOG and part.times is None


def test_a_neurotui_session_logs_folder_is_read_by_rank(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank-0.log").write_text("step 1 loss 1\n")
    (logs / "rank-3.log").write_text("step 1 loss 1\n")
    (logs / "launcher.log").write_text("torchrun says hello\n")
    found = find([logs])
    assert found.kinds == {str(logs): TORCHRUN}
    assert sorted(part.rank for part in found.logs) == [0, 3]


def test_an_empty_json_export_says_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"events": []}))
    with pytest.raises(ImportProblem, match="no event holding both"):
        find([path])
