"""Throughput: samples/s now and steady, step time over the whole run, per-rank step times
with the straggler marked, and samples per dollar."""

from __future__ import annotations

import math
from collections.abc import Callable

from textual.content import Content

from neurotui import charts, fmt
from neurotui.live.model import RankRow, ThroughputState
from neurotui.ui.widgets.panel import ACCENT, ERROR, GOOD, LABEL, MUTED, VALUE, WARN, Line, Panel


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
        dollars: Line = (6, self._dollars(s, width))
        epoch: list[Line] = [(5, self._epoch(s))] if s.dataset_size is not None else []
        # Rows left for the whole-run history and the per-rank lines.
        spare = height - len(head) - 1 - len(epoch)
        per_rank_rows = len(s.ranks) > 1 and spare - 1 >= len(s.ranks)
        ranks = self._ranks(s.ranks, width, spare - 1 if per_rank_rows else 0)
        history = self._history(s, width, max(1, spare - len(ranks)))
        return [*head, *history, *ranks, dollars, *epoch]

    def _history(self, s: ThroughputState, width: int, rows: int) -> list[Line]:
        h = s.history
        if h is None or not any(math.isfinite(x) for x in h.step_time):
            return [(7, Content.styled("step time history: no timed step yet", MUTED))]
        top = max(x for x in h.step_time if math.isfinite(x))
        sps = [x for x in h.samples_per_s if math.isfinite(x)]
        le = "<=" if self.ascii_mode else "≤"
        if rows < 4:
            # One line: the axis spans the data (labelled), so swings stay visible.
            low = min(x for x in h.step_time if math.isfinite(x))
            label = "step time "
            scale = (f" {fmt.seconds(low)}-{fmt.seconds(top)}" if top > low
                     else f" {le}{fmt.seconds(top)}")
            room = max(4, width - len(label) - len(scale))
            base = max(0.0, low - (top - low) / 8) if top > low else 0.0
            shifted = [x - base for x in h.step_time]
            spark = charts.sparkline(shifted, room, self.ascii_mode, top=top - base)
            return [(8, Content.assemble((label, LABEL), (spark, ACCENT), (scale, MUTED)))]
        # Room for charts: step time over the whole run, then samples/s if rows remain.
        axis = 7
        room = max(4, width - axis)
        step_rows = rows - 1 if rows < 8 or not sps else (rows - 2) * 3 // 5
        cells = max(1, len(h.step_time) / room)
        caption = (f"step time, whole run {fmt.duration(len(h.step_time) * h.bucket_s)}, "
                   f"{fmt.short_duration(h.bucket_s * cells)}/cell")
        out: list[Line] = [(7, Content.styled(caption, LABEL))]
        out.extend(self._chart(h.step_time, room, step_rows, top, fmt.seconds(top), ACCENT))
        left = rows - 1 - step_rows
        if sps and left >= 3:
            out.append((3, Content.styled("samples/s, whole job", LABEL)))
            out.extend(self._chart(h.samples_per_s, room, left - 1, max(sps),
                                   fmt.count(max(sps)), GOOD, priority=2, unit=fmt.count))
        return out

    def _chart(self, values: tuple[float, ...], width: int, rows: int, top: float,
               top_label: str, style: str, priority: int = 5,
               unit: Callable[[float | None], str] = fmt.seconds) -> list[Line]:
        """A column chart whose axis spans the data (labelled), so swings stay visible."""
        finite = [v for v in values if math.isfinite(v)]
        low = min(finite) if finite else 0.0
        bottom = max(0.0, low - (top - low) / max(1, rows * 2)) if top > low else 0.0
        chart = charts.columns(values, width, rows, self.ascii_mode, top=top, bottom=bottom)
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

    def _dollars(self, s: ThroughputState, width: int) -> Content:
        if s.spd_note:
            return Content.assemble(("samples/$ ", LABEL), (f"n/a ({s.spd_note})", MUTED),
                                    ("  samples ", LABEL), (fmt.count(s.total_samples), VALUE))
        now: list[str | tuple[str, str]] = [(fmt.count(s.spd_now), VALUE), (" now, ", LABEL)]
        return Content.assemble(
            ("samples/$ ", LABEL), *(now if width >= 48 else []),
            (fmt.count(s.spd_steady), VALUE), (" steady, ", LABEL),
            (fmt.count(s.spd_all_in), VALUE), (" all-in", LABEL))


    def _epoch(self, s: ThroughputState) -> Content:
        """An epoch (the run's --dataset-size) at the steady rate: its time and cost."""
        done = [("  done ", LABEL), (f"{s.epochs_done:,.2f}", VALUE)] \
            if s.epochs_done is not None else []
        if s.epoch is None:
            return Content.assemble(("epoch ", LABEL), ("once steady", MUTED), *done)
        cost: tuple[str, str] = (fmt.usd(s.epoch.remaining_usd), VALUE) \
            if s.epoch.remaining_usd is not None else ("no price", MUTED)
        return Content.assemble(("epoch ", LABEL),
                                (fmt.short_duration(s.epoch.remaining_s), VALUE),
                                ", ", cost, *done)


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
