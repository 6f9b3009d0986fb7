"""A run on a (stand-in) Neuron machine: telemetry recorded, instance detected, priced."""

from __future__ import annotations

import os
import sys

import pytest

from neurotui.session.reader import SessionReader
from tests.e2e.conftest import meta, only_session, run_cli
from tests.standins import tool_captures as replay

pytestmark = pytest.mark.slow

SCRIPT = ("import time\n"
          "for i in range(1, 41):\n"
          "    print(f'neurotui-runner step={i} rank=0 samples=16 loss=1.0 dt=0.1', flush=True)\n"
          "    time.sleep(0.1)\n")


def test_neuron_instance_is_detected_priced_and_its_telemetry_recorded(sessions, tmp_path):
    bin_dir = replay.install(tmp_path / "bin")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "AWS_EC2_METADATA_DISABLED": "true"}
    result = run_cli(sessions, "run", "--headless", "--interval", "1", "--",
                     sys.executable, "-c", SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    session = only_session(sessions)
    m = meta(session)
    assert m["instance"] == {"type": "trn1.2xlarge", "source": "neuron-ls", "region": None}
    assert m["price"]["usd_per_hour"] == 1.34375
    assert "built-in table" in m["price"]["note"]
    events = SessionReader(session).load().events
    assert events["neuron"] and events["neuron_devices"]
    # 16 samples per 0.1 s = 160 samples/s; at $1.34375/h that is about 428,651 samples/$.
    assert "samples/$" in result.stdout


def test_without_any_tool_the_run_is_unpriced_and_says_why(sessions, tmp_path):
    result = run_cli(sessions, "run", "--headless", "--", sys.executable, "-c", SCRIPT,
                     env={"AWS_EC2_METADATA_DISABLED": "true"})
    assert result.returncode == 0, result.stderr
    m = meta(only_session(sessions))
    assert m["price"]["usd_per_hour"] is None and m["instance"] is None
    assert "AWS_EC2_METADATA_DISABLED" in m["price"]["note"]
    assert "no price" in result.stdout
