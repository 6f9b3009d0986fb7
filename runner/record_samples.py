"""Record the sample sessions shipped in sessions/: real runs of the runner on this machine.

    python -m runner.record_samples            # re-records sessions/sample-*

Each sample is a real supervised run (never edited afterwards except for its folder name),
labelled with where and how it was recorded in RECORDED.md beside its meta.json.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
SAMPLES = {
    # name: (preset, extra environment, what it shows)
    "sample-cpu-gloo": ("vit-tiny-cpu", {}, "the plain CPU path: torch DDP over gloo"),
    "sample-xla-cpu": ("vit-tiny-xla-cpu", {},
                       "the XLA path (the one Neuron uses) on the CPU with torch-xla: first "
                       "steps hold graph compilation"),
}


def record(name: str, preset: str, env: dict[str, str], what: str, dest_root: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", tmp, "run",
                        "--headless", "--interval", "10", "--name", name, "--preset", preset],
                       check=True, env={**os.environ, **env}, cwd=REPO)
        (recorded,) = [p for p in Path(tmp).iterdir() if (p / "meta.json").exists()]
        dest = dest_root / name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.move(str(recorded), dest)
    meta_path = dest / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["id"] = name  # the folder was renamed; nothing else is touched
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (dest / "RECORDED.md").write_text(
        f"# {name}\n\n"
        f"A real run, recorded by `python -m runner.record_samples` on "
        f"{time.strftime('%Y-%m-%d', time.gmtime(meta['started_at']))}: {what}.\n\n"
        f"- machine: the project's own development machine ({platform.machine()}, "
        f"{psutil.cpu_count()} shared cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"no accelerator, not on EC2: no instance type, so no price)\n"
        f"- preset: `{preset}` (`neurotui run --list-presets`)\n"
        f"- command: `{' '.join(meta['user_command'])}`\n"
        f"- versions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items() if v)}\n")
    return dest


def main() -> None:
    dest_root = REPO / "sessions"
    for name, (preset, env, what) in SAMPLES.items():
        print(f"recording {name} ...", flush=True)
        print(f"  -> {record(name, preset, env, what, dest_root)}")


if __name__ == "__main__":
    main()
