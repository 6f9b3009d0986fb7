"""Throughput: samples/s now and steady, step time over the whole run, per-rank step times
with the straggler marked, and samples per dollar."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from textual.content import Content

from neurotui import charts, fmt
from neurotui.ui.widgets.panel import ACCENT, ERROR, GOOD, LABEL, MUTED, VALUE, WARN, Line, Panel

if TYPE_CHECKING:
    from neurotui.live.history import StepScale
    from neurotui.live.model import RankRow, ThroughputState

HISTORY_ROOM = 5
"""Rows kept for the step-time history (a caption, four chart rows) before the reason beside
samples/$ may take more than its one line."""


class ThroughputPanel(Panel):
    TITLE = "Throughput"

    def title(self, state: ThroughputState) -> str:
        # Every figure says its source: the steps' origin in the panel's title.
        separator = " - " if self.ascii_mode else " · "
        return f"{self.TITLE}{separator}steps from {state.source}" if state.source else \
            self.TITLE

    def lines(self, s: ThroughputState, width: int, height: int) -> list[Line]:
        steady = s.steady
        head: list[Line] = [(10, Content.assemble(
            ("now ", LABEL), (fmt.rate(s.now_sps, " samples/s"), VALUE), "  ",
            ("steady ", LABEL),
            (fmt.rate(steady.samples_per_s if steady else None, "/s"), VALUE)
            if steady else ("not yet", MUTED)))]
        if steady is not None:
            head.append((9, Content.assemble(
                ("step ", LABEL), (fmt.seconds(steady.step_time_median), VALUE),
                (" median  ", LABEL), ("p90 ", LABEL), (fmt.seconds(steady.step_time_p90), ""),
                ("  loss ", LABEL), (_loss(s.last_loss), ""))))
        elif s.note:
            head.append((9, Content.styled(s.note, MUTED)))
        else:
            head.append((9, Content.assemble(("step time after warm-up", MUTED),
                                              ("  loss ", LABEL), (_loss(s.last_loss), ""))))
        if s.breakdown is not None and s.breakdown.job is not None:
            # (Imported here: the step breakdown's module loads numpy, which the dashboard's
            # first frame does without.)
            from neurotui.ui.widgets.breakdown import breakdown_line

            # Where the step's time goes, in one line (the whole picture on `b`).
            head.append((8, breakdown_line(s.breakdown, width, self.ascii_mode)))
        epoch: list[Line] = [(5, self._epoch(s))] if s.dataset_size is not None else []
        # Why samples/$ is n/a may take a few lines: those the history chart can spare, or
        # all but its one line when it has too few for a chart anyway.
        rank_rows = len(s.ranks) if len(s.ranks) > 1 else 1
        avail = height - len(head) - len(epoch) - rank_rows
        dollars = self._dollars(s, width, 1 + max(0, avail - 1 - HISTORY_ROOM) if avail > 4
                                else avail - 1)
        # Rows left for the whole-run history and the per-rank lines.
        spare = height - len(head) - len(dollars) - len(epoch)
        per_rank_rows = len(s.ranks) > 1 and spare - 1 >= len(s.ranks)
        ranks = self._ranks(s.ranks, width, spare - 1 if per_rank_rows else 0)
        history = self._history(s, width, max(1, spare - len(ranks)))
        return [*head, *history, *ranks, *dollars, *epoch]

    def _history(self, s: ThroughputState, width: int, rows: int) -> list[Line]:
        h = s.history
        scale = h.scale if h is not None else None
        if h is None or scale is None:
            return [(7, Content.styled("step time history: no timed step yet", MUTED))]
        # The scale is the steady steps' (the live model's StepScale): compile and warm-up
        # steps above it are drawn apart, so they cannot flatten the steady band.
        shown = [x for x in scale.shown if math.isfinite(x)]
        top = max(shown) if shown else scale.threshold
        low = min(shown) if shown else 0.0
        sps = [x for x in h.samples_per_s if math.isfinite(x)]
        le = "<=" if self.ascii_mode else "≤"
        mark = charts.ABOVE[self.ascii_mode]
        if rows < 4:
            # One line: the axis spans the data (labelled), so swings stay visible.
            label = "step time "
            scale_text = f" {_range(low, top)}" if top > low else f" {le}{fmt.seconds(top)}"
            apart = f" {mark}{fmt.seconds(scale.highest)}" if scale.apart else ""
            room = max(4, width - len(label) - len(scale_text) - len(apart))
            base = max(0.0, low - (top - low) / 8) if top > low else 0.0
            shifted = [x - base for x in scale.shown]
            spark = charts.sparkline(shifted, room, self.ascii_mode, top=top - base,
                                     above=scale.above if scale.apart else None)
            return [(8, Content.assemble((label, LABEL), (spark, ACCENT), (scale_text, MUTED),
                                         (apart, WARN)))]
        # Room for charts: step time over the whole run, then samples/s if rows remain.
        axis = 7
        room = max(4, width - axis)
        cells = max(1, len(h.step_time) / room)
        caption = (f"step time, whole run {fmt.duration(len(h.step_time) * h.bucket_s)}, "
                   f"{fmt.short_duration(h.bucket_s * cells)}/cell")
        out: list[Line] = [(7, Content.styled(caption, LABEL))]
        if scale.apart:
            # The marks are explained on the caption's line, shortened to fit, else below it.
            short = f"step time, {fmt.short_duration(h.bucket_s * cells)}/cell"
            said = [(c, a) for c in (caption, short)
                    for a in (_apart(scale, mark), _apart(scale, mark, brief=True))
                    if len(c) + 2 + len(a) <= width]
            if said:
                out = [(7, Content.assemble((said[0][0], LABEL), "  ", (said[0][1], WARN)))]
            else:
                out.append((7, Content.styled(_apart(scale, mark), WARN)))
        chart_rows = rows - len(out)
        step_rows = chart_rows if chart_rows < 7 or not sps else (chart_rows - 1) * 3 // 5
        out.extend(self._chart(scale.shown, room, step_rows, top, fmt.seconds(top), ACCENT,
                               above=scale.above if scale.apart else None))
        left = chart_rows - step_rows
        if sps and left >= 3:
            out.append((3, Content.styled("samples/s, whole job", LABEL)))
            out.extend(self._chart(h.samples_per_s, room, left - 1, max(sps),
                                   fmt.count(max(sps)), GOOD, priority=2, unit=fmt.count))
        return out

    def _chart(self, values: Sequence[float], width: int, rows: int, top: float,
               top_label: str, style: str, priority: int = 5,
               unit: Callable[[float | None], str] = fmt.seconds,
               above: Sequence[bool] | None = None) -> list[Line]:
        """A column chart whose axis spans the data (labelled), so swings stay visible;
        `above`: the slots drawn apart, marked in its top row."""
        finite = [v for v in values if math.isfinite(v)]
        low = min(finite) if finite else 0.0
        bottom = max(0.0, low - (top - low) / max(1, rows * 2)) if top > low else 0.0
        chart = charts.columns(values, width, rows, self.ascii_mode, top=top, bottom=bottom,
                               above=above)
        out: list[Line] = []
        for i, row in enumerate(chart):
            label = top_label if i == 0 else (unit(bottom) if i == rows - 1 else "")
            out.append((priority, Content.assemble((f"{label:>6} ", MUTED), (row, style))))
        return out

    def _ranks(self, ranks: tuple[RankRow, ...], width: int, room: int) -> list[Line]:
        if not ranks:
            return []
        slow = [r for r in ranks if r.straggler]
        stalled = [r for r in ranks if r.silent_s is not None]
        mid = _median([r.median_s for r in ranks])
        if len(ranks) > 1 and room >= len(ranks):
            top = max(r.median_s for r in ranks)
            bar_w = max(4, min(24, width - 34))
            return [(5, self._rank_line(r, top, _others(ranks, r), bar_w)) for r in ranks]
        parts: list[str | tuple[str, str]] = [
            (f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''} ", LABEL),
            ("med ", LABEL), (fmt.seconds(mid), VALUE)]
        if slow:
            worst = max(slow, key=lambda r: r.median_s)
            slower = worst.median_s / _others(ranks, worst) - 1
            parts += ["  ", (f"straggler r{worst.rank} +{slower * 100:.0f}%"
                             f" {fmt.seconds(worst.median_s)}", WARN)]
        elif len(ranks) > 1:
            parts += ["  ", ("no straggler", GOOD)]
        if stalled:
            parts += ["  ", (f"stalled: {', '.join(f'r{r.rank}' for r in stalled)}", ERROR)]
        return [(5, Content.assemble(*parts))]

    def _rank_line(self, r: RankRow, top: float, others: float, bar_w: int) -> Content:
        bar = charts.bar(r.median_s / top if top > 0 else None, bar_w, self.ascii_mode)
        style = WARN if r.straggler else ("$text-accent" if not r.silent_s else ERROR)
        mark: tuple[str, str] = ("", "")
        if r.straggler:
            arrow = "<<" if self.ascii_mode else "◀"
            mark = (f" {arrow} straggler +{(r.median_s / others - 1) * 100:.0f}%", WARN)
        elif r.silent_s is not None:
            mark = (f" no step for {fmt.short_duration(r.silent_s)}", ERROR)
        step = "" if r.last_step is None else f" step {r.last_step:,}"
        return Content.assemble((f"r{r.rank:<3}", LABEL), (bar, style),
                                (f" {fmt.seconds(r.median_s):>7}", VALUE), (step, MUTED), mark)

    def _dollars(self, s: ThroughputState, width: int, max_rows: int) -> list[Line]:
        if s.spd_note:
            return self._no_price(s, width, max_rows)
        now: list[str | tuple[str, str]] = [(fmt.count(s.spd_now), VALUE), (" now, ", LABEL)]
        return [(6, Content.assemble(
            ("samples/$ ", LABEL), *(now if width >= 48 else []),
            (fmt.count(s.spd_steady), VALUE), (" steady, ", LABEL),
            (fmt.count(s.spd_all_in), VALUE), (" all-in", LABEL)))]

    def _no_price(self, s: ThroughputState, width: int, max_rows: int) -> list[Line]:
        """samples/$ n/a and why, in at most `max_rows` rows: the reason is said here, by the
        figure it leaves n/a (the header only marks it: "price ?"). The samples counted so
        far come along when the reason takes no more rows with them."""
        reason = f"no price: {s.spd_note}"
        count: list[str | tuple[str, str]] = [("samples ", LABEL),
                                              (fmt.count(s.total_samples), VALUE), "  "]
        ways: list[tuple[Content, list[str]]] = []
        for extra in (count, []):
            head = Content.assemble(("samples/$ ", LABEL), ("n/a", MUTED), "  ", *extra)
            rows = textwrap.wrap(reason, max(10, width), initial_indent="\0" * head.cell_length,
                                 subsequent_indent="  ", break_on_hyphens=False)
            # (With the count, only when its first row still begins the reason readably.)
            if not extra or len(rows[0].lstrip("\0")) >= min(16, len(reason)):
                ways.append((head, rows))
        fitting = [way for way in ways if len(way[1]) <= max_rows]
        # The fewest rows (a tie: with the count); cut short, without: more of the reason.
        head, rows = min(fitting, key=lambda way: len(way[1])) if fitting else ways[-1]
        if len(rows) > max_rows:  # cut at the end, marked
            rows = rows[:max(1, max_rows)]
            rows[-1] = rows[-1][:max(0, width - 1)] + "…"
        first = rows[0].lstrip("\0")
        # Its later lines go first when space is short: the reason keeps its beginning.
        return [(6, head + Content.styled(first, MUTED)),
                *((4, Content.styled(row, MUTED)) for row in rows[1:])]

    def _epoch(self, s: ThroughputState) -> Content:
        """An epoch (the run's --dataset-size) at the steady rate: its time and cost."""
        done = [("  done ", LABEL), (f"{s.epochs_done:,.2f}", VALUE)] \
            if s.epochs_done is not None else []
        if s.epoch is None:
            return Content.assemble(("epoch ", LABEL), ("once steady", MUTED), *done)
        cost: tuple[str, str] = (fmt.usd(s.epoch.remaining_usd), VALUE) \
            if s.epoch.remaining_usd is not None else ("cost ?", MUTED)  # why: samples/$ line
        return Content.assemble(("epoch ", LABEL),
                                (fmt.short_duration(s.epoch.remaining_s), VALUE),
                                ", ", cost, *done)


def _apart(scale: StepScale, mark: str, brief: bool = False) -> str:
    """What the chart draws apart, above its scale."""
    counts = [(scale.warmup_above, "warm-up step"), (scale.compile_spans, "compile span"),
              (scale.slow_spans, "slow span")]
    said = ", ".join(f"{n} {what}{'s' if n != 1 else ''}" for n, what in counts if n)
    return f"{mark} {said}{'' if brief else ' above,'} up to {fmt.seconds(scale.highest)}"


def _range(low: float, top: float) -> str:
    """low-top in step-time units, the unit said once when both share it: 29.8-31.0ms."""
    a, b = fmt.seconds(low), fmt.seconds(top)
    unit = b.lstrip("0123456789.")
    same = unit and a.lstrip("0123456789.") == unit
    return f"{a.removesuffix(unit) if same else a}-{b}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _others(ranks: tuple[RankRow, ...], rank: RankRow) -> float:
    """The median of the other ranks' medians: what a straggler is slower than."""
    rest = [r.median_s for r in ranks if r.rank != rank.rank]
    return _median(rest) if rest else rank.median_s


def _loss(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.4g}"
