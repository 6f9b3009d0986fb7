"""Tests for neurotui.sources.steplog: real captured logs, launcher prefixes, user
patterns, and the promise that no input makes the parser raise or stall."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurotui.sources.steplog import (
    COMPILE_KINDS,
    MAX_LINE_CHARS,
    CompileLine,
    LogReport,
    StepLine,
    StepLineParser,
    classify_compile,
    explain,
    strip_rank_prefix,
)
from neurotui.sources.steplog.rules import _PREFILTER, _maybe_step
from tests.captures import TELEMETRY_CAPTURES

FIXTURES = TELEMETRY_CAPTURES

PARSER = StepLineParser.default()


def records(name: str) -> list[StepLine | CompileLine]:
    """Parse a fixture the way stdout arrives: split on \\n only (keep any \\r)."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return list(PARSER.parse_lines(text.split("\n")))


def steps(recs: list[StepLine | CompileLine]) -> list[StepLine]:
    return [r for r in recs if isinstance(r, StepLine)]


def whats(recs: list[StepLine | CompileLine]) -> list[str]:
    return [r.what for r in recs if isinstance(r, CompileLine)]


# --------------------------------------------------------------------------- fixtures

BERT1 = "trainlog_torch-neuronx_bert-large-phase1_step_loss_docs.txt"
BERT2 = "trainlog_torch-neuronx_bert-large-phase2_step_loss_docs.txt"
BERT2_CONFIG = "trainlog_torch-neuronx_bert-large-phase2_resume-and-config_docs.txt"
NXDT = "trainlog_nxdt_llama3-70B_progressbar_docs.txt"
OPTIMUM = (
    "trainlog_optimum-neuron_hf-trainer_loss-nan_cache-hit_real-capture_"
    "optimum-neuron-issue658_EXCERPT.txt"
)
TWO_WORKERS = (
    "trainlog_torch-neuronx_2workers_compile-and-cache_real-capture_"
    "aws-k8s-tester-pr466_EXCERPT.txt"
)
MLP_FIRST = "trainlog_torch-neuronx_mlp_trn1_first-run-compile_docs.txt"
MLP_CACHED = "trainlog_torch-neuronx_mlp_trn1_cached-rerun_docs.txt"
MLP_TORCHRUN = "trainlog_torch-neuronx_mlp_trn1_torchrun_docs.txt"
CC_FIRST = "compilelog_neuron-cache_first-compile_docs.txt"
CC_HIT = "compilelog_neuron-cache_cache-hit_docs.txt"
CC_FAILED = "compilelog_neuron-cache_cached-failed-neff_docs.txt"

# file -> (compile events in order, number of step lines)
EXPECTED: dict[str, tuple[list[str], int]] = {
    BERT1: ([], 8),
    BERT2: ([], 7),
    BERT2_CONFIG: ([], 0),
    NXDT: ([], 4),
    OPTIMUM: (["cache_hit"], 6),
    TWO_WORKERS: (["compile", "compiled", "cache_hit"], 0),
    MLP_FIRST: (["cache_miss", "compiled", "compiled", "cache_miss", "compiled", "compiled"], 0),
    MLP_CACHED: (["cache_hit", "cache_hit"], 0),
    MLP_TORCHRUN: ([], 0),
    CC_FIRST: (["compiled"], 0),
    CC_HIT: (["cache_hit"], 0),
    CC_FAILED: (["compile_failed"], 0),
}


def test_every_trainlog_and_compilelog_fixture_has_expectations() -> None:
    assert FIXTURES is not None
    present = {
        p.name for p in FIXTURES.iterdir() if p.name.startswith(("trainlog_", "compilelog_"))
    }
    assert present == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_event_sequence_and_step_count(name: str) -> None:
    recs = records(name)
    expected_whats, expected_steps = EXPECTED[name]
    assert whats(recs) == expected_whats
    assert len(steps(recs)) == expected_steps
    # Compile records carry their line; only the newline is removed.
    for rec in recs:
        if isinstance(rec, CompileLine):
            assert rec.what in COMPILE_KINDS
            assert rec.line and not rec.line.endswith("\n")


def test_other_telemetry_fixtures_yield_nothing() -> None:
    """neuron-ls / neuron-monitor / nvidia-smi / runtime logs are not step lines."""
    assert FIXTURES is not None
    others = [
        p
        for p in sorted(FIXTURES.iterdir())
        if p.is_file() and p.name not in EXPECTED and p.name != "SOURCES.md"
    ]
    assert others
    for path in others:
        assert records(path.name) == [], path.name


def test_bert_phase1_values() -> None:
    got = steps(records(BERT1))
    assert [s.step for s in got] == list(range(78, 86))
    first, last = got[0], got[-1]
    assert first == StepLine(
        step=78,
        samples=None,
        loss=9.1875,
        throughput=2873.14,
        dt=None,
        rank=None,
        printed_time=datetime(2022, 9, 29, 22, 30, 10).timestamp(),  # "LOG Thu Sep 29 ..."
    )
    assert (last.step, last.loss, last.throughput) == (85, 9.0, 2873.39)
    assert [s.loss for s in got] == [9.1875, 8.9375, 9.0, 9.0, 8.875, 9.0, 9.125, 9.0]


def test_bert_phase2_values() -> None:
    got = steps(records(BERT2))
    assert [s.step for s in got] == list(range(26, 33))
    assert (got[0].loss, got[0].throughput) == (4.3438, 494.55)
    assert (got[-1].loss, got[-1].throughput) == (4.4688, 496.02)
    assert all(s.dt is None and s.samples is None for s in got)


def test_nxdt_progress_bar_values() -> None:
    got = steps(records(NXDT))
    assert [s.step for s in got] == [1, 2, 2, 3]
    assert [s.loss for s in got] == [6.7, 4.47, 4.47, 3.35]  # loss=, not reduced_train_loss
    assert [s.samples_total for s in got] == [2048.0, 3072.0, 3072.0, 4096.0]  # consumed_samples
    assert all(s.samples is None for s in got)
    assert [s.dt for s in got] == [321.89, 321.89, 320.22, 320.22]  # from s/it
    assert all(s.throughput is None and s.rank is None for s in got)


def test_optimum_hf_trainer_nan_losses_and_wrapped_cache_hit() -> None:
    recs = records(OPTIMUM)
    # The cache-hit message is wrapped over two lines in the paste; its tail
    # ("....neff. Exiting with a successfully compiled graph.") is not a second event.
    assert isinstance(recs[0], CompileLine) and recs[0].what == "cache_hit"
    got = steps(recs)
    assert len(got) == 6
    assert all(s.step is None and s.loss is not None and math.isnan(s.loss) for s in got)


def test_two_workers_compile_then_cache_hit() -> None:
    recs = records(TWO_WORKERS)
    assert [r.what for r in recs if isinstance(r, CompileLine)] == [
        "compile",
        "compiled",
        "cache_hit",
    ]
    assert "Call compiler with cmd: neuronx-cc compile" in recs[0].line  # type: ignore[union-attr]


# --------------------------------------------------------------------------- rank prefixes


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[default0]:hello", (0, "hello")),
        ("[default1]:loss 2", (1, "loss 2")),
        ("[default15]:", (15, "")),
        ("[rank0]:x y", (0, "x y")),
        ("[rank31]:[rank0]:nested", (31, "[rank0]:nested")),
        ("[1,0]<stdout>:a", (0, "a")),
        ("[1,3]<stderr>: b", (3, " b")),
        ("[12,7]<stdout>:", (7, "")),
        ("plain line", (None, "plain line")),
        ("", (None, "")),
        ("[default]:x", (None, "[default]:x")),
        ("[default0] x", (None, "[default0] x")),
        # torchrun names the prefix after --role; a prefix template can add the local rank.
        ("[worker0]:x", (0, "x")),
        ("[trainer0|0]:1|25|Loss: 1.26", (0, "1|25|Loss: 1.26")),
        ("[trainer3|1]:x", (3, "x")),
        ("[0]:LOG x", (None, "[0]:LOG x")),
        ("[Rank 0] step=40", (None, "[Rank 0] step=40")),
        ("[trainer0|]:x", (None, "[trainer0|]:x")),
        ("[step10]: loss 0.5", (None, "[step10]: loss 0.5")),
        ("[1,mpirank:0,algo-1]<stdout>:#015Epoch 0", (0, "#015Epoch 0")),
        ("[1,mpirank:3,algo-2]<stderr>:x", (3, "x")),
        (" [default0]:x", (None, " [default0]:x")),
        ("[1,0]<stdin>:x", (None, "[1,0]<stdin>:x")),
    ],
)
def test_strip_rank_prefix(line: str, expected: tuple[int | None, str]) -> None:
    assert strip_rank_prefix(line) == expected


def test_prefix_rank_goes_into_step_line() -> None:
    rec = PARSER.parse("[default1]:neurotui-runner step=3 samples=16 loss=2.5 dt=0.5\n")
    assert rec == StepLine(step=3, samples=16.0, loss=2.5, throughput=None, dt=0.5, rank=1)
    rec = PARSER.parse("[1,2]<stdout>:step 10 | loss 2.5")
    assert isinstance(rec, StepLine) and (rec.step, rec.rank) == (10, 2)


def test_rank_printed_on_the_line_wins_over_prefix() -> None:
    rec = PARSER.parse("[default0]:neurotui-runner step=3 rank=5 samples=16 loss=2.5 dt=0.5")
    assert isinstance(rec, StepLine) and rec.rank == 5


def test_compile_line_behind_prefix() -> None:
    line = "[default0]:INFO ||NCC_WRAPPER||: No candidate found under /var/tmp/x."
    assert PARSER.parse(line + "\n") == CompileLine(what="cache_miss", line=line)


# --------------------------------------------------------------------------- runner line


def test_runner_line_exact_format() -> None:
    rec = PARSER.parse("neurotui-runner step=12 rank=0 samples=16 loss=6.9077 dt=0.1234\n")
    assert rec == StepLine(step=12, samples=16.0, loss=6.9077, throughput=None, dt=0.1234, rank=0)


def test_runner_line_nan_loss_and_crlf() -> None:
    rec = PARSER.parse("neurotui-runner step=7 rank=3 samples=32 loss=nan dt=1.5\r\n")
    assert isinstance(rec, StepLine)
    assert rec.loss is not None and math.isnan(rec.loss)
    assert (rec.step, rec.rank, rec.samples, rec.dt) == (7, 3, 32.0, 1.5)


def test_runner_line_tolerates_order_extra_keys_and_bad_values() -> None:
    rec = PARSER.parse("neurotui-runner loss=1.0 foo=bar step=2 dt=oops samples=8 throughput=40")
    assert rec == StepLine(step=2, samples=8.0, loss=1.0, throughput=40.0, dt=None, rank=None)
    assert PARSER.parse("neurotui-runner starting, 8 workers") is None


# --------------------------------------------------------------------------- HF Trainer dicts


def test_hf_dict_variants() -> None:
    rec = PARSER.parse("{'loss': 1.2345, 'grad_norm': inf, 'learning_rate': 1e-05, 'epoch': 0.5}")
    assert rec == StepLine(
        step=None, samples=None, loss=1.2345, throughput=None, dt=None, rank=None
    )
    rec = PARSER.parse("  {'loss': -inf, 'step': 7}   ")
    assert isinstance(rec, StepLine) and (rec.step, rec.loss) == (7, -math.inf)
    rec = PARSER.parse("{'loss': 2, 'epoch': 1.0}")
    assert isinstance(rec, StepLine) and rec.loss == 2.0


@pytest.mark.parametrize(
    "line",
    [
        "{'eval_loss': 2.3, 'epoch': 1.0}",
        "{'train_runtime': 12.3, 'train_samples_per_second': 5.0, 'train_loss': 2.1}",
        "{'loss': 'high', 'epoch': 1}",
        "{'loss': True}",
        "{'loss': __import__('os').system('echo pwned')}",
        "{'loss': (lambda: 1)()}",
        "{'loss': 1, 'x': " + "(" * 500 + ")" * 500 + "}",
        "{'loss': 1" + "0" * 400 + "}",
        "{'loss': 1.0, " + "'k': 1, " * 1000 + "}",
        "{'loss': 1.0",
        "['loss', 1.0]",
    ],
)
def test_hf_dict_rejects(line: str) -> None:
    assert PARSER.parse(line) is None


# --------------------------------------------------------------------------- progress bars


def test_tqdm_it_per_s_is_inverted_and_step_needs_global_step() -> None:
    rec = PARSER.parse("Epoch 0:  10%|█ | 10/100 [00:05<00:45, 2.00it/s, loss=2.31, v_num=0]")
    assert rec == StepLine(
        step=None,
        samples=None,
        loss=2.31,
        throughput=None,
        dt=0.5,
        rank=None,
        bar_n=10,
        bar_total=100,
        bar_key="Epoch",
    )


def test_training_bar_without_loss_is_a_bar_position() -> None:
    """An HF Trainer bar (no description, no loss) is the training loop's own counter."""
    rec = PARSER.parse("  5%|▌         | 50/1000 [00:30<09:30,  1.67it/s]")
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.loss, rec.bar_n, rec.bar_total, rec.bar_key) == (None, None, 50, 1000, "")
    assert rec.dt == pytest.approx(1 / 1.67)
    rec = PARSER.parse("Epoch 1: : 3it [00:32, 10.68s/it, v_num=1feb, reduced_train_loss=2.66e-5]")
    assert isinstance(rec, StepLine)
    assert (rec.bar_n, rec.bar_total, rec.bar_key, rec.dt, rec.loss) == (
        3,
        None,
        "Epoch",
        10.68,
        2.66e-5,
    )


@pytest.mark.parametrize(
    "line",
    [
        "Map: 100%|██████████| 1000/1000 [00:01<00:00, 900.00 examples/s]",
        "Map (num_proc=4):  50%|█████     | 500/1000 [00:01<00:01, 450.12 examples/s]",
        "Filter: 100%|██████████| 10/10 [00:00<00:00, 12.50it/s]",
        "Validation DataLoader 0:  40%|████      | 4/10 [00:01<00:02,  2.71it/s]",
        "Validating:  99%|█████████▉| 137/139 [00:17<00:00,  9.99it/s]",
        "Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:00<00:00,  5.12it/s]",
        "Testing DataLoader 0: 100%|██████████| 5/5 [00:01<00:00,  4.41it/s]",
        "Predicting DataLoader 0: 100%|██████████| 5/5 [00:01<00:00,  4.41it/s]",
        "Evaluating: 100%|██████████| 25/25 [00:05<00:00,  4.80it/s]",
        "Eval: 100%|██████████| 25/25 [00:05<00:00,  4.80it/s]",
        "Test: 100%|██████████| 25/25 [00:05<00:00,  4.80it/s]",
        "Downloading data: 100%|██████████| 3/3 [00:02<00:00,  1.10it/s]",
        "Downloading (…)lve/main/config.json: 100%|██████████| 665/665 [00:00<00:00, 3.24MB/s]",
        "model.safetensors:  40%|████      | 400/1000 [00:01<00:01, 312kB/s]",
        "shard:  40%|████      | 400/1000 [00:01<00:01, 312B/s]",
        "Loading checkpoint shards: 100%|██████████| 2/2 [00:03<00:00,  1.53s/it]",
        "Tokenizing: 100%|██████████| 80/80 [00:00<00:00, 800.00it/s]",
        "Generating train split: 100%|██████████| 10/10 [00:00<00:00, 99.00 examples/s]",
        "Training: 0it [00:00, ?it/s]",
        "Epoch 0:   0%|          | 0/18 [00:00<?, ?it/s]",
        "Epoch 0:  10%|█ | 10/100 [00:05<00:45, 2.00it/s, loss=, v_num=0]".replace(
            "10/100", "0/100"
        ),
    ],
)
def test_bars_that_are_not_training_steps(line: str) -> None:
    assert PARSER.parse(line) is None


def test_bar_loss_with_nothing_after_the_equals_is_no_value() -> None:
    rec = PARSER.parse("Epoch 0:  10%|█ | 10/100 [00:05<00:45, 2.00it/s, loss=")
    assert isinstance(rec, StepLine) and rec.loss is None and rec.bar_n == 10
    rec = PARSER.parse(
        "Epoch 0:  10%|█ | 10/100 [00:05<00:45, 2.00it/s, loss=, reduced_train_loss=3]"
    )
    assert isinstance(rec, StepLine) and rec.loss == 3.0


def test_nemo_bar_prefers_train_step_timing_and_reads_samples_per_sec() -> None:
    rec = PARSER.parse(
        "Epoch 1: : 1it [00:04,  4.36s/it, v_num=d3c7, reduced_train_loss=0.674, "
        "global_step=1.000, consumed_samples=128.0, train_step_timing in s=3.370, "
        "batch_time=4.400, samples/sec=14.60]     2025-12-17 04:54:49,774 [INFO] "
    )
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.loss, rec.dt, rec.throughput, rec.samples_total) == (
        1,
        0.674,
        3.37,
        14.6,
        128.0,
    )


def test_tqdm_carriage_return_redraws_use_the_last_one() -> None:
    line = (
        "[default0]:Epoch 0: 3%|▎ | 3/91 [16:05<7:52:06, 321.89s/it, loss=6.7, global_step=1.000]"
        "\rEpoch 0: 4%|▍ | 4/91 [21:20<7:44:18, 300.00s/it, loss=6.1, global_step=2.000]\r"
    )
    rec = PARSER.parse(line)
    assert rec == StepLine(
        step=2,
        samples=None,
        loss=6.1,
        throughput=None,
        dt=300.0,
        rank=0,
        bar_n=4,
        bar_total=91,
        bar_key="Epoch",
    )


# --------------------------------------------------------------------------- Megatron


def test_megatron_iteration_line() -> None:
    line = (
        " iteration       10/  500000 | consumed samples:          320 | elapsed time per "
        "iteration (ms): 1234.5 | learning rate: 1.0E-04 | global batch size:    32 | "
        "lm loss: 1.064536E+01 | loss scale: 1.0 | grad norm: 2.345 |"
    )
    rec = PARSER.parse(line)
    assert rec == StepLine(
        step=10,
        samples=None,
        loss=10.64536,
        throughput=None,
        dt=1.2345,
        rank=None,
        samples_total=320.0,
        global_batch=32.0,
    )


@pytest.mark.parametrize(
    ("line", "step", "loss", "dt", "samples_total", "global_batch", "throughput"),
    [
        (  # nanotron: human-readable suffixes, 11.5K ms is 11.5 s
            "10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 327281 / 378950 | "
            "consumed_tokens: 85.8G | elapsed_time_per_iteration_ms: 11.5K | tokens_per_sec: "
            "22.8K | global_batch_size: 64 | lm_loss: 2.38 | lr: 1e-05 | grad_norm: 1.25",
            327281, 2.38, 11.5, None, 64.0, None,
        ),
        (  # NeMo 2: global_step wins over the per-epoch iteration
            "Training epoch 1, iteration 3/9 | lr: 0.0006 | consumed_samples: 416 | "
            "global_batch_size: 32 | global_step: 12 | reduced_train_loss: 7.113 | "
            "train_step_timing in s: 0.5 | val_loss: 4.106",
            12, 7.113, 0.5, 416.0, 32.0, None,
        ),
        (  # Megatron-DeepSpeed prints samples per second
            " iteration      100/  1000 | consumed samples:         3200 | elapsed time per "
            "iteration (ms): 2000.0 | samples per second: 16.000 | lm loss: 5.0E+00 |",
            100, 5.0, 2.0, 3200.0, None, 16.0,
        ),
        (  # the 2019 form has no colons and no consumed samples
            " iteration      100/   20000 | elapsed time per iteration (ms): 334.9 | learning "
            "rate 1.010E-06 | lm loss 1.020020E+01 | nsp loss 5.515259E-01 |",
            100, 10.2002, 0.3349, None, None, None,
        ),
    ],
)  # fmt: skip
def test_iteration_pipe_lines(
    line: str,
    step: int,
    loss: float,
    dt: float,
    samples_total: float | None,
    global_batch: float | None,
    throughput: float | None,
) -> None:
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.loss, rec.samples_total, rec.global_batch, rec.throughput) == (
        step,
        loss,
        samples_total,
        global_batch,
        throughput,
    )
    assert rec.dt == pytest.approx(dt)


def test_megatron_validation_line_is_not_a_step() -> None:
    line = (
        " validation loss at iteration 100 | lm loss value: 2.345E+00 | lm loss PPL: "
        "1.043E+01 | "
    )
    assert PARSER.parse(line) is None


# --------------------------------------------------------------------------- plain lines


@pytest.mark.parametrize(
    ("line", "step", "loss", "throughput", "dt"),
    [
        ("step 10 | loss 2.5", 10, 2.5, None, None),
        ("Epoch [1/10], Step [100/600], Loss: 0.2341", 100, 0.2341, None, None),
        ("step:  1  loss: 12.2345  memory: 1.2GiB(3%)  tps: 1234", 1, 12.2345, None, None),
        ("\x1b[31mstep:  1  \x1b[32mloss: 12.2345\x1b[0m", 1, 12.2345, None, None),
        ("Epoch:1/10 Step : 5/100 - step_loss : 1.2345", 5, 1.2345, None, None),
        ("iter 10: loss 4.2347, time 12345.67ms, mfu 12.34%", 10, 4.2347, None, 12.34567),
        (
            "step 5 loss tensor(2.3456, device='xla:0', grad_fn=<NllLossBackward0>)",
            5,
            2.3456,
            None,
            None,
        ),
        ("step 5, loss 2.3, 123.4 samples/s, step_time 0.25s", 5, 2.3, 123.4, 0.25),
        ("step=5 loss=2.3 samples_per_second=77.5", 5, 2.3, 77.5, None),
        ("global_step 42 train_loss=1e-3 (2.00it/s)", 42, 0.001, None, 0.5),
        ("STEP 3 LOSS 1.5", 3, 1.5, None, None),
    ],
)
def test_plain_step_loss_lines(
    line: str, step: int, loss: float, throughput: float | None, dt: float | None
) -> None:
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine), line
    assert (rec.step, rec.loss, rec.throughput, rec.samples, rec.rank) == (
        step,
        loss,
        throughput,
        None,
        None,
    )
    assert rec.dt == pytest.approx(dt) if dt is not None else rec.dt is None


def test_plain_nan_loss() -> None:
    rec = PARSER.parse("step 9 loss nan")
    assert isinstance(rec, StepLine) and rec.step == 9
    assert rec.loss is not None and math.isnan(rec.loss)


@pytest.mark.parametrize(
    "line",
    [
        "Worker 21 resuming from checkpoint ./output/ckpt_28125.pt at step 28125",
        "Namespace(max_steps=100, loss_scale=1.0, resume_step=-1)",
        "Gradient overflow at step 5, loss scale 1024",
        "Skipping step 5 because loss is nan",
        "step 250: train loss 1.9687, val loss 2.0808",
        "Saving checkpoint at step 100, best loss 2.3",
        "step 100: eval loss 2.1",
        "Train throughput (iter/sec): 93.16748895384832",
        "Final loss is 0.1979",
        "at iteration 4, with local rank 0at iteration 4, with local rank 1",
        "loss 2.3 at step 10",
        "step 2.5 loss 1.0",
        "step 7 loss 2.3e",
        "missteps 3 glossary 2",
        "",
        "\n",
    ],
)
def test_ordinary_lines_are_not_steps(line: str) -> None:
    assert PARSER.parse(line) is None


# --------------------------------------------------------------------------- compile events


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("..........Compiler status PASS", "compiled"),
        ("Compiler status FAIL", "compile_failed"),
        ("Compiler status ERROR", "compile_failed"),
        (
            "INFO ||NEURON_CC_WRAPPER||: Call compiler with cmd: neuronx-cc compile --target=trn1",
            "compile",
        ),
        (
            "INFO ||NCC_WRAPPER||: No candidate found under /var/tmp/neuron-compile-cache/M.",
            "cache_miss",
        ),
        (
            "INFO ||NCC_WRAPPER||: Using a cached neff at /x/model.neff. Exiting with a "
            "successfully compiled graph.",
            "cache_hit",
        ),
        ("INFO ||NCC_WRAPPER||: Exiting with a successfully compiled graph", "compiled"),
        ("[ERROR]: Got a cached failed neff at /opt/np/cache/.../model.neff.", "compile_failed"),
        (
            "2025-09-11 12:23:08.000052:  9058  ERROR ||NEURON_CC_WRAPPER||: Failed compilation "
            "with ['neuronx-cc', 'compile']",
            "compile_failed",
        ),
        (
            "ERROR ||NEURON_CC_WRAPPER||: Compilation failed for /tmp/m.hlo_module.pb after 0 "
            "retries",
            "compile_failed",
        ),
        ("RuntimeError: RunNeuronCCImpl: error condition error != 0", "compile_failed"),
    ],
)
def test_compile_events(line: str, what: str) -> None:
    assert classify_compile(line) == what
    assert PARSER.parse(line) == CompileLine(what=what, line=line)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "line",
    [
        "INFO ||NCC_WRAPPER||: Compile cache path: /var/tmp/neuron-compile-cache",
        "INFO ||NCC_WRAPPER||: Cache dir for the neff: /var/tmp/neuron-compile-cache/M/x",
        "ODULE_1+abb26765/model.neff. Exiting with a successfully compiled graph.   ",
        "No candidate found under ./outputs/.",
        "the compiler is great",
    ],
)
def test_not_compile_events(line: str) -> None:
    assert classify_compile(line) is None
    assert PARSER.parse(line) is None


# --------------------------------------------------------------------------- user patterns


def test_user_pattern() -> None:
    parser = StepLineParser.from_patterns(
        [r"it=(?P<step>\d+) l=(?P<loss>\S+) (?P<dt_ms>[\d.]+)ms r(?P<rank>\d)"]
    )
    rec = parser.parse("[default3]:it=5 l=0.25 250ms r1")
    assert rec == StepLine(step=5, samples=None, loss=0.25, throughput=None, dt=0.25, rank=1)
    assert parser.parse("step 10 | loss 2.5") is None  # built-ins are off unless asked for
    assert parser.parse("Compiler status PASS") == CompileLine("compiled", "Compiler status PASS")


def test_user_pattern_groups_convert() -> None:
    parser = StepLineParser.from_patterns(
        [
            r"ips=(?P<it_per_s>\S+) n=(?P<samples>[\d,]+)",
            r"tput=(?P<throughput>\S+) dt=(?P<dt>\S+)",
        ]
    )
    assert parser.parse("ips=4 n=1,024") == StepLine(None, 1024.0, None, None, 0.25, None)
    assert parser.parse("tput=99.5 dt=0.1") == StepLine(None, None, None, 99.5, 0.1, None)
    assert parser.parse("ips=zero n=x") is None  # nothing readable: not a record


def test_user_patterns_come_before_defaults() -> None:
    parser = StepLineParser.from_patterns(
        [r"step (?P<step>\d+) \| loss (?P<loss>\S+)"], include_defaults=True
    )
    assert parser.rule_names[0] == r"step (?P<step>\d+) \| loss (?P<loss>\S+)"
    assert "torch-neuronx-bert" in parser.rule_names
    assert parser.parse("step 3 | loss 7") == StepLine(3, None, 7.0, None, None, None)
    assert isinstance(parser.parse("{'loss': 1.5, 'epoch': 0.1}"), StepLine)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (r"step (?P<step>\d+", "does not compile"),
        (r"step (\d+) loss (\S+)", "no named group"),
        (r"rank (?P<rank>\d+)", "no named group"),
        (r"step (?P<stepp>\d+)", "unknown named group"),
        (r"(?P<step>\d*)", "matches an empty line"),
    ],
)
def test_bad_user_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        StepLineParser.from_patterns([r"ok (?P<loss>\S+)", pattern])
    assert repr(pattern) in str(info.value)


def test_patterns_must_be_a_list_of_strings() -> None:
    with pytest.raises(TypeError):
        StepLineParser.from_patterns(r"step (?P<step>\d+)")
    with pytest.raises(TypeError):
        StepLineParser.from_patterns([42])  # type: ignore[list-item]


def test_empty_pattern_list_still_sees_compile_events() -> None:
    parser = StepLineParser.from_patterns([])
    assert parser.parse("step 1 loss 2") is None
    assert parser.parse("Compiler status PASS") is not None


# --------------------------------------------------------------------------- robustness


def test_records_are_frozen() -> None:
    rec = StepLine(1, None, None, None, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.step = 2  # type: ignore[misc]


def test_huge_lines_are_ignored() -> None:
    line = "neurotui-runner step=1 loss=1 " + "x" * MAX_LINE_CHARS
    assert PARSER.parse(line) is None
    assert PARSER.parse(line.encode()) is None


def test_bytes_and_non_strings() -> None:
    assert PARSER.parse(b"step 1 loss 2\xff\n") == StepLine(1, None, 2.0, None, None, None)
    assert PARSER.parse(None) is None  # type: ignore[arg-type]
    assert PARSER.parse(12) is None  # type: ignore[arg-type]


def test_text_is_not_unescaped() -> None:
    # A literal backslash sequence stays text: "\x31" is not the digit 1.
    assert PARSER.parse(r"step \x31 loss 2") is None
    rec = PARSER.parse(r"{'loss': 1.0, 'note': '\x00\n'}")
    assert isinstance(rec, StepLine) and rec.loss == 1.0


HOSTILE = [
    "step 1 " * 9000 + "loss",
    "loss " + "step 1 " * 9000,
    "|1/1 [" * 10000 + " it/s loss=",
    "| 1/1 [00:00<00:00, " * 3000 + "loss=1",
    "step 1 loss " + "1" * 60000,
    "consumed samples:" + "iteration 1 / 1 " * 4000,
    "\x1b[" * 20000 + "loss step 1",
    "\r" * 60000 + "step 1 loss 2",
    "step 1 loss 2 " + "time 1 " * 8000,
    "step 1 loss 2 " + "1 samples " * 6000,
    "{'loss': " + "[" * 2000 + "]" * 2000 + "}",
    "Compiler status" + " " * 60000,
    "iteration " + ("a 1 " * 59 + "|") * 64,
    "iteration " + "| a" * 20000,
    "Epoch: [" * 8000 + "loss",
    "Epoch: [0][ 1/2]" + " Loss" * 12000,
    "%|" * 30000 + " 1/2 [",
    "loss " + " 1it [00:01, " * 5000,
    "2024-01-01 10:00:00" * 3000 + " step 1 loss 2",
    "\x1b]" * 20000 + "loss step 1",
    "0" * 50 + "]:" + " step 1 loss 1" * 3000,
    "Epoch 0:  10%|█ | 10/100 [00:05<00:45, 2.00it/s, " + "loss=1, " * 7000 + "]",
    # the rules added for the held-out captures
    "Train: 1 [" * 7000 + " loss",
    "Epoch(train) [1][" * 4000 + "Loss",
    "Epoch: [0][1/2] " + "data time: 1 " * 5000 + " loss",
    "| epoch 1:  2 / 3 " * 4000 + "loss=",
    "epoch loss=" + "epoch 1  2 / 3  " * 4000,
    "1/2 (epoch 1), train_loss = 1" + " " * 60000,
    "(epoch: 1, iters: 1, time: 1, data: 1) " * 1600 + "iters:",
    "0/1, SamplesPerSec=1, " * 3000,
    "step=1, skipped=1, " * 3000,
    "50% 1/2 [" * 7000 + "it/s",
    "1% " * 20000 + "1/2 [ it/s",
    "[1, 1]" + " " * 60000 + "loss",
    "{'loss': " + "1" * 30 + "," + "x" * 60000,
    # issue #60's rules
    "[Iteration 1] Trained 1 in 1 seconds. Throughput is 1 records/second. " * 900 + "Loss is x",
    "[Iteration 1]" * 5000 + " Loss is ",
    "Batch 1/2 Loss a/b/c=" * 3000,
    "Batch 1/2 " + "Loss span/answer=1/2/3/4/5/6/7/" * 2000,
    "1 1 s run, " + "x, " * 20000 + "1 loss, 1 LR,",
    "1.0 loss, 1 LR, " + ", 1 s" * 10000 + " x",
    "| epoch 1 | 1/ 2 batches |" + " | loss 1" * 8000,
    "0:" + " " * 60000 + "Train loss/train/total: 1x",
    "step 1 loss 2 " + "val-loss: None " * 4000 + "val 1",
    "train_small: 32%|" + "█" * 30000 + "| 1/2 [00:01<00:01, 300.00it/s]",
]


@pytest.mark.parametrize("line", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lines_finish_quickly(line: str) -> None:
    start = time.perf_counter()
    PARSER.parse(line)
    assert time.perf_counter() - start < 0.5


def test_ordinary_lines_are_cheap() -> None:
    """Sanity bound, far above the ~1-2 us measured, so a loaded machine does not flake."""
    lines = [
        "2024-08-06 21:20:41.000156:  1184  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp",
        "[default0]:Epoch 3 starting, lr warmup done, batch size 32",
        "tensor([[2., 2., 2.],",
        '  "hidden_size": 1024,',
        "",
    ] * 2000
    start = time.perf_counter()
    for line in lines:
        PARSER.parse(line)
    per_line = (time.perf_counter() - start) / len(lines)
    assert per_line < 50e-6


FRAGMENTS = [
    "neurotui-runner ",
    "step",
    "step=",
    " loss ",
    "loss=",
    "'loss'",
    "{'loss': ",
    "}",
    "nan",
    "-inf",
    "1.5",
    "12",
    "e+",
    "global_step=",
    "consumed_samples=",
    "consumed samples:",
    "iteration ",
    "lm loss:",
    "|",
    " 3/91 [",
    "s/it",
    "it/s",
    "]",
    "(0, 7) step_loss : ",
    "throughput : ",
    "[default0]:",
    "[rank1]:",
    "[1,2]<stdout>:",
    "\r",
    "\x1b[3",
    "Compiler status ",
    "neff",
    "||NCC_WRAPPER||",
    " ERROR ",
    "tensor(",
    "samples/s",
    "ms",
    ",",
    " ",
    "%|",
    " 0it [00:01, ",
    "Epoch: [0][",
    "iteration: ",
    " | ",
    "elapsed_time_per_iteration_ms: ",
    "11.5K",
    "Data index: ",
    "1|2|Loss: ",
    "train_step_timing in s=",
    "2024-01-02 10:11:12",
    "LOG Mon Jan  2 10:11:12 2025",
    "not found in x: the corresponding graph will be recompiled",
    "\x1b]8;;\x1b\\",
]
PATTERN_PARSER = StepLineParser.from_patterns(
    [r"(?P<step>\d+)/(?P<samples>\S+) (?P<loss>\S+)"], include_defaults=True
)


def _check_never_raises(line: str | bytes) -> None:
    for parser in (PARSER, PATTERN_PARSER):
        rec = parser.parse(line)  # type: ignore[arg-type]
        assert rec is None or isinstance(rec, (StepLine, CompileLine))
        if isinstance(rec, CompileLine):
            assert rec.what in COMPILE_KINDS


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_garbage_text_never_raises(line: str) -> None:
    _check_never_raises(line)


@settings(max_examples=200, deadline=None)
@given(st.binary())
def test_garbage_bytes_never_raise(line: bytes) -> None:
    _check_never_raises(line)


NEAR_MISS = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=20).map("".join)


@settings(max_examples=100, deadline=None)
@given(st.lists(NEAR_MISS))
def test_explain_never_raises(lines: list[str]) -> None:
    rep = explain(lines, PARSER)
    assert rep.lines == len(lines) and len(rep.unmatched) <= 20
    assert all(isinstance(s, StepLine) for _, s in rep.steps)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=30).map("".join))
def test_near_miss_lines_never_raise(line: str) -> None:
    _check_never_raises(line)
    rank, rest = strip_rank_prefix(line)
    assert rank is None or rank >= 0
    assert line.endswith(rest)


# --------------------------------------------------------------------------- prefixes in any order


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("\x1b[32m[default3]:step 1 loss 2", (3, "step 1 loss 2")),
        ("\x1b[1m\x1b[36m[rank12]:x", (12, "x")),
        ("\x1b[0m[1,4]<stdout>:y", (4, "y")),
        ("\x1b[32mplain", (None, "\x1b[32mplain")),
    ],
)
def test_strip_rank_prefix_behind_colour_codes(
    line: str, expected: tuple[int | None, str]
) -> None:
    assert strip_rank_prefix(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "\x1b[32m[default1]:\x1b[0mstep: 5  loss: 2.5",
        "[default1]:\x1b[31mstep: 5  \x1b[32mloss: 2.5\x1b[0m",
        "2025-03-12 11:10:21,511 [rank1]: step: 5  loss: 2.5",
        "\x1b[2m2025-03-12 11:10:21\x1b[0m [rank1]:step: 5  loss: 2.5",
        "[2025-03-12 11:10:21] [rank1]: step: 5  loss: 2.5",
    ],
)
def test_rank_prefix_timestamp_and_colour_in_any_order(line: str) -> None:
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine), line
    assert (rec.step, rec.loss, rec.rank) == (5, 2.5, 1)


# --------------------------------------------------------------------------- printed time


def _local(*args: int) -> float:
    return datetime(*args).timestamp()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "[2024-04-06 02:59:36] iteration 43/ 100 | consumed samples: 5504 | "
            "elapsed time per iteration (ms): 5444.9 | lm loss: 1.8E+00 |",
            _local(2024, 4, 6, 2, 59, 36),
        ),
        (
            "[rank0]:[titan] 2025-03-12 11:10:21,511 - root - INFO - step: 22  loss:  6.2250",
            _local(2025, 3, 12, 11, 10, 21) + 0.511,
        ),
        (
            "LOG Mon Jan  2 10:11:12 2025 - (0, 7) step_loss : 9.0000 throughput : 10.0",
            _local(2025, 1, 2, 10, 11, 12),
        ),
        (
            "2023-06-15T12:11:12Z step 3 loss 2.0",
            datetime(2023, 6, 15, 12, 11, 12, tzinfo=timezone.utc).timestamp(),
        ),
        (
            "2023-06-15T12:11:12+02:00 step 3 loss 2.0",
            datetime(2023, 6, 15, 10, 11, 12, tzinfo=timezone.utc).timestamp(),
        ),
        (
            "10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 8 / 10 | lm_loss: 2.38 | "
            "elapsed_time_per_iteration_ms: 45",
            _local(2025, 10, 17, 16, 31, 56),
        ),
        ("[20:31:51] step 3 loss 2.0", None),  # a time without a date
        ("I0302 02:18:34.095144 1407 x.py:539] Train Step: 83/90  / loss = 10.2", None),
        ("step 3 loss 2.0 saved /ckpt/2024-01-01 10:00:00", None),
        ("2024-13-45 99:99:99 step 3 loss 2.0", None),  # not a real date
    ],
)
def test_printed_time(line: str, expected: float | None) -> None:
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine), line
    assert rec.printed_time == (pytest.approx(expected) if expected is not None else None)


# --------------------------------------------------------------------------- HF dict defects


def test_hf_dict_with_string_values_as_newer_transformers_logs_them() -> None:
    rec = PARSER.parse(
        "{'loss': '1.248', 'grad_norm': '0', 'learning_rate': '0.00041', 'epoch': '10'}"
    )
    assert isinstance(rec, StepLine) and rec.loss == 1.248


def test_hf_dict_literal_eval_prints_no_warning() -> None:
    """Some dict-looking lines made ``literal_eval`` print a SyntaxWarning to stderr."""
    lines = [
        "{'loss': 1.0, 'a': 1if 1else 2}",
        "{'loss': 1.0, 'a': 0x1for}",
        r"{'loss': 1.0, 'path': 'C:\data\run'}",
        "{'loss': 1.0, 'x': 1 is 1}",
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for line in lines:
            PARSER.parse(line)
    assert [str(w.message) for w in caught] == []


def test_hf_dict_step_survives_warnings_as_errors() -> None:
    """Under ``-W error`` an invalid escape in a dict value became a SyntaxError: lost step."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = PARSER.parse(r"{'loss': 0.5, 'run': 'C:\data\run', 'epoch': 1.0}")
    assert isinstance(rec, StepLine) and rec.loss == 0.5


def test_hf_dict_no_stderr_in_a_fresh_interpreter() -> None:
    code = (
        "from neurotui.sources.steplog import StepLineParser as P\n"
        "r = P.default().parse(\"{'loss': 1.0, 'a': 1if 1else 2}\")\n"
        "r2 = P.default().parse(\"{'loss': 2.0, 'p': '\\\\d'}\")\n"
        "print(r, r2.loss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.strip() == "None 2.0"


# Real output of ``rich.console.Console(force_terminal=True).log(dict)`` and of a
# ``RichHandler`` logging ``str(dict)`` (rich 13, captured on the dev VM).
RICH_LOG = (
    "\x1b[2;36m[20:31:51]\x1b[0m\x1b[2;36m \x1b[0m\x1b[1m{\x1b[0m\x1b[32m'loss'\x1b[0m: "
    "\x1b[1;36m2.3456\x1b[0m, \x1b[32m'learning_rate'\x1b[0m: \x1b[1;36m4.8e-05\x1b[0m, "
    "\x1b[32m'epoch'\x1b[0m: \x1b[1;36m0.12\x1b[0m\x1b[1m}\x1b[0m                          "
    "                \x1b[2m<string>:9\x1b[0m"
)
RICH_HANDLER = (
    "\x1b[2;36m[11/23/26 20:31:51]\x1b[0m\x1b[2;36m \x1b[0m\x1b[34mINFO    \x1b[0m \x1b[1m{\x1b[0m"
    "\x1b[32m'loss'\x1b[0m: \x1b[1;36m2.3456\x1b[0m, \x1b[32m'learning_rate'\x1b[0m: "
    "\x1b[1;36m4.8e-05\x1b[0m, \x1b[32m'epoch'\x1b[0m: \x1b[1;36m0.12\x1b[0m\x1b[1m}\x1b[0m      "
    "                 \x1b]8;id=10138700;file://<string>\x1b\\\x1b[2m<string>\x1b[0m\x1b]8;;\x1b\\"
    "\x1b[2m:\x1b[0m\x1b]8;id=10138701;file://<string>#12\x1b\\\x1b[2m12\x1b[0m\x1b]8;;\x1b\\"
)


@pytest.mark.parametrize(
    "line",
    [
        RICH_LOG,
        RICH_HANDLER,
        "[bold]{'loss': 2.3456, 'epoch': 0.12}[/bold]",
        "2024-01-02 10:11:12,345 - INFO - __main__ - {'loss': 2.3456, 'epoch': 0.12}",
    ],
)
def test_hf_dict_inside_rich_or_logging_decoration(line: str) -> None:
    """Before: only a line that *was* the dict counted, so Rich's time column and file
    link around it (or literal markup) lost the step."""
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine) and rec.loss == 2.3456


# --------------------------------------------------------------------------- other formats


def test_imagenet_example_and_metric_logger() -> None:
    rec = PARSER.parse(
        "Epoch: [3][ 40/5005]\tTime  0.315 ( 0.372)\tData  0.002 ( 0.073)\t"
        "Loss 6.9802e+00 (7.0827e+00)\tAcc@1   0.00 (  0.08)"
    )
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.bar_n, rec.bar_total, rec.bar_key, rec.loss, rec.dt) == (
        None,
        40,
        5005,
        "Epoch",
        6.9802,
        0.315,
    )
    rec = PARSER.parse(
        "Epoch: [0]  [ 103/5005]  eta: 4:43:31  lr: 0.1  img/s: 13.6  loss: 6.8536 (6.9458)  "
        "acc1: 0.0000 (0.2103)  time: 2.5401  data: 0.0336  max mem: 3524"
    )
    assert isinstance(rec, StepLine)
    assert (rec.bar_n, rec.loss, rec.dt, rec.throughput) == (103, 6.8536, 2.5401, 13.6)
    assert PARSER.parse("Test: [1460/2500]\tTime 0.036 (0.039)\tLoss 2.6388 (0.9189)") is None


def test_torchtune_bar_description_carries_the_global_step() -> None:
    rec = PARSER.parse(
        "1|25|Loss: 1.2621808052062988:  26%|██▌       | 26/101 [06:45<17:27, 13.96s/it]"
    )
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.loss, rec.bar_n, rec.dt) == (25, 1.2621808052062988, 26, 13.96)


def test_key_style_rate_and_data_index_lines() -> None:
    rec = PARSER.parse("Train step 1040 -- Loss: 11.174, MLM: 10.479 -- It/s: 2.00")
    assert isinstance(rec, StepLine) and (rec.step, rec.loss, rec.dt) == (1040, 11.174, 0.5)
    rec = PARSER.parse("Epoch 0, Data index: 3, Loss: 0.1943359375")
    assert isinstance(rec, StepLine)
    assert (rec.bar_n, rec.bar_key, rec.loss) == (3, "Epoch", 0.1943359375)


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (
            "subprocess.CalledProcessError: Command '['neuronx-cc', 'compile', '--target=trn1']' "
            "returned non-zero exit status 70.",
            "compile_failed",
        ),
        (
            "04/19/2022 09:09:57 AM ERROR 1203 [neuron-cc]:  An Internal Compiler Error has "
            "occurred",
            "compile_failed",
        ),
        (
            "[F134] neuronx-cc terminated abnormally - Please open a support ticket",
            "compile_failed",
        ),
        (
            "neuronxcc-2.12.54.0+f631c2365/MODULE_de2a+2c2d707e/model.neff not found in "
            "aws-neuron/optimum-neuron-cache: the corresponding graph will be recompiled. This "
            "may take up to one hour for large models.",
            "cache_miss",
        ),
    ],
)
def test_more_compile_events(line: str, what: str) -> None:
    assert classify_compile(line) == what


@pytest.mark.parametrize(
    "line",
    [
        "2023-06-15T12:11:12Z ERROR 85724 [neuronx-cc]:   File \"neuronxcc/driver/Job.py\", "
        "line 300",
        "subprocess.CalledProcessError: Command '['ls']' returned non-zero exit status 2.",
        "the graph will be recompiled later",
    ],
)
def test_not_more_compile_events(line: str) -> None:
    assert classify_compile(line) is None


# --------------------------------------------------------------------------- explain


def test_explain_reads_every_carriage_return_position() -> None:
    log = [
        "[default1]:\r  4%|▎ | 12/300 [00:05<02:00,  2.00it/s]\r  4%|▎ | 13/300 [00:05<02:00,"
        "  2.00it/s]\r      \r{'loss': 1.25, 'learning_rate': 1e-05, 'epoch': 0.1}\n",
        "INFO ||NCC_WRAPPER||: No candidate found under /var/tmp/x.\n",
        "resuming at step 3 with loss scale 1024\n",
        "ordinary line\n",
    ]
    rep = explain(log, PARSER)
    assert isinstance(rep, LogReport) and rep.lines == 4
    assert [(n, s.bar_n, s.loss, s.rank) for n, s in rep.steps] == [
        (1, 12, None, 1),
        (1, 13, None, 1),
        (1, None, 1.25, 1),
    ]
    assert [(n, c.what) for n, c in rep.compiles] == [(2, "cache_miss")]
    assert rep.unmatched == [(3, "resuming at step 3 with loss scale 1024")]


def test_explain_keeps_at_most_twenty_unmatched_and_never_raises() -> None:
    odd: list = [None, 3, "step 1 loss 2 " * (MAX_LINE_CHARS // 10)]
    rep = explain([f"loss scale {i}\n" for i in range(50)] + odd, PARSER)
    assert len(rep.unmatched) == 20 and rep.unmatched[0] == (1, "loss scale 0")
    assert rep.steps == [] and rep.lines == 53
    assert explain([], PARSER) == LogReport(steps=[], compiles=[], unmatched=[], lines=0)


def test_explain_with_a_user_pattern() -> None:
    parser = StepLineParser.from_patterns([r"it=(?P<step>\d+) l=(?P<loss>\S+)"])
    rep = explain(["it=5 l=0.25\n", "step 1 loss 2\n"], parser)
    assert [(n, s.step) for n, s in rep.steps] == [(1, 5)]
    assert rep.unmatched == [(2, "step 1 loss 2")]


def test_step_line_new_fields_are_optional_and_last() -> None:
    names = [f.name for f in dataclasses.fields(StepLine)]
    assert names[:7] == ["step", "samples", "loss", "throughput", "dt", "rank", "samples_total"]
    assert names[7:] == ["global_batch", "printed_time", "bar_n", "bar_total", "bar_key"]
    rec = StepLine(1, None, 2.0, None, None, None)
    assert json.dumps(dataclasses.asdict(rec))  # plain values only


# --------------------------------------------------------------------------- formats met on
# logs the parser was not written from (tests/fixtures/steplogs/heldout)


def test_prefilter_function_is_the_word_list() -> None:
    for word in _PREFILTER:
        assert _maybe_step(f"xx {word} yy")
    assert not _maybe_step("UserWarning: This DataLoader will create 4 worker processes")


@pytest.mark.parametrize(
    ("line", "key", "n", "total", "loss"),
    [
        # Notebook / CloudWatch copies drop the glyphs and the pipes around them.
        ("Epoch 0:  50% 1/2 [00:00<00:00,  6.54it/s, loss=2.29, v_num=0]", "Epoch", 1, 2, 2.29),
        ("Epoch 0:  34% 1020/3000 [01:04<02:05, 15.73it/s, loss=1.2, v_num=1024]", "Epoch", 1020,
         3000, 1.2),
    ],
)
def test_bar_without_glyphs(line: str, key: str, n: int, total: int, loss: float) -> None:
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine)
    assert (rec.bar_key, rec.bar_n, rec.bar_total, rec.loss) == (key, n, total, loss)


@pytest.mark.parametrize(
    "line",
    [
        # A new epoch's bar still shows the last epoch's loss: nothing is done yet.
        "Epoch 1:   0% 0/2 [00:00<?, ?it/s, loss=2.29, v_num=0, val_acc=0.166]",
        "Epoch 1:   0%|          | 0/2 [00:00<?, ?it/s, loss=2.29, v_num=0]",
        # Unlabelled and far too fast for a training step: a download or a dataset pass.
        "100%|██████████| 4542/4542 [00:00<00:00, 20528587.03it/s]",
        " 37%|███▋      | 1843/5000 [00:01<00:01, 1809.12it/s]",
        "100% 1648877/1648877 [00:00<00:00, 27617389.31it/s]",
        "Validation DataLoader 0: 100% 1/1 [00:00<00:00, 1113.73it/s]",
    ],
)
def test_more_bars_that_are_not_training_steps(line: str) -> None:
    assert PARSER.parse(line) is None


def test_fast_bars_that_are_still_training_steps() -> None:
    # a description, or a loss, says it is training; slower than 100 it/s it may be
    for line in (
        "Epoch 0:  50%|█████     | 500/1000 [00:01<00:01, 450.00it/s]",
        " 50%|█████     | 500/1000 [00:01<00:01, 450.00it/s, loss=0.5]",
        " 50%|█████     | 500/1000 [00:05<00:05, 99.00it/s]",
    ):
        assert isinstance(PARSER.parse(line), StepLine), line


def test_bar_cut_before_its_bracket_drops_the_last_postfix_item() -> None:
    # a wrapped line: "loss=0." may have been "loss=0.1234"
    rec = PARSER.parse("Epoch 1:  50%|█████     | 50/100 [00:10<00:10,  4.83it/s, v_num=0, loss=0.")
    assert isinstance(rec, StepLine) and rec.bar_n == 50 and rec.loss is None
    rec = PARSER.parse("Epoch 1:  50%|█████     | 50/100 [00:10<00:10,  4.83it/s, loss=0.25, v_n")
    assert isinstance(rec, StepLine) and rec.loss == 0.25


def test_epoch_batch_counters_of_mmengine_mmcv_timm_and_openpcdet() -> None:
    rec = PARSER.parse(
        "2024/01/24 02:47:35 - mmengine - INFO - Epoch(train)  [83][  50/2693]  base_lr: 2.0e-03"
        " lr: 3.96e-04  eta: 14:57:00  time: 1.1114  data_time: 0.0995  memory: 27201  "
        "grad_norm: 1298.9  loss: 1917.3984  loss_cls: 708.9749"
    )
    assert isinstance(rec, StepLine)
    assert (rec.bar_key, rec.bar_n, rec.bar_total, rec.loss, rec.dt) == (
        "Epoch", 50, 2693, 1917.3984, 1.1114,
    )  # fmt: skip
    rec = PARSER.parse(
        "2020-05-08 18:56:16,649 - mmdet - INFO - Epoch [1][2400/7517]\tlr: 0.00125, eta: 4:33:09"
        ", time: 0.595, data_time: 0.032, memory: 6836, loss_rpn_cls: 0.0989, loss: 0.4890"
    )
    assert isinstance(rec, StepLine) and (rec.bar_n, rec.loss, rec.dt) == (2400, 0.489, 0.595)
    rec = PARSER.parse(
        "Train: 0 [  50/73 ( 70%)]  Loss: 6.77 (6.83)  Time: 0.320s,  400.32/s  (0.470s,  "
        "272.39/s)  LR: 1.000e-05  Data: 0.217 (0.047)"
    )
    assert isinstance(rec, StepLine)
    assert (rec.bar_n, rec.bar_total, rec.loss, rec.dt, rec.throughput) == (
        50, 73, 6.77, 0.32, 400.32,
    )  # fmt: skip
    rec = PARSER.parse(
        "2023-01-05 16:34:49,377   INFO  Train:    1/3 ( 33%) [  49/323 ( 15%)]  Loss: 36.77 "
        "(81.7)  LR: 1.351e-04  Time cost: 00:15/01:25 [00:15/04:48]  Acc_iter 50          "
        "Data time: 0.00(0.02)  Forward time: 0.31(0.29)  Batch time: 0.31(0.31)"
    )
    assert isinstance(rec, StepLine) and (rec.bar_n, rec.loss, rec.dt) == (49, 36.77, 0.31)


def test_mnist_example_counts_samples_not_batches() -> None:
    rec = PARSER.parse("Train Epoch: 1 [12800/45000 (28%)]\tLoss: 2.316770")
    assert isinstance(rec, StepLine)
    assert (rec.samples_total, rec.bar_n, rec.loss) == (12800.0, None, 2.31677)


@pytest.mark.parametrize(
    "line",
    [
        "04/21 21:03:53 - mmengine - INFO - Epoch(val) [1][10/50]  eta: 0:00:01  time: 0.01",
        "Test: [  30/30]  Time: 3.856 (0.732)  Loss:   6.615 ( 6.691)  Acc@1:   0.000 (  0.076)",
        "====> Epoch 1 Average train loss: 2.3434",
        "[1 / 10]: Accuracy on test set: 96.5 % ",
        "Epoch [1][100/5005]    lr: 1.000e-01, eta: 37 days, 5:46:17, memory: 3086",
    ],
)
def test_epoch_lines_that_are_not_training_steps(line: str) -> None:
    assert PARSER.parse(line) is None


def test_cifar_tutorial_epoch_comma_batch() -> None:
    rec = PARSER.parse("[1,  2000] loss: 2.183")
    assert isinstance(rec, StepLine)
    assert (rec.bar_key, rec.bar_n, rec.loss) == ("Epoch", 2000, 2.183)
    rec = PARSER.parse("[1,   300]: loss: 0.719 , acc: 79.59 , time: 0.43149 % ")
    assert isinstance(rec, StepLine) and (rec.bar_n, rec.loss) == (300, 0.719)


def test_fairseq_progress_lines() -> None:
    rec = PARSER.parse(
        "| epoch 009:   1000 / 2737 loss=6.220, nll_loss=5.070, ppl=33.60, wps=12800, ups=4.0, "
        "wpb=2568, bsz=108, num_updates=22897, lr=0.000208983, gnorm=1.242, clip=0%, oom=0"
    )
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.loss, rec.dt, rec.global_batch, rec.bar_n) == (
        22897, 6.22, 0.25, 108.0, None,
    )  # fmt: skip
    rec = PARSER.parse(
        "| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, wpb=908, bsz=32, lr=0.001, clip=100%"
    )
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.bar_key, rec.bar_n, rec.bar_total, rec.loss) == (
        None, "epoch", 2000, 8223, 1.27,
    )  # fmt: skip
    for line in (
        "| epoch 009 | loss 6.233 | nll_loss 5.085 | ppl 33.94 | wps 12857 | num_updates 24633",
        "| epoch 010 | valid on 'valid' subset  1000 / 1311 loss=1.60",
        "| epoch 009 | valid on 'valid' subset | valid_loss 6.37204 | num_updates 24633",
    ):
        assert PARSER.parse(line) is None, line


def test_char_rnn_lines() -> None:
    rec = PARSER.parse(
        "112/9500 (epoch 0.589), train_loss = 3.44701844, grad/param norm = 3.8647e-01, "
        "time/batch = 0.1673s\t"
    )
    assert isinstance(rec, StepLine) and (rec.step, rec.loss, rec.dt) == (112, 3.44701844, 0.1673)
    rec = PARSER.parse("168/446 (epoch 0), train_loss = 2.304, time/batch = 0.160")
    assert isinstance(rec, StepLine) and (rec.step, rec.loss, rec.dt) == (168, 2.304, 0.16)


def test_cyclegan_loss_lines_are_positions_without_a_loss() -> None:
    rec = PARSER.parse(
        "(epoch: 1, iters: 100, time: 0.507, data: 0.091) D_A: 0.201 G_A: 0.297 cycle_A: 4.741"
    )
    assert isinstance(rec, StepLine)
    assert (rec.bar_key, rec.bar_n, rec.loss, rec.dt) == ("epoch", 100, None, None)
    for line in (
        "saving the model at the end of epoch 355, iters 800",
        "End of epoch 355 / 400   Time Taken: 88 sec",
        "(epoch: 1, iters: 100, time: 0.507, data: 0.091)",
    ):
        assert PARSER.parse(line) is None, line


def test_deepspeed_step_report_and_throughput_timer() -> None:
    rec = PARSER.parse(
        "[2022-03-11 02:06:58,985] [INFO] [logging.py:69:log_dist] [Rank 0] step=40, skipped=2,"
        " lr=[5e-05], mom=[[0.9, 0.999]]"
    )
    assert isinstance(rec, StepLine) and (rec.step, rec.loss, rec.throughput) == (40, None, None)
    rec = PARSER.parse(
        "[2023-07-25 21:03:17,269] [INFO] [timer.py:215:stop] epoch=0/micro_step=34/"
        "global_step=34, RunningAvgSamplesPerSec=7.86, CurrSamplesPerSec=8.01, MemAllocated=59GB"
    )
    assert isinstance(rec, StepLine) and (rec.step, rec.throughput) == (34, 8.01)
    rec = PARSER.parse("[INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48, MemAllocated=0.26GB")
    assert isinstance(rec, StepLine)
    assert (rec.step, rec.bar_key, rec.bar_n, rec.throughput) == (None, "DeepSpeed", 40, 83.48)
    assert PARSER.parse("[deepspeed] OVERFLOW! Rank 0 Skipping step. skipped=3") is None


def test_hf_dict_wrapped_onto_the_next_line_keeps_a_whole_loss() -> None:
    rec = PARSER.parse("{'loss': 0.0923, 'grad_norm': 2.38, 'learning_rate': 1.9e-05, 'epo")
    assert isinstance(rec, StepLine) and rec.loss == 0.0923
    assert PARSER.parse("{'loss': 0.09") is None  # the number may go on on the next line
    assert PARSER.parse("ch': 0.38}") is None


def test_explain_reads_octal_carriage_returns_and_glued_bar_positions() -> None:
    log = [
        "[1,mpirank:0,algo-1]<stdout>:#015Epoch 0: 100% 2/2 [00:00<00:00, 12.33it/s, loss=2.29]",
        # a copy that lost its carriage returns: three positions on one line
        "Epoch 0:  10%|█         | 1/10 [00:01<00:09,  1.00it/s, loss=1.5]Epoch 0:  20%|██"
        "        | 2/10 [00:02<00:08,  1.00it/s, loss=1.4]Epoch 0:  30%|███       | 3/10 [00:03<"
        "00:07,  1.00it/s, loss=1.3]",
        # one bar with the next log message written after it stays one position
        "  8%|▊         | 1999/24128 [1:52:09<20:27:23,  3.33s/it][2021-11-26 03:07:16,494] "
        "[INFO] [logging.py:69:log_dist] [Rank 0] step=2000, skipped=1995, lr=[0.001]",
    ]
    rep = explain(log, PARSER)
    assert [(n, s.bar_key, s.bar_n, s.loss, s.rank) for n, s in rep.steps] == [
        (1, "Epoch", 2, 2.29, 0),
        (2, "Epoch", 1, 1.5, None),
        (2, "Epoch", 2, 1.4, None),
        (2, "Epoch", 3, 1.3, None),
        (3, "", 1999, None, None),
    ]


# --------------------------------------------------------------------------- second held-out set


def _step(line: str) -> StepLine:
    rec = PARSER.parse(line)
    assert isinstance(rec, StepLine), line
    return rec


def test_keras_bar_positions() -> None:
    rec = _step(
        "1719/1719 [==============================] - 4s 2ms/step - loss: 1.0187 - accuracy: "
        "0.6807 - val_loss: 0.5207 - val_accuracy: 0.8234"
    )
    assert (rec.bar_n, rec.bar_total, rec.bar_key, rec.loss) == (1719, 1719, "Epoch", 1.0187)
    assert rec.dt == pytest.approx(0.002)
    mid = _step("29312/60000 [=============>................] - ETA: 2s - loss: 0.0891 - acc: 0.97")
    assert (mid.bar_n, mid.loss, mid.dt) == (29312, 0.0891, None)
    terse = _step("1079/1079 - 21s - loss: 0.2431 - 21s/epoch - 19ms/step")  # verbose=2
    assert (terse.bar_n, terse.loss) == (1079, 0.2431) and terse.dt == pytest.approx(0.019)
    unknown = _step("  60000/Unknown - 5s 87us/step - loss: 0.3281 - acc: 0.8997")
    assert unknown.bar_total is None and unknown.dt == pytest.approx(87e-6)


@pytest.mark.parametrize(
    "line",
    [
        "Epoch 1/30",
        "   0/1719 [..............................] - ETA: 0s - loss: 0.5",  # nothing done yet
        "1719/1719 [==============================] - 4s 2ms/step - val_loss: 0.5207",
        "32/768 [>.............................] - ETA: 0s",  # predict / evaluate, no loss
    ],
)
def test_keras_lines_that_are_not_steps(line: str) -> None:
    assert PARSER.parse(line) is None


def test_opennmt_training_reports() -> None:
    rec = _step(
        "[2019-03-21 18:31:43,773 INFO] Step 2250/200000; acc:  31.18; ppl: 57.53; xent: 4.05; "
        "lr: 0.00028; 5092/261 tok/s;   6641 sec"
    )
    assert (rec.step, rec.loss, rec.dt) == (2250, 4.05, None)
    old = _step(
        "Epoch  1, 12900/37527; acc:   4.48; ppl: 35173.75; xent:  10.47; 3599 src tok/s; "
        "3678 tgt tok/s;   9861 s elapsed"
    )
    assert (old.step, old.bar_n, old.bar_total, old.loss) == (None, 12900, 37527, 10.47)
    assert PARSER.parse("[2019-03-21 18:55:02,001 INFO] Validation xent: 3.91") is None


def test_olmo_step_header_is_the_step() -> None:
    rec = _step(
        "2024-08-06 10:00:05.520 intern-studio-160750:0  olmo.train:908  INFO    "
        "[step=2/739328,epoch=0]"
    )
    assert (rec.step, rec.loss) == (2, None)
    assert PARSER.parse("    train/CrossEntropyLoss=1.7872662283480167e-06") is None
    assert PARSER.parse("olmo.train:908  INFO    [eval_step=2/100]") is None
    assert PARSER.parse("[step=2/739328,epoch=0] saving checkpoint") is None  # not a header


def test_bare_step_number_in_the_first_cell() -> None:
    rec = _step("420 | loss 4.0625 | lr 9.000000e-04 | 7367.57ms")
    assert (rec.step, rec.loss) == (420, 4.0625) and rec.dt == pytest.approx(7.36757)
    rec = _step("  7 | train_loss: 2.5 | 1.25s")
    assert (rec.step, rec.loss, rec.dt) == (7, 2.5, 1.25)
    assert PARSER.parse("step 500: train loss 4.3931, val loss 4.4297") is None
    assert PARSER.parse("| 420 | loss 4.0625 |") is None  # a table row, not a report


def test_iters_word_and_its_speed_line() -> None:
    rec = _step("\titers: 100, epoch: 1 | loss: 0.3404325")
    assert (rec.step, rec.loss) == (100, 0.3404325)
    assert PARSER.parse("\tspeed: 0.0710s/iter; left time: 907.8888s") is None


def test_outer_epoch_bar_counts_epochs_not_steps() -> None:
    for line in (
        "Epoch: 100%|██████████| 13/13 [61:14:16<00:00, 16952.06s/it]  ",
        "Epochs:  40%|████      | 2/5 [00:10<00:15,  5.00s/it]",
    ):
        assert PARSER.parse(line) is None, line
    # Lightning names the epoch; a bar over batches that shows a loss is a step
    assert _step("Epoch 3: 100%|██████████| 13/13 [00:02<00:00,  6.1it/s]").bar_n == 13
    assert _step("Epoch:  50%|█████     | 5/10 [00:05<00:05,  1.0it/s, loss=0.3]").loss == 0.3


def test_new_prefilter_words_reach_their_rules() -> None:
    # OLMo's header and OpenNMT's report hold none of the older words
    assert _maybe_step("[step=2/739328,epoch=0]") and _maybe_step("Step 50/100; xent: 9.1;")
    assert _maybe_step("[Rank 0] step=40, skipped=2, lr=[5e-05]")
    assert _maybe_step("(epoch: 355, iters: 100, time: 0.078, data: 3.094) G_GAN: 18.2")


# ---- issue #60: lines with no "step" word, NxD's val-loss: None, Composer, bars before training


def test_nxd_line_with_an_unevaluated_val_loss_is_a_step() -> None:
    rec = _step("step 12 step_time 9.8s loss nan val-loss: None current_lr: 1.5e-05 grad norm nan")
    assert rec.step == 12 and math.isnan(rec.loss) and rec.dt == pytest.approx(9.8)
    # a validation loss with a value is still an evaluation line
    assert PARSER.parse("step 12 step_time 9.8s loss 2.1 val-loss: 2.4 current_lr: 1e-05") is None
    assert PARSER.parse("step 500: train loss 4.3931, val loss 4.4297") is None


def test_bigdl_iteration_lines_and_their_validation_result() -> None:
    rec = _step("[Epoch 1 28160000/28857522][Iteration 56][Wall Clock 72.891726153s] Train "
                "512000 in 1.236008372seconds. Throughput is 414236.66 records/second. Loss is "
                "0.53861904.")
    assert (rec.step, rec.samples, rec.loss) == (56, 512000.0, 0.53861904)
    assert rec.dt == pytest.approx(1.236008372) and rec.throughput == pytest.approx(414236.66)
    assert PARSER.parse("Loss is (Loss: 134.79276, count: 128, Average Loss: 1.0530684)") is None
    assert PARSER.parse("[Epoch 33 1109376/1281167][Iteration 36579][Wall Clock 77919.56s] "
                        "bigdl_metirc_2 Loss is (Loss: 10748.957, count: 6336, Average Loss: "
                        "1.6964895)") is None


@pytest.mark.parametrize(
    ("line", "n", "total", "loss", "throughput"),
    [
        ("Epoch: 1, Batch: 3900/8164, Loss span/answer/total=0.7729/0.1773/0.9502, LR=0.00001868, "
         "grad_norm=21.5925. Time cost=90.67, Throughput=52.94 samples/s ETA=1.70h",
         3900, 8164, 0.9502, 52.94),
        ("Batch 10/100, Loss: 2.2845", 10, 100, 2.2845, None),
        ("Epoch   0 Batch   50/225 - Loss: 3.2396 - perplextity: 25.5224", 50, 225, 3.2396, None),
        ("[Epoch 4] Batch 10/126 | loss=0.0432", 10, 126, 0.0432, None),
        ("Batch 0/100, Loss: 2.3156", 0, 100, 2.3156, None),  # printed after batch 0's step
    ],
)
def test_batch_of_total_lines(
    line: str, n: int, total: int, loss: float, throughput: float | None
) -> None:
    rec = _step(line)
    assert (rec.bar_n, rec.bar_total, rec.bar_key, rec.loss, rec.throughput) == (
        n, total, "Epoch", loss, throughput)
    assert rec.step is None and rec.dt is None  # ``Time cost`` is the log interval's


@pytest.mark.parametrize(
    "line",
    [
        "Epoch   0 Batch   50/225 - Test Loss: 3.1811 - Test perplextity: 24.0732",
        "Eval Batch: 10/100, Loss: 1.2",
        "Batch: 3900/8164 done",  # no loss
        "Batch 3/8/2024, loss: 1.0",  # a date, not a counter
    ],
)
def test_batch_lines_that_are_not_training_steps(line: str) -> None:
    assert PARSER.parse(line) is None


def test_word_language_model_lines() -> None:
    rec = _step("| epoch  25 |   800/ 1106 batches | lr 20.00 | ms/batch 107.03 | loss  4.02 | "
                "ppl    55.54")
    assert (rec.bar_n, rec.bar_total, rec.bar_key, rec.loss) == (800, 1106, "epoch", 4.02)
    assert rec.dt == pytest.approx(0.10703)
    rec = _step("| epoch   1 |   200/ 2983 batches | lr 20.0000 | ms/batch 11.61 | loss   nan | "
                "ppl      nan")
    assert math.isnan(rec.loss)
    assert PARSER.parse("| end of epoch  25 | time: 127.27s | valid loss  4.35 | valid ppl "
                        "   77.44") is None


def test_tinygrad_value_before_name_lines() -> None:
    rec = _step("10.5008 loss, 0.000016689301 LR, 8.83 GB used, 18.70 s" + " " * 40)
    assert (rec.step, rec.loss, rec.dt) == (None, 10.5008, 18.7)
    rec = _step("    3 7.34 s run, 11.8750 loss, 0.000000000002 LR, 1454.57 GB used, "
                "236258.78 GFLOPS")
    assert (rec.step, rec.loss, rec.dt) == (3, 11.875, 7.34)
    # hlb_cifar10: milliseconds, with more cells before the loss
    rec = _step(" 12  253.41 ms run,  251.80 ms python,    1.61 ms CUDA,    1.93 loss, "
                "0.001200 LR, 0.86 GB used,   3102.85 GFLOPS")
    assert (rec.step, rec.loss) == (12, 1.93) and rec.dt == pytest.approx(0.25341)
    assert PARSER.parse("we reached 10.5 loss, which is bad") is None


def test_composer_block_reports_its_training_loss() -> None:
    assert _step("         Train loss/train/total: 10.9724").loss == 10.9724
    assert _step("0:       Train loss/train/total: 12.0000").loss == 12.0
    for line in ("[batch=2/100]:", "         Train Perplexity: 58243.8086",
                 "         Eval metrics/eval/LanguageCrossEntropy: 10.9",
                 "         Train time/batch: 0"):
        assert PARSER.parse(line) is None, line


def test_named_fast_bars_of_a_dataset_are_not_steps() -> None:
    assert PARSER.parse("train_small:  32%|███▏      | 31745/100000 [01:51<00:19, 3538.83it/s]") \
        is None
    assert PARSER.parse("val_small: 100%|██████████| 10000/10000 [00:19<00:00, 514.19it/s]") \
        is None
    # named for training, or with a loss: still steps, however fast
    assert _step("Training: 50%|█████     | 500/1000 [00:01<00:01, 450.00it/s]").bar_n == 500
    assert _step("train_small:  32%|███▏ | 317/1000 [01:51<00:19, 338.8it/s, loss=2.1]").loss == 2.1
