"""The mark a profile leaves on the session: the alerts panel's note of the steps profiled
(not steady-state times) and where the traces are, as of the clock (replay too)."""

from __future__ import annotations

from neurotui.live.alerts import profiles_taken


def record(t: float, what: str, rank: int, **fields) -> dict:
    return {"t": t, "kind": "profile", "what": what, "rank": rank, "id": "ab12",
            "first_step": 41, "last_step": 45, "file": f"profiles/ab12/rank-{rank}.json.gz",
            **fields}


RECORDS = [record(10.0, "started", 0), record(10.0, "started", 1), record(10.5, "done", 0),
           record(10.6, "failed", 1, error="RuntimeError: profiler already running"),
           {**record(20.0, "started", 0), "id": "cd34", "first_step": 90, "last_step": 92}]


def test_the_steps_profiled_and_the_traces_are_noted_as_of_the_clock() -> None:
    assert profiles_taken(RECORDS, 9.9) is None
    during = profiles_taken(RECORDS, 10.2)
    assert during is not None and during.severity == "info"
    assert during.evidence == ("rank 0, 1 profiling steps 41-45",)
    after = profiles_taken(RECORDS, 15.0)
    assert after is not None and after.title == "1 profile taken"
    assert after.evidence == (
        "steps 41-45 of rank 0 profiled (not steady-state times): traces in profiles/ab12/",
        "profile ab12 failed in rank 1: RuntimeError: profiler already running "
        "(training went on)")
    later = profiles_taken(RECORDS, 30.0)
    assert later is not None and later.title == "2 profiles taken"
    assert later.evidence[-1] == "rank 0 profiling steps 90-92"


def test_ranks_that_took_the_request_at_different_steps_say_each_range() -> None:
    records = [record(1.0, "done", 0), {**record(1.0, "done", 1), "first_step": 42,
                                        "last_step": 46}, record(1.0, "done", 2)]
    said = profiles_taken(records, 2.0)
    assert said is not None and said.evidence == (
        "steps 41-45 of rank 0, 2, 42-46 of rank 1 profiled (not steady-state times): "
        "traces in profiles/ab12/",)
