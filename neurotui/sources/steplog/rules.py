"""The per-framework rules: each reads one family of training scripts' step lines (the
neurotui runner, Hugging Face, Megatron, DeepSpeed, Keras, ...; progress bars in bars.py)
into raw fields, and the word screens that keep an ordinary line from reaching them.

Text is data. Nothing is evaluated except the Hugging Face Trainer log dict, and
that only through :func:`ast.literal_eval`; escape sequences are never decoded."""

from __future__ import annotations

import ast
import functools
import math
import re
import warnings
from collections.abc import Callable

from neurotui.sources.steplog.bars import _rule_bar
from neurotui.sources.steplog.records import _Fields
from neurotui.sources.steplog.text import _NUM, _NUM_END, _NUMX, _to_float

# A rule takes the cleaned text and returns raw field values (_Fields), or None when the
# line is not its kind. Every built-in rule starts with cheap substring tests.
_Rule = Callable[[str], "_Fields | None"]

#: Named groups a user pattern may use. ``dt_ms`` is milliseconds and ``it_per_s``
#: iterations per second; both are turned into ``dt`` seconds.
KNOWN_GROUPS = frozenset(
    {
        "step",
        "samples",
        "samples_total",
        "loss",
        "throughput",
        "dt",
        "dt_ms",
        "it_per_s",
        "rank",
        "global_batch",
    }
)

_VALUE_GROUPS = KNOWN_GROUPS - {"rank"}

_RUNNER_MARK = "neurotui-runner "
_RUNNER_KEYS = frozenset({"step", "rank", "samples", "loss", "dt", "throughput"})


def _rule_runner(text: str) -> _Fields | None:
    """``neurotui-runner step=12 rank=0 samples=16 loss=6.9077 dt=0.1234`` (any key order)."""
    at = text.find(_RUNNER_MARK)
    if at < 0:
        return None
    fields: _Fields = {}
    for token in text[at + len(_RUNNER_MARK) :].split(None, 32)[:32]:
        key, sep, value = token.partition("=")
        if sep and key in _RUNNER_KEYS:
            fields[key] = value
    if "step" not in fields and "loss" not in fields:
        return None
    return fields


_BERT_RE = re.compile(
    r"\(\s{0,4}\d{1,9},\s{0,4}(?P<step>\d{1,15})\s{0,4}\)\s{1,8}step_loss\s{0,4}:\s{0,4}"
    rf"(?P<loss>{_NUM}){_NUM_END}"
    rf"(?:\s{{1,8}}learning_rate\s{{0,4}}:\s{{0,4}}{_NUM}{_NUM_END})?"
    rf"(?:\s{{1,8}}throughput\s{{0,4}}:\s{{0,4}}(?P<throughput>{_NUM}){_NUM_END})?",
    re.ASCII,
)


def _rule_bert(text: str) -> _Fields | None:
    """torch-neuronx BERT: ``LOG <date> - (epoch, step) step_loss : L ... throughput : T``."""
    if "step_loss" not in text:
        return None
    m = _BERT_RE.search(text)
    return None if m is None else m.groupdict()


_HF_NONFINITE_RE = re.compile(r"(?<![\w'\".])(-?)(nan|inf)(?![\w'\"])")
_HF_SENTINELS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_HF_MAX_CHARS = 4096
_HF_OPEN_LOSS_RE = re.compile(rf"\{{\s{{0,4}}'loss':\s{{0,4}}'?(?P<loss>{_NUM})'?,", re.ASCII)


_HF_SENTINEL = "__neurotui_nonfinite__:"


def _hf_sentinel(m: re.Match[str]) -> str:
    return f"'{_HF_SENTINEL}{m.group(1)}{m.group(2)}'"


def _hf_number(value: object) -> float | None:
    """A dict value as a float: numbers, the non-finite sentinels, and numeric strings
    (newer ``transformers`` logs ``{'loss': '1.248', ...}``)."""
    if isinstance(value, str):
        if value.startswith(_HF_SENTINEL):
            return _HF_SENTINELS.get(value[len(_HF_SENTINEL) :])
        if len(value) > 40:
            return None
        return _to_float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def _literal(text: str) -> object:
    """``ast.literal_eval`` without its compile-time warnings: some inputs (``'\\d'``,
    ``1if 1else 2``) make Python print a SyntaxWarning/DeprecationWarning to stderr, and
    under ``-W error`` the warning would become an error that loses the step."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def _rule_hf_dict(text: str) -> _Fields | None:
    """Hugging Face Trainer: ``{'loss': nan, 'learning_rate': 4.8e-05, 'epoch': 0.12}``.

    The dict may sit inside other text (a Rich or ``logging`` prefix such as
    ``[20:31:51] {...}   train.py:42``, literal markup ``[bold]{...}[/bold]``): the span
    from the first ``{`` to the last ``}`` is read. ``literal_eval`` rejects bare
    ``nan``/``inf``, so they become sentinel strings first. Only dicts with a numeric
    ``'loss'`` key count: eval and summary dicts (``eval_loss``, ``train_loss``) are not
    training steps. A dict cut off by a line wrap gives its loss when that comes first and
    is whole (followed by a comma).
    """
    if "'loss'" not in text:
        return None
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        return None
    if end < start:
        # Wrapped onto the next line (a narrow terminal, a paste): the loss, when it comes
        # first and is followed by its comma, is whole; the rest of the dict is not there.
        m = _HF_OPEN_LOSS_RE.match(text, start)
        return None if m is None else {"loss": m.group("loss")}
    s = text[start : end + 1]
    if len(s) > _HF_MAX_CHARS or "'loss'" not in s:
        return None
    try:
        data = _literal(_HF_NONFINITE_RE.sub(_hf_sentinel, s))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    loss = _hf_number(data.get("loss"))
    if loss is None:
        return None
    fields: _Fields = {"loss": loss}
    step = data.get("step")
    if isinstance(step, (int, str)) and not isinstance(step, bool):
        fields["step"] = step
    return fields


# ---- "key: value | key: value" lines: Megatron-LM, NeMo 2, nanotron

_PIPE_KV_RE = re.compile(
    r"(?P<key>[A-Za-z][A-Za-z0-9_ ()/.-]{0,60}?)\s{0,4}:?\s{1,24}"
    rf"(?P<val>{_NUMX})(?:\s{{0,24}}/\s{{0,24}}(?P<of>{_NUMX}))?\s{{0,8}}$",
    re.ASCII,
)
_PIPE_KEYS = {
    "iteration": "iteration",
    "global_step": "step",
    "consumed_samples": "samples_total",
    "global_batch_size": "global_batch",
    "elapsed_time_per_iteration_(ms)": "dt_ms",
    "elapsed_time_per_iteration_ms": "dt_ms",
    "train_step_timing_in_s": "dt",
    "samples_per_second": "throughput",
    "samples/sec": "throughput",
    "samples/s": "throughput",
}
# Loss keys, most specific first.
_PIPE_LOSS_KEYS = ("lm_loss", "reduced_train_loss", "loss", "train_loss", "training_loss_step")


def _rule_pipe_kv(text: str) -> _Fields | None:
    """``key: value | key: value`` iteration lines.

    Megatron-LM ``iteration 10/ 500 | consumed samples: 320 | elapsed time per iteration
    (ms): 1234.5 | ... | global batch size: 32 | lm loss: 1.06E+01 |`` (also the 2019 form
    without colons), NeMo 2 ``Training epoch 0, iteration 0/9 | ... | global_step: 0 |
    reduced_train_loss: 11.02``, nanotron ``iteration: 8 / 100 | ... |
    elapsed_time_per_iteration_ms: 11.5K | global_batch_size: 64 | lm_loss: 2.38``.
    ``global_step`` wins over ``iteration`` (NeMo's iteration restarts every epoch).
    A line whose first part names validation/evaluation is not a training step.
    """
    if "iteration" not in text or "|" not in text:
        return None
    parts = text.split("|", 64)
    if _PLAIN_NOT_TRAIN_RE.search(parts[0]) is not None:
        return None
    fields: _Fields = {}
    loss_rank = len(_PIPE_LOSS_KEYS)
    for part in parts[:64]:
        if len(part) > 240 or not any(c.isdigit() for c in part):
            continue
        m = _PIPE_KV_RE.search(part)
        if m is None:
            continue
        key = "_".join(m.group("key").lower().split())
        if key in _PIPE_LOSS_KEYS:
            if _PIPE_LOSS_KEYS.index(key) < loss_rank:
                fields["loss"], loss_rank = m.group("val"), _PIPE_LOSS_KEYS.index(key)
            continue
        name = _PIPE_KEYS.get(key)
        if name is not None:
            fields.setdefault(name, m.group("val"))
    iteration = fields.pop("iteration", None)
    if "step" not in fields and iteration is not None:
        fields["step"] = iteration
    if "step" not in fields or len(fields) < 2:
        return None
    return fields


# ---- epoch / batch counters: the PyTorch ImageNet and MNIST examples, torchvision's
# MetricLogger, timm, mmengine / mmcv (mmdetection, mmpretrain, ...), OpenPCDet

_EPOCH_BATCH_RE = re.compile(
    # ``Epoch: [0][ 400/80073]``, ``Epoch: [0]  [ 103/5005]``, ``Epoch(train) [1][10/90]``,
    # ``Epoch [1][2400/7517]``, timm ``Train: 0 [  50/1251 (  4%)]``, OpenPCDet
    # ``Train:    1/3 ( 33%) [  49/323 ( 15%)]`` and the MNIST example
    # ``Train Epoch: 1 [640/60000 (1%)]``; never ``Epoch(val)`` or ``Test: [ 0/30]``.
    r"\b(?P<word>Epoch(?:\(train\))?|Train(?P<mnist> Epoch)?):?\s{0,8}\[?\s{0,8}\d{1,9}"
    r"(?:\s{0,4}/\s{0,4}\d{1,9})?\]?\s{0,8}(?:\(\s{0,4}\d{1,3}%\)\s{0,8})?"
    r"\[\s{0,12}(?P<n>\d{1,12})\s{0,4}/\s{0,4}(?P<total>\d{1,12})(?:\s{0,4}\(\s{0,4}\d{1,3}%\))?\]",
    re.ASCII,
)
_EPOCH_BATCH_LOSS_RE = re.compile(rf"\b[Ll]oss:?\s{{1,8}}(?P<v>{_NUM}){_NUM_END}", re.ASCII)
# A step time, ``0.315`` or timm's ``0.320s``; not data/forward/backward time, not an eta.
_EPOCH_BATCH_TIME_RE = re.compile(
    rf"(?P<what>\b\w{{1,12}}[ _])?\b[Tt]ime:?\s{{1,8}}(?P<v>{_NUM})(?:s\b|{_NUM_END})", re.ASCII
)
_EPOCH_BATCH_TIME_NOT = frozenset({"data ", "data_", "forward ", "backward ", "last_", "eta "})
_EPOCH_BATCH_TPUT_RE = re.compile(
    rf"\b(?:img|imgs|images|samples?)/s(?:ec)?:?\s{{1,8}}(?P<v>{_NUM}){_NUM_END}"
    # timm: ``Time: 0.320s,  400.32/s`` (samples per second over the step)
    rf"|\b[Tt]ime:?\s{{1,8}}{_NUM}s,\s{{1,8}}(?P<v2>{_NUM})/s\b",
    re.ASCII,
)


def _step_time(tail: str) -> str | None:
    """The first ``time: x`` in ``tail`` that is the step's own time."""
    for i, m in enumerate(_EPOCH_BATCH_TIME_RE.finditer(tail)):
        if i >= 8:
            break
        what = (m.group("what") or "").lower()
        if what not in _EPOCH_BATCH_TIME_NOT:
            return m.group("v")
    return None


def _rule_epoch_batch(text: str) -> _Fields | None:
    """Per-epoch batch counters: ``Epoch: [0][ 400/80073]\\tTime  0.315 ( 0.372)\\t...
    Loss 6.98e+00 (7.08e+00)``, torchvision's ``Epoch: [0]  [ 103/5005]  eta: ...  img/s:
    13.6  loss: 6.85 (6.94) ... time: 2.54``, mmengine ``Epoch(train)  [83][  50/2693]  ...
    time: 1.11  data_time: 0.09 ... loss: 1917.4``, timm ``Train: 0 [  50/73 ( 70%)]  Loss:
    6.77 (6.83)  Time: 0.320s,  400.32/s``. The batch index restarts every epoch, so it is
    reported as a bar position (``bar_key`` ``"Epoch"``); the value before the running
    average in parentheses is this batch's. The MNIST example's ``[640/60000 (1%)]`` counts
    samples, not batches: it is reported as ``samples_total`` (a running total that starts
    again each epoch), not as a position. A line without a loss or a time is not a step."""
    if "Epoch" not in text and "Train" not in text:
        return None
    m = _EPOCH_BATCH_RE.search(text)
    if m is None:
        return None
    tail = text[m.end() :]
    fields: _Fields
    if m.group("mnist"):
        fields = {"samples_total": m.group("n")}
    else:
        fields = {"bar_n": m.group("n"), "bar_total": m.group("total"), "bar_key": "Epoch"}
    if (lo := _EPOCH_BATCH_LOSS_RE.search(tail)) is not None:
        fields["loss"] = lo.group("v")
    if (dt := _step_time(tail)) is not None:
        fields["dt"] = dt
    if (tp := _EPOCH_BATCH_TPUT_RE.search(tail)) is not None:
        fields["throughput"] = tp.group("v") or tp.group("v2")
    if "loss" not in fields and "dt" not in fields:
        return None
    return fields


# ``[1,  2000] loss: 2.183`` (PyTorch's CIFAR-10 tutorial and the many loops copied from it):
# ``[epoch, batch]`` at the start of the line, then the loss.
_EPOCH_COMMA_BATCH_RE = re.compile(
    r"^\s{0,8}\[\s{0,4}\d{1,9},\s{0,12}(?P<n>\d{1,12})\]:?\s{0,8}(?:[a-z]{1,12}[_ ])?"
    rf"loss\s{{0,4}}[:=]?\s{{0,4}}(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII | re.IGNORECASE,
)


def _rule_epoch_comma_batch(text: str) -> _Fields | None:
    """``[1,  2000] loss: 2.183`` / ``[1,   300]: loss: 0.719 , acc: 79.59``: a position in
    the epoch (``bar_key`` ``"Epoch"``) with its loss."""
    if not text.lstrip().startswith("["):
        return None
    m = _EPOCH_COMMA_BATCH_RE.match(text)
    if m is None:
        return None
    return {"bar_n": m.group("n"), "bar_key": "Epoch", "loss": m.group("loss")}


# ---- fairseq, char-rnn, CycleGAN / pix2pix, DeepSpeed

# fairseq ``| epoch 009:   1000 / 2737 loss=6.220, ..., bsz=108, num_updates=22897, ...`` and
# the 2018 form ``| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, ...``. The epoch's
# summary (``| epoch 009 | loss 6.233 | ...``) and validation lines have no counter.
_FAIRSEQ_RE = re.compile(
    r"\bepoch\s{1,4}\d{1,9}:?\s{1,24}(?P<n>\d{1,12})\s{0,4}/\s{0,4}(?P<total>\d{1,12})\s{1,8}"
    rf"loss=(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII,
)
_FAIRSEQ_KEYS_RE = re.compile(
    rf"\b(?P<key>num_updates|ups|bsz)=(?P<v>{_NUM}){_NUM_END}", re.ASCII
)


def _rule_fairseq(text: str) -> _Fields | None:
    """fairseq's progress lines. ``num_updates`` is the global step (else the epoch's
    counter is a bar position), ``ups`` updates per second gives ``dt`` and ``bsz`` the
    sentences of an update (``global_batch``)."""
    if "loss=" not in text or "epoch" not in text:
        return None
    m = _FAIRSEQ_RE.search(text)
    if m is None or _PLAIN_NOT_TRAIN_RE.search(text, 0, m.start()) is not None:
        return None
    fields: _Fields = {"loss": m.group("loss")}
    for i, kv in enumerate(_FAIRSEQ_KEYS_RE.finditer(text, m.end())):
        if i >= 8:
            break
        key = kv.group("key")
        name = {"num_updates": "step", "ups": "it_per_s", "bsz": "global_batch"}[key]
        fields.setdefault(name, kv.group("v"))
    if "step" not in fields:
        fields.update(bar_n=m.group("n"), bar_total=m.group("total"), bar_key="epoch")
    return fields


# char-rnn (Lua, and its TensorFlow and PyTorch ports): ``112/9500 (epoch 0.589),
# train_loss = 3.44701844, grad/param norm = 3.86e-01, time/batch = 0.1673s``.
_CHAR_RNN_RE = re.compile(
    r"^\s{0,8}(?P<step>\d{1,12})/\d{1,12}\s{0,4}\(epoch\s{0,4}[\d.]{1,16}\),\s{0,4}"
    rf"train_loss\s{{0,4}}=\s{{0,4}}(?P<loss>{_NUM}){_NUM_END}"
    rf"(?:.{{0,200}}?time/batch\s{{0,4}}=\s{{0,4}}(?P<dt>{_NUM})s?(?![\w.]))?",
    re.ASCII,
)


def _rule_char_rnn(text: str) -> _Fields | None:
    """``N/total (epoch e), train_loss = L, ..., time/batch = T``: N is the global iteration."""
    if "train_loss" not in text:
        return None
    m = _CHAR_RNN_RE.match(text)
    return None if m is None else m.groupdict()


# pytorch-CycleGAN-and-pix2pix's Visualizer (copied by many GAN repositories):
# ``(epoch: 355, iters: 100, time: 0.078, data: 3.094) G_GAN: 18.230 G_L1: 12.882 ...``.
# ``iters`` counts images within the epoch; ``time`` is the computation time per image.
_GAN_RE = re.compile(
    r"^\s{0,8}\(epoch:\s{0,4}\d{1,9},\s{0,4}iters:\s{0,4}(?P<n>\d{1,12}),\s{0,4}"
    rf"time:\s{{0,4}}{_NUM},\s{{0,4}}data:\s{{0,4}}{_NUM}\)"
    rf"\s{{1,8}}[A-Za-z][\w.]{{0,40}}:\s{{0,4}}{_NUM}{_NUM_END}",
    re.ASCII,
)


def _rule_gan_visualizer(text: str) -> _Fields | None:
    """CycleGAN / pix2pix loss lines: a position in the epoch (``bar_key`` ``"epoch"``). Its
    losses are several named terms (``G_GAN``, ``D_A``, ...), none of them *the* loss, so
    no loss is taken; nor is ``time``, which is per image, not per step."""
    if "iters:" not in text:
        return None
    m = _GAN_RE.match(text)
    if m is None:
        return None
    return {"bar_n": m.group("n"), "bar_key": "epoch"}


# DeepSpeed's engine reports every ``steps_per_print`` steps:
# ``[Rank 0] step=40, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]`` and its throughput timer
# ``epoch=0/micro_step=34/global_step=34, RunningAvgSamplesPerSec=7.86, CurrSamplesPerSec=8.0``
# (older: ``0/40, SamplesPerSec=83.48``).
_DS_STEP_RE = re.compile(r"\bstep=(?P<step>\d{1,15}), skipped=\d{1,15}, lr=", re.ASCII)
_DS_TIMER_RE = re.compile(
    r"(?:\bglobal_step=(?P<step>\d{1,15})|(?<![\w/])\d{1,9}/(?P<n>\d{1,15})), "
    rf"(?:RunningAvg)?SamplesPerSec=(?P<avg>{_NUM}){_NUM_END}"
    rf"(?:, CurrSamplesPerSec=(?P<cur>{_NUM}){_NUM_END})?",
    re.ASCII,
)


def _rule_deepspeed(text: str) -> _Fields | None:
    """DeepSpeed's step report (the step) and throughput timer (samples/s, the current
    step's rate when printed, else the running average)."""
    if "skipped=" in text:
        m = _DS_STEP_RE.search(text)
        return None if m is None else {"step": m.group("step")}
    if "SamplesPerSec=" not in text:
        return None
    t = _DS_TIMER_RE.search(text)
    if t is None:
        return None
    fields: _Fields = {"throughput": t.group("cur") or t.group("avg")}
    if t.group("step") is not None:
        fields["step"] = t.group("step")
    else:
        fields.update(bar_n=t.group("n"), bar_key="DeepSpeed")
    return fields


_DATA_INDEX_RE = re.compile(
    r"\bEpoch\s{0,4}\d{1,9},\s{0,4}Data index:\s{0,4}(?P<n>\d{1,12}),\s{0,4}Loss:\s{0,4}"
    rf"(?:tensor\()?(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII,
)


def _rule_data_index(text: str) -> _Fields | None:
    """torch-neuronx tutorials: ``Epoch 0, Data index: 3, Loss: 0.1943359375``."""
    if "Data index" not in text:
        return None
    m = _DATA_INDEX_RE.search(text)
    if m is None:
        return None
    return {"bar_n": m.group("n"), "bar_key": "Epoch", "loss": m.group("loss")}


_PLAIN_STEP_RE = re.compile(
    # ``iters: 100, epoch: 1 | loss: 0.34`` (Time-Series-Library and its many copies)
    r"\b(?:global[_ ]?)?(?:step|iters?|iteration)\b\s{0,4}[:=#]?\s{0,4}\[?\s{0,4}"
    r"(?P<step>\d{1,15})(?:\s{0,4}/\s{0,4}\d{1,15})?(?![\w.])",
    re.ASCII | re.IGNORECASE,
)
_PLAIN_LOSS_RE = re.compile(
    r"\b(?:[a-z]{1,12}_)?loss\b\s{0,4}[:=]?\s{0,4}(?:tensor\()?"
    rf"(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII | re.IGNORECASE,
)
# Evaluation and summary lines also say "step ... loss" but are not training steps.
_PLAIN_NOT_TRAIN_RE = re.compile(
    r"\b(?:val|valid|validation|eval|evaluation|test|dev|best)(?:_|\b)",
    re.ASCII | re.IGNORECASE,
)
# A validation loss printed with no value (NxD's ``val-loss: None`` on every training line
# between evaluations): nothing was evaluated, so the word does not make the line one.
_PLAIN_NO_EVAL_RE = re.compile(
    r"\b(?:val|valid|validation|eval|test)[-_ ]?loss:?\s{0,4}None\b", re.ASCII | re.IGNORECASE
)
# A value that stands alone ("123.4 samples/s"), not one that belongs to a key ("x=123.4").
_FREE = r"(?<![^\s,;(\[|])"
_PLAIN_DT_RES = (
    re.compile(
        r"\b(?:time|dt|step[_ ]?time|iter[_ ]?time|elapsed|duration)\b\s{0,4}[:=]?\s{0,4}"
        rf"(?P<v>{_NUM})\s{{0,2}}(?P<unit>ms|s|sec|secs|seconds)\b",
        re.ASCII | re.IGNORECASE,
    ),
    re.compile(rf"{_FREE}(?P<v>{_NUM})\s{{0,2}}(?P<unit>s)/it\b", re.ASCII),
    re.compile(rf"{_FREE}(?P<v>{_NUM})\s{{0,2}}(?P<unit>it)/s\b", re.ASCII),
    # ``-- It/s: 1.69``: the rate as a key.
    re.compile(
        rf"\b(?P<unit>it)/s\s{{0,4}}[:=]\s{{0,4}}(?P<v>{_NUM}){_NUM_END}",
        re.ASCII | re.IGNORECASE,
    ),
)
_PLAIN_THROUGHPUT_RES = (
    re.compile(
        r"\bsamples?(?:/|_per_|\s+per\s+)s(?:ec(?:ond)?)?\b\s{0,4}[:=]\s{0,4}"
        rf"(?P<v>{_NUM}){_NUM_END}",
        re.ASCII | re.IGNORECASE,
    ),
    re.compile(
        rf"{_FREE}(?P<v>{_NUM})\s{{0,2}}samples?(?:/|\s+per\s+)s(?:ec(?:ond)?)?\b",
        re.ASCII | re.IGNORECASE,
    ),
)


def _rule_plain(text: str) -> _Fields | None:
    """Hand-written ``step 10 | loss 2.31`` / ``iter 10: loss 4.23, time 120.5ms`` lines.

    Needs the words step/iter(ation) then a number, and later a loss word then a
    number, so "resuming at step 28125" or "loss scale 1024" are not steps. Lines
    naming val/eval/test/best are skipped, but for a validation loss printed as ``None``
    (NxD: ``step 66 step_time 5.98s ... loss nan val-loss: None current_lr: ...``), and
    so is BigDL's validation result (``... Loss is (Loss: 134.8, count: 128, ...)``). The
    two searches are separate (not one ``step.*loss`` regex) so a hostile line cannot make
    the search quadratic.

    Each optional search runs only when the word it needs is in the line: several start
    with a look-behind, which the regex engine tries at every position (about 2.5 us each
    on a short line), and most step lines print none of them.
    """
    if "loss" not in text and "Loss" not in text and "LOSS" not in text:
        return None
    st = _PLAIN_STEP_RE.search(text)
    if st is None:
        return None
    lo = _PLAIN_LOSS_RE.search(text, st.end())
    if lo is None:
        return None
    if "Loss is (" in text:
        return None  # BigDL's validation result: ``Loss is (Loss: 134.8, count: 128, ...)``
    lower = text.lower()
    if ("val" in lower or "test" in lower or "dev" in lower or "best" in lower) and \
            _PLAIN_NOT_TRAIN_RE.search(
                _PLAIN_NO_EVAL_RE.sub("", text) if "None" in text else text) is not None:
        return None
    fields: _Fields = {"step": st.group("step"), "loss": lo.group("loss")}
    # The first of _PLAIN_DT_RES that finds a time, each tried only with the word it needs.
    d = None
    if "time" in lower or "dt" in lower or "elapsed" in lower or "duration" in lower:
        d = _PLAIN_DT_RES[0].search(text)
    if d is None and "s/it" in text:
        d = _PLAIN_DT_RES[1].search(text)
    if d is None and "it/s" in text:
        d = _PLAIN_DT_RES[2].search(text)
    if d is None and "it/s" in lower:
        d = _PLAIN_DT_RES[3].search(text)
    if d is not None:
        unit = d.group("unit").lower()
        key = {"ms": "dt_ms", "it": "it_per_s"}.get(unit, "dt")
        fields[key] = d.group("v")
    if "sample" in lower:
        for tp_re in _PLAIN_THROUGHPUT_RES:
            if (t := tp_re.search(text)) is not None:
                fields["throughput"] = t.group("v")
                break
    return fields


# ---- Keras-style bars, OpenNMT-py, OLMo, a bare step number at the start of the line

# Keras ``Model.fit`` (and the PyTorch loops that copy its bar): ``1719/1719
# [==============================] - 4s 2ms/step - loss: 1.0187 - accuracy: 0.68 - val_loss:
# 0.52``; mid-epoch ``13184/60000 [=====>......] - ETA: 3s - loss: 0.0952``; verbose=2 drops
# the bar: ``1079/1079 - 21s - loss: 0.2431 - 21s/epoch - 19ms/step``.
_KERAS_RE = re.compile(
    r"^\s{0,12}(?P<n>\d{1,12})/(?P<total>\d{1,12}|Unknown)\s{1,4}(?:\[[=>.]{1,200}\]\s{1,4})?- ",
    re.ASCII,
)
_KERAS_LOSS_RE = re.compile(rf" - loss: (?P<v>{_NUM}){_NUM_END}", re.ASCII)
_KERAS_DT_RE = re.compile(rf"\b(?P<v>{_NUM})(?P<unit>us|ms|s)/step\b", re.ASCII)
_KERAS_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _rule_keras(text: str) -> _Fields | None:
    """A Keras progress-bar position: the counter restarts every epoch (``bar_key``
    ``"Epoch"``), ``loss`` is the training loss (``val_loss`` is not), ``2ms/step`` the step
    time. A position with no loss (``0/1719``, a predict bar) is not a step."""
    if " - loss: " not in text:
        return None
    m = _KERAS_RE.match(text)
    if m is None or m.group("n") == "0":
        return None
    lo = _KERAS_LOSS_RE.search(text, m.end() - 3)
    if lo is None:
        return None
    fields: _Fields = {"bar_n": m.group("n"), "bar_key": "Epoch", "loss": lo.group("v")}
    if m.group("total") != "Unknown":
        fields["bar_total"] = m.group("total")
    if (d := _KERAS_DT_RE.search(text, m.end())) is not None:
        value = _to_float(d.group("v"))
        if value is not None:
            fields["dt"] = value * _KERAS_UNIT_S[d.group("unit")]
    return fields


# OpenNMT-py: ``[2019-03-21 18:31:43,773 INFO] Step 2250/200000; acc:  31.18; ppl: 57.53;
# xent: 4.05; lr: 0.00028; 5092/261 tok/s;   6641 sec``; before 2018 ``Epoch  1,
# 12850/37527; acc: ...; xent: 9.46; ...``. ``xent`` (cross-entropy) is its training loss;
# ``sec`` is the time since the start, not the step's.
_ONMT_RE = re.compile(
    r"(?:\bStep\s{1,4}(?P<step>\d{1,15})\s{0,4}/\s{0,12}\d{1,15}"
    r"|\bEpoch\s{1,4}\d{1,9},\s{1,8}(?P<n>\d{1,12})/\s{0,12}(?P<total>\d{1,12}));"
    rf"[^|]{{0,120}}?\bxent:\s{{0,8}}(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII,
)


def _rule_opennmt(text: str) -> _Fields | None:
    """OpenNMT-py's training report (its validation report has no step counter)."""
    if "xent:" not in text:
        return None
    m = _ONMT_RE.search(text)
    if m is None or _PLAIN_NOT_TRAIN_RE.search(text, 0, m.start()) is not None:
        return None
    if m.group("step") is not None:
        return {"step": m.group("step"), "loss": m.group("loss")}
    fields: _Fields = {"bar_n": m.group("n"), "bar_total": m.group("total"), "bar_key": "Epoch"}
    fields["loss"] = m.group("loss")
    return fields


# OLMo's trainer logs each step as a block: a header ``... olmo.train:908  INFO
# [step=2/739328,epoch=0]`` (the only line that names the step) and one metric a line under
# it. The header is the step's report; the loss is on a later line, so it is not taken.
_OLMO_RE = re.compile(r"\[step=(?P<step>\d{1,15})/(?:\d{1,15}|\?)(?:,epoch=\d{1,9})?\]\s{0,8}$")


def _rule_olmo(text: str) -> _Fields | None:
    if "[step=" not in text:
        return None
    m = _OLMO_RE.search(text)
    return None if m is None else {"step": m.group("step")}


# ``420 | loss 4.0625 | lr 9.000000e-04 | 7367.57ms``: a hand-written loop that prints the
# step number alone in the first cell, then its loss; a cell that is only a duration is the
# step time.
_LEADING_STEP_RE = re.compile(
    r"^\s{0,8}(?P<step>\d{1,15})\s{0,4}\|\s{0,4}(?:train[_ ])?loss\s{0,4}[:=]?\s{0,4}"
    rf"(?P<loss>{_NUM}){_NUM_END}",
    re.ASCII | re.IGNORECASE,
)
_CELL_DURATION_RE = re.compile(
    rf"\|\s{{0,4}}(?:(?:step[_ ])?time:?\s{{0,4}})?(?P<v>{_NUM})\s?(?P<unit>ms|s)\s{{0,8}}(?:\||$)",
    re.ASCII,
)


def _rule_leading_step(text: str) -> _Fields | None:
    if "|" not in text or not text.lstrip()[:1].isdigit():
        return None
    m = _LEADING_STEP_RE.match(text)
    if m is None:
        return None
    fields: _Fields = {"step": m.group("step"), "loss": m.group("loss")}
    if (d := _CELL_DURATION_RE.search(text, m.end())) is not None:
        fields["dt_ms" if d.group("unit") == "ms" else "dt"] = d.group("v")
    return fields


# ---- lines with no "step" word: BigDL, ``Batch N/M`` counters, tinygrad, Composer

# BigDL / Analytics Zoo's DistriOptimizer: ``[Epoch 3 3360/3668][Iteration 96][Wall Clock
# 1317.2s] Trained 112 records in 13.138 seconds. Throughput is 8.52 records/second. Loss is
# 0.0802.`` (older: ``Train 512000 in 1.236seconds``). The iteration is the global step, the
# records the step's samples; its validation result ``Loss is (Loss: ..., count: ...)`` is no
# number after ``Loss is``, so no step.
_BIGDL_ITER_RE = re.compile(r"\[Iteration\s{1,4}(?P<step>\d{1,15})\]", re.ASCII)
_BIGDL_LOSS_RE = re.compile(rf"\bLoss is\s{{1,4}}(?P<v>{_NUM}){_NUM_END}", re.ASCII)
_BIGDL_TRAINED_RE = re.compile(
    rf"\bTrain(?:ed)?\s{{1,4}}(?P<samples>\d{{1,15}})(?:\s{{1,4}}records)?\s{{1,4}}in\s{{1,4}}"
    rf"(?P<dt>{_NUM})\s{{0,4}}seconds?\b",
    re.ASCII,
)
_BIGDL_TPUT_RE = re.compile(
    rf"\bThroughput is\s{{1,4}}(?P<v>{_NUM})\s{{1,4}}records/second", re.ASCII
)


def _rule_bigdl(text: str) -> _Fields | None:
    """One search a field, each from the iteration on (not one regex of optional parts, which
    a hostile line could make backtrack)."""
    if "Loss is " not in text or "[Iteration" not in text:
        return None
    m = _BIGDL_ITER_RE.search(text)
    if m is None:
        return None
    lo = _BIGDL_LOSS_RE.search(text, m.end())
    if lo is None:
        return None
    fields: _Fields = {"step": m.group("step"), "loss": lo.group("v")}
    if (tr := _BIGDL_TRAINED_RE.search(text, m.end(), lo.start())) is not None:
        fields["samples"], fields["dt"] = tr.group("samples"), tr.group("dt")
    if (tp := _BIGDL_TPUT_RE.search(text, m.end(), lo.start())) is not None:
        fields["throughput"] = tp.group("v")
    return fields


# A batch counter without brackets, then the loss: gluon-nlp ``Epoch: 1, Batch: 3900/8164,
# Loss span/answer/total=0.7729/0.1773/0.9502, LR=..., Throughput=52.94 samples/s`` (the last
# of several slash-joined losses is their total), hand-written loops ``Batch 10/100, Loss:
# 2.2845`` and ``Epoch   0 Batch   50/225 - Loss: 3.2396``. The counter restarts every epoch: a
# position (``bar_key`` ``"Epoch"``). A line that names evaluation anywhere (``Epoch 0 Batch
# 50/225 - Test Loss: 3.18``) is not training.
_BATCH_OF_RE = re.compile(
    r"\bBatch:?\s{1,4}(?P<n>\d{1,12})\s{0,4}/\s{0,4}(?P<total>\d{1,12})(?![\d/])", re.ASCII
)
_BATCH_LOSS_RE = re.compile(
    rf"\b[Ll]oss\b(?:\s{{1,4}}[\w/]{{1,60}})?\s{{0,4}}[:=]\s{{0,4}}"
    rf"(?P<v>(?:{_NUM}/){{0,7}}{_NUM}){_NUM_END}",
    re.ASCII,
)
_BATCH_TPUT_RE = re.compile(
    rf"\bThroughput\s{{0,4}}[:=]\s{{0,4}}(?P<v>{_NUM})\s{{0,4}}samples?/s(?:ec)?\b", re.ASCII
)


def _rule_batch_of(text: str) -> _Fields | None:
    if "Batch" not in text:
        return None
    m = _BATCH_OF_RE.search(text)
    if m is None:
        return None
    lo = _BATCH_LOSS_RE.search(text, m.end())
    if lo is None or _PLAIN_NOT_TRAIN_RE.search(text) is not None:
        return None
    fields: _Fields = {"bar_n": m.group("n"), "bar_total": m.group("total"), "bar_key": "Epoch",
                       "loss": lo.group("v").rsplit("/", 1)[-1]}
    if "Throughput" in text and (tp := _BATCH_TPUT_RE.search(text, lo.end())) is not None:
        fields["throughput"] = tp.group("v")
    return fields


# The PyTorch word_language_model example and the AWD-LSTM / MoS code built on it: ``| epoch
# 25 |   800/ 1106 batches | lr 20.00 | ms/batch 107.03 | loss  4.02 | ppl    55.54``. The
# batch counter restarts every epoch (``bar_key`` ``"epoch"``); ``ms/batch`` is the step time
# averaged over the log interval. ``| end of epoch 25 | ... | valid loss 4.35`` has no counter.
_WORD_LM_RE = re.compile(
    r"^\s{0,8}\|\s{0,4}epoch\s{1,8}\d{1,9}\s{0,4}\|\s{0,12}(?P<n>\d{1,12})\s{0,4}/\s{0,12}"
    r"(?P<total>\d{1,12})\s{1,4}batches\s{0,4}\|",
    re.ASCII,
)
_WORD_LM_CELL_RE = re.compile(
    rf"\|\s{{0,4}}(?P<key>ms/batch|loss)\s{{1,12}}(?P<v>{_NUM})\s{{0,12}}(?=\||$)", re.ASCII
)


def _rule_word_lm(text: str) -> _Fields | None:
    if " batches" not in text:
        return None
    m = _WORD_LM_RE.match(text)
    if m is None:
        return None
    fields: _Fields = {"bar_n": m.group("n"), "bar_total": m.group("total"), "bar_key": "epoch"}
    for i, cell in enumerate(_WORD_LM_CELL_RE.finditer(text, m.end() - 1)):
        if i >= 4:
            break
        fields["dt_ms" if cell.group("key") == "ms/batch" else "loss"] = cell.group("v")
    return fields if "loss" in fields else None


# tinygrad's training loops print the value before its name: ``10.5008 loss, 0.000016689 LR,
# 8.83 GB used, 18.70 s`` (the llama trainer's bar description, no step number) or, with the
# step first, ``    3 7.34 s run, 11.8750 loss, 0.000000000002 LR, 1454.57 GB used, 236258.78
# GFLOPS`` (hlb_cifar10: ``ms run``). The time is the step's own.
_TINYGRAD_RE = re.compile(
    rf"^\s{{0,12}}(?:(?P<step>\d{{1,15}})\s{{1,8}}(?P<run>{_NUM})\s{{0,2}}(?P<unit>ms|s)\s{{1,2}}run,"
    rf"(?:[^,]{{0,60}},){{0,4}}?\s{{0,8}})?(?P<loss>{_NUM})\s{{1,4}}loss,\s{{0,8}}{_NUM}\s{{1,4}}LR,",
    re.ASCII,
)
_TINYGRAD_END_S_RE = re.compile(rf",\s{{0,8}}(?P<v>{_NUM})\s{{1,2}}s\s{{0,200}}$", re.ASCII)


def _rule_tinygrad(text: str) -> _Fields | None:
    if " loss, " not in text or " LR," not in text:
        return None
    m = _TINYGRAD_RE.match(text)
    if m is None:
        return None
    fields: _Fields = {"loss": m.group("loss")}
    if m.group("step") is not None:
        fields["step"] = m.group("step")
        fields["dt_ms" if m.group("unit") == "ms" else "dt"] = m.group("run")
    elif (d := _TINYGRAD_END_S_RE.search(text, m.end())) is not None:
        fields["dt"] = d.group("v")
    return fields


# Composer (MosaicML, LLM Foundry) logs each batch as a block: a header ``[batch=2/100]:``, then
# one ``Train <metric>: <value>`` a line. The block's training loss, ``Train
# loss/train/total: 10.9724``, is its step's report (the header names the batch but holds no
# word of the screen, _maybe_step, and no figure but the counter). Its evaluation metrics are
# ``Eval ...`` lines. Under ``srun -l`` each line starts with the task's number (``0: ``).
_COMPOSER_LOSS_RE = re.compile(
    rf"^(?:\d{{1,7}}:)?\s{{0,24}}Train loss/train/total:\s{{1,8}}(?P<loss>{_NUM}){_NUM_END}"
    r"\s{0,8}$",
    re.ASCII,
)


def _rule_composer(text: str) -> _Fields | None:
    if "loss/train/total" not in text:
        return None
    m = _COMPOSER_LOSS_RE.match(text)
    return None if m is None else {"loss": m.group("loss")}


# Order matters: specific formats before the loose "step ... loss" rule.
_DEFAULT_RULES: tuple[tuple[str, _Rule], ...] = (
    ("neurotui-runner", _rule_runner),
    ("torch-neuronx-bert", _rule_bert),
    ("hf-trainer-dict", _rule_hf_dict),
    ("progress-bar", _rule_bar),
    ("megatron-nemo-nanotron", _rule_pipe_kv),
    ("epoch-batch-counter", _rule_epoch_batch),
    ("epoch-comma-batch", _rule_epoch_comma_batch),
    ("epoch-data-index", _rule_data_index),
    ("fairseq", _rule_fairseq),
    ("char-rnn", _rule_char_rnn),
    ("cyclegan-pix2pix", _rule_gan_visualizer),
    ("deepspeed", _rule_deepspeed),
    ("keras", _rule_keras),
    ("opennmt-py", _rule_opennmt),
    ("olmo", _rule_olmo),
    ("leading-step-number", _rule_leading_step),
    ("plain-step-loss", _rule_plain),
    # Lines with no "step" word, after every rule above: none of them reads these lines.
    ("bigdl", _rule_bigdl),
    ("batch-of-total", _rule_batch_of),
    ("word-language-model", _rule_word_lm),
    ("tinygrad", _rule_tinygrad),
    ("composer", _rule_composer),
)
_RULE_WORDS: dict[_Rule, tuple[str, ...]] = {
    # What each built-in rule's own first test needs in the line (one of these words): a
    # batch of lines holding none of a rule's words is not shown to that rule at all.
    _rule_runner: (_RUNNER_MARK,),
    _rule_bert: ("step_loss",),
    _rule_hf_dict: ("'loss'",),
    _rule_bar: ("|", "%", " ["),  # _search_bar's three forms
    _rule_pipe_kv: ("iteration",),
    _rule_epoch_batch: ("Epoch", "Train"),
    _rule_epoch_comma_batch: ("[",),
    _rule_data_index: ("Data index",),
    _rule_fairseq: ("loss=",),
    _rule_char_rnn: ("train_loss",),
    _rule_gan_visualizer: ("iters:",),
    _rule_deepspeed: ("skipped=", "SamplesPerSec="),
    _rule_keras: (" - loss: ",),
    _rule_opennmt: ("xent:",),
    _rule_olmo: ("[step=",),
    _rule_leading_step: ("|",),
    _rule_plain: ("loss", "Loss", "LOSS"),
    _rule_bigdl: ("Loss is ",),
    _rule_batch_of: ("Batch",),
    _rule_word_lm: (" batches",),
    _rule_tinygrad: (" loss, ",),
    _rule_composer: ("loss/train/total",),
}
_RULE_WORD_LIST = tuple(sorted({word for words in _RULE_WORDS.values() for word in words}))
_ALL_DEFAULT_RULES = tuple(rule for _, rule in _DEFAULT_RULES)


def _default_rules_for(batch: str) -> tuple[_Rule, ...]:
    """The built-in rules, in order, that could match a line of ``batch`` (a rule none of
    whose words the batch holds could not): a batch of plain ``step N loss X`` lines is shown
    to one rule, not seventeen (about 2 us a line)."""
    present = 0
    for bit, word in enumerate(_RULE_WORD_LIST):
        if word in batch:
            present |= 1 << bit
    return _rules_with_words(present)


@functools.lru_cache(maxsize=256)
def _rules_with_words(present: int) -> tuple[_Rule, ...]:
    return tuple(rule for rule in _ALL_DEFAULT_RULES if any(
        present >> _RULE_WORD_LIST.index(word) & 1 for word in _RULE_WORDS[rule]))


# Every built-in format needs one of these; an ordinary line costs these tests and no regex.
_PREFILTER = (
    "loss",
    "Loss",
    "LOSS",
    "it/s",
    "s/it",
    "%|",
    "it [",
    "iter",  # Megatron ``iteration``; CycleGAN / pix2pix ``iters:`` (no word "loss" there)
    _RUNNER_MARK,
    "SamplesPerSec=",  # DeepSpeed's throughput timer
    "step=",  # DeepSpeed's ``step=40, skipped=2``; OLMo's ``[step=2/739328,epoch=0]`` header
    "xent:",  # OpenNMT-py (its loss is the cross-entropy)
)


def _maybe_step(text: str) -> bool:
    """Whether ``text`` holds one of :data:`_PREFILTER` (the two are kept equal by a test).

    Written out as one boolean expression because ``any()`` over the tuple costs more in
    generator steps than the substring tests themselves (about 1.4 against 0.9 us for an
    ordinary 140-character line), and every line the job prints comes through here."""
    return (
        "loss" in text
        or "Loss" in text
        or "LOSS" in text
        or "it/s" in text
        or "s/it" in text
        or "%|" in text
        or "it [" in text
        or "iter" in text
        or _RUNNER_MARK in text
        or "SamplesPerSec=" in text
        or "step=" in text
        or "xent:" in text
    )
