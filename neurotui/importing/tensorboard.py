"""A TensorBoard event folder or file: its scalars per global step, with their wall times.

The events are TensorBoard's own records (`tensorboard.compat.proto.event_pb2.Event`, read
by protobuf) in TFRecord framing, each record's CRC-32C checked (google-crc32c). TensorBoard's
EventAccumulator reads the same files, but its framing is pure Python: 23 s for a million
scalars on the dev VM against about 3 here (tests/bench/bench_import.py). Both come with the
`import` extra; without it, a message names it.

Which scalar is the loss: the first of LOSS_TAGS there is, else a tag naming a loss that is no
validation's (the shortest); the import says which tag it used.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurotui.importing.logs import ImportProblem

EXTRA_HINT = "pip install 'neurotui[import]'"
LOSS_TAGS = ("train/loss", "loss", "train_loss", "training_loss", "train/train_loss",
             "loss/train", "train/loss_step", "train_loss_step", "trainer/loss",
             "train/lm_loss", "lm loss", "lm_loss", "reduced_train_loss")
LR_TAGS = ("train/learning_rate", "learning_rate", "lr", "train/lr", "lr-adamw", "lr-adam",
           "learning-rate", "trainer/learning_rate")
THROUGHPUT_TAGS = ("train/samples_per_second", "samples_per_second", "throughput",
                   "train/throughput", "samples/s", "samples_per_sec", "train/samples_per_sec",
                   "throughput/samples_per_sec")
_NOT_TRAINING = ("val", "eval", "test", "valid")
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")


def is_event_file(path: Path) -> bool:
    return "tfevents" in path.name and path.is_file()


def event_files(folder: Path) -> list[Path]:
    """The event files under `folder`, in the order they were written (their names begin
    with the time: `events.out.tfevents.<seconds>.<host>...`)."""
    found = [p for p in folder.rglob("*tfevents*") if p.is_file()]
    return sorted(found, key=lambda p: (_written_at(p.name), str(p)))


def _written_at(name: str) -> float:
    parts = name.split(".")
    try:
        return float(parts[parts.index("tfevents") + 1])
    except (ValueError, IndexError):
        return math.inf


@dataclass
class Scalars:
    """One tag's values: (wall time, step, value) in the order written."""

    points: list[tuple[float, int, float]] = field(default_factory=list)


@dataclass
class TensorBoardRun:
    """The steps read: per step its wall time, loss, learning rate and logged throughput."""

    files: list[Path]
    loss_tag: str | None
    lr_tag: str | None
    throughput_tag: str | None
    steps: list[tuple[int, float, float | None, float | None, float | None]]
    tags: list[str]
    skipped_records: int = 0


def _modules() -> tuple[Any, Any, Any]:
    try:
        import google_crc32c
        from tensorboard.compat.proto import event_pb2
        from tensorboard.util import tensor_util
    except ImportError as exc:
        raise ImportProblem(f"reading TensorBoard event files needs TensorBoard ({exc.name} "
                            f"is missing): {EXTRA_HINT}") from exc
    return event_pb2, tensor_util, google_crc32c


def read_scalars(files: list[Path]) -> tuple[dict[str, Scalars], int]:
    """Every scalar of `files` by tag, and how many records were skipped (a bad CRC, a
    record cut short where a run was killed mid-write: the rest of that file)."""
    event_pb2, tensor_util, crc32c = _modules()
    from_string, crc = event_pb2.Event.FromString, crc32c.value
    unpack_header, unpack_crc = _HEADER.unpack_from, _CRC.unpack_from
    by_tag: dict[str, Scalars] = {}
    skipped = 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ImportProblem(f"cannot read {path}: {exc.strerror or exc}") from exc
        at, size = 0, len(data)
        while at + 12 <= size:
            length, length_crc = unpack_header(data, at)
            start = at + 12
            end = start + length + 4
            # TFRecord's masked CRC-32C (rotated right by 15, plus a constant), inline: a
            # call each cost a sixth of an event's read.
            value = crc(data[at:at + 8])
            if end > size or \
                    (((value >> 15) | (value << 17)) + 0xA282EAD8) & 0xFFFFFFFF != length_crc:
                skipped += 1
                break
            record = data[start:end - 4]
            value = crc(record)
            at = end
            if (((value >> 15) | (value << 17)) + 0xA282EAD8) & 0xFFFFFFFF != \
                    unpack_crc(data, end - 4)[0]:
                skipped += 1
                continue
            try:
                event = from_string(record)
            except Exception:  # a record that is no Event: counted, the rest still read
                skipped += 1
                continue
            if not event.HasField("summary"):
                continue
            wall, step = event.wall_time, event.step
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = value.simple_value
                elif value.HasField("tensor"):
                    number = _tensor_scalar(value.tensor, tensor_util)
                    if number is None:
                        continue
                else:
                    continue
                tag = value.tag
                scalars = by_tag.get(tag)
                if scalars is None:
                    scalars = by_tag[tag] = Scalars()
                scalars.points.append((wall, step, number))
    return by_tag, skipped


def _tensor_scalar(tensor: Any, tensor_util: Any) -> float | None:
    """A tensor summary's value where it is one number (TF 2's scalars), else None."""
    try:
        array = tensor_util.make_ndarray(tensor)
    except Exception:  # strings, an odd dtype: not a scalar
        return None
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(-1)[0])


def pick_tag(tags: list[str], named: tuple[str, ...], word: str) -> str | None:
    """The first of `named` among `tags` (case aside), else the shortest tag holding `word`
    that names no validation, evaluation or test."""
    lowered = {tag.lower(): tag for tag in tags}
    for name in named:
        if name in lowered:
            return lowered[name]
    candidates = [tag for tag in tags if word in tag.lower()
                  and not any(part in tag.lower() for part in _NOT_TRAINING)]
    return min(candidates, key=lambda tag: (len(tag), tag)) if candidates else None


def read_run(paths: list[Path]) -> TensorBoardRun:
    """The steps of the event files `paths`: one a loss (else most-logged) tag's point, with
    the learning rate and throughput logged at its step."""
    by_folder: dict[Path, list[Path]] = {}
    for path in paths:
        by_folder.setdefault(path.parent, []).append(path)
    read = {folder: read_scalars(files) for folder, files in by_folder.items()}
    runs = sorted(str(folder) for folder, (tags, _) in read.items() if tags)
    if len(runs) > 1:  # Lightning's version_0, version_1...: runs of their own
        raise ImportProblem(
            f"TensorBoard scalars in {len(runs)} folders, each a run of its own "
            f"({', '.join(runs[:3])}{' ...' if len(runs) > 3 else ''}): import one folder "
            "at a time")
    # A folder without scalars beside the run's (torch's add_hparams writes one, as HF
    # Trainer's callback calls it) is no run.
    by_tag = next((tags for tags, _ in read.values() if tags), {})
    skipped = sum(count for _, count in read.values())
    if not by_tag:
        raise ImportProblem(f"no scalar in {len(paths)} TensorBoard event file(s) "
                            f"({', '.join(str(p) for p in paths[:3])})")
    tags = sorted(by_tag)
    loss_tag = pick_tag(tags, LOSS_TAGS, "loss")
    lr_tag = pick_tag(tags, LR_TAGS, "learning_rate") or \
        next((t for t in tags if t.lower().split("/")[-1].startswith("lr")), None)
    throughput_tag = pick_tag(tags, THROUGHPUT_TAGS, "samples_per_second")
    steps_tag = loss_tag or max(tags, key=lambda tag: len(by_tag[tag].points))
    lrs = _by_step(by_tag.get(lr_tag)) if lr_tag else {}
    rates = _by_step(by_tag.get(throughput_tag)) if throughput_tag else {}
    steps = []
    for wall, step, value in by_tag[steps_tag].points:
        steps.append((step, wall, value if loss_tag else None, lrs.get(step),
                      rates.get(step)))
    return TensorBoardRun(paths, loss_tag, lr_tag, throughput_tag, steps, tags, skipped)


def _by_step(scalars: Scalars | None) -> dict[int, float]:
    return {} if scalars is None else {step: value for _, step, value in scalars.points}
