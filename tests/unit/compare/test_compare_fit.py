"""`neurotui compare` read in a terminal: the table fits the width (turned when that reads
better), says which run is the better deal, and re-prices runs at what-if prices.

Hand figures (tests.unit.compare.test_compare's sessions): trn1.2xlarge runs 2 ranks x 16 samples at
0.1 s/step = 320 samples/s; at a what-if $1.00/h that is 320 x 3600 / 1.00 = 1,152,000
samples per dollar, and an epoch of 1,281,167 samples takes 4,003.6 s = $1.1121. inf2.xlarge
runs 32 / 0.1275 = 250.98 samples/s; at the table's eu-west-1 price, $0.94775/h (SkyPilot's
catalog, 2026-11-27), that is 250.98 x 3600 / 0.94775 = 953,342 samples per dollar, 0.8276x
trn1's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neurotui import compare
from neurotui.compare.layout import (
    DECIDING,
    THEN,
    column_width,
    decision_line,
    ordered_columns,
    render_fitted,
    render_turned,
)
from neurotui.compare.whatif import WhatIf, WhatIfError, parse_price_args, reprice
from neurotui.pricing.live import LivePrice
from neurotui.pricing.table import builtin_table
from tests.ui.sessions import recorded_job
from tests.unit.compare.test_compare import make_session

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "sessions"
TRN1_RATE = 2 * 16 / 0.1
INF2_RATE = 2 * 16 / 0.1275


def run(*args: str, sessions: Path = SAMPLES, columns: int | None = None
        ) -> subprocess.CompletedProcess[str]:
    """The real program, its output piped; COLUMNS set only when asked."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions),
                           "compare", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "sessions"
    make_session(r, "20260101-100000-trn1", instance="trn1.2xlarge", price=1.34375, dt=0.1)
    make_session(r, "20260101-110000-inf2", instance="inf2.xlarge", price=0.7582, dt=0.1275)
    make_session(r, "20260101-120000-laptop", instance=None, price=None, dt=0.05)
    return r


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_the_samples_fit_the_width(width: int) -> None:
    done = run("sample-cpu", "sample-xla", "--price", "sample-cpu=1.34375", "--price",
               "sample-xla=0.7582", columns=width)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= width, done.stdout
    text = done.stdout
    assert "sample-cpu-gloo" in text and "sample-xla-cpu" in text
    for header in ("STEP MEDIAN", "SAMPLES/S", "PRICE/H", "SAMPLES/$", "RELATIVE"):
        assert header in text, (width, header)
    # 6,893,902 samples/$ = 2,573.2 samples/s x 3600 / $1.34375 (the run's own throughput).
    assert "6,893,902" in text
    assert any(line.startswith("Better deal: sample-cpu-gloo, 1.47x (+47%)") for line in lines)
    turned = any(line.startswith("SAMPLES/$ ") for line in lines)
    # Two runs: turned (a row per figure) until the table shows at least half its columns.
    assert turned == (width < 200), text


def test_piped_without_columns_keeps_every_column() -> None:
    done = run("sample-cpu", "sample-xla")
    assert done.returncode == 0, done.stderr
    rows = compare.compare_rows([SAMPLES / "sample-cpu-gloo", SAMPLES / "sample-xla-cpu"])
    header = done.stdout.splitlines()[0]
    assert header.split() == " ".join(c.header for c in compare.table_columns(rows)).split()
    assert "Better deal: unknown, no run has a price" in done.stdout


def test_wide_and_columns() -> None:
    wide = run("sample-cpu", "sample-xla", "--wide", columns=80)
    assert wide.returncode == 0, wide.stderr
    header = wide.stdout.splitlines()[0]
    assert "SAMPLES/$" in header and "SAMPLES/$ ALL-IN" in header and "DATA" in header
    assert len(header) > 80
    picked = run("sample-cpu", "sample-xla", "--columns", "samples_per_s,RELATIVE", columns=80)
    assert picked.returncode == 0, picked.stderr
    assert picked.stdout.splitlines()[:3] == [
        "SESSION          SAMPLES/S  RELATIVE",
        "sample-cpu-gloo    2,573.2       n/a",
        "sample-xla-cpu       990.7       n/a"]
    wrong = run("sample-cpu", "--columns", "samples,relative")
    assert wrong.returncode == 2
    assert "--columns: no column 'samples'; columns: session, state" in wrong.stderr
    assert wrong.stdout == ""


def test_what_if_prices_against_hand_figures(root: Path) -> None:
    done = run("trn1", "inf2", "laptop", "--price", "trn1.2xlarge=1.00", "--region",
               "eu-west-1", "--dataset-size", "1281167", "--format", "json", sessions=root)
    assert done.returncode == 0, done.stderr
    trn1, inf2, laptop = json.loads(done.stdout)
    assert trn1["usd_per_hour"] == 1.0
    assert trn1["samples_per_dollar_steady"] == pytest.approx(1_152_000, rel=1e-9)
    assert trn1["epoch_s"] == pytest.approx(4003.646875, rel=1e-9)
    assert trn1["usd_per_epoch"] == pytest.approx(1.1121241319, rel=1e-9)
    assert inf2["usd_per_hour"] == 0.94775
    assert inf2["samples_per_dollar_steady"] == pytest.approx(953_341.55, rel=1e-6)
    assert inf2["relative_price_performance"] == pytest.approx(0.827553, rel=1e-5)
    # Measured figures are unchanged by a price.
    assert trn1["samples_per_s"] == pytest.approx(TRN1_RATE)
    assert inf2["samples_per_s"] == pytest.approx(INF2_RATE)
    assert laptop["usd_per_hour"] is None and laptop["samples_per_dollar_steady"] is None

    table = run("trn1", "inf2", "laptop", "--price", "trn1.2xlarge=1.00", "--region",
                "eu-west-1", sessions=root, columns=120)
    text = table.stdout
    assert "Better deal: 20260101-100000-trn1, 1.21x (+21%) the samples per dollar of " \
           "20260101-110000-inf2" in " ".join(text.split())
    said = " ".join(text.split())
    assert "inf2.xlarge $0.94775/h on-demand eu-west-1" in said
    assert "as of 2026-11-27" in said and "recorded $0.7582/h" in said
    assert "no price in eu-west-1: instance type unknown" in said


def test_a_region_without_a_price_gives_none_never_another_regions(root: Path) -> None:
    done = run("trn1", "--region", "eu-west-1", "--format", "json", sessions=root)
    (trn1,) = json.loads(done.stdout)
    assert trn1["usd_per_hour"] is None and trn1["samples_per_dollar_steady"] is None
    table = run("trn1", "--region", "eu-west-1", sessions=root, columns=100)
    said = " ".join(table.stdout.split())
    assert "trn1.2xlarge has no on-demand price for eu-west-1" in said
    assert "priced for us-east-1, us-east-2, us-west-2" in said


def test_spot_given_or_live(root: Path) -> None:
    sessions = [compare.load_session(root / "20260101-100000-trn1"),
                compare.load_session(root / "20260101-110000-inf2")]

    def live(itype: str, region: str) -> LivePrice:
        assert (itype, region) == ("inf2.xlarge", "us-east-1")  # the recorded region
        return LivePrice(0.2275, "aws-spot-history", as_of="2026-12-06")

    priced, choices = reprice(sessions, WhatIf({"trn1.2xlarge": 0.5}, spot=True),
                              table=builtin_table(), live_spot=live)
    assert [c.basis for c in choices] == ["--price spot", "spot us-east-1 2026-12-06"]
    assert priced[1].meta["price"]["spot"] is True
    rows = compare.compare_rows(priced)
    assert rows[0]["samples_per_dollar_steady"] == pytest.approx(320 * 3600 / 0.5)
    assert rows[1]["samples_per_dollar_steady"] == pytest.approx(INF2_RATE * 3600 / 0.2275)
    # The sessions themselves keep what was recorded.
    assert sessions[1].meta["price"]["usd_per_hour"] == 0.7582

    def down(itype: str, region: str) -> LivePrice:
        return LivePrice(None, "aws-spot-history", "boto3 not installed")

    _, choices = reprice(sessions[1:], WhatIf(spot=True), table=builtin_table(),
                         live_spot=down)
    assert choices[0].record["usd_per_hour"] is None
    assert "no spot price for inf2.xlarge in us-east-1: boto3 not installed" in choices[0].note


@pytest.mark.parametrize("bad", ["trn1.2xlarge", "=1", "trn1.2xlarge=0", "x=-1", "x=abc",
                                 "x=5000"])
def test_bad_price_arguments_are_refused(bad: str) -> None:
    with pytest.raises(WhatIfError, match=r"--price"):
        parse_price_args([bad])
    done = run("sample-cpu", "--price", bad)
    assert done.returncode == 2 and done.stdout == ""
    assert "--price" in done.stderr


def test_a_job_of_two_nodes_costs_two_instances(tmp_path: Path) -> None:
    """Job J: two trn1.32xlarge nodes (recorded at $21.50/h each, $43.00 together); at a
    what-if $15/h an instance it costs $30/h."""
    recorded_job(tmp_path)
    done = run("J", "--price", "trn1.32xlarge=15", "--format", "json", sessions=tmp_path)
    assert done.returncode == 0, done.stderr
    (job,) = json.loads(done.stdout)
    assert job["nodes"] == 2 and job["usd_per_hour"] == 30.0
    assert job["samples_per_dollar_steady"] == pytest.approx(job["samples_per_s"] * 3600 / 30)
    table = run("J", "--price", "trn1.32xlarge=15", sessions=tmp_path, columns=100)
    said = " ".join(table.stdout.split())
    assert "--price x2" in said and "2 nodes: $30.00/h together" in said


def test_the_screen_is_not_offered_what_it_cannot_show() -> None:
    done = run("sample-cpu", "--tui", "--price", "sample-cpu=1")
    assert done.returncode == 2 and "compare --tui shows the recorded prices" in done.stderr


def test_a_price_naming_nothing_is_said_and_the_rest_compared(root: Path) -> None:
    done = run("trn1", "--price", "trn9.2xlarge=1", sessions=root, columns=100)
    assert done.returncode == 0
    assert "--price trn9.2xlarge: no compared session or instance type" in done.stderr
    assert "SAMPLES/$" in done.stdout


def test_a_given_price_says_what_it_is(root: Path) -> None:
    """A Capacity Block or Savings Plan price the table has no source for, given by the
    user with what it is: the table and the decision line say so."""
    assert parse_price_args(["trn1.2xlarge=$0.85:Savings Plan 1yr"]) == {"trn1.2xlarge": 0.85}
    done = run("trn1", "inf2", "--price", "trn1.2xlarge=0.85:Savings Plan 1yr",
               sessions=root, columns=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    # 320 x 3600 / 0.85 = 1,355,294 against inf2's recorded 250.98 x 3600 / 0.7582 = 1,191,677.
    assert "1,355,294" in said and "1,191,677" in said
    assert "Better deal: 20260101-100000-trn1, 1.14x (+14%)" in said
    assert "at $0.85/h (Savings Plan 1yr, --price) vs $0.7582/h (recorded on-demand" in said
    assert "trn1.2xlarge $0.85/h Savings Plan 1yr (--price, what-if; recorded $1.34375/h)" \
        in said


def _row(name: str, **figures: object) -> dict[str, object]:
    return {"session": name, "phases_s": {}, **figures}


def test_decision_line() -> None:
    rows = [_row("a", samples_per_dollar_steady=1_000_000.0, usd_per_hour=1.34375,
                 price_basis="recorded on-demand us-east-1 2026-07-20"),
            _row("b", samples_per_dollar_steady=1_390_000.0, usd_per_hour=0.7582,
                 price_basis="--price"),
            _row("c", samples_per_dollar_steady=None)]
    assert decision_line(rows) == (
        "Better deal: b, 1.39x (+39%) the samples per dollar of a: 1.4M vs 1.0M, at "
        "$0.7582/h (--price) vs $1.34375/h (recorded on-demand us-east-1 2026-07-20).")
    assert decision_line(rows[:1] + rows[2:]).startswith(
        "Better deal: only a has a price (1.0M samples/$ at $1.34375/h")
    assert decision_line(rows[2:]).startswith("Better deal: unknown, no run has a price")


def test_unknown_columns_go_last_narrowest_first() -> None:
    rows = [_row("a", samples_per_s=1.0, phases_s={"forward": 0.1, "data": 0.02})]
    columns = ordered_columns(rows)
    keys = [c.key for c in columns]
    assert keys[:len(DECIDING)] == list(DECIDING)
    # Columns this module does not name (phases; others' added later) after the named ones,
    # narrowest first: DATA before FORWARD, though a step runs FORWARD after DATA either way.
    known = len(DECIDING) + len([k for k in keys if k in THEN])
    assert keys.index("phase_data_s") > known - 1
    assert keys.index("phase_data_s") < keys.index("phase_forward_s")
    widths = [column_width(rows, c) for c in columns[known:]]
    assert widths == sorted(widths)
    rows[0]["phases_s"] = {"backward": 0.1, "dt": 0.02}
    keys = [c.key for c in ordered_columns(rows)]
    assert keys.index("phase_dt_s") < keys.index("phase_backward_s")  # DT narrower


def test_turned_layout_groups_sessions_to_the_width() -> None:
    rows = [_row(f"session-{i:02d}-with-a-long-name", samples_per_s=1000.0 * (i + 1))
            for i in range(5)]
    lines = render_turned(rows, ordered_columns(rows), 80)
    assert max(len(line) for line in lines) <= 80
    blocks = "\n".join(lines).split("\n\n")
    assert len(blocks) == 3  # two sessions a block at 80 columns
    assert blocks[0].splitlines()[0].split()[1:] == ["session-00-with-a-long-name",
                                                     "session-01-with-a-long-name"]
    assert "SAMPLES/S" in blocks[2] and "5,000.0" in blocks[2]


def test_a_name_wider_than_the_screen_is_cut_not_wrapped() -> None:
    rows = [_row("x" * 120, samples_per_s=1.0)]
    text = render_fitted(rows, 60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "…" in text
