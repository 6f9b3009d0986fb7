"""The home screen's rows, read from meta.json alone (session/listing.py)."""

from __future__ import annotations

import time
from pathlib import Path

from neurotui.session.listing import (
    BROKEN,
    UNREADABLE,
    matches,
    read_entries,
    sort_entries,
)
from tests.ui.home_sessions import (
    CORRUPT,
    NO_META,
    finished,
    mixed_folder,
    starting_session,
)


def test_states_figures_and_problems(tmp_path: Path) -> None:
    root = mixed_folder(tmp_path)
    (tmp_path / "not-a-session").mkdir()  # an empty folder is not listed
    (tmp_path / "notes.txt").write_text("x")
    entries = {e.name: e for e in read_entries(root)}
    assert set(entries) == {"sample-cpu-gloo", "sample-xla-cpu", "20260101-120000-vit-b16",
                            "20260101-130000-cpu", CORRUPT, NO_META}
    gloo = entries["sample-cpu-gloo"]
    assert gloo.state == "completed" and not gloo.needs_read
    assert gloo.samples_per_s is not None and round(gloo.samples_per_s, 1) == 2573.2
    assert gloo.samples_per_dollar is None  # no price recorded: unknown, not 0
    crashed = entries["20260101-120000-vit-b16"]
    assert crashed.state == "crashed" and crashed.instance == "trn1.2xlarge"
    assert crashed.needs_read and crashed.samples_per_s is None  # no summary: read later
    assert crashed.duration_s is not None and 72 < crashed.duration_s < 73
    lost = entries["20260101-130000-cpu"]
    assert lost.state == "lost" and lost.duration_s is None  # no end recorded
    corrupt = entries[CORRUPT]
    assert corrupt.state == UNREADABLE and not corrupt.readable
    assert corrupt.problem is not None and corrupt.problem.startswith("meta.json: unreadable:")
    assert entries[NO_META].state == BROKEN and "no meta.json" in str(entries[NO_META].problem)


def test_a_running_session_is_read_for_its_figures(tmp_path: Path) -> None:
    starting_session(tmp_path)
    (entry,) = read_entries(tmp_path, now=time.time() + 5)
    assert entry.running and entry.needs_read
    assert entry.duration_s is not None and 4 < entry.duration_s < 10


def test_sorting_puts_unknown_figures_last_either_way(tmp_path: Path) -> None:
    for i in range(5):
        finished(tmp_path, i)  # run004 has no price: no samples per dollar
    entries = read_entries(tmp_path)
    for descending in (False, True):
        ordered = sort_entries(entries, "samples_per_dollar", descending)
        assert ordered[-1].name.endswith("run004")
        known = [e.samples_per_dollar for e in ordered[:-1]]
        assert known == sorted(known, reverse=descending)  # type: ignore[type-var]
    assert [e.name[-6:] for e in sort_entries(entries, "started")] == \
        [f"run{i:03d}" for i in range(5)]


def test_filter_words(tmp_path: Path) -> None:
    entry = read_entries(Path(finished(tmp_path, 1)).parent)[0]
    assert matches(entry, "") and matches(entry, "INF2 completed")
    assert matches(entry, "--lr=1") and not matches(entry, "trn1")
