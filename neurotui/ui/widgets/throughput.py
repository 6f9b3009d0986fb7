"""Throughput: samples/s now and steady, step time over the whole run, per-rank step times
with the straggler marked, and samples per dollar."""

from __future__ import annotations

import math

from textual.content import Content

from neurotui.ui import charts, fmt
from neurotui.ui.model import RankRow, ThroughputState
from neurotui.ui.widgets.panel import Line, Panel
from neurotui.ui.widgets.styles import ERROR, GOOD, LABEL, MUTED, VALUE, WARN


class ThroughputPanel(Panel):
    TITLE = "Throughput"

    def lines(self, s: ThroughputState, width: int, height: int) -> list[Line]:
        out: list[Line] = []
        steady = s.steady
        out.append((10, Content.assemble(
            ("now ", LABEL), (fmt.rate(s.now_sps, " samples/s"), VALUE), "  ",
            ("steady ", LABEL),
            (fmt.rate(steady.samples_per_s if steady else None, "/s"), VALUE)
            if steady else ("not yet", MUTED))))
        if steady is not None:
            out.append((9, Content.assemble(
                ("step ", LABEL), (fmt.seconds(steady.step_time_median), VALUE),
                (" median  ", LABEL), ("p90 ", LABEL), (fmt.seconds(steady.step_time_p90), ""),
                ("  loss ", LABEL), (_loss(s.last_loss), ""))))
        elif s.note:
            out.append((9, Content.styled(s.note, MUTED)))
        else:
            out.append((9, Content.assemble(("step time after warm-up", MUTED),
                                            ("  loss ", LABEL), (_loss(s.last_loss), ""))))
        out.extend(self._history(s, width, height))
        out.extend(self._ranks(s.ranks, width, height))
        out.append((6, self._dollars(s)))
        return out

    def _history(self, s: ThroughputState, width: int, height: int) -> list[Line]:
        h = s.history
        if h is None or not any(math.isfinite(x) for x in h.step_time):
            return [(7, Content.styled("step time history: no timed step yet", MUTED))]
        finite = [x for x in h.step_time if math.isfinite(x)]
        top = max(finite)
        label = "step time "
        scale = f" ≤{fmt.seconds(top)}" if not self.ascii_mode else f" <={fmt.seconds(top)}"
        room = max(4, width - len(label) - len(scale))
        spark = charts.sparkline(h.step_time, room, self.ascii_mode, top=top)
        lines: list[Line] = [(8, Content.assemble((label, LABEL), (spark, "$text-accent"),
                                                  (scale, MUTED)))]
        if height >= 10:
            per = fmt.short_duration(h.bucket_s * max(1, len(h.step_time) / room))
            lines.append((3, Content.styled(
                f"{' ' * len(label)}whole run, {fmt.duration(len(h.step_time) * h.bucket_s)}; "
                f"one cell = {per}", MUTED)))
            tops = [x for x in h.samples_per_s if math.isfinite(x)]
            if tops:
                label2 = "samples/s "
                spark2 = charts.sparkline(h.samples_per_s, room, self.ascii_mode)
                lines.append((4, Content.assemble((label2, LABEL), (spark2, "$text-success"),
                                                  (f" ≤{fmt.count(max(tops))}" if not
                                                   self.ascii_mode else
                                                   f" <={fmt.count(max(tops))}", MUTED))))
        return lines

    def _ranks(self, ranks: tuple[RankRow, ...], width: int, height: int) -> list[Line]:
        if not ranks:
            return []
        slow = [r for r in ranks if r.straggler]
        stalled = [r for r in ranks if r.silent_s is not None]
        medians = sorted(r.median_s for r in ranks)
        mid = medians[len(medians) // 2]
        room_for_rows = height - 6
        if len(ranks) > 1 and room_for_rows >= len(ranks):
            top = max(r.median_s for r in ranks)
            bar_w = max(4, min(24, width - 34))
            return [(5, self._rank_line(r, top, mid, bar_w)) for r in ranks]
        parts: list[str | tuple[str, str]] = [
            (f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''} ", LABEL),
            ("median ", LABEL), (fmt.seconds(mid), VALUE)]
        if slow:
            worst = max(slow, key=lambda r: r.median_s)
            parts += ["  ", (f"straggler r{worst.rank} {fmt.seconds(worst.median_s)} "
                             f"(+{(worst.median_s / mid - 1) * 100:.0f}%)", WARN)]
        elif len(ranks) > 1:
            parts += ["  ", ("no straggler", GOOD)]
        if stalled:
            parts += ["  ", (f"stalled: {', '.join(f'r{r.rank}' for r in stalled)}", ERROR)]
        return [(5, Content.assemble(*parts))]

    def _rank_line(self, r: RankRow, top: float, mid: float, bar_w: int) -> Content:
        bar = charts.bar(r.median_s / top if top > 0 else None, bar_w, self.ascii_mode)
        style = WARN if r.straggler else ("$text-accent" if not r.silent_s else ERROR)
        mark: tuple[str, str] = ("", "")
        if r.straggler:
            arrow = "<<" if self.ascii_mode else "◀"
            mark = (f" {arrow} straggler +{(r.median_s / mid - 1) * 100:.0f}%", WARN)
        elif r.silent_s is not None:
            mark = (f" no step for {fmt.short_duration(r.silent_s)}", ERROR)
        step = "" if r.last_step is None else f" step {r.last_step:,}"
        return Content.assemble((f"r{r.rank:<3}", LABEL), (bar, style),
                                (f" {fmt.seconds(r.median_s):>7}", VALUE), (step, MUTED), mark)

    def _dollars(self, s: ThroughputState) -> Content:
        if s.spd_note:
            return Content.assemble(("samples/$ ", LABEL), (f"n/a ({s.spd_note})", MUTED),
                                    ("  total ", LABEL), (fmt.count(s.total_samples), VALUE))
        return Content.assemble(
            ("samples/$ ", LABEL), (fmt.count(s.spd_now), VALUE), (" now ", LABEL),
            (fmt.count(s.spd_steady), VALUE), (" steady ", LABEL),
            (fmt.count(s.spd_all_in), VALUE), (" all-in", LABEL))


def _loss(value: float | None) -> str:
    return fmt.MISSING if value is None else f"{value:.4g}"
