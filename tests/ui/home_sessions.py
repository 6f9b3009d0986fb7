"""Sessions folders for the home screen's tests: the shipped real recordings, the dashboard
tests' recorded sessions (a crash, a lost run), a corrupt meta.json, a folder without one,
and, for "many sessions", finished runs as their supervisor leaves them (meta.json with the
summary it writes at the end)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from neurotui.session import layout
from neurotui.session.writer import write_json_atomic
from tests.ui.sessions import T0, cpu_only_session, meta, reference_session

REPO = Path(__file__).resolve().parents[2]
SAMPLES = ("sample-cpu-gloo", "sample-xla-cpu")
CORRUPT = "20260102-090000-corrupt"
NO_META = "20260102-100000-no-meta"
_INSTANCES = (("trn1.2xlarge", 1.34375), ("inf2.xlarge", 0.7582), ("g5.xlarge", 1.006),
              ("trn1.32xlarge", 21.5), (None, None))


def samples(root: Path) -> list[Path]:
    """The shipped recordings of real runs (sessions/), copied."""
    return [Path(shutil.copytree(REPO / "sessions" / name, root / name)) for name in SAMPLES]


def mixed_folder(root: Path) -> Path:
    """Real recordings, a crash (no summary: its figures are read), a lost run, a corrupt
    meta.json and a folder of session files without meta.json."""
    root.mkdir(parents=True, exist_ok=True)
    samples(root)
    reference_session(root, end=True)
    cpu_only_session(root)
    corrupt = root / CORRUPT
    (corrupt / layout.PROBE_DIR).mkdir(parents=True)
    (corrupt / layout.META).write_text('{"format": 1, "started_at": 17672')  # cut short
    (root / NO_META / layout.LOGS_DIR).mkdir(parents=True)
    return root


def finished(root: Path, i: int) -> Path:
    """The i-th of many finished runs: a completed (or stopped) run with its summary."""
    instance, price = _INSTANCES[i % len(_INSTANCES)]
    rate = 800.0 + 37.5 * (i % 17)
    started = T0 + 3600.0 * i
    name = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started)) + f"-run{i:03d}"
    wall = 600.0 + 30 * (i % 11)
    summary = {"steady_samples_per_s": rate, "wall_s": wall, "usd_per_hour": price,
               "samples_per_dollar_steady": rate * 3600 / price if price else None}
    folder = root / name
    folder.mkdir(parents=True)
    write_json_atomic(folder / layout.META, meta(
        name, command=["torchrun", "--nproc_per_node=2", "train.py", f"--lr={i}"],
        started_at=started, ended_at=started + wall,
        exit={"code": 0, "signal": None, "reason": "stopped" if i % 7 == 3 else "completed"},
        instance={"type": instance} if instance else None,
        price={"usd_per_hour": price} if price else None, summary=summary))
    return folder


def many_folder(root: Path, count: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        finished(root, i)
    return root


def starting_session(root: Path) -> Path:
    """A session that has just been created (running: its supervisor is on its way)."""
    name = "20260201-000000-starting"
    folder = root / name
    folder.mkdir(parents=True)
    write_json_atomic(folder / layout.META, meta(name, started_at=time.time()))
    return folder
