"""What a PATH given to `neurotui import` is: a saved log, a torchrun log folder, a TensorBoard
event folder or file, or a CloudWatch / SageMaker export; or why it is none of them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from neurotui.importing import tensorboard
from neurotui.importing.logs import (
    ImportProblem,
    LogPart,
    cloudwatch_part,
    read_json_events,
    read_text_lines,
)

LOG = "log"
TORCHRUN = "torchrun"
TENSORBOARD = "tensorboard"
CLOUDWATCH = "cloudwatch"

_TORCHRUN_FILE = re.compile(r"attempt_(\d+)/(\d+)/(stdout|stderr)\.log$")
_RANK_LOG = re.compile(r"(?:^|[^a-z])rank[-_]?(\d{1,6})(?!\d)", re.IGNORECASE)
_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".json", ".jsonl")


@dataclass
class Found:
    """What the PATHs hold: logs to parse, TensorBoard event files, and each PATH's kind."""

    logs: list[LogPart] = field(default_factory=list)
    event_files: list[Path] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)


def find(paths: list[Path]) -> Found:
    """Each of `paths` read as the kind it is (ImportProblem where one is none: what was
    tried). Several logs given are ranks of one run: a rank named in a file's name, else the
    order given."""
    found = Found()
    for index, path in enumerate(paths):
        if not path.exists():
            raise ImportProblem(f"{path}: no such file or folder")
        if path.is_dir():
            kind = _folder(path, found)
        elif tensorboard.is_event_file(path):
            found.event_files.append(path)
            kind = TENSORBOARD
        else:
            rank = _rank_in_name(path) if len(paths) > 1 else None
            part = _file(path, index if rank is None and len(paths) > 1 else rank)
            found.logs.append(part)
            kind = part.kind
        found.kinds[str(path)] = kind
    if found.event_files and found.logs:
        raise ImportProblem("TensorBoard event files and logs of one run cannot be imported "
                            "together: import each as a session of its own")
    return found


def _file(path: Path, rank: int | None, kind: str = LOG) -> LogPart:
    if not path.is_file():
        raise ImportProblem(f"{path}: not a regular file")
    try:
        mtime = path.stat().st_mtime
    except OSError as exc:
        raise ImportProblem(f"cannot read {path}: {exc.strerror or exc}") from exc
    events = read_json_events(path)
    if events is not None:
        part = cloudwatch_part(path, events)
        part.rank, part.mtime = rank, mtime
        return part
    lines = read_text_lines(path)
    if not any(line.strip() for line in lines):
        raise ImportProblem(f"{path}: an empty log")
    return LogPart(path, kind, lines, rank=rank, mtime=mtime)


def _folder(path: Path, found: Found) -> str:
    events = tensorboard.event_files(path)
    if events:
        found.event_files.extend(events)
        return TENSORBOARD
    ranked = []
    for file in sorted(path.rglob("*.log")):
        m = _TORCHRUN_FILE.search(file.as_posix())
        if m is not None:
            ranked.append((int(m.group(1)), int(m.group(2)), file))
    if not ranked:  # neurotui's own logs/: rank-R.log
        ranked = [(0, int(m.group(1)), file) for file in sorted(path.glob("rank-*.log"))
                  if (m := re.fullmatch(r"rank-(\d+)\.log", file.name))]
    if ranked:
        for attempt, rank, file in ranked:
            if file.stat().st_size == 0:
                continue  # a rank that wrote nothing to stderr: nothing to read
            part = _file(file, rank, TORCHRUN)
            part.attempt = attempt
            found.logs.append(part)
        if not found.logs:
            raise ImportProblem(f"{path}: a torchrun log folder whose logs are all empty")
        return TORCHRUN
    files = [f for f in sorted(path.iterdir()) if f.is_file() and f.suffix in _LOG_SUFFIXES]
    if len(files) == 1:
        found.logs.append(_file(files[0], None))
        return found.logs[-1].kind
    raise ImportProblem(
        f"{path}: nothing recognised in this folder (tried: TensorBoard event files "
        "`*tfevents*`, a torchrun log folder `attempt_N/RANK/stdout.log`, neurotui's "
        f"`rank-R.log`, a single log file; found {len(files)} log-like files): name the "
        "log files themselves")


def _rank_in_name(path: Path) -> int | None:
    m = _RANK_LOG.search(path.name)
    return int(m.group(1)) if m else None
