"""Recorded sessions whose steps report phases (data, forward, backward, optimizer), for the
step breakdown's tests: fixed timestamps, no wall clock."""

from __future__ import annotations

from pathlib import Path

from tests.ui.sessions import T0, Recorder, procs


def phased_session(root: Path, *, starved: bool = True, steps: int = 140, ranks: int = 2,
                   name: str | None = None, grow_at: int | None = 90,
                   phases: bool = True) -> Path:
    """`ranks` CPU ranks of a run reporting its step phases: a DataLoader starved (data the
    largest share, and growing from step `grow_at`: the augmentation got heavier) or healthy
    (data a few ms). Steps 1-10 are slow (warm-up). `phases=False`: the same steps without
    phases (a script that does not report them)."""
    rec = Recorder(root, name or ("20260101-150000-starved" if starved else
                                  "20260101-160000-healthy"))
    rec.event(T0 + 0.1, "proc_start", attempt=0, pid=4100, pgid=4100, argv=["torchrun"])
    t = {r: T0 + 2.0 + r * 0.003 for r in range(ranks)}
    for n in range(1, steps + 1):
        for rank in range(ranks):
            wobble = ((n * 7 + rank * 3) % 5) * 0.001
            data = (0.22 if grow_at is None or n < grow_at else 0.30) if starved else 0.004
            split = {"data": data + wobble, "forward": 0.05 + rank * 0.004,
                     "backward": 0.09 + wobble, "optimizer": 0.012}
            if n <= 10:
                split["forward"] += 0.4  # warm-up: left out of the breakdown
            dt = round(sum(split.values()) + 0.002, 4)
            t[rank] += dt
            extra = {"phases": {k: round(v, 4) for k, v in split.items()}} if phases else {}
            rec.step(round(t[rank], 4), rank, n, dt, loss=round(7.0 - n * 0.02, 4), **extra)
    last = max(t.values())
    for s in range(int(last - T0) + 1):
        rec.event(T0 + s, "host", cpu=[100.0, 98.0] if starved else [60.0, 55.0],
                  mem_used=3 * 2**30, mem_total=8 * 2**30, load=[2.0, 1.8, 1.5])
        rec.event(T0 + s, "procs", procs=procs())
    return rec.close()
