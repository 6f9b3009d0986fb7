"""The run summary, checked by hand: the issue's arithmetic on a recorded steps table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui.session.columns import Columns
from neurotui.session.reader import STEP_SOURCES, SessionReader
from neurotui.summary import summarize
from tests.strategies import Run, runs

SESSIONS = Path(__file__).resolve().parents[3] / "sessions"


def steps_table(ranks: int = 2, n: int = 50, dt: float = 0.1, batch: int = 16,
                t0: float = 1000.0) -> pd.DataFrame:
    rows = [{"t": t0 + i * dt, "rank": r, "step": i, "samples": float(batch), "loss": 1.0,
             "dt": dt, "src": "probe", "attempt": 0}
            for i in range(1, n + 1) for r in range(ranks)]
    return pd.DataFrame(rows)


def test_two_workers_batch_16_at_a_tenth_of_a_second_on_trn1_2xlarge() -> None:
    meta = {"started_at": 990.0, "ended_at": 1005.0, "price": {"usd_per_hour": 1.34375}}
    s = summarize(meta, steps_table(), pd.DataFrame())
    assert s["steady_samples_per_s"] == pytest.approx(320.0)
    assert s["samples_per_dollar_steady"] == pytest.approx(857_302.3, abs=0.1)
    assert s["time_to_first_step_s"] == pytest.approx(10.1)
    assert s["total_samples"] == 1600
    assert s["cost_usd"] == pytest.approx(15 / 3600 * 1.34375)
    # All-in: 1600 samples over the whole 15 s bill (10 s of it before the first step).
    assert s["samples_per_dollar_all_in"] == pytest.approx(1600 / (15 / 3600 * 1.34375))
    assert s["samples_per_dollar_all_in"] < s["samples_per_dollar_steady"]
    assert s["usd_per_million_samples"] == pytest.approx(1e6 / 857_302.3, rel=1e-6)


def test_without_a_price_the_money_figures_are_missing_not_zero() -> None:
    s = summarize({"started_at": 990.0, "ended_at": 1005.0, "price": None}, steps_table(),
                  pd.DataFrame())
    assert s["steady_samples_per_s"] == pytest.approx(320.0)
    for key in ("cost_usd", "samples_per_dollar_steady", "samples_per_dollar_all_in",
                "usd_per_million_samples"):
        assert s[key] is None


def test_no_steps_at_all() -> None:
    s = summarize({"started_at": 990.0, "ended_at": 1005.0}, pd.DataFrame(
        columns=["t", "rank", "step", "samples", "loss", "dt", "src", "attempt"]),
        pd.DataFrame())
    assert s["ranks"] == 0 and s["steady_samples_per_s"] is None and s["steps"] is None


def test_an_epochs_time_and_cost_from_the_runs_dataset_size() -> None:
    meta = {"started_at": 990.0, "ended_at": 1005.0, "price": {"usd_per_hour": 1.34375},
            "config": {"dataset_size": 1_281_167}}
    s = summarize(meta, steps_table(), pd.DataFrame())
    # An ImageNet epoch at 320 samples/s: 4,003.6 s; at $1.34375/h, $1.4944.
    assert s["dataset_size"] == 1_281_167
    assert s["epoch_s"] == pytest.approx(1_281_167 / 320)
    assert s["usd_per_epoch"] == pytest.approx(1.49441680)
    # compare --dataset-size asks the same of any run; without a price, time only.
    s = summarize({**meta, "price": None}, steps_table(), pd.DataFrame(), dataset_size=50_000)
    assert s["epoch_s"] == pytest.approx(50_000 / 320) and s["usd_per_epoch"] is None
    s = summarize({**meta, "config": {}}, steps_table(), pd.DataFrame())
    assert s["dataset_size"] is None and s["epoch_s"] is None and s["usd_per_epoch"] is None


def _columns_of(df: pd.DataFrame) -> Columns:
    """A DataFrame as the reader's Columns: `src` as codes into STEP_SOURCES."""
    data = {name: df[name].to_numpy() for name in df.columns}
    if "src" in data:
        data["src"] = np.array([STEP_SOURCES.index(str(s)) for s in data["src"]],
                               dtype=np.int8)
    return Columns(data, len(df))


@settings(max_examples=60, deadline=None)
@given(runs(), st.booleans())
def test_the_summary_of_numpy_columns_is_the_summary_of_the_dataframe(
        run: Run, with_phases: bool) -> None:
    """The supervisor summarizes the reader's numpy columns (no pandas at a run's end);
    compare summarizes DataFrames: every figure the same, to the last bit."""
    steps = run.steps.assign(src="probe")
    phases = None
    if with_phases:  # a data wait for every other step, one step's reported twice
        phases = steps[["t", "rank"]].iloc[::2].assign(data=0.01)
        phases = pd.concat([phases, phases.iloc[:1].assign(data=0.02)], ignore_index=True)
    meta = {"started_at": float(steps["t"].min()) - 5.0 if len(steps) else 0.0,
            "ended_at": float(steps["t"].max()) + 1.0 if len(steps) else 1.0,
            "price": {"usd_per_hour": 1.34}, "config": {"dataset_size": 1000}}
    from_frames = summarize(meta, steps, run.compiles, phases=phases)
    from_columns = summarize(meta, _columns_of(steps),
                             Columns.of_records(run.compile_events(), ("t", "rank")),
                             phases=None if phases is None else _columns_of(phases))
    assert from_columns == from_frames


@pytest.mark.parametrize("name", ["sample-cpu-gloo", "sample-xla-cpu"])
def test_the_sample_sessions_summarize_alike_from_columns_and_dataframes(name: str) -> None:
    reader = SessionReader(SESSIONS / name, use_cache=False).load()
    compiles = list(reader.events.get("compile", ()))
    probe_info = list(reader.events.get("probe_info", ()))
    from_frames = summarize(reader.meta, reader.steps(), reader.frame("compile"),
                            phases=reader.phases(), probe_info=probe_info,
                            samples_from=reader.samples_from)
    from_columns = summarize(reader.meta, reader.step_columns(),
                             Columns.of_records(compiles, ("t", "rank")),
                             phases=reader.phase_columns(), probe_info=probe_info,
                             samples_from=reader.samples_from)
    assert from_columns == from_frames
    assert from_columns["steady_samples_per_s"] is not None
