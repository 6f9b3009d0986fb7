"""TensorBoard event files read by their records: which tag is the loss, damaged files."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurotui.importing.logs import ImportProblem
from neurotui.importing.tensorboard import (
    LOSS_TAGS,
    event_files,
    pick_tag,
    read_run,
    read_scalars,
)


def written(folder: Path, steps: int = 20) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(1, steps + 1):
        writer.add_scalar("Loss/val", 9.0, step, walltime=100.0 + step)
        writer.add_scalar("train_loss", 1.0 / step, step, walltime=100.0 + step)
        writer.add_scalar("lr-AdamW", 1e-3, step, walltime=100.0 + step)
    writer.close()
    [path] = folder.glob("*tfevents*")
    return path


@pytest.mark.parametrize(("tags", "loss"), [
    (["eval/loss", "train/loss", "loss"], "train/loss"),
    (["Loss/val", "Loss/train"], "Loss/train"),
    (["validation_loss", "my_model/total_loss"], "my_model/total_loss"),
    (["accuracy", "eval/loss"], None),
])
def test_the_loss_is_a_training_loss(tags: list[str], loss: str | None) -> None:
    assert pick_tag(tags, LOSS_TAGS, "loss") == loss


def test_a_run_reads_loss_and_learning_rate_by_step(tmp_path: Path) -> None:
    written(tmp_path)
    run = read_run([next(tmp_path.glob("*tfevents*"))])
    assert (run.loss_tag, run.lr_tag) == ("train_loss", "lr-AdamW")
    assert run.steps[0] == (1, 101.0, 1.0, pytest.approx(1e-3), None)
    assert len(run.steps) == 20 and run.skipped_records == 0


def test_a_file_cut_short_keeps_what_came_before(tmp_path: Path) -> None:
    path = written(tmp_path)
    path.write_bytes(path.read_bytes()[:-10])  # a run killed mid-write: its last record cut
    by_tag, skipped = read_scalars([path])
    assert skipped == 1
    assert [len(by_tag[tag].points) for tag in ("Loss/val", "train_loss", "lr-AdamW")] == \
        [20, 20, 19]


def test_a_damaged_record_is_skipped_and_counted(tmp_path: Path) -> None:
    """A record whose payload fails its CRC is skipped and the rest still read; a damaged
    length ends the file's read there (nothing after it can be framed)."""
    path = written(tmp_path)
    data = bytearray(path.read_bytes())
    at, starts = 0, []
    while at + 12 <= len(data):  # TFRecord framing: length, its CRC, payload, its CRC
        length = int.from_bytes(data[at:at + 8], "little")
        starts.append(at)
        at += 12 + length + 4
    payload = bytearray(data)
    payload[starts[30] + 12] ^= 0xFF
    path.write_bytes(bytes(payload))
    by_tag, skipped = read_scalars([path])
    assert skipped == 1 and sum(len(s.points) for s in by_tag.values()) == 59
    length = bytearray(data)
    length[starts[30]] ^= 0xFF
    path.write_bytes(bytes(length))
    by_tag, skipped = read_scalars([path])
    assert skipped == 1 and sum(len(s.points) for s in by_tag.values()) == 29


def test_no_scalars_says_so(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"")
    with pytest.raises(ImportProblem, match="no scalar"):
        read_run([path])


def test_runs_side_by_side_are_not_one_run_but_hparams_are_no_run(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    for version in ("version_0", "version_1"):
        written(tmp_path / "lightning_logs" / version)
    files = event_files(tmp_path / "lightning_logs")
    with pytest.raises(ImportProblem, match="in 2 folders, each a run of its own"):
        read_run(files)
    hf = tmp_path / "runs" / "Dec06_10-00-00_host"
    written(hf)
    writer = SummaryWriter(str(hf))
    writer.add_hparams({"learning_rate": 1e-3}, {})  # a folder of its own, no scalar
    writer.close()
    files = event_files(tmp_path / "runs")
    assert len({p.parent for p in files}) >= 2
    assert read_run(files).loss_tag == "train_loss"
