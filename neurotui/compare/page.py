"""A comparison to share: one self-contained HTML page, or its charts alone as SVG.

`neurotui compare ... --format html --out FILE` writes a page that opens offline and as a mail
attachment: no script, font, style sheet or image is fetched (the style is inline, the charts
are inline SVG). It holds the table (every column, each cell with its raw figure in
`data-value`, so that what the page says can be checked against the JSON), the decision line,
a bar chart of samples per dollar and of samples/s per run, each run's throughput over time
overlaid, and per run its instance, its price with source and date, and how its steps were
timed. `--format svg` writes the charts alone, as one SVG document.

Everything from a session (names, notes) is text: escaped, never markup.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from neurotui import __version__, fmt
from neurotui.compare.layout import cell, decision_line, ordered_columns
from neurotui.compare.overlay import overlay_bucket_s

if TYPE_CHECKING:
    import pandas as pd

    from neurotui.compare.load import LoadedSession

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
"""One colour per run, the same in every chart (Matplotlib's tab10)."""
CHART_WIDTH = 720
BAR_HEIGHT = 22
_LABEL_WIDTH = 200
CURVE_POINTS = 120
"""About this many points on the longest run's curve."""
_SMALL_BUCKETS_S = (0.5, 1.0, 2.0, 5.0)
"""Buckets under compare's 10 s minimum, so that a run of a minute still draws a curve."""
_VALUE_WIDTH = 110

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; white-space: nowrap; }
th { text-align: left; background: #f4f4f4; } td.n { text-align: right; }
.table-wrap { overflow-x: auto; }
.decision { font-size: 16px; font-weight: 600; padding: 10px 12px; background: #eef6ee;
            border-left: 4px solid #2ca02c; }
.notes { color: #555; font-size: 13px; } svg { display: block; margin: 8px 0; }
"""


def render_page(rows: Sequence[dict[str, Any]], overlay: pd.DataFrame, *,
                notes: Sequence[str] = (), generated: _dt.datetime | None = None) -> str:
    """The whole page: `rows` from compare_rows (with their price basis), `overlay` from
    throughput_overlay, `notes` the table's footnotes."""
    when = (generated or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    names = ", ".join(str(r["session"]) for r in rows)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>neurotui compare: {escape(names)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Comparison: {escape(names)}</h1>",
        f'<p class="decision" id="decision">{escape(decision_line(rows))}</p>',
        '<h2>Figures</h2><div class="table-wrap">', _table(rows), "</div>",
        "<h2>Samples per dollar and samples/s</h2>",
        bar_chart(rows, "samples_per_dollar_steady", "Samples per dollar (steady state)",
                  fmt.count),
        bar_chart(rows, "samples_per_s", "Samples/s (steady state)", fmt.rate),
        "<h2>Throughput over time</h2>",
        throughput_chart(overlay, [str(r["session"]) for r in rows]),
        "<h2>Runs</h2>", _runs(rows),
        '<div class="notes"><h2>Notes</h2><ul>',
        *(f"<li>{escape(note)}</li>" for note in notes),
        "</ul>",
        f"<p>Written by neurotui {escape(__version__)} on {escape(when)}.</p></div>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def render_svg(rows: Sequence[dict[str, Any]], overlay: pd.DataFrame) -> str:
    """The page's three charts, one under the other, as one standalone SVG document."""
    charts = [bar_chart(rows, "samples_per_dollar_steady", "Samples per dollar (steady state)",
                        fmt.count),
              bar_chart(rows, "samples_per_s", "Samples/s (steady state)", fmt.rate),
              throughput_chart(overlay, [str(r["session"]) for r in rows])]
    heights = [_height(c) for c in charts]
    body = []
    y = 0
    for chart, h in zip(charts, heights, strict=True):
        body.append(f'<g transform="translate(0,{y})">{_inner(chart)}</g>')
        y += h + 16
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{y}" '
            f'viewBox="0 0 {CHART_WIDTH} {y}" font-family="sans-serif" font-size="12">'
            + "".join(body) + "</svg>\n")


def curve_bucket_s(sessions: Sequence[LoadedSession]) -> float:
    """The overlay's bucket: about CURVE_POINTS points on the longest run, short runs too."""
    durations = []
    for s in sessions:
        started, end = s.meta.get("started_at"), s.meta.get("ended_at") or s.last_seen
        if isinstance(started, int | float) and isinstance(end, int | float):
            durations.append(float(end) - float(started))
    want = max(durations, default=0.0) / CURVE_POINTS
    small = next((b for b in _SMALL_BUCKETS_S if b >= want), None)
    return small if small is not None else overlay_bucket_s(durations, CURVE_POINTS)


def _height(svg: str) -> int:
    return int(svg.split('height="', 1)[1].split('"', 1)[0])


def _inner(svg: str) -> str:
    return svg.split(">", 1)[1].rsplit("</svg>", 1)[0]


def _table(rows: Sequence[dict[str, Any]]) -> str:
    columns = ordered_columns(rows)
    head = "".join(f'<th data-key="{escape(c.key)}">{escape(c.header)}</th>' for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c.key)
            raw = repr(float(value)) if c.kind != "text" and fmt.known(value) else ""
            kind = ' class="n"' if c.kind != "text" else ""
            cells.append(f'<td{kind} data-key="{escape(c.key)}" data-value="{escape(raw)}">'
                         f"{escape(cell(row, c))}</td>")
        body.append(f'<tr data-session="{escape(str(row["session"]))}">{"".join(cells)}</tr>')
    return (f'<table id="figures"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table>")


def _runs(rows: Sequence[dict[str, Any]]) -> str:
    items = []
    for row in rows:
        said = [f"instance {row.get('instance_type') or 'unknown'}"
                + (f" ({row['accelerator']})" if row.get("accelerator") else ""),
                f"price: {row.get('price_note') or 'not recorded'}",
                f"steps timed by {row.get('step_source') or 'unknown'}"]
        without = row.get("step_time_without_data_s")
        if fmt.known(without):
            said.append(f"step time less data wait {without * 1000:.1f} ms")
        items.append(f'<li data-session="{escape(str(row["session"]))}"><b>'
                     f'{escape(str(row["session"]))}</b>: {escape("; ".join(said))}</li>')
    return "<ul>" + "".join(items) + "</ul>"


def bar_chart(rows: Sequence[dict[str, Any]], key: str, title: str,
              show: Any) -> str:
    """Horizontal bars, one per run, longest = the largest figure; a run without the
    figure gets no bar and says n/a."""
    values = [row.get(key) for row in rows]
    top = max((float(v) for v in values if fmt.known(v)), default=0.0)
    height = 28 + BAR_HEIGHT * len(rows) + 8
    room = CHART_WIDTH - _LABEL_WIDTH - _VALUE_WIDTH
    out = [f'<svg class="chart" data-chart="{escape(key)}" width="{CHART_WIDTH}" '
           f'height="{height}" viewBox="0 0 {CHART_WIDTH} {height}" role="img" '
           f'aria-label="{escape(title)}" font-family="sans-serif" font-size="12">',
           f'<text x="0" y="16" font-weight="bold">{escape(title)}</text>']
    for i, (row, value) in enumerate(zip(rows, values, strict=True)):
        y = 28 + i * BAR_HEIGHT
        name = str(row["session"])
        out.append(f'<text x="{_LABEL_WIDTH - 8}" y="{y + 15}" text-anchor="end">'
                   f"{escape(_short(name, 28))}</text>")
        if fmt.known(value) and top > 0:
            w = max(1.0, room * float(value) / top)
            out.append(f'<rect x="{_LABEL_WIDTH}" y="{y + 3}" width="{w:.1f}" '
                       f'height="{BAR_HEIGHT - 6}" fill="{PALETTE[i % len(PALETTE)]}" '
                       f'data-session="{escape(name)}" data-value="{float(value)!r}"/>')
            out.append(f'<text x="{_LABEL_WIDTH + w + 6:.1f}" y="{y + 15}">'
                       f"{escape(show(value))}</text>")
        else:
            out.append(f'<text x="{_LABEL_WIDTH + 6}" y="{y + 15}" fill="#777">n/a</text>')
    out.append("</svg>")
    return "".join(out)


def throughput_chart(overlay: pd.DataFrame, sessions: Sequence[str], *,
                     height: int = 260) -> str:
    """Each run's samples/s over time since its start, overlaid on one pair of axes."""
    left, right, top, bottom = 70, 20, 28, 40
    plot_w, plot_h = CHART_WIDTH - left - right, height - top - bottom
    legend_h = 18 * len(sessions)
    total_h = height + legend_h
    out = [f'<svg class="chart" data-chart="throughput" width="{CHART_WIDTH}" '
           f'height="{total_h}" viewBox="0 0 {CHART_WIDTH} {total_h}" role="img" '
           'aria-label="Throughput over time" font-family="sans-serif" font-size="12">',
           '<text x="0" y="16" font-weight="bold">Samples/s over time since each run '
           "started</text>"]
    known = overlay[overlay["samples_per_s"].notna()] if len(overlay) else overlay
    if not len(known):
        out.append(f'<text x="{left}" y="{top + 20}" fill="#777">no steps recorded</text>')
        out.append("</svg>")
        return "".join(out)
    x_max = max(float(known["t_s"].max()), 1e-9)
    y_max = max(float(known["samples_per_s"].max()), 1e-9)
    y_top = _nice_ceiling(y_max)
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" '
               'fill="none" stroke="#999"/>')
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{escape(fmt.rate(y_top * frac, ''))}</text>")
        x = left + plot_w * frac
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
                   f"{escape(fmt.short_duration(x_max * frac))}</text>")
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" '
               'text-anchor="middle" fill="#555">time since start</text>')
    for i, name in enumerate(sessions):
        mine = known[known["session"] == name]
        colour = PALETTE[i % len(PALETTE)]
        if len(mine):
            points = " ".join(
                f"{left + plot_w * t / x_max:.1f},{top + plot_h * (1 - v / y_top):.1f}"
                for t, v in zip(mine["t_s"], mine["samples_per_s"], strict=True))
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                       f'points="{points}" data-session="{escape(name)}"/>')
            if len(mine) == 1:  # one bucket: a dot, or nothing would show
                x, y = points.split(",")
                out.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>')
        y = height + 18 * i
        out.append(f'<rect x="{left}" y="{y - 9}" width="12" height="3" fill="{colour}"/>')
        said = "" if len(mine) else " (no steps)"
        out.append(f'<text x="{left + 18}" y="{y - 4}">{escape(name + said)}</text>')
    out.append("</svg>")
    return "".join(out)


def _nice_ceiling(value: float) -> float:
    """1, 2, 2.5 or 5 times a power of ten, at or above `value`: round axis labels."""
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
