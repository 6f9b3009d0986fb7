"""Progress bars as step lines: tqdm's, and those of Lightning, NeMo, NxD Training and the
Hugging Face Trainer drawn with it. A bar position is a step once (`bar_n`, `bar_key`);
bars that are not training (validation, downloads, dataset passes) are not steps. One of
the per-framework rules (rules.py), in a room of its own for its size.

Text is data: nothing in a bar's text is evaluated."""

from __future__ import annotations

import re

from neurotui.sources.steplog.records import _Fields
from neurotui.sources.steplog.text import _NUM, _NUM_END, _to_float

# ---- progress bars (tqdm, and Lightning / NeMo / NxD Training / HF Trainer on top of it)

# ``desc:  45%|bar| 45/100 [00:02<00:02, 19.8it/s, loss=2.31]`` or, without a total,
# ``desc: 3it [00:32, 10.68s/it, ...]``. The bracket may be cut off at the end of a line.
# Notebooks and log services drop the bar glyphs and the pipes: ``desc:  50% 1/2 [...]``.
# Three patterns, each starting with a literal or a digit so that the search skips ahead
# quickly (one alternation that starts with a look-behind tries every position).
_BAR_COUNTER = r"(?P<n>\d{1,12})/(?P<total>\d{1,12}|\?)\s{0,4}\[(?P<inner>[^\[\]]{0,800})(?:\]|$)"
_BAR_PIPE_RE = re.compile(rf"\|\s{{0,8}}{_BAR_COUNTER}", re.ASCII)
_BAR_GLYPHLESS_RE = re.compile(rf"%\s{{1,9}}{_BAR_COUNTER}", re.ASCII)  # after a digit
_BAR_NO_TOTAL_RE = re.compile(  # after the start, a space, ``:`` or ``|``
    r"(?P<n>\d{1,12})[A-Za-z]{1,12} \[(?P<inner>(?:\d{1,4}:)?\d{1,2}:\d{2}[^\[\]]{0,800})(?:\]|$)",
    re.ASCII,
)
_BAR_NO_TOTAL_AFTER = frozenset(" \t:|")
_BAR_MAX_TRIES = 64


def _search_bar(text: str, pos: int = 0) -> re.Match[str] | None:
    """The first bar counter in ``text[pos:]``: ``| 45/100 [...]``, else ``50% 1/2 [...]``
    (drawn without glyphs), else ``3it [00:32, ...]`` (no total); the match has groups
    ``n``, ``inner`` and, but for the last form, ``total``. The forms are tried in that
    order, not together: a line does not mix them, and most bars are the first."""
    if "|" in text and (m := _BAR_PIPE_RE.search(text, pos)) is not None:
        return m
    if "%" in text:
        for i, m in enumerate(_BAR_GLYPHLESS_RE.finditer(text, pos)):
            if i >= _BAR_MAX_TRIES:
                break
            if m.start() > 0 and text[m.start() - 1].isdigit():
                return m
    if " [" in text:
        for i, m in enumerate(_BAR_NO_TOTAL_RE.finditer(text, pos)):
            if i >= _BAR_MAX_TRIES:
                break
            if m.start() == 0 or text[m.start() - 1] in _BAR_NO_TOTAL_AFTER:
                return m
    return None
_BAR_RATE_RE = re.compile(
    rf"\s{{0,8}}(?:(?P<v>{_NUM})|\?)\s?(?P<unit>[A-Za-z]{{1,12}})/(?P<den>[A-Za-z]{{1,12}})\s{{0,8}}",
    re.ASCII,
)
#: Units of a bar that counts training steps; anything else (B/s, MB/s, examples/s) is
#: a download, a dataset map or the like.
_BAR_STEP_UNITS = frozenset({"it", "its", "step", "steps", "batch", "batches", "iter", "iters"})
# Bars whose description says they are not training: validation, evaluation, tests,
# sanity checks, dataset maps and filters, downloads, loading, tokenising, generation.
_BAR_NOT_TRAIN_RE = re.compile(
    r"(?<![a-z])(?:val(?:id(?:ation|ating|ate)?)?|eval(?:uat(?:e|ing|ion))?"
    r"|predict(?:ing|ion)?|test(?:ing)?|sanity|map|filter|download(?:ing)?|load(?:ing)?"
    r"|tokeni[sz](?:e|ing|ation)|generat(?:e|ing|ion)|infer(?:ence|ring)?)(?![a-z])",
    re.IGNORECASE,
)
_BAR_GLYPHS = " |#:\u2588\u2589\u258a\u258b\u258c\u258d\u258e\u258f\u2590\t"
_BAR_PCT_RE = re.compile(r"\s{0,8}\d{1,3}%$")
_BAR_PCT_DIGITS_RE = re.compile(r"\s{0,8}\d{1,3}$")  # the match took the glyph-less bar's %
_BAR_KEY_RE = re.compile(r"[-+]?\d[\d.]{0,40}(?:[eE][-+]?\d{1,4})?")
# torchtune writes ``f"{epoch}|{global_step}|Loss: {loss}"`` as the bar description.
_TORCHTUNE_DESC_RE = re.compile(
    rf"(?<![\w|.])(?P<epoch>\d{{1,6}})\|(?P<step>\d{{1,15}})\|Loss:\s{{0,4}}(?P<loss>{_NUM}){_NUM_END}$",
    re.ASCII,
)
_BAR_LOSS_KEYS = ("loss", "reduced_train_loss", "train_loss")
#: A bar this fast with nothing in its postfix is a download or a dataset pass, not
#: training steps (10 ms a step is quicker than any real training step here), unless its
#: description names training (_BAR_TRAIN_DESC_RE): ``train_small: 32%|███▏ | 31745/100000
#: [01:51<00:19, 3538.83it/s]`` converts a dataset split.
_BAR_MAX_UNLABELLED_IT_PER_S = 100.0
_BAR_TRAIN_DESC_RE = re.compile(
    r"(?<![A-Za-z_])(?:epoch|train(?:ing)?|iteration|step|batch)(?![A-Za-z_])", re.IGNORECASE
)
#: Descriptions of an outer bar over epochs (no epoch number in them, unlike Lightning's).
_BAR_EPOCH_COUNTER_DESCS = frozenset({"Epoch", "Epochs", "epoch", "epochs", "EPOCH"})
_BAR_POSTFIX_KEYS = {
    "global_step": "step",
    "consumed_samples": "samples_total",
    "throughput": "throughput",
    "samples/sec": "throughput",
    "samples_per_second": "throughput",
    "train_step_timing in s": "dt",
    "global_batch_size": "global_batch",
}


def _bar_description(prefix: str, with_total: bool, glyphless: bool = False) -> str:
    """The bar's description from the text before its counter (for a bar drawn without
    glyphs, ``Epoch 0:  50% 1/2 [``, the text before its percentage's ``%``)."""
    desc = prefix
    if glyphless:
        desc = _BAR_PCT_DIGITS_RE.sub("", prefix)
    elif with_total:
        cut = prefix.rfind("%|")
        if cut >= 0:
            desc = _BAR_PCT_RE.sub("", prefix[: cut + 1])
    return desc.rstrip(_BAR_GLYPHS).strip().rstrip(":").strip()


def _bar_key(desc: str) -> str:
    return " ".join(_BAR_KEY_RE.sub(" ", desc).split()).strip(" :|,.-")


def _rule_bar(text: str) -> _Fields | None:
    """One tqdm position of a training bar: Lightning, NeMo / NxD Training, HF Trainer.

    ``Epoch 0: 3%|▎ | 3/91 [16:05<7:52:06, 321.89s/it, loss=6.7, ..., global_step=1.000,
    consumed_samples=2048.0]``. The bar's own counter (``3/91``) goes to ``bar_n`` /
    ``bar_total`` (it restarts every epoch); ``step`` is only taken from a printed
    ``global_step``. ``dt`` comes from ``train_step_timing in s`` when printed, else from
    the bar's rate (``s/it``, or the inverse of ``it/s``). Bars of other work (validation,
    a dataset map, a download: see ``_BAR_NOT_TRAIN_RE``, or a rate in bytes or
    examples per second) are not steps, nor is a position that has counted nothing yet
    (``0/2``, even with the last epoch's loss still in its postfix), nor a bar faster than
    ``_BAR_MAX_UNLABELLED_IT_PER_S`` with nothing in its postfix whose description does not
    name training (a dataset split's conversion, ``train_small: ...``). A position cut
    off before its ``]`` loses its last postfix item: the value may be cut too.
    """
    m = _search_bar(text)
    if m is None:
        return None
    with_total = m.re is not _BAR_NO_TOTAL_RE
    n = int(m.group("n"))
    inner = m.group("inner")
    desc = _bar_description(text[: m.start()], with_total, m.re is _BAR_GLYPHLESS_RE)
    if _BAR_NOT_TRAIN_RE.search(desc) is not None:
        return None
    items = inner.split(",", 64)[1:]  # the first item is the elapsed/remaining time
    if items and not m.group(0).endswith("]"):
        items = items[:-1]  # ``loss=0.`` at a cut: the number may have gone on
    fields: _Fields = {"bar_n": n, "bar_key": _bar_key(desc)}
    total = m.group("total") if with_total else None
    if total is not None and total != "?":
        fields["bar_total"] = int(total)
    if items and (rate := _BAR_RATE_RE.fullmatch(items[0])) is not None:
        items = items[1:]
        unit, den = rate.group("unit"), rate.group("den")
        if unit == "s" and den in _BAR_STEP_UNITS:
            fields["dt"] = rate.group("v")
        elif den == "s" and unit in _BAR_STEP_UNITS:
            fields["it_per_s"] = rate.group("v")
        else:
            return None  # B/s, MB/s, examples/s, ...: not a training bar
    loss_rank = len(_BAR_LOSS_KEYS)
    for item in items[:48]:
        key, sep, value = item.partition("=")
        if not sep:
            continue
        key = key.strip()
        if key in _BAR_POSTFIX_KEYS:
            name = _BAR_POSTFIX_KEYS[key]
            if name == "dt" and _to_float(value) is not None:
                fields.pop("it_per_s", None)
                fields["dt"] = value  # NeMo's measured step time beats the bar's smoothed rate
            else:
                fields.setdefault(name, value)
        elif (
            key in _BAR_LOSS_KEYS
            and _BAR_LOSS_KEYS.index(key) < loss_rank
            and _to_float(value) is not None  # ``loss=`` with nothing after is no value
        ):
            fields["loss"], loss_rank = value, _BAR_LOSS_KEYS.index(key)
    if (tt := _TORCHTUNE_DESC_RE.search(desc)) is not None:
        fields.setdefault("step", tt.group("step"))
        fields.setdefault("loss", tt.group("loss"))
        fields["bar_key"] = ""
    if n == 0 and "step" not in fields:
        return None  # the bar has just been drawn; no step has finished yet
    if desc in _BAR_EPOCH_COUNTER_DESCS and "loss" not in fields and "step" not in fields:
        # ``for epoch in trange(n, desc="Epoch")`` around an inner batch bar: its positions
        # count epochs, not steps (Lightning's bar says which epoch: ``Epoch 3``).
        return None
    if (
        "loss" not in fields
        and "step" not in fields
        and (rate := _to_float(fields.get("it_per_s"))) is not None  # type: ignore[arg-type]
        and rate >= _BAR_MAX_UNLABELLED_IT_PER_S
        and (not fields["bar_key"] or _BAR_TRAIN_DESC_RE.search(desc) is None)
    ):
        return None  # a download or a dataset pass, without a description or named so
    return fields
