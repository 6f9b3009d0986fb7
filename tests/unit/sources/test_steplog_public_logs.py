"""Recognition of real training logs collected from public issues, docs and examples.

Every capture in ``tests/fixtures/steplogs`` (sources in its SOURCES.md) has its number of
training steps written here by hand, from reading the capture: one per line or progress
bar position (the text between carriage returns) that reports a training step. Redraws
of the same bar position count, because each is a separate report; bars that have not
counted anything yet (``0/18``), evaluation lines and log noise do not. The test counts
what :func:`explain` finds and requires it to equal that number for every capture.

The ``trainlog_*``/``compilelog_*`` captures in ``tests/fixtures/telemetry`` are counted
too.

``tests/fixtures/steplogs/heldout`` holds captures collected after the parser was written
(issue #10), from frameworks and scripts it had not seen: fairseq, mmengine / mmcv, timm,
OpenPCDet, YOLO, CycleGAN, char-rnn, detectron2, DeepSpeed, torch-xla, Lightning under
SageMaker, the PyTorch MNIST and CIFAR examples. Counted by the same rules, in their own
table; before the rules they led to, the parser found 21 of their 114 steps (18%).

``tests/fixtures/steplogs/heldout2`` is a second fresh set, collected after those rules
(Trainer runs under pdsh, non-tty and the 2020 example scripts, torchtune, torchtitan,
fairseq on TPU, OpenNMT-py, OLMo, lit-gpt, Megatron-DeepSpeed, Keras, Time-Series-Library,
MetricLogger and hand-written loops, torch-neuronx on trn1). Before the rules it led to,
the parser found 98 of its 153 steps (64%) and invented 2.

``tests/fixtures/steplogs/heldout3`` is the third (issue #60), a third of it Neuron's (NxD
under Slurm and HyperPod, the Neuron quick start, torch-neuronx, optimum-neuron), with the
lines that hold evaluation, summary or download output listed beside each count: a step
found on one is invented. Before issue #60's rules the parser found 61 of its 84 steps
(72.6%; Neuron 11 of 14) and invented none; its rules were written from other captures
(``EXPECTED``'s issue #60 block), two of them looked for because this set showed the format.
"""

from __future__ import annotations

import math
import random
import re
from datetime import datetime
from pathlib import Path

import pytest

from neurotui.sources.steplog import (
    MAX_LINE_CHARS,
    LogReport,
    StepLine,
    StepLineParser,
    explain,
    strip_rank_prefix,
)
from neurotui.sources.steplog import parser as parser_module
from neurotui.sources.steplog.compile_lines import _may_compile
from neurotui.sources.steplog.rules import _DEFAULT_RULES, _RULE_WORDS, _maybe_step
from tests.captures import STEPLOG_CAPTURES, TELEMETRY_CAPTURES

CAPTURES = STEPLOG_CAPTURES
TELEMETRY = TELEMETRY_CAPTURES

PARSER = StepLineParser.default()

# capture -> (training steps present, compile events in order)
EXPECTED: dict[str, tuple[int, list[str]]] = {
    # aws-neuron docs and samples
    "nxdt_llama3-8B-dpo_progressbar_mojibake_docs.txt": (3, []),
    "nxdt_megatron-gpt_progressbar_docs.txt": (3, []),
    "torch-neuronx_bert_torchx-eks_LOG_docs.txt": (3, []),
    # Neuron issues
    "torch-neuronx_Epoch-Data-index-Loss_with-compile_real-capture_aws-neuron-sdk-issue872_EXCERPT"
    ".txt": (1, ["compile", "compiled", "compile"]),
    "optimum-neuron_hf-bar-with-log-text-appended_cache-hit_real-capture_optimum-neuron-issue129"
    "_EXCERPT.txt": (1, ["cache_hit", "cache_hit"]),
    "compilelog_neuron-parallel-compile_exit-status-70_real-capture_aws-neuron-samples-issue94"
    "_EXCERPT.txt": (0, ["compile_failed"]),
    "compilelog_neuron-cc_internal-compiler-error_real-capture_aws-neuron-sdk-issue422_EXCERPT"
    ".txt": (0, ["compile_failed"]),
    "compilelog_optimum-neuron_hub-cache-miss-model-done-not-found_real-capture_optimum-neuron"
    "-issue698_EXCERPT.txt": (0, ["cache_miss", "cache_miss", "cache_miss", "compile"]),
    "compilelog_optimum-neuron_hub-cache-miss-model-neff-not-found_real-capture_aws-neuron-sdk"
    "-issue825_EXCERPT.txt": (0, ["compile", "cache_miss", "cache_miss", "cache_miss"]),
    # NeMo / NxD Training progress bars and NeMo 2 lines
    "nemo1_megatron-bar_real-capture_nemo-launcher-issue55.txt": (1, []),
    "nemo2_training-epoch-iteration_real-capture_nemo-pr10128_EXCERPT.txt": (9, []),
    "nemo2_training-line-with-val_loss_real-capture_bionemo-recipes-pr740_EXCERPT.txt": (6, []),
    # Megatron-LM and nanotron
    "megatron-lm_bert_first-iteration-no-loss_real-capture_nccl-issue743_EXCERPT.txt": (1, []),
    "megatron-lm_2019-format-no-consumed-samples_real-capture_megatron-issue5_EXCERPT.txt": (4, []),
    "megatron-lm_tflops-per-gpu_real-capture_megatron-issue756_EXCERPT.txt": (3, []),
    "megatron-bridge_timestamped-iteration_real-capture_megatron-bridge-issue4024_EXCERPT.txt": (
        3,
        [],
    ),
    "nanotron_11.5K-suffixes_real-capture_nanotron-issue390_EXCERPT.txt": (4, []),
    "nanotron_host-in-prefix_real-capture_nanotron-pr23_EXCERPT.txt": (3, []),
    # torchtitan, torchtune, nanoGPT
    "torchtitan_rank-prefix-and-timestamp_real-capture_torchtitan-pr950_EXCERPT.txt": (8, []),
    "torchtitan_gc-and-profiler-lines_real-capture_torchtitan-pr1287_EXCERPT.txt": (6, []),
    "torchtune_bar-description-carries-step-and-loss_real-capture_torchtune-pr2620_EXCERPT.txt": (
        13,
        [],
    ),
    "nanogpt_iter-loss-time-mfu_real-capture_nanogpt-issue167_EXCERPT.txt": (2, []),
    # Hugging Face Trainer
    "hf-trainer_bar-redraws-and-loss-dicts_CR_real-capture_h2ogpt-pr86_EXCERPT.txt": (15, []),
    "hf-trainer_loss-dicts-with-grad_norm_real-capture_modal-llm-finetuning-pr82_EXCERPT.txt": (
        13,
        [],
    ),
    "hf-trainer_string-valued-loss-dict_real-capture_transformers-pr48397_EXCERPT.txt": (1, []),
    # PyTorch Lightning
    "lightning_bar-redraws-and-loss-less-positions_real-capture_lightning-issue4225_EXCERPT.txt": (
        15,
        [],
    ),
    "lightning_validation-bar-overwritten-by-checkpoint-message_real-capture_lightning-issue2667"
    ".txt": (1, []),
    "lightning_bar_real-capture_nnue-pytorch-issue83.txt": (1, []),
    "lightning_bar-without-loss-and-hours-elapsed_real-capture_anemoi-core-issue614.txt": (1, []),
    # PyTorch ImageNet example / torchvision references
    "pytorch-imagenet-example_Epoch-batch-Time-Loss_tabs_real-capture_yjh0410-pytorch-imagenet"
    "-issue1.txt": (1, []),
    "pytorch-imagenet-example_Test-eval-lines-not-training_real-capture_cadene-pretrained-models"
    "-issue149_EXCERPT.txt": (0, []),
    "torchvision-references_MetricLogger-img-per-s_real-capture_spike-element-wise-resnet"
    "-issue10_EXCERPT.txt": (7, []),
    # TensorFlow BERT scripts (hand-written step lines)
    "tf-bert_mpirun-prefix-Train-step-It-per-s_real-capture_aws-deep-learning-models-issue45"
    "_EXCERPT.txt": (8, []),
    "tf-bert_absl-Train-Step-loss-time-sec_real-capture_deeplearningexamples-issue1262"
    "_EXCERPT.txt": (2, []),
    # issue #60: NxD with ``val-loss: None``; lines with no "step" word (BigDL, ``Batch N/M``,
    # word_language_model, tinygrad); Composer's blocks (one report each: the block's
    # ``Train loss/train/total`` line); evaluation lines and bars before training are none
    "nxd_llama3-70B_step_time-loss-nan-val-loss-None-current_lr_real-capture_trn1-512-node-test"
    "-record_EXCERPT.txt": (10, []),
    "bigdl_Epoch-records-Iteration-Wall-Clock-Trained-records-in-seconds-Loss-is_real-capture"
    "_bigdl-pr1165_EXCERPT.txt": (5, []),
    "bigdl_Train-records-in-seconds-Throughput-is-Loss-is-and-validation-Loss-is-tuple_real"
    "-capture_ipex-llm-issue678.txt": (1, []),
    "bigdl_validation-metric-Loss-is-Loss-count-Average-Loss-lines-not-steps_real-capture_bigdl"
    "-issue2216_EXCERPT.txt": (0, []),
    "gluon-nlp_Epoch-Batch-of-total-Loss-span-answer-total-Throughput-samples-per-s_real-capture"
    "_gluon-nlp-pr1261_EXCERPT.txt": (6, []),
    "seq2seq-notebook_Epoch-Batch-of-total-dash-Loss-with-Test-Loss-lines_real-capture_nlp-models"
    "-tensorflow-issue10_EXCERPT.txt": (10, []),
    "awd-lstm-mos_pipe-epoch-batches-ms-per-batch-loss-ppl-with-end-of-epoch-valid_real-capture"
    "_mos-issue12_EXCERPT.txt": (9, []),
    "tinygrad_no-step-word-loss-comma-LR-comma-GB-used-comma-seconds_real-capture_tinygrad"
    "-pr11467_EXCERPT.txt": (6, []),
    "tinygrad_step-number-then-s-run-loss-LR-GB-used-GFLOPS_real-capture_tinygrad-pr13803.txt": (
        10,
        [],
    ),
    "composer_multi-line-batch-blocks-header-then-Train-metric-lines_llm-foundry-readme.txt": (
        4,
        [],
    ),
    "composer_srun-rank-prefix-batch-block-with-time-and-memory-metrics_awsome-distributed"
    "-training-readme_EXCERPT.txt": (1, []),
    "streaming-dataset_download-and-conversion-bars-before-training-not-steps_awsome-distributed"
    "-training-readme_EXCERPT.txt": (0, []),
}

# tests/fixtures/telemetry's training and compile logs (same rules).
TELEMETRY_EXPECTED: dict[str, tuple[int, list[str]]] = {
    "trainlog_torch-neuronx_bert-large-phase1_step_loss_docs.txt": (8, []),
    "trainlog_torch-neuronx_bert-large-phase2_step_loss_docs.txt": (7, []),
    "trainlog_torch-neuronx_bert-large-phase2_resume-and-config_docs.txt": (0, []),
    "trainlog_nxdt_llama3-70B_progressbar_docs.txt": (4, []),
    "trainlog_optimum-neuron_hf-trainer_loss-nan_cache-hit_real-capture_optimum-neuron-issue658"
    "_EXCERPT.txt": (6, ["cache_hit"]),
    "trainlog_torch-neuronx_2workers_compile-and-cache_real-capture_aws-k8s-tester-pr466"
    "_EXCERPT.txt": (0, ["compile", "compiled", "cache_hit"]),
    "trainlog_torch-neuronx_mlp_trn1_first-run-compile_docs.txt": (
        0,
        ["cache_miss", "compiled", "compiled", "cache_miss", "compiled", "compiled"],
    ),
    "trainlog_torch-neuronx_mlp_trn1_cached-rerun_docs.txt": (0, ["cache_hit", "cache_hit"]),
    "trainlog_torch-neuronx_mlp_trn1_torchrun_docs.txt": (0, []),
    "compilelog_neuron-cache_first-compile_docs.txt": (0, ["compiled"]),
    "compilelog_neuron-cache_cache-hit_docs.txt": (0, ["cache_hit"]),
    "compilelog_neuron-cache_cached-failed-neff_docs.txt": (0, ["compile_failed"]),
}


HELDOUT = CAPTURES / "heldout"

# held-out capture -> (training steps present, compile events in order)
HELDOUT_EXPECTED: dict[str, tuple[int, list[str]]] = {
    # fairseq: progress lines count; the epoch's summary and validation lines do not
    "fairseq_epoch-progress-num_updates-and-epoch-summaries_real-capture_fairseq-issue514"
    "_EXCERPT.txt": (3, []),
    "fairseq_legacy-epoch-progress-running-loss_valid-progress_real-capture_fairseq-issue301"
    "_EXCERPT.txt": (10, []),
    # mmengine / mmcv (mmdetection, mmpretrain) and timm-style epoch / batch counters
    "mmengine_Epoch-train-epoch-batch-lr-eta-loss_real-capture_mmengine-pr155_EXCERPT.txt": (
        8,
        [],
    ),
    "mmengine_Epoch-train-padded-counter-with-exp-name-line_real-capture_yolo-world-issue165"
    "_EXCERPT.txt": (3, []),
    "mmdet-v1_Epoch-batch-tab-lr-eta-time-loss_real-capture_mmdetection-issue2672_EXCERPT.txt": (
        5,
        [],
    ),
    "mmcls_Epoch-batch-eta-in-days_real-capture_mmpretrain-issue408_EXCERPT.txt": (7, []),
    "openpcdet_timm-style-Train-epoch-of-total-batch-counter_real-capture_openpcdet-pr1229"
    "_EXCERPT.txt": (4, []),
    "timm_Train-epoch-batch-Loss-Time-rate-and-Test-lines_optimum-habana-readme.txt": (4, []),
    # YOLO: training bars count, the validation bars (Class Images ... mAP50) do not
    "ultralytics-yolov8_epoch-columns-bar-and-val-bars_real-capture_ultralytics-issue7653"
    "_EXCERPT.txt": (3, []),
    "ultralytics-yolov8_ddp-bar-in-s-per-it_real-capture_yolov5-issue13492_EXCERPT.txt": (3, []),
    # hand-written formats of popular repositories
    "cyclegan_epoch-iters-time-data-then-losses-no-loss-word_real-capture_pytorch-cyclegan"
    "-pix2pix-issue1260_EXCERPT.txt": (8, []),
    "char-rnn_iteration-of-total-epoch-fraction-train_loss_real-capture_char-rnn-issue215"
    "_EXCERPT.txt": (8, []),
    "char-rnn-tensorflow_iteration-of-total-epoch-train_loss_real-capture_char-rnn-tensorflow"
    "-issue138_EXCERPT.txt": (6, []),
    "detectron2_eta-iter-total_loss-last_time_real-capture_detectron2-issue5037_EXCERPT.txt": (
        4,
        [],
    ),
    "cifar-tutorial-style_epoch-batch-bracket-loss_with-test-lines_git-mnistlearning"
    "_EXCERPT.txt": (6, []),
    "pytorch-mnist-example_Train-Epoch-samples-with-epoch-summaries_git-cs4782-resnet110"
    "_EXCERPT.txt": (9, []),
    # DeepSpeed: its step report and its throughput timer each report a step; the
    # ``time (ms)`` breakdowns do not
    "deepspeed_log_dist-step-skipped-and-timer-SamplesPerSec_real-capture_deepspeed"
    "-issue1825_EXCERPT.txt": (5, []),
    "megatron-deepspeed_samples-per-sec-iteration-with-deepspeed-timer-lines_real-capture"
    "_deepspeed-issue3742_EXCERPT.txt": (3, []),
    # torch-xla (the loop torch-neuronx's examples come from): one line per device and step
    "torch-xla_mp-mnist-Training-Device-Epoch-Step-Loss-Rate_real-capture_pytorch-xla-pr4112"
    "_EXCERPT.txt": (10, []),
    # Lightning under SageMaker: mpirun prefix with host, CRs written as #015, no bar glyphs
    "lightning-sagemaker_mpirun-mpirank-host-prefix_CR-shown-as-octal-015_bars-without-glyphs"
    "_real-capture_sagemaker-workshop-issue6_EXCERPT.txt": (5, []),
}


HELDOUT2 = CAPTURES / "heldout2"

# second held-out capture -> (training steps present, compile events in order)
HELDOUT2_EXPECTED: dict[str, tuple[int, list[str]]] = {
    # Hugging Face Trainer: every node's dict behind pdsh's address, a non-tty bar (one
    # position a line), and the 2020 example scripts, whose outer ``Epoch`` bar counts epochs
    "hf-trainer_pdsh-host-prefix-every-node-prints-the-dict_real-capture_llamafactory"
    "-issue813_EXCERPT.txt": (16, []),
    "hf-trainer_non-tty-bar-positions-one-per-line-and-nan-grad_norm-dict_real-capture_vg-llm"
    "-issue21_EXCERPT.txt": (12, []),
    "hf-legacy-examples_Iteration-bar-positions-and-outer-Epoch-bar-counting-epochs_real"
    "-capture_transformers-issue5901_EXCERPT.txt": (10, []),
    # LLM trainers
    "torchtune_Step-pipe-loss-colon-lr-tokens_per_second_per_gpu_real-capture_torchtune"
    "-pr1358_EXCERPT.txt": (12, []),
    "torchtitan_titan-prefix-without-rank-every-rank-prints-the-step_real-capture_torchtitan"
    "-pr2389_EXCERPT.txt": (8, []),
    "olmo_multi-line-step-blocks-header-then-metric-lines_real-capture_olmo-issue692"
    "_EXCERPT.txt": (3, []),
    "litgpt_iter-step-loss-iter-time-ms-optimizer-step-marks_real-capture_litgpt-issue689"
    "_EXCERPT.txt": (23, []),
    "megatron-deepspeed_iteration-lines-without-loss-samples-per-second-TFLOPs_real-capture"
    "_megatron-deepspeed-issue396_EXCERPT.txt": (3, []),
    "custom-loop_bare-step-number-pipe-loss-lr-ms-with-eval-lines_real-capture_modded-llama2"
    "-pr9_EXCERPT.txt": (26, []),
    # translation: fairseq on TPU, OpenNMT-py (its loss is ``xent``)
    "fairseq_timestamped-train_inner-on-tpu-with-xla-compilation-notes_real-capture_fairseq"
    "-issue2338_EXCERPT.txt": (4, []),
    "opennmt-py_Step-of-total-acc-ppl-xent-no-loss-word_real-capture_opennmt-py-issue1362"
    "_EXCERPT.txt": (9, []),
    # vision and other loops
    "lightning-0.6_bar-in-batch-per-s-over-100-with-loss_real-capture_lightning-issue1238"
    ".txt": (1, []),
    "mmengine_Epoch-train-with-memory-information-line-between_real-capture_mmdetection"
    "-issue10310_EXCERPT.txt": (1, []),
    "metriclogger-style_time-prefix-Epoch-batch-closs-not-loss-with-summary-lines_real-capture"
    "_llama2-accessory-issue48_EXCERPT.txt": (7, []),
    "keras_fit-verbose-1-final-bar-per-epoch-step-loss-val_loss_real-capture_handson-ml2"
    "-issue372_EXCERPT.txt": (5, []),
    "time-series-library_iters-epoch-pipe-loss-then-speed-line_real-capture_openltm-issue35"
    "_EXCERPT.txt": (12, []),
    # XLA: a torch-xla loop on TPU, torch-neuronx BERT on trn1 (compiling, no step yet)
    "torch-xla_Iter-Batch-Batch_loss-line-glued-to-xla-debug-log_real-capture_pytorch-xla"
    "-issue1178_EXCERPT.txt": (1, []),
    "torch-neuronx-bert_mpirun-tag-output-compile-with-interleaved-progress-dots_real-capture"
    "_aws-k8s-tester-pr558_EXCERPT.txt": (0, ["compile", "compiled", "compiled"]),
}


HELDOUT3 = CAPTURES / "heldout3"

# third held-out capture -> (training steps present, lines that hold evaluation, summary or
# download output: never a step). Neuron's files are the NEURON3 ones.
HELDOUT3_EXPECTED: dict[str, tuple[int, tuple[int, ...]]] = {
    # Neuron: NxD under Slurm and HyperPod, the quick start, torch-neuronx, optimum-neuron
    "nxd_llama3-70B-step-step_time-throughput-seq-per-s-loss-grad-norm_awsome-distributed"
    "-training-readme_EXCERPT.txt": (5, ()),
    "nxd_hyperpod-auto-resume-lines-then-resumed-step_time-lines_awsome-distributed-training"
    "-readme_EXCERPT.txt": (4, ()),
    "neuron-quickstart_Batch-of-total-comma-Loss-with-start-and-complete-lines_aws-neuron-sdk"
    "-docs.txt": (3, ()),
    "torch-neuronx-unet_Training-Device-Epoch-Step-Loss-expected-output_aws-neuron-sdk-docs"
    ".txt": (2, ()),
    "torch-neuronx-customop-mlp_cached-neff-lines-train-throughput-and-final-loss-summary_aws"
    "-neuron-sdk-docs.txt": (0, (5, 6)),
    "optimum-neuron_bert-on-trn1-train-metrics-summary-with-eval_loss-and-train_loss_optimum"
    "-neuron-notebook.txt": (0, tuple(range(1, 12))),
    "optimum-neuron_parallel-compile-graph-extraction-then-Running-training-header_real-capture"
    "_optimum-neuron-issue638_EXCERPT.txt": (0, ()),
    # Hugging Face Trainer and TRL: dicts and bar positions count; data preparation does not
    "hf-trainer_esm2_data-prep-download-and-iteration-count-bars-no-training_awsome-distributed"
    "-training-readme_EXCERPT.txt": (0, (5, 8, 9, 10, 11, 14, 15)),
    "hf-trainer_esm2_rank-prefixed-loss-dicts-between-non-tty-bar-positions_awsome-distributed"
    "-training-readme_EXCERPT.txt": (10, ()),
    "hf-trainer_selected-loss-dicts-with-ellipsis-lines-between_real-capture_crystal-text-llm"
    "-issue6_EXCERPT.txt": (10, ()),
    "trl-grpo_bar-position-then-rank-prefixed-dict-with-completions_awsome-distributed-training"
    "-readme_EXCERPT.txt": (2, ()),
    # Megatron-LM and NeMo
    "megatron-lm_gpt3_rank-number-prefix-lm-loss-E-notation_awsome-distributed-training-readme"
    "_EXCERPT.txt": (3, ()),
    "megatron-lm_gpt3_skipped-iterations-no-loss-with-dataset-sizes_awsome-distributed-training"
    "-readme_EXCERPT.txt": (3, ()),
    "nemo1_bionemo-esm1nv-bar-with-reduced_train_loss-and-val_loss_awsome-distributed-training"
    "-readme_EXCERPT.txt": (4, ()),
    "nemo2_skypilot-ray-actor-prefix-Training-epoch-iteration-with-checkpoint-lines_awsome"
    "-distributed-training-readme_EXCERPT.txt": (3, ()),
    # other loops: Lightning, lightly-train, Caffe (one step an iteration: its loss and lr lines
    # report one step; iteration 920 shows only its lr line), Chainer, word_language_model
    "lightning_Epoch-and-Epoch-Train-final-bar-positions-with-run-labels_real-capture_nnue"
    "-pytorch-pr441.txt": (5, ()),
    "lightly-train_Train-Step-of-total-pipe-Train-Loss-pipe-Time-Spent-percentages_real-capture"
    "_lightly-train-pr604_EXCERPT.txt": (3, ()),
    "caffe_solver-Iteration-loss-and-lr-lines-with-Testing-net-and-snapshot_real-capture"
    "_yjxiong-caffe-issue2_EXCERPT.txt": (6, (10, 11, 12)),
    "caffe_Iteration-iter-per-s-and-s-per-10-iters-loss-with-Train-net-output-lines_real-capture"
    "_libornovax-master-thesis-issue50_EXCERPT.txt": (2, ()),
    "chainer_PrintReport-columns-epoch-iteration-main-loss-no-step-word_real-capture_bartzi-see"
    "-issue10_EXCERPT.txt": (3, ()),
    "word-language-model_pipe-epoch-batches-lr-ms-per-batch-loss-nan-ppl-with-end-of-epoch"
    "-valid_nlpia2-pypi_EXCERPT.txt": (16, (17,)),
}
NEURON3 = ("nxd_", "neuron-quickstart_", "torch-neuronx-", "optimum-neuron_")


def _report(path: Path) -> LogReport:
    # Split on \n only, as a pipe delivers it: carriage returns stay for explain().
    return explain(path.read_text(encoding="utf-8").split("\n"), PARSER)


def _all_cases() -> list[tuple[str, Path, int, list[str]]]:
    cases = [(name, CAPTURES / name, n, c) for name, (n, c) in EXPECTED.items()]
    cases += [
        (f"telemetry/{name}", TELEMETRY / name, n, c) for name, (n, c) in TELEMETRY_EXPECTED.items()
    ]
    return cases


CASES = _all_cases()
HELDOUT_CASES = [(name, HELDOUT / name, n, c) for name, (n, c) in HELDOUT_EXPECTED.items()]
HELDOUT2_CASES = [(name, HELDOUT2 / name, n, c) for name, (n, c) in HELDOUT2_EXPECTED.items()]


def test_every_capture_has_an_expectation_and_a_source() -> None:
    present = {p.name for p in CAPTURES.iterdir() if p.suffix == ".txt"}
    assert present == set(EXPECTED)
    sources = (CAPTURES / "SOURCES.md").read_text(encoding="utf-8")
    missing = [name for name in EXPECTED if f"`{name}`" not in sources]
    assert missing == []
    assert len(EXPECTED) >= 15


def test_every_heldout_capture_has_an_expectation_and_a_source() -> None:
    present = {p.name for p in HELDOUT.iterdir() if p.suffix == ".txt"}
    assert present == set(HELDOUT_EXPECTED)
    sources = (HELDOUT / "SOURCES.md").read_text(encoding="utf-8")
    missing = [name for name in HELDOUT_EXPECTED if f"`{name}`" not in sources]
    assert missing == []
    assert len(HELDOUT_EXPECTED) >= 15


def test_every_third_heldout_capture_has_an_expectation_and_a_source() -> None:
    present = {p.name for p in HELDOUT3.iterdir() if p.suffix == ".txt"}
    assert present == set(HELDOUT3_EXPECTED)
    sources = (HELDOUT3 / "SOURCES.md").read_text(encoding="utf-8")
    missing = [name for name in HELDOUT3_EXPECTED if f"`{name}`" not in sources]
    assert missing == []
    assert len(HELDOUT3_EXPECTED) >= 15
    neuron = [name for name in HELDOUT3_EXPECTED if name.startswith(NEURON3)]
    assert len(neuron) * 3 >= len(HELDOUT3_EXPECTED)  # a third from Neuron, as collected


def _heldout3_table() -> tuple[list[str], dict[str, tuple[int, int, int]]]:
    """Per capture: found (at most the steps present, on lines that may hold one), present,
    invented (steps beyond those present, and any on an evaluation / download line); and
    the same summed over all and over Neuron's, as a printable table."""
    rows = []
    totals = {"all": [0, 0, 0], "neuron": [0, 0, 0]}
    for name, (present, not_steps) in HELDOUT3_EXPECTED.items():
        lines = [n for n, _ in _report(HELDOUT3 / name).steps]
        on_other = sum(1 for n in lines if n in not_steps)
        counted = len(lines) - on_other
        found, invented = min(counted, present), max(counted - present, 0) + on_other
        rows.append((name, found, present, invented))
        for group in ("all", "neuron") if name.startswith(NEURON3) else ("all",):
            totals[group][0] += found
            totals[group][1] += present
            totals[group][2] += invented
    width = max(len(r[0]) for r in rows)
    text = [f"{'capture':<{width}}  found  present  invented"]
    text += [f"{n:<{width}}  {f:>5}  {p:>7}  {i:>8}" for n, f, p, i in rows]
    for group, (found, present, invented) in totals.items():
        text.append(f"{group.upper():<{width}}  {found:>5}  {present:>7}  {invented:>8}"
                    f"  ({found / present:.1%} found, {invented / present:.1%} invented)")
    return text, {group: (f, p, i) for group, (f, p, i) in totals.items()}


def test_third_heldout_recognition_and_invented() -> None:
    """Issue #60's target on its fresh held-out set: at least 90% of the steps a person sees,
    at most 3% invented (no step on an evaluation, summary or download line). Before the
    issue's rules: 61 of 84 (72.6%; Neuron 11 of 14), none invented."""
    text, totals = _heldout3_table()
    print("\n" + "\n".join(text))
    found, present, invented = totals["all"]
    assert present == 84 and totals["neuron"][1] == 14  # the hand counts, as collected
    assert found / present >= 0.90, "\n".join(text)
    assert invented / present <= 0.03, "\n".join(text)
    assert totals["neuron"][0] / totals["neuron"][1] >= 0.90, "\n".join(text)


def test_every_second_heldout_capture_has_an_expectation_and_a_source() -> None:
    present = {p.name for p in HELDOUT2.iterdir() if p.suffix == ".txt"}
    assert present == set(HELDOUT2_EXPECTED)
    sources = (HELDOUT2 / "SOURCES.md").read_text(encoding="utf-8")
    missing = [name for name in HELDOUT2_EXPECTED if f"`{name}`" not in sources]
    assert missing == []
    assert len(HELDOUT2_EXPECTED) >= 15


@pytest.mark.parametrize(
    ("name", "path", "present", "compiles"),
    CASES + HELDOUT_CASES + HELDOUT2_CASES,
    ids=[c[0][:60] for c in CASES + HELDOUT_CASES + HELDOUT2_CASES],
)
def test_capture_steps_found_equal_steps_present(
    name: str, path: Path, present: int, compiles: list[str]
) -> None:
    report = _report(path)
    assert len(report.steps) == present, [n for n, _ in report.steps]
    assert [c.what for _, c in report.compiles] == compiles


@pytest.mark.parametrize(
    "cases",
    [CASES, HELDOUT_CASES, HELDOUT2_CASES],
    ids=["developed-from", "heldout", "heldout2"],
)
def test_recognition_table(cases: list[tuple[str, Path, int, list[str]]]) -> None:
    rows = []
    for name, path, present, _ in cases:
        rows.append((name, len(_report(path).steps), present))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'capture':<{width}}  found  present"]
    lines += [f"{name:<{width}}  {found:>5}  {present:>7}" for name, found, present in rows]
    total_found = sum(r[1] for r in rows)
    total_present = sum(r[2] for r in rows)
    rate = total_found / total_present
    lines.append(f"{'TOTAL':<{width}}  {total_found:>5}  {total_present:>7}  ({rate:.1%})")
    print("\n" + "\n".join(lines))
    invented = [(name, found, present) for name, found, present in rows if found > present]
    assert invented == [], "steps found that are not in the capture"
    assert rate >= 0.90, "\n".join(lines)


# --------------------------------------------------------------------------- values


def _steps(name: str) -> list[StepLine]:
    return [s for _, s in _report(CAPTURES / name).steps]


def test_values_nanotron_suffixes_and_us_date() -> None:
    got = _steps("nanotron_11.5K-suffixes_real-capture_nanotron-issue390_EXCERPT.txt")
    assert [s.step for s in got] == [327281, 327282, 327283, 327284]
    assert {s.dt for s in got} == {11.5}  # elapsed_time_per_iteration_ms: 11.5K
    assert {s.global_batch for s in got} == {64.0}
    assert got[0].throughput is None  # tokens_per_sec is not samples/s
    assert got[0].printed_time == datetime(2025, 10, 17, 16, 31, 56).timestamp()


def test_values_megatron_timestamped() -> None:
    got = _steps(
        "megatron-bridge_timestamped-iteration_real-capture_megatron-bridge-issue4024_EXCERPT.txt"
    )
    first = got[0]
    assert (first.step, first.samples_total, first.global_batch, first.loss) == (
        15,
        7680.0,
        512.0,
        1.059172,
    )
    assert first.dt == pytest.approx(27.4476)
    assert first.printed_time == datetime(2026, 5, 28, 22, 19, 49).timestamp()
    got = _steps("megatron-lm_tflops-per-gpu_real-capture_megatron-issue756_EXCERPT.txt")
    assert all(s.throughput is None for s in got)  # TFLOP/s/GPU is not samples/s


def test_values_progress_bars() -> None:
    dpo = _steps("nxdt_llama3-8B-dpo_progressbar_mojibake_docs.txt")
    assert [(s.step, s.bar_n, s.bar_total, s.bar_key) for s in dpo] == [
        (1, 3, 62, "Epoch"),
        (3, 4, 62, "Epoch"),
        (3, 5, 62, "Epoch"),
    ]
    assert [s.throughput for s in dpo] == [0.108, 0.181, 0.181]
    assert dpo[0].dt == pytest.approx(50.0)  # 0.02it/s
    hf = _steps("hf-trainer_bar-redraws-and-loss-dicts_CR_real-capture_h2ogpt-pr86_EXCERPT.txt")
    assert [s.bar_n for s in hf if s.bar_n is not None] == [
        1294, 1295, 1295, 1296, 1296, 1297, 1297, 1298, 1298, 1299,
    ]  # fmt: skip
    assert {s.bar_key for s in hf if s.bar_n is not None} == {""}
    assert [s.loss for s in hf if s.loss is not None] == [1.0692, 1.2193, 1.4059, 1.2362, 1.1192]
    lightning = _steps(
        "lightning_bar-redraws-and-loss-less-positions_real-capture_lightning-issue4225_EXCERPT.txt"
    )
    assert lightning[4].bar_n == 6 and lightning[4].dt is None  # cut off: "[00:23<00:47,  3"
    tune = _steps(
        "torchtune_bar-description-carries-step-and-loss_real-capture_torchtune-pr2620_EXCERPT.txt"
    )
    assert [s.step for s in tune][:3] == [25, 26, 26] and tune[0].bar_n == 26


def test_values_rank_and_time_prefixes() -> None:
    titan = _steps("torchtitan_rank-prefix-and-timestamp_real-capture_torchtitan-pr950_EXCERPT.txt")
    assert {s.rank for s in titan} == {0}
    assert titan[0].printed_time == pytest.approx(
        datetime(2025, 3, 12, 11, 10, 21, 511000).timestamp()
    )
    tf = _steps(
        "tf-bert_mpirun-prefix-Train-step-It-per-s_real-capture_aws-deep-learning-models-issue45"
        "_EXCERPT.txt"
    )
    assert {s.rank for s in tf} == {0}
    assert tf[0].dt == pytest.approx(1 / 1.69)
    string_dict = _steps(
        "hf-trainer_string-valued-loss-dict_real-capture_transformers-pr48397_EXCERPT.txt"
    )
    assert string_dict[0].loss == 1.248 and not math.isnan(string_dict[0].loss)


def test_values_heldout_formats() -> None:
    def steps(name: str) -> list[StepLine]:
        return [s for _, s in _report(HELDOUT / name).steps]

    fairseq = steps(
        "fairseq_epoch-progress-num_updates-and-epoch-summaries_real-capture_fairseq-issue514"
        "_EXCERPT.txt"
    )
    assert [s.step for s in fairseq] == [22897, 23897, 25634]
    assert fairseq[0].dt == pytest.approx(1 / 4.7) and fairseq[0].global_batch == 108.0
    sagemaker = steps(
        "lightning-sagemaker_mpirun-mpirank-host-prefix_CR-shown-as-octal-015_bars-without"
        "-glyphs_real-capture_sagemaker-workshop-issue6_EXCERPT.txt"
    )
    assert {(s.bar_key, s.loss) for s in sagemaker} == {("Epoch", 2.29)}
    assert [s.bar_n for s in sagemaker] == [1, 2, 2, 2, 2]
    assert [s.rank for s in sagemaker] == [None, 0, 0, 0, 0]  # the first line starts with `
    deepspeed = steps(
        "megatron-deepspeed_samples-per-sec-iteration-with-deepspeed-timer-lines_real-capture"
        "_deepspeed-issue3742_EXCERPT.txt"
    )
    assert [(s.step, s.throughput) for s in deepspeed] == [
        (34, 8.00912418308922),
        (34, 7.799),
        (35, None),
    ]
    timm = steps("timm_Train-epoch-batch-Loss-Time-rate-and-Test-lines_optimum-habana-readme.txt")
    assert [(s.bar_n, s.loss, s.dt, s.throughput) for s in timm][1] == (50, 6.77, 0.32, 400.32)
    tune = _steps(
        "torchtune_bar-description-carries-step-and-loss_real-capture_torchtune-pr2620_EXCERPT.txt"
    )
    assert {s.rank for s in tune} == {0}  # ``[trainer0|0]:``


def test_values_second_heldout_formats() -> None:
    def steps(name: str) -> list[StepLine]:
        return [s for _, s in _report(HELDOUT2 / name).steps]

    loop = steps(
        "custom-loop_bare-step-number-pipe-loss-lr-ms-with-eval-lines_real-capture_modded-llama2"
        "-pr9_EXCERPT.txt"
    )
    assert (loop[0].step, loop[0].loss) == (420, 4.0625)
    assert loop[0].dt == pytest.approx(7.36757)  # ``7367.57ms``
    assert 500 in {s.step for s in loop} and len(loop) == 26  # not ``step 500: ... val loss``
    onmt = steps(
        "opennmt-py_Step-of-total-acc-ppl-xent-no-loss-word_real-capture_opennmt-py-issue1362"
        "_EXCERPT.txt"
    )
    assert [(s.step, s.loss) for s in onmt][:2] == [(2250, 4.05), (2300, 4.12)]
    assert onmt[0].dt is None  # ``6641 sec`` is the time since the start
    olmo = steps(
        "olmo_multi-line-step-blocks-header-then-metric-lines_real-capture_olmo-issue692"
        "_EXCERPT.txt"
    )
    assert [(s.step, s.loss) for s in olmo] == [(1, None), (2, None), (3, None)]
    keras = steps(
        "keras_fit-verbose-1-final-bar-per-epoch-step-loss-val_loss_real-capture_handson-ml2"
        "-issue372_EXCERPT.txt"
    )
    first = keras[0]
    assert (first.bar_n, first.bar_total, first.bar_key) == (1719, 1719, "Epoch")
    assert [s.loss for s in keras] == [1.0187, 0.5028, 0.4485, 0.4210, 0.4061]  # not val_loss
    assert keras[0].dt == pytest.approx(0.002) and keras[4].dt == pytest.approx(0.001)
    hf_2020 = steps(
        "hf-legacy-examples_Iteration-bar-positions-and-outer-Epoch-bar-counting-epochs_real"
        "-capture_transformers-issue5901_EXCERPT.txt"
    )
    assert {s.bar_key for s in hf_2020} == {"Iteration"}  # the Epoch bar's 13/13 is no step
    tsl = steps(
        "time-series-library_iters-epoch-pipe-loss-then-speed-line_real-capture_openltm-issue35"
        "_EXCERPT.txt"
    )
    assert [s.step for s in tsl] == list(range(100, 1300, 100))


def test_values_issue60_formats() -> None:
    nxd = _steps("nxd_llama3-70B_step_time-loss-nan-val-loss-None-current_lr_real-capture_trn1-512"
                 "-node-test-record_EXCERPT.txt")
    assert [s.step for s in nxd] == [66, 67, 68, 69, 70, 71, 72, 28, 29, 30]
    assert math.isnan(nxd[0].loss) and nxd[7].loss == 12.078991651535034  # type: ignore[arg-type]
    assert nxd[0].dt == pytest.approx(5.986423969268799)
    bigdl = _steps("bigdl_Epoch-records-Iteration-Wall-Clock-Trained-records-in-seconds-Loss-is"
                   "_real-capture_bigdl-pr1165_EXCERPT.txt")
    assert [(s.step, s.samples, s.loss) for s in bigdl][:2] == [(96, 112.0, 0.08021599),
                                                               (97, 112.0, 0.17566326)]
    assert bigdl[0].dt == pytest.approx(13.138344759)
    assert bigdl[0].throughput is None and bigdl[4].throughput == pytest.approx(8.869707)
    gluon = _steps("gluon-nlp_Epoch-Batch-of-total-Loss-span-answer-total-Throughput-samples-per-s"
                   "_real-capture_gluon-nlp-pr1261_EXCERPT.txt")
    assert [(s.bar_n, s.loss) for s in gluon][:2] == [(3900, 0.9502), (4200, 0.9473)]
    assert gluon[0].throughput == 52.94 and gluon[0].printed_time is not None
    tiny = _steps("tinygrad_no-step-word-loss-comma-LR-comma-GB-used-comma-seconds_real-capture"
                  "_tinygrad-pr11467_EXCERPT.txt")
    assert [(s.loss, s.dt) for s in tiny][:2] == [(10.5008, 18.7), (10.4828, 12.5)]
    tiny = _steps("tinygrad_step-number-then-s-run-loss-LR-GB-used-GFLOPS_real-capture_tinygrad"
                  "-pr13803.txt")
    assert [s.step for s in tiny] == list(range(1, 11)) and tiny[2].dt == 7.34
    composer = _steps("composer_multi-line-batch-blocks-header-then-Train-metric-lines_llm-foundry"
                      "-readme.txt")
    assert [s.loss for s in composer] == [10.9736, 10.9724, 10.9745, 10.6459]
    wlm = _steps("awd-lstm-mos_pipe-epoch-batches-ms-per-batch-loss-ppl-with-end-of-epoch-valid"
                 "_real-capture_mos-issue12_EXCERPT.txt")
    assert [s.bar_n for s in wlm][:3] == [800, 1000, 200] and wlm[0].dt == pytest.approx(0.10703)


# --------------------------------------------------------------------------- batches
# The supervisor parses each log's new lines as one batch (parse_values_many): the same
# records as one line at a time, on every capture, cut into batches of every size.


def _capture_lines() -> list[tuple[str, list[str]]]:
    dirs = [CAPTURES, CAPTURES / "heldout", CAPTURES / "heldout2", HELDOUT3, TELEMETRY]
    found = []
    for folder in dirs:
        for path in sorted(folder.glob("*.txt")):
            if folder == TELEMETRY and not path.name.startswith(("trainlog_", "compilelog_")):
                continue
            text = path.read_bytes().decode("utf-8", "replace")
            found.append((path.name, text.split("\n")))
    return found


@pytest.mark.parametrize("batch", [1, 3, 17, 10_000])
def test_batches_parse_as_lines_do(batch: int) -> None:
    captures = _capture_lines()
    assert len(captures) > 40
    parsed = steps = 0
    for name, lines in captures:
        for start in range(0, len(lines), batch):
            chunk = lines[start:start + batch]
            many = PARSER.parse_values_many(chunk)
            one_by_one = [PARSER.parse_values(line) for line in chunk]
            # By repr: a nan loss is not equal to itself (NxD's ``loss nan``).
            assert [repr(r) for r in many] == [repr(r) for r in one_by_one], name
            parsed += len(chunk)
            steps += sum(record is not None for record in many)
    assert steps > 400 and parsed > steps


def test_lines_of_a_learnt_shape_parse_as_the_rules_read_them() -> None:
    """parse_values_many reads a line of a shape it learnt (_ShapeMemo: the same text but
    for its digits) at the places the rule read an earlier one. Each capture's lines come
    four times with other digits of the same count (steps, losses, ranks, times: every
    number), after the line itself: the records must be the rules' own."""
    rng = random.Random(7)

    def other_digits(line: str) -> str:
        return re.sub(r"[0-9]", lambda _: str(rng.randint(0, 9)), line)

    learnt = parsed = direct = 0
    parser = StepLineParser.default()
    made = [("our runner", ["neurotui-runner step=12 rank=3 samples=16 loss=6.9077 dt=0.1234"]),
            ("plain", ["step 120 loss 2.3456 lr 0.001", "iter 7: loss 4.2301, time 120.52ms"]),
            ("torch-neuronx", ["(0, 78) step_loss : 9.1875  learning_rate : 1.56e-05"])]
    for name, lines in [*made, *_capture_lines()]:
        for line in lines:
            if not re.search(r"[0-9]", line):
                continue
            variants = [line, line, *(other_digits(line) for _ in range(4))]
            # By repr: the same figures of the same types (16 is not 16.0 in the session).
            assert [repr(r) for r in parser.parse_values_many(variants)] == \
                [repr(PARSER.parse_values(v)) for v in variants], (name, line)
            parsed += 1
        recipes = [r for r in parser._shapes._recipes.values() if r]
        learnt = max(learnt, len(recipes))
        direct = max(direct, sum(1 for _, reader, _ in recipes if reader is not None))
    assert parsed > 500
    assert learnt >= 4  # the memo did read lines (not only the rules): the made ones
    assert direct >= 3  # and read some as numbers only (_direct_reader): runner, plain, bert


def test_a_batch_of_learnt_lines_skips_the_batch_screens_and_a_mixed_one_reads_as_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """parse_values_many reads a line of a shape it learnt as numbers (_direct_reader) before
    any batch screen: a batch of only such lines never joins or screens (its words are not
    looked for), and a batch that mixes them with lines the screens are for (a compile line,
    a bar's carriage returns, colour codes, a rank prefix, a line too long) gives each line
    the record parse_values gives it alone."""
    parser = StepLineParser.default()
    learn = [f"step {n} loss 2.{n}456 lr 0.001" for n in range(100, 104)]
    assert [repr(r) for r in parser.parse_values_many(learn)] == \
        [repr(PARSER.parse_values(line)) for line in learn]
    mixed = ["step 105 loss 2.1456 lr 0.001",
             "..........Compiler status PASS",
             "[1]:step 106 loss 2.2456 lr 0.001",
             "step 107 loss 2.3456 lr 0.001\rstep 108 loss 2.4456 lr 0.001",
             "\x1b[32mstep 109 loss 2.5456 lr 0.001\x1b[0m",
             "step 110 loss 2.6456 lr 0.001 " + "x" * 20_000,
             "step 111 loss nan lr 0.001",
             "step 112 loss 2.8456 lr 0.001"]
    assert [repr(r) for r in parser.parse_values_many(mixed)] == \
        [repr(PARSER.parse_values(line)) for line in mixed]

    def no_screen(*_: object) -> None:
        raise AssertionError("a batch of learnt lines was screened")

    monkeypatch.setattr(parser_module, "_default_rules_for", no_screen)
    monkeypatch.setattr(parser_module, "_may_compile", no_screen)
    learnt = [f"step {n} loss 3.{n}456 lr 0.001" for n in range(200, 210)]
    records = parser.parse_values_many(learnt)
    assert [(r.step, r.loss) for r in records] == [(n, float(f"3.{n}456"))  # type: ignore[union-attr]
                                                   for n in range(200, 210)]


def test_a_line_over_the_limit_is_no_step_though_its_text_is_of_a_learnt_shape() -> None:
    """The limit is on the whole line: a rank prefix one digit longer takes a line of a
    learnt shape (its text after the prefix) over it, and parse_values reads no step there."""
    parser = StepLineParser.default()

    def text(n: int) -> str:
        return f"step {n} loss 2.{n}456".ljust(MAX_LINE_CHARS - len("[default1]:"))

    learn = [f"[default1]:{text(n)}" for n in range(100, 104)]
    assert [r.step for r in parser.parse_values_many(learn)] == [100, 101, 102, 103]  # type: ignore[union-attr]
    over = f"[default11]:{text(105)}"
    assert len(over) > MAX_LINE_CHARS
    assert parser.parse_values_many([over]) == [PARSER.parse_values(over)] == [None]


def test_every_rule_match_holds_one_of_its_words() -> None:
    """parse_values_many shows a batch only to the rules one of whose words it holds
    (_RULE_WORDS), and a line to a few rules without the screen (_maybe_step) in front:
    every line of every capture that a rule matches must hold one of each."""
    assert set(_RULE_WORDS) == {rule for _, rule in _DEFAULT_RULES}
    matched = 0
    for name, lines in _capture_lines():
        for line in lines:
            text = strip_rank_prefix(line.rsplit("\r", 1)[-1])[1]
            for rule_name, rule in _DEFAULT_RULES:
                try:
                    fields = rule(text)
                except Exception:  # the parser's own guard catches these; not a match
                    continue
                if fields is not None:
                    matched += 1
                    assert any(word in text for word in _RULE_WORDS[rule]), (name, rule_name)
                    assert _maybe_step(text), (name, rule_name)
    assert matched > 400


def test_every_compile_line_holds_a_screened_word() -> None:
    """parse_values_many skips classify_compile for a batch without any of _may_compile's
    words: every compile line of every capture must hold one."""
    compile_lines = 0
    for name, lines in _capture_lines():
        for line in lines:
            record = PARSER.parse_values(line)
            if record is not None and not hasattr(record, "step"):  # a CompileLine
                compile_lines += 1
                assert _may_compile(line.rsplit("\r", 1)[-1]) or _may_compile(line), name
    assert compile_lines >= 10
