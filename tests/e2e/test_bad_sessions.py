"""One session that cannot be read is that session's problem alone (issue #63, parts 1 and 6).

A sessions folder holds a good recorded session (a copy of sessions/sample-cpu-gloo) beside bad
ones: a meta.json nested 1,000 levels deep (2 kB), one of 100 MB, one that is a FIFO, one whose
`started_at` is text. Through the real program, every command on the good session gives what it
gives in a folder holding only that session; each bad one is listed with its reason, and named
on its own gives that reason and exit code 2, never a traceback. Also: `export` never overwrites
a file without --force nor writes into a session folder; compare's JSON is strict; a file that
cannot be read is counted the same by compare and attach.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable

from neurotui.session import layout
from tests.e2e.conftest import REPO, run_cli
from tests.ui.conftest import settle

GOOD = "sample-cpu-gloo"
HUGE_BYTES = 100_000_000
BAD = {
    "deep": "meta.json: unreadable: nested deeper than 32 levels",
    "huge": f"meta.json: unreadable: {HUGE_BYTES:,} bytes, over the 1,048,576",
    "fifo": "meta.json: unreadable: not a regular file",
    "typed": "meta.json: `started_at` is a string, not a number",
}
"""Each bad session's folder name -> its reason, as `ls` and the commands give it."""


def _make_bad(root: Path) -> None:
    for name in BAD:
        (root / name / layout.PROBE_DIR).mkdir(parents=True)
    (root / "deep" / layout.META).write_text("[" * 1000 + "]" * 1000)
    with open(root / "huge" / layout.META, "w") as f:  # valid at both ends, sparse between
        f.write('{"format": 1, "pad": "')
        f.seek(HUGE_BYTES - 2)
        f.write('"}')
    os.mkfifo(root / "fifo" / layout.META)
    meta = json.loads((REPO / "sessions" / GOOD / layout.META).read_text())
    (root / "typed" / layout.META).write_text(json.dumps({**meta, "started_at": "yesterday"}))


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a folder with the good session alone, the same with the bad ones beside it)."""
    clean = tmp_path_factory.mktemp("clean")
    mixed = tmp_path_factory.mktemp("mixed")
    for root in (clean, mixed):
        shutil.copytree(REPO / "sessions" / GOOD, root / GOOD)
    _make_bad(mixed)
    return clean, mixed


def _rows(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line for line in stdout.splitlines()[1:] if line.strip()}


def test_ls_lists_the_good_session_and_each_bad_one_with_its_reason(
        roots: tuple[Path, Path]) -> None:
    _, mixed = roots
    result = run_cli(mixed, "ls", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = _rows(result.stdout)
    assert rows[GOOD].split()[1:3] == ["completed", "13s"], rows[GOOD]
    for name, reason in BAD.items():
        assert rows[name].split()[1] == "unreadable", rows[name]
        assert reason in rows[name], rows[name]


@pytest.mark.parametrize("command", [
    ("compare", GOOD, "--format", "json"),
    ("export", GOOD, "--out", "-"),
    ("export", GOOD, "--what", "events", "--out", "-"),
    ("attach", "--headless", GOOD),
    ("stop", GOOD),
], ids=lambda c: " ".join(c[:2]))
def test_commands_on_the_good_session_are_as_without_the_bad_ones(
        roots: tuple[Path, Path], command: tuple[str, ...]) -> None:
    clean, mixed = roots
    alone, beside_bad = (run_cli(root, *command, timeout=120) for root in (clean, mixed))
    assert "Traceback" not in beside_bad.stderr, beside_bad.stderr
    assert beside_bad.returncode == alone.returncode, beside_bad.stderr
    assert beside_bad.stdout.replace(str(mixed), "ROOT") == \
        alone.stdout.replace(str(clean), "ROOT")
    assert beside_bad.stderr.replace(str(mixed), "ROOT") == \
        alone.stderr.replace(str(clean), "ROOT")
    if command[0] == "compare":
        rows = json.loads(beside_bad.stdout, parse_constant=_not_strict)
        assert [row["session"] for row in rows] == [GOOD]


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("command", [("compare",), ("export", "--out", "-"),
                                     ("attach", "--headless"), ("stop",)],
                         ids=lambda c: c[0])
def test_a_bad_session_named_gives_its_reason(roots: tuple[Path, Path], name: str,
                                              command: tuple[str, ...]) -> None:
    _, mixed = roots
    result = run_cli(mixed, command[0], name, *command[1:], timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert BAD[name].removeprefix("meta.json: ") in result.stderr
    assert result.stdout == ""


def test_compare_of_good_and_bad_compares_the_good_and_names_the_bad(
        roots: tuple[Path, Path]) -> None:
    _, mixed = roots
    result = run_cli(mixed, "compare", GOOD, "deep", "--format", "csv", timeout=60)
    assert result.returncode == 1  # some could not be read: said, the others compared
    assert "Traceback" not in result.stderr
    assert "cannot compare deep" in result.stderr and "nested deeper" in result.stderr
    assert result.stdout.splitlines()[1].startswith(GOOD)


async def test_the_home_screen_lists_the_good_session_and_the_bad_ones(
        roots: tuple[Path, Path]) -> None:
    from neurotui.ui.home_app import NeurotuiApp

    _, mixed = roots
    app = NeurotuiApp(mixed, None, interval_s=3600.0, ascii_mode=False)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#home-table", DataTable)
        rows = {Path(str(key.value)).name: " | ".join(str(c) for c in table.get_row(key))
                for key in table.rows}
        assert set(rows) == {GOOD, *BAD}
        assert "completed" in rows[GOOD]
        for name in BAD:
            assert "unreadable" in rows[name], rows[name]


# -- export's output ---------------------------------------------------------------------------
def test_export_never_overwrites_without_force(roots: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    _, mixed = roots
    out = tmp_path / "steps.csv"
    out.write_text("my notes\n")
    refused = run_cli(mixed, "export", GOOD, "--out", str(out), timeout=60)
    assert refused.returncode == 2
    assert f"{out} exists: not overwritten (add --force to replace it)" in refused.stderr
    assert out.read_text() == "my notes\n"
    forced = run_cli(mixed, "export", GOOD, "--out", str(out), "--force", timeout=60)
    assert forced.returncode == 0, forced.stderr
    assert out.read_text().startswith("t,rank,step,")
    assert len(out.read_text().splitlines()) == 1 + 1200


@pytest.mark.parametrize("where", ["meta", "new-file", "link-to-meta", "other-session"])
def test_export_never_writes_into_a_session_folder(roots: tuple[Path, Path], tmp_path: Path,
                                                   where: str) -> None:
    _, mixed = roots
    meta = mixed / GOOD / layout.META
    out = {"meta": meta, "new-file": mixed / GOOD / "steps.csv",
           "link-to-meta": tmp_path / "steps.csv",
           "other-session": mixed / "deep" / "steps.csv"}[where]
    if where == "link-to-meta":
        out.symlink_to(meta)
    before = meta.read_bytes()
    result = run_cli(mixed, "export", GOOD, "--out", str(out), "--force", timeout=60)
    assert result.returncode == 2
    assert "is inside the session folder" in result.stderr, result.stderr
    assert meta.read_bytes() == before
    assert where in ("meta", "link-to-meta") or not out.exists()


# -- unreadable lines: one count -----------------------------------------------------------------
@pytest.mark.parametrize("damage", ["a-folder", "binary", "truncated"])
def test_an_unreadable_events_file_is_counted_alike_by_compare_and_attach(
        tmp_path: Path, damage: str) -> None:
    session = tmp_path / GOOD
    shutil.copytree(REPO / "sessions" / GOOD, session)
    events = session / layout.EVENTS
    if damage == "a-folder":
        events.unlink()
        events.mkdir()
    elif damage == "binary":
        events.write_bytes(bytes(range(256)) * 40 + b"\x00\xff\n" * 7)
    else:
        events.write_bytes(events.read_bytes()[:5000])
    compared = run_cli(tmp_path, "compare", GOOD, timeout=60)
    attached = run_cli(tmp_path, "attach", "--headless", GOOD, timeout=120)
    for result in (compared, attached):
        assert "Traceback" not in result.stderr, result.stderr
    # (attach's headless lines, its problems among them, go to stdout)
    counts = [_problem_counts(result.stderr + result.stdout) for result in (compared, attached)]
    assert counts[0] == counts[1], (compared.stderr, attached.stdout)
    assert sum(counts[0]) >= 1
    if damage == "a-folder":
        assert counts[0] == (1, 0)


def _problem_counts(output: str) -> tuple[int, int]:
    """(unreadable lines, truncated last lines) as a command reports them."""
    bad = re.search(r"(\d+) unreadable line\(s\)", output)
    cut = re.search(r"(\d+) truncated last line\(s\)", output)
    return int(bad.group(1)) if bad else 0, int(cut.group(1)) if cut else 0


def _not_strict(constant: str) -> None:
    raise AssertionError(f"not strict JSON: {constant}")


# -- strict JSON from a real run -----------------------------------------------------------------
NAN_LOSS_SCRIPT = """
import time
from neurotui import probe
for step in range(1, 31):
    time.sleep(0.02)
    loss = float("nan") if step > 20 else 1.0 / step
    probe.step(16, loss, phases={"data": float("inf") if step == 25 else 0.001})
    print(f"step {step} loss {loss}", flush=True)
"""


@pytest.mark.parametrize("steps_from", ["probe", "log"])
def test_a_run_whose_loss_goes_nan_is_recorded_as_strict_json(tmp_path: Path,
                                                               steps_from: str) -> None:
    """Every file of the session parses with a strict parser; the NaN losses (the probe's, or
    the log lines' with the probe off) are null and named; compare's JSON is strict too."""
    script = tmp_path / "nan_loss.py"
    script.write_text(NAN_LOSS_SCRIPT)
    sessions = tmp_path / "sessions"
    env = {"NEUROTUI_PROBE": "0"} if steps_from == "log" else {}
    result = run_cli(sessions, "run", "--headless", "--name", "nan", "--",
                     sys.executable, str(script), env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    session = next(sessions.iterdir())
    files = [session / layout.META, session / layout.EVENTS,
             *sorted((session / layout.PROBE_DIR).glob("*.jsonl"))]
    steps = []
    for path in files:
        for text in path.read_text().splitlines() if path.suffix == ".jsonl" else \
                [path.read_text()]:
            record = json.loads(text, parse_constant=_not_strict)
            if record.get("kind") == "step" and record.get("src") == steps_from:
                steps.append(record)
    assert [s["step"] for s in steps] == list(range(1, 31))
    assert all(s["loss"] is None and s["nonfinite"]["loss"] == "nan" for s in steps[20:])
    assert all(isinstance(s["loss"], float) and "nonfinite" not in s for s in steps[:20])
    if steps_from == "probe":
        assert steps[24]["nonfinite"] == {"loss": "nan", "phases.data": "inf"}
    compared = run_cli(sessions, "compare", session.name, "--format", "json", timeout=60)
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout, parse_constant=_not_strict)[0]["session"] == session.name
