"""In-training-script API: one call per step. Standard library only.

    from neurotui import probe
    probe.step(samples=16, loss=loss_value)            # once per completed step
    probe.step(samples=16, phases={"data": 0.01, "forward": 0.05})

Outside neurotui (no NEUROTUI_SESSION in the environment) every call is a cheap no-op. Inside,
each call appends one line to the session's probe/rank-<R>.jsonl with a single os.write on an
O_APPEND descriptor: no thread, no socket, nothing buffered to lose, and the steps land on disk
even if the supervisor dies. It never raises into the training loop: a full disk drops steps
(counted, and said in the file once it has room again); any other error switches it off for
the rest of the process.

Pass `loss` as a Python float. A tensor is not converted, because float(tensor) forces a device
sync (on XLA, a graph execution) that would change the very timing being measured.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time

from neurotui.autoprobe.site.neurotui_autoprobe import RecordFile

SESSION_ENV = "NEUROTUI_SESSION"
DISABLE_ENV = "NEUROTUI_PROBE"  # "0" turns the probe off (to test the log-parsing path)
ATTEMPT_ENV = "NEUROTUI_ATTEMPT"

_file: RecordFile | None = None
_disabled = False
_rank = 0
_attempt = 0
_step = 0
_last_t: float | None = None
_phase_keys: dict[str, str] = {}
_told_refusal = False
MAX_STEP = 2**53
"""Steps the session can hold exactly (readers skip larger ones as out of range)."""


def _open() -> RecordFile | None:
    global _file, _disabled, _rank, _attempt
    session = os.environ.get(SESSION_ENV)
    if not session or os.environ.get(DISABLE_ENV) == "0":
        _disabled = True
        return None
    _rank = int(os.environ.get("RANK", "0"))
    _attempt = int(os.environ.get(ATTEMPT_ENV, "0"))
    probe_dir = os.path.join(session, "probe")
    os.makedirs(probe_dir, exist_ok=True)
    _file = RecordFile(os.path.join(probe_dir, f"rank-{_rank}.jsonl"), _rank)
    return _file


def enabled() -> bool:
    """True when running under neurotui and the probe is working."""
    if _file is None and not _disabled:
        try:
            _open()
        except Exception:
            _switch_off()
    return _file is not None


def step(samples: int | float, loss: float | None = None, *, step: int | None = None,
         dt: float | None = None, phases: dict[str, float] | None = None) -> None:
    """Record one completed step of this rank: call it where the step's work has finished.

    `dt` (seconds) defaults to the time since the previous call; pass it to time the first
    step too (from when the model was ready), which holds the first graph compile on XLA.
    """
    global _step, _last_t
    if _disabled:
        return
    try:
        file = _file if _file is not None else _open()
        if file is None:
            return
        if step is not None and not (isinstance(step, int) and 0 <= step < MAX_STEP):
            _refuse(f"step={step!r} cannot be recorded (a whole number from 0 to 2**53)")
            return
        now = time.time()
        nonfinite: list[str] = []  # strict JSON: NaN and infinities are null, named here
        if isinstance(dt, (int, float)) and not isinstance(dt, bool):
            dt_text = _number(float(dt), '"dt"', nonfinite)
        else:
            dt_text = "null" if _last_t is None else repr(now - _last_t)
        _last_t = now
        _step = step if step is not None else _step + 1
        loss_text = _number(loss, '"loss"', nonfinite)
        samples_text = _number(samples, '"samples"', nonfinite)
        phase_text = "null" if not phases else _phases_json(phases, nonfinite)
        flags = f',"nonfinite":{{{",".join(nonfinite)}}}' if nonfinite else ""
        # Formatted by hand: json.dumps of the whole record costs several times more.
        line = (f'{{"t":{now!r},"kind":"step","rank":{_rank},"step":{int(_step)},'
                f'"samples":{samples_text},"loss":{loss_text},"dt":{dt_text},'
                f'"phases":{phase_text},"src":"probe","attempt":{_attempt}{flags}}}\n')
        file.write(line, 1, now)
    except Exception:
        _switch_off()


def _number(value: object, place: str, nonfinite: list[str]) -> str:
    """`value` as strict JSON: a number, else null; a NaN or infinity is null too, and its
    `place` (a JSON string) goes into `nonfinite` with what it was (session/FORMAT.md)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        what = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        nonfinite.append(f'{place}:"{what}"')
        return "null"
    return repr(value)


def _phases_json(phases: dict[str, float], nonfinite: list[str]) -> str:
    # Keys are escaped once and cached: json.dumps on every call would double the probe's cost.
    parts = []
    for name, seconds in phases.items():
        key = _phase_keys.get(name)
        if key is None:
            key = _phase_keys[name] = json.dumps(str(name))
        if isinstance(seconds, float) and not math.isfinite(seconds):
            _number(seconds, json.dumps(f"phases.{name}"), nonfinite)
            parts.append(f"{key}:null")
        else:
            parts.append(f"{key}:{_number(seconds, key, nonfinite)}")
    return "{" + ",".join(parts) + "}"


def _refuse(why: str) -> None:
    """Leave out a call it cannot record, and say so once (in the rank's own log)."""
    global _told_refusal
    if not _told_refusal:
        _told_refusal = True
        print(f"neurotui.probe: {why}; such calls are left out", file=sys.stderr, flush=True)


def _switch_off() -> None:
    global _disabled
    _disabled = True


def _reset_for_tests() -> None:
    """Forget the open file and counters (tests change the environment between calls)."""
    global _file, _disabled, _step, _last_t
    if _file is not None:
        with contextlib.suppress(OSError):
            os.close(_file.fd)
    _file, _disabled, _step, _last_t = None, False, 0, None
