"""--headless following a session (headless.follow): what the run records as it ends is
printed, however its end falls between the follower's reads."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

from neurotui import headless
from neurotui.session import layout
from neurotui.session.status import session_status
from tests.ui.sessions import T0, Recorder


def test_alerts_recorded_as_the_run_ends_are_printed(tmp_path: Path) -> None:
    """The supervisor ends a run by recording its alerts' ends, then its exit in meta.json.
    Here that happens after the follower read the session and before it asks whether the
    run goes on (a race seen in CI: the stall alert's end was not printed)."""
    rec = Recorder(tmp_path, "20260101-120000-stall")
    rec.event(T0 + 1, "alert", key="stalled", state="start", severity="error",
              title="no progress on rank(s) 0", evidence=["rank 0: no step for 11 s"],
              advice="look at the rank's log")
    session = rec.close()
    asked: list[bool] = []

    def run_ends_now() -> bool:
        if not asked:  # the supervisor's last moments, between the read and this question
            with open(session / layout.EVENTS, "a", encoding="utf-8") as events:
                events.write(json.dumps({"t": T0 + 20, "kind": "alert", "key": "stalled",
                                         "state": "end", "why": "the job completed"}) + "\n")
            rec.update_meta(ended_at=T0 + 20, exit={"code": 0, "signal": None,
                                                    "reason": "completed", "attempts": 1})
        running = session_status(session).running
        asked.append(running)
        return running

    out = io.StringIO()
    ended = headless.follow(headless.model_for(session), out=out, alive=run_ends_now)
    assert ended is not None and ended["reason"] == "completed"
    assert asked == [False]
    printed = out.getvalue()
    assert "neurotui: alert (error): no progress on rank(s) 0" in printed
    assert "neurotui: alert over: stalled (the job completed)" in printed
    assert printed.index("alert (error)") < printed.index("alert over")


def test_a_line_is_worked_out_each_interval_and_alerts_come_as_recorded(
        tmp_path: Path, monkeypatch) -> None:
    """The follower reads the session each second (an alert recorded now is printed within
    about a second), but takes the steps in and works the figures out only for a line,
    every `interval_s`: doing it each second made following a 32-rank run cost as much as
    the dashboard."""
    rec = Recorder(tmp_path, "20260101-120000-quiet")
    for k in range(1, 41):
        rec.step(T0 + k * 0.1, 0, k, 0.1)
    session = rec.close()
    monkeypatch.setattr(headless, "NOTICE_S", 0.1)
    refreshes: list[float] = []
    model = headless.model_for(session)
    real_refresh = model.refresh

    def counted_refresh(**kwargs):
        refreshes.append(time.monotonic())
        return real_refresh(**kwargs)

    monkeypatch.setattr(model, "refresh", counted_refresh)
    started = time.monotonic()
    asked: list[float] = []

    def alive() -> bool:  # (the run ends by its exit in meta.json, below: at 2.5 s)
        asked.append(time.monotonic())
        return time.monotonic() - started < 10  # a follower that missed it ends all the same

    def write_later() -> None:
        time.sleep(0.35)
        with open(session / layout.EVENTS, "a", encoding="utf-8") as events:
            events.write(json.dumps({"t": T0 + 5, "kind": "alert", "key": "stalled",
                                     "state": "start", "severity": "error",
                                     "title": "no progress on rank(s) 0"}) + "\n")
        alerted.append(time.monotonic())
        for k in range(41, 61):  # read at a second's look, taken in at the next line's
            rec.step(T0 + k * 0.1, 0, k, 0.1)
        time.sleep(2.15)
        # Noted before the replace: the follower may see it and print before this thread
        # runs again (CI met exactly that).
        exited.append(time.monotonic())
        rec.update_meta(ended_at=T0 + 6, exit={"code": 0, "signal": None,
                                               "reason": "completed", "attempts": 1})

    alerted: list[float] = []
    exited: list[float] = []
    out = _LineTimes()
    writer = threading.Thread(target=write_later)
    writer.start()
    ended = headless.follow(model, interval_s=2.0, out=out, alive=alive)
    writer.join()
    assert ended is not None and ended["reason"] == "completed"
    # Two lines' figures (at the start and 2 s in) and the end's: not one a read.
    assert len(refreshes) == 3, refreshes
    alert_printed = out.when("alert (error)")
    assert alert_printed - alerted[0] < 0.5
    # The end is seen when meta.json is replaced, not at the next read's time.
    assert out.when("steps from") > exited[0] and time.monotonic() - exited[0] < 0.5
    assert len(asked) == 1  # whether the run goes on: every ALIVE_S, not at each read
    assert "| step 60 |" in [text for _, text in out.times if "steps from" in text][-1]


class _LineTimes(io.StringIO):
    """Output that notes when each line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        if text.strip():
            self.times.append((time.monotonic(), text))
        return super().write(text)

    def when(self, part: str) -> float:
        """When the last line holding `part` was written."""
        return [t for t, text in self.times if part in text][-1]


def test_the_heap_is_set_aside_after_the_first_line_and_given_back_at_the_end(
        tmp_path: Path, monkeypatch) -> None:
    """After its first line the follower sets what it built aside from the garbage
    collector's full collections (live/heap.py); what it set aside is given back when it
    returns (a process that goes on, as tests, must not keep it for good)."""
    import gc

    rec = Recorder(tmp_path, "20260101-120000-heap")
    for k in range(1, 11):
        rec.step(T0 + k * 0.1, 0, k, 0.1)
    session = rec.close()
    monkeypatch.setattr(headless, "NOTICE_S", 0.1)

    class Counted(io.StringIO):
        """Output that notes, at each line, how many objects are set aside."""

        def __init__(self) -> None:
            super().__init__()
            self.counts: list[int] = []

        def write(self, text: str) -> int:
            if text.strip():
                self.counts.append(gc.get_freeze_count())
            return super().write(text)

    def end_soon() -> None:
        time.sleep(0.7)
        rec.update_meta(ended_at=T0 + 2, exit={"code": 0, "signal": None,
                                               "reason": "completed", "attempts": 1})

    threading.Thread(target=end_soon, daemon=True).start()
    out = Counted()
    ended = headless.follow(headless.model_for(session), interval_s=0.2, out=out)
    assert ended is not None and ended["reason"] == "completed"
    assert len(out.counts) >= 2, out.getvalue()
    assert out.counts[0] == 0  # the first line, printed before it was set aside
    assert all(count > 0 for count in out.counts[1:])  # the lines after it
    assert gc.get_freeze_count() == 0  # given back
