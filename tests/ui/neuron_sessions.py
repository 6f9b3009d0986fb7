"""Sessions whose Neuron telemetry was recorded through the real collectors, from the stand-in
tools replaying real captures (tests/standins/tool_captures.py): trn2 (neuron-ls's trn2n.48xlarge
capture, 64 logical cores, LNC 2; neuron-monitor's record from the SDK 2.30 doc fragments, with
FLOPs) and trn1 (neuron-ls and neuron-monitor real captures: no FLOPs).

The collectors stamp events with the wall clock; the recorded events are then written again,
unchanged but for their time, into a session with fixed times (tests/ui/sessions.py), so the
dashboard shows the same thing on every run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from neurotui.collect.telemetry import Telemetry
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from tests.standins import tool_captures as replay
from tests.ui.sessions import T0, Recorder

_CAPTURED: dict[str, dict[str, list[dict[str, Any]]]] = {}
RECORD_WAIT_S = 60.0
"""How long the collectors may take to record the stand-ins' first records (a loaded machine
started them slowly enough once that none came in the first second and a half)."""


def recorded_events(capture: str, tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    """The `neuron` and `neuron_devices` events the collectors recorded from the stand-ins
    (STANDIN_CAPTURE=`capture`); recorded once per test process."""
    if capture not in _CAPTURED:
        session = record_through_collectors(capture, tmp_path)
        events = SessionReader(session, telemetry_history=None).load().events
        _CAPTURED[capture] = {kind: [dict(e) for e in events.get(kind, ())]
                              for kind in ("neuron", "neuron_devices")}
    return _CAPTURED[capture]


def record_through_collectors(capture: str, root: Path) -> Path:
    """A session (`root`/standin-`capture`) whose telemetry the supervisor's Telemetry
    recorded for a second and a half from the stand-in tools (STANDIN_CAPTURE=`capture`)."""
    with pytest.MonkeyPatch.context() as mp:
        bin_dir = replay.install(root / f"bin-{capture}")
        (bin_dir / "nvidia-smi").unlink()
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
        mp.setenv("STANDIN_CAPTURE", capture)
        session = root / f"standin-{capture}"
        (session / "logs").mkdir(parents=True)
        write_json_atomic(session / layout.META, {"format": FORMAT_VERSION, "exit": None})
        writer = EventWriter(session / layout.EVENTS)
        telemetry = Telemetry(session, writer, time.time())
        # A second and a half at least; longer on a loaded machine, until the stand-ins'
        # first records came (a test's session needs a `neuron` and a `neuron_devices` one).
        start = time.time()
        while time.time() - start < 1.5 or (
                not _recorded(writer, session, {"neuron", "neuron_devices"})
                and time.time() - start < RECORD_WAIT_S):
            telemetry.poll(time.time(), frozenset({123}))
            time.sleep(0.05)
        telemetry.close()
        writer.close()
    return session


def _recorded(writer: EventWriter, session: Path, kinds: set[str]) -> bool:
    """Whether the session holds an event of each of `kinds` yet (what waits is written
    first)."""
    writer.flush()
    found = {json.loads(line).get("kind") for line in
             (session / layout.EVENTS).read_text().splitlines() if line.strip()}
    return kinds <= found


def neuron_session(root: Path, capture: str, *, seconds: int = 60,
                   **meta_extra: Any) -> Path:
    """Two ranks stepping for `seconds`, with the stand-in's recorded Neuron telemetry
    once a second (its records in turn), re-stamped from T0."""
    events = recorded_events(capture, root)
    instance = "trn2.48xlarge" if capture == "trn2" else "trn1.2xlarge"
    rec = Recorder(root, f"20260101-160000-{capture}", instance={
        "type": instance, "source": "neuron-ls", "region": "us-east-1"}, **meta_extra)
    rec.event(T0 + 0.5, "source_status", source="neuron-monitor", ok=True, message="running")
    for snapshot in events["neuron_devices"][:1]:
        rec.event(T0 + 0.5, "neuron_devices", **{k: v for k, v in snapshot.items()
                                                 if k not in ("t", "kind")})
    # The stand-in's distinct records, in the order first seen: how many it printed in its
    # second and a half varies, and must not change what the session holds.
    samples: list[dict[str, Any]] = []
    for e in events["neuron"]:
        fields = {k: v for k, v in e.items() if k != "t"}
        if fields not in samples:
            samples.append(fields)
    assert samples, f"the collectors recorded no neuron sample from the {capture} stand-in"
    for s in range(1, seconds + 1):
        sample = samples[(s - 1) % len(samples)]
        rec.event(T0 + s, "neuron", **{k: v for k, v in sample.items()
                                       if k not in ("t", "kind")})
        rec.event(T0 + s, "host", cpu=[20.0, 25.0, 18.0, 22.0], mem_used=40 * 2**30,
                  mem_total=64 * 2**30, load=[1.0, 1.0, 1.0])
    for n in range(1, seconds * 2):
        for rank in (0, 1):
            rec.step(T0 + 2 + n * 0.5, rank, n, 0.5)
    return rec.close()
