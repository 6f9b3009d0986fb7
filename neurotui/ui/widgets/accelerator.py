"""Accelerator: per-NeuronCore (or per-GPU) utilisation and memory, or why there is none.

On Neuron, cores are counted as the SDK counts them (logical cores; LNC and the core version
in the title), each core's FLOPs utilisation against its peak beside its utilisation (the
physical cores behind a logical one where neuron-monitor splits them), then device memory by
kind, execution errors, latency and ECC, and which peak the FLOPs are measured against. A
figure neuron-monitor did not report is shown as missing, with the reason.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from textual.content import Content

from neurotui import charts, fmt
from neurotui.live.neuron import (
    MEMORY_KIND_NAMES,
    MISSING_MARK,
    errors_text,
    flops_percent,
)
from neurotui.ui.widgets.cells import heat_lines
from neurotui.ui.widgets.panel import (
    ERROR,
    LABEL,
    MUTED,
    VALUE,
    WARN,
    Line,
    Panel,
    usage_style,
)
from neurotui.ui.widgets.wrap import wrapped

if TYPE_CHECKING:
    from neurotui.live.model import AcceleratorState, CoreRow
    from neurotui.live.neuron import NeuronState


class AcceleratorPanel(Panel):
    TITLE = "Accelerator"

    def title(self, s: AcceleratorState) -> str:
        if s.kind is None or not s.cores:
            return self.TITLE
        n = s.neuron
        if n is not None:
            # The longest that fits the border (the size is known once laid out).
            room = self.size.width - 4 if self.size.width else 10**6
            texts = [f"{self.TITLE}: {neuron_cores_text(n, len(s.cores), short)}"
                     for short in (False, True)]
            return next((t for t in texts if len(t) <= room), texts[-1])
        unit = "NeuronCore" if s.kind == "neuron" else "GPU"
        return f"{self.TITLE}: {len(s.cores)} {unit}{'s' if len(s.cores) > 1 else ''}"

    def on_resize(self) -> None:
        self.retitle()  # the title's wording depends on the width

    def lines(self, s: AcceleratorState, width: int, height: int) -> list[Line]:
        if s.kind is None or not s.cores:
            return wrapped(s.note or "no accelerator telemetry", width, WARN, 9)
        utils = [c.util for c in s.cores]
        known = [u for u in utils if u is not None]
        mem = [c.mem_used for c in s.cores if c.mem_used is not None]
        out: list[Line] = []
        mean = sum(known) / len(known) if known else None
        out.append((10, Content.assemble(
            ("util ", LABEL), (fmt.percent(mean), VALUE), (" mean", LABEL), "  ",
            ("mem ", LABEL), (fmt.size(sum(mem)) if mem else fmt.MISSING, VALUE),
            (_mem_total(s.cores), LABEL), _age(s.age_s))))
        n = s.neuron
        if n is not None:
            out.extend(flops_lines(n, width))
        fixed = len(out) + (1 if s.util_history and height >= 5 else 0)
        if len(s.cores) <= height - fixed:
            out.extend((7, self._core_line(c, width, n is not None)) for c in s.cores)
        else:
            out.extend(heat_lines(utils, "per core ", width, self.ascii_mode))
        if s.util_history and height >= 5:
            label = "history  "
            room = max(4, width - len(label))
            spark = charts.sparkline(s.util_history, room, self.ascii_mode, top=100.0, gap="?")
            out.append((6, Content.assemble((label, LABEL), (spark, "$text-accent"))))
        if n is not None:
            out.extend(detail_lines(n, width))
        return out

    def _core_line(self, c: CoreRow, width: int, neuron: bool) -> Content:
        flops: list[tuple[str, str]] = []
        if neuron:  # a NeuronCore's FLOPs utilisation beside its utilisation
            flops = [(" FLOPs ", LABEL), (f"{flops_percent(c.flops_util):>5}",
                                          VALUE if c.flops_util is not None else MUTED)]
        frac = None if c.util is None else c.util / 100.0
        mem = fmt.size(c.mem_used)
        if c.mem_total:
            mem += f"/{fmt.size(c.mem_total)}"
        split = "".join(f" {name} {fmt.percent(util)}" for name, util in c.physical)
        rest: list[tuple[str, str]] = [
            (f" {fmt.percent(c.util):>4}", usage_style(c.util) or VALUE), *flops,
            (f" {mem}", ""), (f" {c.extra}" if c.extra else "", MUTED), (split, MUTED)]
        # The bar gives way to the figures (down to 4 cells): they say more than it.
        # The bar gives way to the figures (down to 4 cells, else none): they say more.
        bar_w = min(30, width - 6 - sum(len(t) for t, _ in rest))
        bar = charts.bar(frac, bar_w, self.ascii_mode) if bar_w >= 4 else ""
        return Content.assemble((f"{c.label:<6}", LABEL), (bar, "$text-accent"), *rest)


def neuron_cores_text(n: NeuronState, in_use: int, short: bool = False) -> str:
    """"2/64 logical NeuronCores, LNC 2, v3d": in use of the instance's, as the SDK counts
    ("2/64 NCs, LNC 2, v3d" when `short`)."""
    text = f"{in_use}/{n.logical_cores}" if n.logical_cores else f"{in_use}"
    many = (n.logical_cores or in_use) != 1
    # Logical where the SDK says how it counts (LNC, or neuron-ls's logical count).
    logical = "logical " if n.lnc is not None or n.cores_from == "neuron-ls" else ""
    if short:
        text += " NCs" if many else " NC"
    else:
        text += f" {logical}NeuronCore{'s' if many else ''}"
    if n.lnc is not None:
        text += f", LNC {n.lnc}"
    if n.core_version is not None:
        text += f", {n.core_version}"
    return text


def flops_lines(n: NeuronState, width: int) -> list[Line]:
    """The cores' mean FLOPs utilisation and the peak it is against, or '—' and why not."""
    if n.flops_util is None:
        return wrapped(f"FLOPs util {MISSING_MARK}: {n.flops_note or 'unknown'}", width,
                       MUTED, 9, indent="  ")
    rate = f", {n.flops_per_s / 1e12:.3g} TF/s" if n.flops_per_s is not None else ""
    value = (flops_percent(n.flops_util), VALUE)
    # The longest wording that fits: the peak it is measured against always named.
    for line in (
            Content.assemble(("FLOPs util ", LABEL), value, (" mean vs ", LABEL),
                             (n.peak.label, ""), (rate, LABEL)),
            Content.assemble(("FLOPs util ", LABEL), value, (" mean vs ", LABEL),
                             (n.peak.label, ""))):
        if line.cell_length <= width:
            return [(9, line)]
    return [(9, Content.assemble(("FLOPs ", LABEL), value, (" of ", LABEL),
                                 (n.peak.short_label, "")))]


def detail_lines(n: NeuronState, width: int) -> list[Line]:
    """Memory by kind, errors, latency, ECC and the peak's source: shown as the panel's
    height allows (errors and uncorrected ECC first), each missing one said missing."""
    out: list[Line] = []
    if n.mem_by_kind:
        # A kind never split over two lines: the line breaks between kinds.
        line = Content.styled("mem by kind", LABEL)
        for i, (kind, value) in enumerate(n.mem_by_kind):
            piece = Content.assemble((f" {MEMORY_KIND_NAMES.get(kind, kind)} ", LABEL),
                                     (fmt.size(value), ""))
            if line.cell_length + piece.cell_length > width and i:
                out.append((4 - bool(out), line))
                line = Content.styled("           ", LABEL)
            line += piece
        out.append((4 - bool(out), line))
    else:
        out.append((2, Content.styled("mem by kind: not reported", MUTED)))
    errors = n.errors
    if errors is None:
        out.append((3, Content.styled("exec errors: not reported", MUTED)))
    else:
        span = (f"last {fmt.short_duration(errors.seconds)}" if errors.seconds
                else "last sample")
        label = ("exec errors ", LABEL), (f"({span}) ", LABEL)
        if errors.total:
            types = errors_text(errors.by_type) or "of no type reported"
            line = Content.assemble(*label, (f"{errors.total:,}: ", ERROR), (types, ERROR))
            if line.cell_length > width:  # the types are what matters: the label gives way
                line = Content.assemble(("errors ", LABEL), (f"{span}: ", LABEL),
                                        (types, ERROR))
            out.append((9, line))
        else:
            out.append((5, Content.assemble(*label, ("none", VALUE))))
    lat = n.latency
    if lat is None:
        out.append((2, Content.styled("latency: not reported", MUTED)))
    else:
        out.append((4, Content.assemble(
            ("latency p50 ", LABEL), (fmt.seconds(lat.p50), VALUE), (" p99 ", LABEL),
            (fmt.seconds(lat.p99), VALUE), ("  device ", LABEL),
            (f"{fmt.seconds(lat.device_p50)}/{fmt.seconds(lat.device_p99)}", ""))))
    if n.ecc is None:
        out.append((2, Content.styled("ECC: not reported", MUTED)))
    else:
        ecc = dict(n.ecc)
        bad = any((ecc.get(k) or 0) > 0 for k in ("mem_uncorrected", "sram_uncorrected"))
        style = ERROR if bad else ""
        out.append((9 if bad else 3, Content.assemble(
            ("ECC corrected ", LABEL), ("mem ", LABEL), (_count(ecc["mem_corrected"]), ""),
            (" sram ", LABEL), (_count(ecc["sram_corrected"]), ""),
            ("  uncorrected ", LABEL), ("mem ", LABEL),
            (_count(ecc["mem_uncorrected"]), style), (" sram ", LABEL),
            (_count(ecc["sram_uncorrected"]), style))))
    source = f"peak: {n.peak.source}"
    if n.peak.flops is not None:
        source = f"peak: {n.peak.flops.arithmetic}; {n.peak.source}"
    out.extend(wrapped(source, width, MUTED, 1))
    return out


def _count(value: int | None) -> str:
    return fmt.MISSING if value is None else f"{value:,}"


def _mem_total(cores: tuple[CoreRow, ...]) -> str:
    totals = [c.mem_total for c in cores if c.mem_total]
    return f" of {fmt.size(sum(totals))}" if totals else " used"


def _age(age: float | None) -> tuple[str, str]:
    if age is None or not math.isfinite(age) or age < 10:
        return ("", "")
    return (f"  last sample {fmt.short_duration(age)} ago", WARN)
