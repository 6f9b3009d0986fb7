"""Compare runs side by side: pick sessions, see the reference study's table (one row per
run, relative to a baseline) and their throughput over time on one chart.

Reading a session can take a second or more (millions of events), so sessions are read and
the figures computed in a thread worker; each request carries a generation number and only
the newest one's answer is drawn. Sessions already read are kept, so picking one more or
changing the baseline does not read the others again (`r` reads them afresh).
Everything read from disk (names, error messages) is shown literally, never as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, SelectionList, Static
from textual.widgets.selection_list import Selection
from textual.worker import Worker, WorkerState

from neurotui import fmt
from neurotui.compare.layout import decision_line, fitting_columns, ordered_columns
from neurotui.compare.load import LoadedSession, load_session
from neurotui.compare.overlay import overlay_bucket_s, throughput_overlay
from neurotui.compare.render import MISSING, format_value
from neurotui.compare.rows import COLUMNS, Column, compare_rows, table_columns
from neurotui.session.paths import list_sessions
from neurotui.session.reader import SessionFormatError
from neurotui.textsafe import safe_text, visible_text
from neurotui.ui.widgets.compare_chart import CompareChart, curves_from_overlay
from neurotui.ui.widgets.footer import KeysFooter
from neurotui.ui.widgets.panel import ERROR, LABEL, MUTED, WARN

BASELINE_LABEL = "base"
MARK_COLUMN = "baseline_mark"
_SMALL_BUCKETS_S = (0.5, 1.0, 2.0, 5.0)
# Short runs (the samples last a minute) need buckets under compare's 10 s minimum to show
# more than a handful of points.


@dataclass(frozen=True)
class _Request:
    generation: int
    paths: tuple[Path, ...]
    """Picked sessions, in the picker's order."""
    baseline: Path | None
    cached: dict[Path, LoadedSession]
    columns: int
    """About this many points per curve: a few per column of the chart, so that no column
    falls between two buckets."""


@dataclass
class ComparisonReady(Message):
    """A worker's answer: what it read and the figures of the readable sessions."""

    generation: int
    loaded: dict[Path, LoadedSession]
    errors: dict[Path, str]
    rows: list[dict[str, Any]]
    overlay: pd.DataFrame = field(repr=False)


class CompareScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("b", "baseline", "Baseline", tooltip="measure the others against the "
                                                     "highlighted session"),
        Binding("r", "reload", "Reload", tooltip="list and read the sessions again"),
    ]
    DEFAULT_CSS = """
    CompareScreen { layout: vertical; overflow: hidden; }
    CompareScreen #compare-picker, CompareScreen #compare-table, CompareScreen CompareChart {
        border: none;
        border-top: solid $foreground 30%;
        border-title-color: $text-primary;
        border-title-style: bold;
        background: $background;
    }
    CompareScreen #compare-picker:focus, CompareScreen #compare-table:focus {
        border-top: solid $primary;
        background-tint: $foreground 4%;
    }
    CompareScreen #compare-picker { height: auto; max-height: 7; }
    CompareScreen #compare-table { height: auto; max-height: 12; }
    CompareScreen #compare-notes { height: auto; max-height: 6; padding: 0 1; }
    CompareScreen CompareChart { height: 1fr; min-height: 5; padding: 0 1; }
    CompareScreen.-ascii #compare-picker, CompareScreen.-ascii #compare-table,
    CompareScreen.-ascii CompareChart { border-top: ascii $foreground 30%; }
    CompareScreen.-ascii #compare-picker:focus, CompareScreen.-ascii #compare-table:focus {
        border-top: ascii $primary;
    }
    """

    def __init__(self, root: Path, chosen: Sequence[Path] = (), *,
                 baseline: Path | None = None, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.root = Path(root)
        self.chosen = [Path(p).resolve() for p in chosen]
        # The baseline stays the one asked for (else the first chosen) while it is compared;
        # otherwise the first compared session is.
        self.baseline: Path | None = (Path(baseline).resolve() if baseline is not None
                                      else (self.chosen[0] if self.chosen else None))
        self.rows: list[dict[str, Any]] = []
        self.left_out: list[Column] = []
        """Columns the table's width has no room for (`neurotui compare --wide` has all)."""
        self.errors: dict[Path, str] = {}
        self._loaded: dict[Path, LoadedSession] = {}
        self._generation = 0
        self._loading = False
        self._busy = False
        self.failure: str | None = None
        """Why the last comparison could not be computed (a bug, not a bad session)."""

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        picker: SelectionList[Path] = SelectionList(id="compare-picker")
        picker.border_title = "Sessions (space picks, b makes the highlighted one the baseline)"
        yield picker
        table: DataTable[Text] = DataTable(id="compare-table", cursor_type="row",
                                           zebra_stripes=True)
        table.border_title = "Comparison"
        yield table
        yield Static(id="compare-notes", markup=False)
        chart = CompareChart()
        chart.border_title = "Throughput over time"
        yield chart
        yield KeysFooter()

    def on_mount(self) -> None:
        self._set_columns(self.query_one("#compare-table", DataTable), [])
        self._list_sessions()
        self._ascii_changed()
        if hasattr(self.app, "ascii_mode"):
            # The dashboard's ASCII toggle redraws this screen too.
            self.watch(self.app, "ascii_mode", lambda _: self._ascii_changed(), init=False)
        self._compute()

    def _list_sessions(self) -> None:
        """Sessions under the root, oldest first, then chosen ones from elsewhere; a reload
        keeps what was picked."""
        picker = self.query_one("#compare-picker", SelectionList)
        shown = {picker.get_option_at_index(i).value for i in range(picker.option_count)}
        picked = set(picker.selected) | set(self.chosen)
        found = [p.resolve() for p in list_sessions(self.root)]
        found += [p for p in self.chosen if p not in found]
        picker.add_options([Selection(Content(visible_text(p.name)), p, p in picked)
                            for p in found if p not in shown])
        self.chosen = []  # picked once; the picker holds the choice from now on

    def _ascii_changed(self) -> None:
        ascii_mode = bool(getattr(self.app, "ascii_mode", False))
        self.set_class(ascii_mode, "-ascii")
        self.query_one(CompareChart).refresh()

    # -- reading and computing, off the UI thread ------------------------------------------
    def picked(self) -> list[Path]:
        """Picked sessions in the picker's order (stable, whatever order they were picked)."""
        picker = self.query_one("#compare-picker", SelectionList)
        selected = set(picker.selected)
        values = [picker.get_option_at_index(i).value for i in range(picker.option_count)]
        return [p for p in values if p in selected]

    def _compute(self) -> None:
        """Recompute for what is picked now. One worker at a time: a request made while one
        runs is served when it ends, from the sessions it has read by then (never read twice
        at once: two cores, and a big session takes a second)."""
        self._generation += 1
        self._loading = bool(self.picked())
        self._show_notes()
        if not self._loading:
            self.rows, self.errors, self.failure = [], {}, None
            self._show_rows([])
            self._show_notes()
            self.query_one(CompareChart).show((), "no session picked")
        elif not self._busy:
            # Requests of one moment (the picker reports each initial pick) start one worker.
            self._busy = True
            self.call_after_refresh(self._start_worker)

    def _start_worker(self) -> None:
        self._busy = True
        if not self._loading:
            self._busy = False
            return
        request = _Request(self._generation, tuple(self.picked()), self.baseline,
                           dict(self._loaded), 3 * max(20, self.app.size.width))
        self.run_worker(partial(self._compare, request), name=str(request.generation),
                        group="compare", thread=True, exit_on_error=False)

    def _compare(self, request: _Request) -> None:
        """In a thread worker: read what is not read yet, then compute rows and curves."""
        loaded: dict[Path, LoadedSession] = {}
        errors: dict[Path, str] = {}
        for path in request.paths:
            if path in request.cached:
                loaded[path] = request.cached[path]
                continue
            try:
                loaded[path] = load_session(path)
            except SessionFormatError as exc:
                errors[path] = str(exc)  # names the file and what is wrong with it
            except Exception as exc:  # one unreadable session must not take the others down
                errors[path] = f"{path}: {exc!r}"
        readable = [loaded[p] for p in request.paths if p in loaded]
        rows: list[dict[str, Any]] = []
        overlay = pd.DataFrame(columns=["session", "t_s", "samples_per_s"])
        if readable:
            paths = [s.path for s in readable]
            base = paths.index(request.baseline) if request.baseline in paths else 0
            rows = compare_rows(readable, base)
            overlay = throughput_overlay(readable, chart_bucket_s(readable, request.columns))
        self.post_message(ComparisonReady(request.generation, loaded, errors, rows, overlay))

    def on_comparison_ready(self, message: ComparisonReady) -> None:
        # Keep only what is picked: a big session's steps take real memory.
        picked = set(self.picked())
        self._loaded.update(message.loaded)
        self._loaded = {p: s for p, s in self._loaded.items() if p in picked}
        self._busy = False
        if message.generation != self._generation:
            if self._loading:
                self._start_worker()  # the picks or the baseline changed meanwhile
            return
        self._loading = False
        self.rows, self.errors, self.failure = message.rows, message.errors, None
        self._show_rows(message.rows)
        names = [row["session"] for row in message.rows]
        note = "no steps recorded yet" if names else "no readable session picked"
        self.query_one(CompareChart).show(curves_from_overlay(message.overlay, names), note)
        self._show_notes()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "compare" or event.state != WorkerState.ERROR:
            return
        self._busy = False
        if event.worker.name != str(self._generation) and self._loading:
            self._start_worker()
            return
        # A bug in the figures must not close the screen: say what failed.
        self._loading = False
        self.failure = f"comparison failed: {event.worker.error!r}"
        self._show_notes()

    # -- drawing ---------------------------------------------------------------------------
    def _show_rows(self, rows: list[dict[str, Any]]) -> None:
        table = self.query_one("#compare-table", DataTable)
        keep = None
        if table.row_count and table.is_valid_row_index(table.cursor_row):
            keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        columns = self._fitting(rows)
        cells = [[Text(BASELINE_LABEL if row["baseline"] else "", style="bold"),
                  *row_cells(row, columns)] for row in rows]
        self._set_columns(table, cells, columns)
        for row, shown in zip(rows, cells, strict=True):
            table.add_row(*shown, key=row["path"])
        if keep is not None and keep in {row["path"] for row in rows}:
            table.move_cursor(row=table.get_row_index(keep))

    def _fitting(self, rows: list[dict[str, Any]]) -> list[Column]:
        """The columns that fit the screen's width, those that decide first (as `neurotui
        compare` fits a terminal); the others are named in the notes."""
        every = ordered_columns(rows) if rows else list(table_columns(rows))
        mark = len(BASELINE_LABEL) + 2
        # A DataTable pads each cell by one column on each side; 2 more for a scrollbar.
        room = self.size.width - mark - 2 - 2
        shown = fitting_columns(rows, room) if rows else every
        self.left_out = [c for c in every if c not in shown]
        return shown

    def on_resize(self) -> None:
        if self.rows:
            self._show_rows(self.rows)
            self._show_notes()

    @staticmethod
    def _set_columns(table: DataTable[Text], cells: list[list[Text]],
                     columns: Sequence[Column] = COLUMNS) -> None:
        """Empty the table and size its columns to the header and `cells` (a mark column for
        the baseline, then `columns`). Sized here, not by the table: a DataTable measures its
        columns when idle, and a frame drawn before that stays cached at the old widths
        (Textual #3533), which a loaded machine showed as a row cut short."""
        headers = [Text(""), *(Text(c.header) for c in columns)]
        widths = [max([h.cell_len, *(row[i].cell_len for row in cells)])
                  for i, h in enumerate(headers)]
        table.clear(columns=True)
        table.add_column(headers[0], key=MARK_COLUMN, width=widths[0])
        for column, header, width in zip(columns, headers[1:], widths[1:], strict=True):
            table.add_column(header, key=column.key, width=width)
        table.fixed_columns = 2  # the mark and the session's name stay when scrolling sideways

    def _show_notes(self) -> None:
        lines: list[Content] = []
        if self._loading:
            lines.append(Content.styled("loading...", MUTED))
        elif not self.rows and not self.errors:
            lines.append(Content.styled("pick sessions to compare (space)", MUTED))
        if self.rows and not self._loading:
            lines.append(Content.styled(visible_text(decision_line(self.rows)), "bold"))
        if self.left_out and self.rows:
            lines.append(Content.styled(
                "more columns than fit: widen the terminal, or `neurotui compare --wide`",
                MUTED))
        base = next((row for row in self.rows if row["baseline"]), None)
        if base is not None and len(self.rows) > 1:
            lines.append(Content.assemble(
                ("RELATIVE: ", LABEL), "samples per dollar (steady state) against ",
                (visible_text(base["session"]), "bold"), "; > 1 is the better deal"))
        unpriced = [row["session"] for row in self.rows if not fmt.known(row["usd_per_hour"])]
        if unpriced:
            lines.append(Content.styled(
                f"no price recorded for {', '.join(visible_text(n) for n in unpriced)}: "
                "PRICE/H, SAMPLES/$ and RELATIVE are n/a (run with --instance-type or "
                "--price-per-hour)", MUTED))
        unphased = [visible_text(row["session"]) for row in self.rows if not row.get("phases_s")]
        if unphased:  # how to get the phase columns, never a guess at them
            lines.append(Content.styled(
                f"no step phases recorded in {', '.join(unphased)}: one probe.step(..., "
                "phases={\"data\": ..., \"forward\": ...}) call per step reports them", MUTED))
        if self.failure:
            lines.append(Content.styled(visible_text(self.failure), ERROR))
        for path, error in self.errors.items():
            lines.append(Content.assemble((f"cannot read {visible_text(path.name)}: ", ERROR),
                                          visible_text(error)))
        for row in self.rows:
            if row.get("problems"):
                lines.append(Content.assemble((f"{visible_text(row['session'])}: ", WARN),
                                              visible_text(str(row["problems"]))))
        self.query_one("#compare-notes", Static).update(Content("\n").join(lines))

    # -- actions ---------------------------------------------------------------------------
    def on_selection_list_selected_changed(
            self, event: SelectionList.SelectedChanged[Path]) -> None:
        self._compute()

    def action_baseline(self) -> None:
        path = self._highlighted()
        if path is None:
            self.notify("highlight a session first", markup=False)
            return
        self.baseline = path
        picker = self.query_one("#compare-picker", SelectionList)
        if path not in picker.selected:
            picker.select(path)  # picking it recomputes
        else:
            self._compute()

    def _highlighted(self) -> Path | None:
        """The session under the cursor: in the picker when it has focus, else the table's."""
        picker = self.query_one("#compare-picker", SelectionList)
        if self.focused is picker:
            option = picker.highlighted_option
            return None if option is None else option.value  # type: ignore[attr-defined]
        table = self.query_one("#compare-table", DataTable)
        if not table.row_count or not table.is_valid_row_index(table.cursor_row):
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else Path(key)

    def action_reload(self) -> None:
        self._loaded.clear()
        self._list_sessions()
        self._compute()

    def action_close(self) -> None:
        # Pushed over the dashboard: back to it. Alone (neurotui compare --tui): quit.
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit()


def row_cells(row: dict[str, Any], columns: Sequence[Column] = COLUMNS) -> list[Text]:
    """The table's cells of one row, formatted as `neurotui compare` does: missing is n/a."""
    cells = []
    for column in columns:
        value = format_value(row.get(column.key), column.kind)
        if column.key == "cores_used" and value != MISSING and \
                fmt.known(row.get("cores_available")):
            value = f"{value}/{int(row['cores_available'])}"
        if column.kind == "text":
            cells.append(safe_text(value))
        else:
            cells.append(Text(value, justify="right", no_wrap=True))
    return cells


def chart_bucket_s(sessions: Sequence[LoadedSession], points: int) -> float:
    """A round bucket giving about `points` points on the longest run (down to 0.5 s)."""
    durations = [_duration(s) for s in sessions]
    longest = max((d for d in durations if d is not None), default=0.0)
    want = longest / max(1, points)
    small = next((b for b in _SMALL_BUCKETS_S if b >= want), None)
    return small if small is not None else overlay_bucket_s(durations, points)


def _duration(session: LoadedSession) -> float | None:
    started = session.meta.get("started_at")
    end = session.meta.get("ended_at") or session.last_seen
    if not isinstance(started, int | float) or not isinstance(end, int | float):
        return None
    return float(end) - float(started)


