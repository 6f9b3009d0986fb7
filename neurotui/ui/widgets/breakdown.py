"""Step breakdown: where a step's time goes (data loading, forward, backward, ...), as a stacked
bar for the job and per rank, and each phase's share over time, the phase that grew marked.

The figures come whole from the live model's BreakdownState (metrics/breakdown.py defines
them); this only lays them out. Each phase keeps one colour and one glyph everywhere (block
shades, or letters in ASCII mode), so the bars read without colour too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.content import Content

from neurotui import charts, fmt
from neurotui.metrics.breakdown import OTHER
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE, WARN, Line, Panel

if TYPE_CHECKING:
    from neurotui.live.model import BreakdownState
    from neurotui.metrics.breakdown import Growth, PhaseSplit

_STYLES = {"data": "$text-warning", "forward": "$text-primary", "backward": "$text-accent",
           "optimizer": "$text-success", "step": "$text-primary", OTHER: MUTED}
_MORE_STYLES = ("$text-secondary", "$text-error", "$text-success", "$text-accent")
_BLOCKS = {"data": "█", "forward": "▓", "backward": "▒", "optimizer": "░", "step": "▓",
           OTHER: "·"}
_MORE_BLOCKS = ("▚", "▞", "▙", "▟")
_LETTERS = {"data": "D", "forward": "F", "backward": "B", "optimizer": "O", "step": "S",
            OTHER: "."}
_SHORT = {"data": "data", "forward": "fwd", "backward": "bwd", "optimizer": "opt",
          "step": "step", OTHER: "other"}


def phase_style(name: str) -> str:
    """One colour per phase name: the known ones fixed, the others by a stable hash."""
    if name in _STYLES:
        return _STYLES[name]
    return _MORE_STYLES[sum(map(ord, name)) % len(_MORE_STYLES)]


def phase_glyph(name: str, ascii_mode: bool) -> str:
    """The character a phase's cells are drawn with: a block shade, or its letter."""
    if ascii_mode:
        if name in _LETTERS:
            return _LETTERS[name]
        letter = next((c.upper() for c in name if c.isalpha()), "#")
        # A letter a known phase has would read as that phase: lower case marks it apart.
        return letter.lower() if letter in _LETTERS.values() else letter
    if name in _BLOCKS:
        return _BLOCKS[name]
    return _MORE_BLOCKS[sum(map(ord, name)) % len(_MORE_BLOCKS)]


def cells(shares: Sequence[float], width: int) -> list[int]:
    """Cells per segment of a `width`-cell bar (largest remainders, so they fill it exactly);
    a segment of 1% or more gets at least one cell when there is room."""
    if width <= 0 or not shares:
        return [0] * len(shares)
    exact = [max(0.0, s) * width for s in shares]
    out = [math.floor(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - out[i],
                    reverse=True)[:width - sum(out)]:
        out[i] += 1
    for i, share in enumerate(shares):  # a visible phase must not vanish at a narrow width
        if out[i] == 0 and share >= 0.01 and max(out) > 1:
            out[out.index(max(out))] -= 1
            out[i] = 1
    return out


def stacked_bar(split: PhaseSplit, width: int, ascii_mode: bool) -> Content:
    """The split as one bar of `width` cells, each phase in its glyph and colour."""
    parts: list[tuple[str, str]] = []
    for name, n in zip(split.names, cells(split.shares, width), strict=True):
        if n:
            parts.append((phase_glyph(name, ascii_mode) * n, phase_style(name)))
    return Content.assemble(*parts)


def legend_items(split: PhaseSplit, ascii_mode: bool, short: bool = False,
                 with_ms: bool = True) -> list[Content]:
    out = []
    for name, median, share in zip(split.names, split.median_s, split.shares, strict=True):
        label = _SHORT.get(name, name) if short else name
        ms = f" {fmt.seconds(median)}" if with_ms else ""
        out.append(Content.assemble((phase_glyph(name, ascii_mode), phase_style(name)),
                                    (f" {label}", LABEL), (ms, ""),
                                    (f" {share * 100:.0f}%", VALUE)))
    return out


def grew_text(grew: Growth, ascii_mode: bool) -> str:
    arrow = "^" if ascii_mode else "▲"
    ratio = "new" if math.isinf(grew.ratio) else f"+{grew.ratio * 100:.0f}%"
    return f"{arrow} {grew.phase} {ratio}"


def _flow(items: list[Content], width: int, gap: str = "  ") -> list[Content]:
    """Items on as few lines of `width` as they fit on, in order."""
    lines: list[Content] = []
    current: Content | None = None
    for item in items:
        if current is not None and current.cell_length + len(gap) + item.cell_length <= width:
            current = Content.assemble(current, gap, item)
        else:
            if current is not None:
                lines.append(current)
            current = item
    if current is not None:
        lines.append(current)
    return lines


def breakdown_line(state: BreakdownState | None, width: int, ascii_mode: bool) -> Content:
    """One line for another panel: the job's stacked bar, then each phase's share (and the
    phase that grew), as much of it as `width` holds; or why there is none."""
    if state is None:
        return Content.styled("step breakdown: reading the session...", MUTED)
    job = state.job
    if job is None:
        if state.note and state.note.startswith("no step phases"):
            return Content.assemble(("step ", LABEL), (
                "no phases recorded: probe.step(..., phases={...}) adds them", MUTED))
        return Content.assemble(("step ", LABEL), (state.note or "no breakdown yet", MUTED))
    head = Content.styled("step ", LABEL)
    bar_w = max(6, min(24, width // 4))
    grew = Content.styled(f" {grew_text(state.grew, ascii_mode)}", WARN) \
        if state.grew is not None else Content("")
    room = width - head.cell_length - bar_w - 1 - grew.cell_length
    items = legend_items(job, ascii_mode, short=True, with_ms=False)
    shown: list[Content] = []
    for item in items:
        used = sum(i.cell_length + 1 for i in shown)
        if used + 1 + item.cell_length > room:
            break
        shown.append(item)
    return Content.assemble(head, stacked_bar(job, bar_w, ascii_mode), " ",
                            Content(" ").join(shown), grew)


class BreakdownPanel(Panel):
    TITLE = "Step breakdown"

    def title(self, state: BreakdownState) -> str:
        job = state.job
        if job is None:
            return self.TITLE
        separator = " - " if self.ascii_mode else " · "
        return (f"{self.TITLE}{separator}median of the last {job.steps:,} steady steps "
                "(all ranks)")

    def lines(self, s: BreakdownState, width: int, height: int) -> list[Line]:
        ascii_mode = self.ascii_mode
        job = s.job
        if job is None:
            return self._empty(s, width)
        label_w = 6
        step = f" {fmt.seconds(job.step_s)}/step"
        bar_w = max(8, width - label_w - len(step))
        head: list[Line] = [(10, Content.assemble(("job".ljust(label_w), VALUE),
                                                  stacked_bar(job, bar_w, ascii_mode),
                                                  (step, MUTED)))]
        head.extend((9, line) for line in _flow(legend_items(job, ascii_mode), width))
        head.append((8, self._grew(s, ascii_mode)))
        source: list[Line] = [(2, Content.styled(f"phases: {s.source}", MUTED))] \
            if s.source else []
        # Rows shared out: a bar per rank when they all fit beside the smallest picture over
        # time (a sparkline per phase), else one line on the ranks; the rest over time.
        room = height - len(head) - len(source)
        names = s.history.names if s.history is not None else ()
        least = 1 + len(names) if names else 0
        full = len(s.ranks) + 1 if len(s.ranks) > 1 else 0
        ranks = self._ranks(s, width, ascii_mode, full if room >= full + least else 1)
        history = self._history(s, width, ascii_mode, room - len(ranks))
        return [*head, *ranks, *history, *source]

    def _empty(self, s: BreakdownState, width: int) -> list[Line]:
        out: list[Line] = []
        for text in (s.note or "no step breakdown yet").split("\n"):
            indent = text[:len(text) - len(text.lstrip(" "))]
            current = ""
            for word in text.split():  # wrapped: the how-to must be readable whole
                if current and len(current) + 1 + len(word) > width:
                    out.append((10 - min(len(out), 5), Content.styled(current, MUTED)))
                    current = indent + word
                else:
                    current = f"{current} {word}" if current else indent + word
            style = VALUE if indent else MUTED  # the code to paste stands out
            out.append((10 - min(len(out), 5), Content.styled(current, style)))
        return out

    def _grew(self, s: BreakdownState, ascii_mode: bool) -> Content:
        grew = s.grew
        if grew is None:
            return Content.styled("no phase grew against the steady baseline (the first "
                                  "steady steps)", MUTED)
        return Content.assemble(
            (grew_text(grew, ascii_mode), f"bold {WARN}"),
            (f"  {fmt.seconds(grew.before_s)} -> {fmt.seconds(grew.now_s)} median"
             if ascii_mode else
             f"  {fmt.seconds(grew.before_s)} → {fmt.seconds(grew.now_s)} median", ""),
            (", the first steady steps against the last", MUTED))

    def _ranks(self, s: BreakdownState, width: int, ascii_mode: bool, room: int
               ) -> list[Line]:
        ranks = s.ranks
        if len(ranks) < 2 or room < 1:
            return []
        if room - 1 >= len(ranks):
            label_w = max(4, len(f"r{ranks[-1].rank}") + 1)
            out: list[Line] = [(6, Content.styled("per rank", LABEL))]
            for r in ranks:
                tail = f" {fmt.seconds(r.step_s):>7} {_SHORT.get(r.largest(), r.largest()[:5]):<5}"
                mark = f" {grew_text(r.grew, ascii_mode)}" if r.grew is not None else ""
                bar_w = max(6, width - label_w - len(tail) - len(mark))
                out.append((5, Content.assemble((f"r{r.rank}".ljust(label_w), LABEL),
                                                stacked_bar(r, bar_w, ascii_mode),
                                                (tail, MUTED), (mark, WARN))))
            return out
        # Too many ranks for a bar each: the spread of the largest phase's share.
        name = s.job.largest() if s.job is not None else ranks[0].largest()
        shares = [(r.share(name) or 0.0, r.rank) for r in ranks]
        low, high = min(shares), max(shares)
        same = sum(1 for r in ranks if r.largest() == name)
        grown = [r for r in ranks if r.grew is not None]
        text = (f"{len(ranks)} ranks: {name} largest on {same}; {name} share from "
                f"{low[0] * 100:.0f}% (r{low[1]}) to {high[0] * 100:.0f}% (r{high[1]})")
        if grown:
            text += f"; grew on {len(grown)}"
        return [(6, Content.styled(text, LABEL))]

    def _history(self, s: BreakdownState, width: int, ascii_mode: bool, rows: int
                 ) -> list[Line]:
        """Each phase's share over time: stacked columns (a column per time slot, shares
        from the bottom, data first) when the rows allow, else a sparkline per phase."""
        h = s.history
        if h is None or not any(math.isfinite(x) for x in h.step_s) or rows < 2:
            return []
        stacked = rows >= len(h.names) + 4 and rows >= 6
        label_w = 5 if stacked else max(len(n) for n in h.names) + 2
        room = max(4, width - label_w - (0 if stacked else 5))
        # A short run is drawn wide: each time slot over `repeat` columns.
        repeat = max(1, room // max(1, len(h.step_s)))
        slots = max(1.0, len(h.step_s) / room)
        per = (f"{fmt.short_duration(h.bucket_s)} per {repeat} columns" if repeat > 1 else
               f"{fmt.short_duration(h.bucket_s * slots)} a column")
        out: list[Line] = [(3, Content.styled(
            f"share of the step over time (whole run {fmt.duration(len(h.step_s) * h.bucket_s)},"
            f" {per})", LABEL))]
        series = [tuple(x for x in shares for _ in range(repeat)) for shares in h.shares]
        if stacked:  # (taller than 16 rows draws no finer than a share reads)
            return out + self._columns(h.names, series, room, min(16, rows - 1), ascii_mode)
        for name, shares in zip(h.names, series, strict=True):
            last = next((x for x in reversed(shares) if math.isfinite(x)), math.nan)
            spark = charts.sparkline(shares, room, ascii_mode, top=1.0)
            out.append((3, Content.assemble(
                (phase_glyph(name, ascii_mode), phase_style(name)),
                (f" {name}".ljust(label_w - 1), LABEL), (spark, phase_style(name)),
                (f" {fmt.percent(last * 100 if math.isfinite(last) else None):>4}", MUTED))))
        return out

    def _columns(self, names: Sequence[str], series: Sequence[Sequence[float]], width: int,
                 height: int, ascii_mode: bool) -> list[Line]:
        slots = [charts.resample(shares, width) for shares in series]
        n = len(slots[0]) if slots else 0
        grid = [[" "] * n for _ in range(height)]
        styles = [[""] * n for _ in range(height)]
        for col in range(n):
            shares = [slot[col] for slot in slots]
            if not all(math.isfinite(x) for x in shares):
                continue  # no counted step in this slot: left blank
            row = height - 1
            for name, count in zip(names, cells(shares, height), strict=True):
                for _ in range(count):
                    grid[row][col] = phase_glyph(name, ascii_mode)
                    styles[row][col] = phase_style(name)
                    row -= 1
        out: list[Line] = []
        for i, (chars, looks) in enumerate(zip(grid, styles, strict=True)):
            axis = "100%" if i == 0 else ("0%" if i == height - 1 else "")
            parts: list[tuple[str, str]] = [(f"{axis:>4} ", MUTED)]
            for ch, look in zip(chars, looks, strict=True):
                if parts and parts[-1][1] == look and len(parts) > 1:
                    parts[-1] = (parts[-1][0] + ch, look)
                else:
                    parts.append((ch, look))
            out.append((3, Content.assemble(*parts)))
        return out
