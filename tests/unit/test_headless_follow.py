"""--headless following a session (headless.follow): what the run records as it ends is
printed, however its end falls between the follower's reads."""

from __future__ import annotations

import io
import json
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
