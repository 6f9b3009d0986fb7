"""The automatic probe: step times and samples from inside every rank, without code changes.

Jobs that neurotui launches get `site/` prepended to PYTHONPATH (torchrun passes the
environment on to every rank). Its `sitecustomize` arms `neurotui_autoprobe`, which waits for
the process to import torch and then hooks two public points of every PyTorch training loop:
each optimizer's `step()` (torch's global step post-hook) and each batch a DataLoader (or
torch-xla's device loader) hands out. Each optimizer step becomes one `step` record with
`src: "auto"` in probe/auto-rank-<R>.jsonl. The files in site/ are standard library only, so
they work in a job whose Python cannot import neurotui itself.

This package may import only the standard library: the supervisor imports it to build the job's
environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
"""Prepended to the job's PYTHONPATH: holds sitecustomize.py and neurotui_autoprobe.py."""
ENABLE_ENV = "NEUROTUI_AUTO_PROBE"


def job_env(base: Mapping[str, str], enabled: bool) -> dict[str, str]:
    """The job's environment with the automatic probe armed (or not, with it said so)."""
    env = dict(base)
    if not enabled:
        env[ENABLE_ENV] = "0"
        return env
    env[ENABLE_ENV] = "1"
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(SITE_DIR) not in paths:
        env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *paths])
    return env
