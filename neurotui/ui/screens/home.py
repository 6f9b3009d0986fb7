"""The home screen: every session of the sessions folder in one table.

The rows come from each session's meta.json alone (session/listing.py), so the first frame
is quick with hundreds of sessions. Figures that meta.json does not hold (a running session,
one recorded without a summary) are read afterwards in a thread worker, through compare's
own read, one session at a time; until then they show as being read, after a failure as
n/a with the reason. The screen opens nothing itself: Enter posts `OpenSession`, and the app
decides how (live or replay).
Everything read from disk (names, problems) is shown literally, never as markup.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static
from textual.worker import get_current_worker

from neurotui import fmt
from neurotui.fmt import MISSING, format_value
from neurotui.session.listing import (
    SORT_KEYS,
    SessionEntry,
    matches,
    read_entries,
    sort_entries,
)
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.status import status_of
from neurotui.textsafe import safe_text, visible_text
from neurotui.ui.screens.confirm_delete import ConfirmDelete
from neurotui.ui.widgets.footer import KeysFooter
from neurotui.ui.widgets.panel import ERROR, LABEL, MUTED

READING = "reading..."
MARK = "*"
NOTE_WIDTH = 40
"""A long problem is cut in the table; the line under it says it whole."""
FIRST_ROWS = 80
"""Rows added before the first frame (more than a tall terminal shows): the rest follow just
after it, so that hundreds of sessions do not hold the first frame back."""


@dataclass(frozen=True)
class _Column:
    key: str
    """A sort key of listing.SORT_KEYS, or "mark" / "note"."""
    header: str
    right: bool = False


COLUMNS = (
    _Column("mark", " "),
    _Column("state", "STATE"),
    _Column("name", "SESSION"),
    _Column("instance", "INSTANCE"),
    _Column("started", "STARTED"),
    _Column("duration", "DURATION", right=True),
    _Column("samples_per_s", "SAMPLES/S", right=True),
    _Column("samples_per_dollar", "SAMPLES/$", right=True),
    _Column("note", "NOTE"),
)
_STATE_STYLES = {"running": "bold green", "starting": "green", "unsupervised": "yellow",
                 "completed": "", "crashed": "bold red", "lost": "yellow",
                 "unreadable": "bold red", "broken": "bold red"}


@dataclass
class OpenSession(Message):
    """Open this session: live when it runs, else in replay."""

    path: Path
    live: bool


@dataclass
class FiguresRead(Message):
    """The worker's figures for one session that meta.json had none for."""

    path: Path
    samples_per_s: float | None
    samples_per_dollar: float | None
    problem: str | None


class HomeScreen(Screen[None]):
    BINDINGS = [
        Binding("space", "mark", "Mark"),
        Binding("c", "compare", "Compare", tooltip="compare the marked sessions"),
        Binding("d,delete", "delete", "Delete", tooltip="delete the session (asks first)"),
        Binding("s", "sort", "Sort", tooltip="sort by the next column"),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    DEFAULT_CSS = """
    HomeScreen { layout: vertical; }
    HomeScreen #home-title { height: 1; padding: 0 1; background: $panel; }
    HomeScreen #home-filter { height: 1; border: none; padding: 0 1; }
    HomeScreen #home-filter:focus { background-tint: $foreground 4%; }
    HomeScreen #home-table { height: 1fr; border: none; }
    HomeScreen #home-detail { height: auto; max-height: 3; padding: 0 1; }
    """

    def __init__(self, root: Path, *, id: str | None = "home") -> None:
        super().__init__(id=id)
        self.root = Path(root)
        self.entries: dict[Path, SessionEntry] = {}
        self.marked: set[Path] = set()
        self.sort_key = "started"
        self.descending = True  # newest first
        self.filter_text = ""
        self._generation = 0
        """Counts redraws: rows left to add belong to the newest only."""
        self._read: dict[Path, FiguresRead] = {}
        """Figures read for finished sessions: they do not change, never read twice."""

    def compose(self) -> ComposeResult:
        yield Static(id="home-title", markup=False)
        yield Input(placeholder="/ filter: words of the name, state, instance or command",
                    id="home-filter")
        yield DataTable(id="home-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="home-detail", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#home-table", DataTable).focus()

    def on_screen_resume(self) -> None:
        # Shown first, or back from a session or compare (whose runs may have ended since);
        # not while a dashboard the app started on is already over it.
        if self.app.screen is self:
            self.reload()

    def on_screen_suspend(self) -> None:
        # A session opened over this screen gets the CPU: the figures wait until we return.
        self.workers.cancel_group(self, "home-figures")

    # -- reading --------------------------------------------------------------------------
    def reload(self) -> None:
        """List the folder again (meta.json only) and redraw; the slow figures follow."""
        entries = {}
        for entry in read_entries(self.root, now=time.time()):
            done = self._read.get(entry.path)
            if entry.needs_read and done is not None and not entry.running:
                entry = entry.with_figures(done.samples_per_s, done.samples_per_dollar,
                                           done.problem)
            entries[entry.path] = entry
        self.entries = entries
        self.marked &= set(entries)
        self.redraw()
        # Those shown first, then those the filter hides (it may change meanwhile).
        first = [e.path for e in self.shown()]
        order = first + sorted(set(entries) - set(first))
        self._read_figures([p for p in order if entries[p].needs_read and entries[p].readable])

    @work(thread=True, exclusive=True, group="home-figures", exit_on_error=False)
    def _read_figures(self, paths: list[Path]) -> None:
        """Compare's figures of the sessions without a summary, in the order shown."""
        from neurotui.compare.rows import compare_rows  # pandas: only when a session needs it

        worker = get_current_worker()
        for path in paths:
            if worker.is_cancelled:
                return
            try:
                row = compare_rows([path])[0]
            except Exception as exc:  # one unreadable session must not stop the others
                self.post_message(FiguresRead(path, None, None, f"figures unreadable: {exc}"))
                continue
            self.post_message(FiguresRead(path, row["samples_per_s"],
                                          row["samples_per_dollar_steady"], None))

    def on_figures_read(self, message: FiguresRead) -> None:
        entry = self.entries.get(message.path)
        if entry is None:
            return
        if not entry.running:
            self._read[message.path] = message
        entry = entry.with_figures(message.samples_per_s, message.samples_per_dollar,
                                   message.problem)
        self.entries[message.path] = entry
        table = self.query_one("#home-table", DataTable)
        key = str(message.path)
        if key not in table.rows:
            return
        cells = self.cells(entry)
        for column, cell in zip(COLUMNS, cells, strict=True):
            if column.key in ("samples_per_s", "samples_per_dollar", "note"):
                table.update_cell(key, column.key, cell, update_width=True)
        self._show_detail()

    # -- drawing --------------------------------------------------------------------------
    def shown(self) -> list[SessionEntry]:
        entries = [e for e in self.entries.values() if matches(e, self.filter_text)]
        return sort_entries(entries, self.sort_key, self.descending)

    def redraw(self) -> None:
        table = self.query_one("#home-table", DataTable)
        keep = self.highlighted()
        shown = self.shown()
        headers = [Text(self._header(c), justify="right" if c.right else "left")
                   for c in COLUMNS]
        # Sized here, not by the table (as the compare screen: Textual #3533), to fit every
        # row: measured on plain text, styled cells are made only for the rows added.
        texts = [[visible_text(t) for t in self.texts(e)] for e in shown]
        widths = [max([h.cell_len, *(cell_len(row[i]) for row in texts)])
                  for i, h in enumerate(headers)]
        widths[-1] = min(widths[-1], NOTE_WIDTH)
        table.clear(columns=True)
        for column, header, width in zip(COLUMNS, headers, widths, strict=True):
            table.add_column(header, key=column.key, width=width)
        table.fixed_columns = 3  # the mark, state and name stay when scrolling sideways
        for entry in shown[:FIRST_ROWS]:
            table.add_row(*self.cells(entry), key=str(entry.path))
        self._generation += 1
        if len(shown) > FIRST_ROWS:
            self.call_after_refresh(self._add_rows, self._generation, shown[FIRST_ROWS:], keep)
        self._keep_cursor(keep)
        self._show_title(len(shown))
        self._show_detail()

    def _add_rows(self, generation: int, entries: list[SessionEntry], keep: Path | None) -> None:
        """The rows after the first frame's (unless the table was redrawn since)."""
        if generation != self._generation:
            return
        table = self.query_one("#home-table", DataTable)
        for entry in entries:  # as they are now: figures may have come in meanwhile
            table.add_row(*self.cells(self.entries.get(entry.path, entry)),
                          key=str(entry.path))
        self._keep_cursor(keep)

    def _keep_cursor(self, keep: Path | None) -> None:
        table = self.query_one("#home-table", DataTable)
        if keep is not None and keep != self.highlighted() and str(keep) in table.rows:
            table.move_cursor(row=table.get_row_index(str(keep)), animate=False)

    def _header(self, column: _Column) -> str:
        if column.key != self.sort_key:
            return column.header
        return f"{column.header} {'v' if self.descending else '^'}"

    def texts(self, entry: SessionEntry) -> list[str]:
        """The row's cells as plain text, in COLUMNS' order (name, instance and note as read
        from disk: `cells` shows them literally)."""
        started = MISSING if entry.started_at is None else \
            time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.started_at))
        if entry.needs_read and entry.readable:
            rate = per_dollar = READING
        elif not entry.readable:
            rate = per_dollar = ""
        else:
            rate = format_value(entry.samples_per_s, "rate")
            per_dollar = format_value(entry.samples_per_dollar, "count")
        note = entry.problem or ("no price" if entry.readable and not entry.needs_read
                                 and entry.samples_per_s is not None
                                 and entry.samples_per_dollar is None else "")
        return [MARK if entry.path in self.marked else "", entry.state, entry.name,
                entry.instance or MISSING, started,
                fmt.short_duration(entry.duration_s) if entry.readable else "", rate,
                per_dollar, note]

    def cells(self, entry: SessionEntry) -> list[Text]:
        mark, state, name, instance, started, took, rate, per_dollar, note = self.texts(entry)

        def right(value: str) -> Text:
            return Text(value, justify="right", no_wrap=True)

        return [Text(mark, style="bold"),
                Text(state, style=_STATE_STYLES.get(state, ""), no_wrap=True),
                safe_text(name), safe_text(instance), Text(started, no_wrap=True),
                right(took), right(rate), right(per_dollar),
                safe_text(note, "red" if not entry.readable else "")]

    def _show_title(self, shown: int) -> None:
        total = len(self.entries)
        count = f"{total} session{'s' if total != 1 else ''}"
        if shown != total:
            count = f"{shown} of {count} (filter: {self.filter_text})"
        marked = f", {len(self.marked)} marked" if self.marked else ""
        self.query_one("#home-title", Static).update(Content.assemble(
            ("neurotui  ", "bold"), (count + marked, LABEL), " in ",
            visible_text(str(self.root))))

    def _show_detail(self) -> None:
        detail = self.query_one("#home-detail", Static)
        if not self.entries:
            detail.update(Content.styled(
                f"no sessions under {visible_text(str(self.root))}: `neurotui run -- COMMAND` "
                "records one (or --sessions-dir names another folder)", MUTED))
            return
        path = self.highlighted()
        entry = self.entries.get(path) if path is not None else None
        if entry is None:
            detail.update(Content.styled("no session matches the filter", MUTED))
            return
        lines = [Content.assemble((visible_text(entry.name), "bold"), "  ",
                                  (visible_text(entry.command), MUTED))]
        if entry.problem:
            lines.append(Content.styled(visible_text(entry.problem),
                                        ERROR if not entry.readable else MUTED))
        keys = ("enter opens it live" if entry.running else "enter replays it") \
            if entry.readable else "it cannot be opened; d deletes it"
        lines.append(Content.styled(keys + "; space marks, c compares the marked", MUTED))
        detail.update(Content("\n").join(lines))

    def highlighted(self) -> Path | None:
        table = self.query_one("#home-table", DataTable)
        if not table.row_count or not table.is_valid_row_index(table.cursor_row):
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else Path(key)

    # -- events and keys ------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        entry = self.entries.get(Path(key)) if key is not None else None
        if entry is None:
            return
        if not entry.readable:
            self.notify(f"cannot open {visible_text(entry.name)}: {entry.problem}",
                        severity="error", markup=False)
            return
        self.post_message(OpenSession(entry.path, live=entry.running))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key not in SORT_KEYS:
            return
        if key == self.sort_key:
            self.descending = not self.descending
        else:
            self.sort_key, self.descending = key, False
        self.redraw()

    def action_sort(self) -> None:
        self.sort_key = SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)]
        self.descending = self.sort_key in ("started", "duration", "samples_per_s",
                                            "samples_per_dollar")  # biggest first
        self.redraw()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.redraw()

    def action_filter(self) -> None:
        self.query_one("#home-filter", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#home-table", DataTable).focus()

    def action_clear_filter(self) -> None:
        filter_input = self.query_one("#home-filter", Input)
        if filter_input.value:
            filter_input.value = ""  # redraws through Input.Changed
        self.query_one("#home-table", DataTable).focus()

    def action_mark(self) -> None:
        path = self.highlighted()
        if path is None:
            return
        self.marked ^= {path}
        table = self.query_one("#home-table", DataTable)
        table.update_cell(str(path), "mark", Text(MARK if path in self.marked else "",
                                                  style="bold"))
        self._show_title(table.row_count)
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1, animate=False)

    def action_compare(self) -> None:
        # Imported here: comparing loads whole sessions with pandas, the list never does.
        from neurotui.ui.screens.compare import CompareScreen

        shown = [e.path for e in self.shown() if e.readable]
        chosen = [p for p in shown if p in self.marked]
        if not chosen:
            path = self.highlighted()
            if path is None or path not in shown:
                self.notify("mark sessions with space first", markup=False)
                return
            chosen = [path]
        self.app.push_screen(CompareScreen(self.root, chosen=chosen))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "delete" and not self._control():
            return None  # greyed: served read-only
        return super().check_action(action, parameters)

    def _control(self) -> bool:
        """False where `neurotui serve` is read-only (the app's `control`): no deleting."""
        return bool(getattr(self.app, "control", True))

    def on_key(self, event: events.Key) -> None:
        if event.key in ("d", "delete") and not self._control() and \
                not isinstance(self.focused, Input):
            # A greyed binding does not run: say why here, as the dashboard does for S.
            self.notify("deleting is off: this view is served read-only (`neurotui serve` "
                        "without --allow-control)", severity="warning", markup=False)

    def action_delete(self) -> None:
        path = self.highlighted()
        entry = self.entries.get(path) if path is not None else None
        if entry is None:
            return
        if entry.running:
            self.notify(f"{visible_text(entry.name)} is running: stop it first (S on its "
                        "dashboard, or `neurotui stop`)", severity="error", markup=False)
            return
        self.app.push_screen(ConfirmDelete(entry.name, str(entry.path)),
                             lambda yes: self._delete(entry.path) if yes else None)

    def _delete(self, path: Path) -> None:
        try:  # asked again: it may have been started since the row was read
            running = status_of(load_meta(path)).running
        except SessionFormatError:
            running = False  # corrupt or no meta.json: nothing of it can be running
        if running:
            self.notify(f"{visible_text(path.name)} is running now: not deleted",
                        severity="error", markup=False)
            self.reload()
            return
        self._delete_worker(path)

    @work(thread=True, group="home-delete", exit_on_error=False)
    def _delete_worker(self, path: Path) -> None:
        try:
            shutil.rmtree(path)
        except OSError as exc:
            self.app.call_from_thread(self.notify, f"could not delete {path.name}: {exc}",
                                      severity="error", markup=False)
        else:
            self.app.call_from_thread(self.notify, f"deleted {path.name}", markup=False)
        self.app.call_from_thread(self.reload)
