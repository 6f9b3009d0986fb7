"""The comparison table fitted to a width, turned when that reads better, and its decision.

render.render_table writes every column (237 characters for the two shipped samples), which
a terminal of 80 or 100 columns wraps into unreadable lines. Here:

- `ordered_columns`: the columns that decide (session, instance, steady step time, samples/s,
  price/h, samples per dollar, relative) first, then the others by how much they say, then
  columns this module does not know (step phases, columns added later) narrowest first;
- `render_fitted(rows, width)`: as many of those as fit the width; with few sessions, when
  the table would hide most figures, it turns: one column per session, one row per figure
  (as such comparisons are read), sessions in groups that fit the width;
- `decision_line(rows)`: which run gives the most samples per dollar, by how much, at which
  price (the command's line under the table, and the dashboard's compare screen's).

Cells are render.format_value's, so a figure reads the same in every layout.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from neurotui import fmt
from neurotui.compare.render import format_value
from neurotui.compare.rows import Column, table_columns

GAP = "  "
PRICE_BASIS = Column("price_basis", "PRICED AT", "text")
"""Which price each run's figures used (whatif.py); in rows that say."""
DECIDING = ("session", "instance_type", "step_time_median_s", "samples_per_s", "usd_per_hour",
            "samples_per_dollar_steady", "relative_price_performance")
"""What the comparison is for: shown first, kept at any width that can hold them."""
THEN = ("price_basis", "samples_per_dollar_all_in", "step_time_p90_s", "state",
        "time_to_first_step_s", "accelerator", "cores_used", "global_batch", "workers",
        "flops_util", "exec_errors", "alerts")
"""Then these, in this order, as the width allows; any other column after them."""
TURN_MAX_SESSIONS = 4
"""Up to this many sessions, a table that would hide most columns is turned instead."""
MIN_WIDTH = 40
"""Narrower than this, the layouts are drawn at this width (a table needs some room)."""


class UnknownColumnError(ValueError):
    """--columns named a column the comparison does not have (the message lists them)."""


def all_columns(rows: Sequence[dict[str, Any]]) -> tuple[Column, ...]:
    """compare's columns for these rows, and PRICED AT when the rows say which price."""
    columns = table_columns(rows)
    if any(row.get(PRICE_BASIS.key) for row in rows):
        columns = (*columns, PRICE_BASIS)
    return columns


def cell(row: dict[str, Any], column: Column) -> str:
    """One figure as compare's table shows it (cores as used/available)."""
    if column.key == "cores_used" and fmt.known(row.get("cores_used")) \
            and fmt.known(row.get("cores_available")):
        return f"{int(row['cores_used'])}/{int(row['cores_available'])}"
    return format_value(row.get(column.key), column.kind)


def column_width(rows: Sequence[dict[str, Any]], column: Column) -> int:
    return max([len(column.header), *(len(cell(row, column)) for row in rows)])


def ordered_columns(rows: Sequence[dict[str, Any]]) -> list[Column]:
    """Every column, the deciding ones first: unknown ones (phases, columns added by
    others) last, narrowest first, so that the width holds as many as it can."""
    columns = {c.key: c for c in all_columns(rows)}
    known = [columns[k] for k in (*DECIDING, *THEN) if k in columns]
    rest = sorted((c for k, c in columns.items() if k not in DECIDING and k not in THEN),
                  key=lambda c: column_width(rows, c))
    return [*known, *rest]


def pick_columns(rows: Sequence[dict[str, Any]], wanted: Iterable[str]) -> list[Column]:
    """--columns a,b,c: each by its key (samples_per_s) or its header (SAMPLES/S), in the
    order given; the session column first if not named (a row must say whose it is)."""
    columns = all_columns(rows)
    by_name = {c.key.lower(): c for c in columns} | {c.header.lower(): c for c in columns}
    picked: list[Column] = []
    for name in wanted:
        name = name.strip()
        if not name:
            continue
        found = by_name.get(name.lower())
        if found is None:
            raise UnknownColumnError(
                f"--columns: no column {name!r}; columns: "
                + ", ".join(c.key for c in columns))
        if found not in picked:
            picked.append(found)
    session = by_name["session"]
    return picked if session in picked else [session, *picked]


def table_width(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> int:
    return sum(column_width(rows, c) for c in columns) + len(GAP) * max(0, len(columns) - 1)


def fitting_columns(rows: Sequence[dict[str, Any]], width: int) -> list[Column]:
    """ordered_columns() that fit in `width`, in order, skipping any too wide for what is
    left (a narrower one after it may still fit)."""
    chosen: list[Column] = []
    used = 0
    for column in ordered_columns(rows):
        need = column_width(rows, column) + (len(GAP) if chosen else 0)
        if used + need <= width:
            chosen.append(column)
            used += need
    return chosen


def should_turn(rows: Sequence[dict[str, Any]], width: int) -> bool:
    """Turn when the deciding columns do not fit, or when few sessions would show under
    half of their figures as a table."""
    fitting = {c.key for c in fitting_columns(rows, width)}
    everything = ordered_columns(rows)
    deciding = [c.key for c in everything if c.key in DECIDING]
    if not set(deciding) <= fitting:
        return True
    return len(rows) <= TURN_MAX_SESSIONS and len(fitting) * 2 < len(everything)


def render_rows(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> list[str]:
    """A plain table of exactly these columns: text left, figures right."""
    widths = [column_width(rows, c) for c in columns]
    lines = [[c.header for c in columns], *([cell(row, c) for c in columns] for row in rows)]
    return [GAP.join(text.ljust(w) if c.kind == "text" else text.rjust(w)
                     for text, w, c in zip(line, widths, columns, strict=True)).rstrip()
            for line in lines]


def render_turned(rows: Sequence[dict[str, Any]], columns: Sequence[Column],
                  width: int) -> list[str]:
    """One row per figure, one column per session; sessions in groups that fit `width`,
    one block after another. A cell too long for the width is cut, marked with an ellipsis."""
    figures = [c for c in columns if c.key != "session"]
    label_width = max([len("SESSION"), *(len(c.header) for c in figures)])
    room = max(8, width - label_width - len(GAP))
    cells = [[cell(row, c) for c in [Column("session", "SESSION", "text"), *figures]]
             for row in rows]
    widths = [min(room, max(len(x) for x in row_cells)) for row_cells in cells]
    groups: list[list[int]] = []
    used = label_width
    for i, w in enumerate(widths):
        if groups and used + len(GAP) + w <= width:
            groups[-1].append(i)
            used += len(GAP) + w
        else:
            groups.append([i])
            used = label_width + len(GAP) + w
    out: list[str] = []
    for group in groups:
        if out:
            out.append("")
        for at, label in enumerate(["SESSION", *(c.header for c in figures)]):
            # Right-aligned, text too: each session's column reads as one.
            parts = [label.ljust(label_width),
                     *(_cut(cells[i][at], widths[i]).rjust(widths[i]) for i in group)]
            out.append(GAP.join(parts).rstrip())
    return out


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def render_fitted(rows: Sequence[dict[str, Any]], width: int, *,
                  notes: Sequence[str] = (), wide: bool = False,
                  columns: Sequence[Column] | None = None) -> str:
    """The text comparison for a terminal `width` wide: the table (fitted, turned, every
    column with `wide`, or the `columns` picked), the decision line, then `notes` (compare's
    footnotes and the price notes), every line wrapped to the width unless `wide`."""
    width = max(width, MIN_WIDTH)
    left_out: list[Column] = []
    if columns is not None:
        lines = render_rows(rows, columns)
    elif wide:
        lines = render_rows(rows, ordered_columns(rows))
    elif should_turn(rows, width):
        lines = render_turned(rows, ordered_columns(rows), width)
    else:
        shown = fitting_columns(rows, width)
        left_out = [c for c in ordered_columns(rows) if c not in shown]
        lines = render_rows(rows, shown)
    said = [decision_line(rows)]
    if left_out:
        said.append("not shown (--wide shows every column, --columns picks): "
                    + ", ".join(c.header for c in left_out))
    said.extend(notes)
    if not wide and columns is None:
        lines = [_cut(line, width) for line in lines]  # (a name wider than the screen)
        said = [wrapped for note in said for wrapped in
                textwrap.wrap(note, width, subsequent_indent="  ", break_on_hyphens=False)]
    return "\n".join([*lines, "", *said]) + "\n"


def decision_line(rows: Sequence[dict[str, Any]]) -> str:
    """Which run is the better deal (most samples per dollar, steady state), by how much
    against the next best, and at which price; or why that cannot be said."""
    priced = sorted((r for r in rows if fmt.known(r.get("samples_per_dollar_steady"))),
                    key=lambda r: -float(r["samples_per_dollar_steady"]))
    if not priced:
        if not rows:
            return "Better deal: nothing to compare."
        return ("Better deal: unknown, no run has a price; pass --price INSTANCE=USD_PER_HOUR "
                "(or SESSION=USD_PER_HOUR) to price them.")
    best = priced[0]
    if len(rows) == 1:
        return f"{best['session']}: {_deal(best)}."
    if len(priced) == 1:
        others = ", ".join(r["session"] for r in rows if r is not best)
        return (f"Better deal: only {best['session']} has a price ({_deal(best)}); price "
                f"{others} with --price to compare.")
    second = priced[1]
    ratio = float(best["samples_per_dollar_steady"]) / float(second["samples_per_dollar_steady"])
    return (f"Better deal: {best['session']}, {ratio:.2f}x (+{(ratio - 1) * 100:.0f}%) the "
            f"samples per dollar of {second['session']}: "
            f"{fmt.count(best['samples_per_dollar_steady'])} vs "
            f"{fmt.count(second['samples_per_dollar_steady'])}, at {_price(best)} vs "
            f"{_price(second)}.")


def _price(row: dict[str, Any]) -> str:
    """$1.34375/h (on-demand us-east-1 2026-07-20): the price and which one it is."""
    basis = row.get(PRICE_BASIS.key)
    return f"{fmt.price(row.get('usd_per_hour'))}/h" + (f" ({basis})" if basis else "")


def _deal(row: dict[str, Any]) -> str:
    return f"{fmt.count(row['samples_per_dollar_steady'])} samples/$ at {_price(row)}"
