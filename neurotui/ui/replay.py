"""`neurotui replay`: the live dashboard, driven by a recorded clock.

The same app, screens and model as following a live run; only the reader (a `TimelineView`
cut at the replay's cursor) and the clock (a `ReplayClock`) differ. The recording is loaded
in the poll worker, so the window opens at once and says "loading" meanwhile.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from neurotui import fmt
from neurotui.live.clock import ReplayClock
from neurotui.live.logtail import LogChoice
from neurotui.ui.app import DEFAULT_INTERVAL_S, DashboardApp, env_interval
from neurotui.ui.messages import LogLines
from neurotui.ui.screens.help import HELP, REPLAY_HELP, HelpScreen
from neurotui.ui.widgets.panel import LABEL, MUTED, VALUE

# As in app.py: the recording and the dashboard's modules load when a session is opened.
if TYPE_CHECKING:
    from neurotui.session.jobtimeline import JobTimeline, JobTimelineView
    from neurotui.session.status import SessionStatus
    from neurotui.session.timeline import Timeline, TimelineView
    from neurotui.ui.screens.dashboard import DashboardScreen

PLAYING_FRAME_S = 0.5
PLAYER_ACTIONS = frozenset({"play", "speed", "seek", "seek_start", "seek_end", "go_to"})
"""Seconds between frames while playing at a timed speed (paused: the app's interval)."""


@dataclass(frozen=True)
class ReplayPosition:
    """What the replay bar shows."""

    t: float
    start: float
    end: float
    playing: bool
    speed: float
    step: int | None = None


class ReplayMoved(Message):
    """The replay's cursor after a frame (or why there is none); only the newest matters."""

    def __init__(self, position: ReplayPosition | None, error: str = "") -> None:
        super().__init__()
        self.position = position
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplayMoved)


class ReplayBar(Widget):
    """One line: play state, speed, position in the run, a progress bar and the keys."""

    DEFAULT_CSS = """
    ReplayBar { height: 1; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self) -> None:
        super().__init__(id="replay-bar")
        self.position: ReplayPosition | None = None
        self.message = "loading the recording..."

    def show(self, position: ReplayPosition | None, message: str = "") -> None:
        self.position, self.message = position, message
        self.refresh()

    def render(self) -> Content:
        from neurotui.charts import bar  # (numpy: with the recording, not at start-up)

        p = self.position
        if p is None:
            return Content.styled(f" replay: {self.message}", MUTED)
        ascii_mode = bool(getattr(self.app, "ascii_mode", False))
        state = ("> " if ascii_mode else "▶ ") if p.playing else ("|| " if ascii_mode else "⏸ ")
        speed = "max" if math.isinf(p.speed) else f"{p.speed:g}x"
        span = p.end - p.start
        where = f"{fmt.duration(p.t - p.start)} / {fmt.duration(span)}"
        step = f"  step {p.step:,}" if p.step is not None else ""
        keys = "  space play  +/- speed  , . < > seek  g go to  end"
        left = Content.assemble(" ", (state + speed, VALUE), "  ", (where, VALUE),
                                (step, LABEL))
        room = self.content_size.width - left.cell_length - len(keys) - 2
        if room < 10:  # narrow: the bar goes first, then the keys
            keys = "  ? keys" if self.content_size.width - left.cell_length > 12 else ""
            room = self.content_size.width - left.cell_length - len(keys) - 2
        fraction = (p.t - p.start) / span if span > 0 else 1.0
        progress = ("  " + bar(fraction, room, ascii_mode)) if room >= 10 else ""
        return Content.assemble(left, progress, (keys, MUTED))


class GoTo(ModalScreen[float | None]):
    """Ask where to go: a time from the start or a step; stays open on a bad answer."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    GoTo { align: center middle; }
    GoTo > Vertical {
        width: 60; max-width: 100%; height: auto; padding: 1 2;
        border: thick $accent; background: $surface;
    }
    GoTo #goto-error { color: $text-error; height: auto; }
    """

    def __init__(self, timeline: Timeline) -> None:
        super().__init__()
        self.timeline = timeline

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Go to a time from the start (12:30, 1h5m, 90s) or a step (step 500)",
                         markup=False)
            yield Input(placeholder="12:30 or step 500", id="goto-input")
            yield Static("", id="goto-error", markup=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            from neurotui.session.timeline import parse_position

            t = parse_position(event.value, self.timeline.time_of_step, self.timeline.start)
        except ValueError as exc:
            self.query_one("#goto-error", Static).update(str(exc))
            return
        self.dismiss(t)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReplayApp(DashboardApp):
    BINDINGS = [
        Binding("space", "play", "Play/pause", priority=True),
        Binding("plus,equals_sign", "speed(1)", "Faster", key_display="+"),
        Binding("minus", "speed(-1)", "Slower", key_display="-"),
        Binding("comma", "seek(-1)", "Back", show=False),
        Binding("full_stop", "seek(1)", "Forward", show=False),
        Binding("less_than_sign", "seek(-10)", "Back 10%", show=False),
        Binding("greater_than_sign", "seek(10)", "Forward 10%", show=False),
        Binding("home", "seek_start", "Start", show=False, priority=True),
        Binding("end", "seek_end", "End", show=False, priority=True),
        Binding("g", "go_to", "Go to"),
    ]
    dashboard_actions = DashboardApp.dashboard_actions | {
        "play", "speed", "seek", "seek_start", "seek_end", "go_to"}

    def __init__(self, session_dir: Path | None, *, speed: float = 10.0, at: str | None = None,
                 paused: bool = False, interval_s: float = DEFAULT_INTERVAL_S,
                 ascii_mode: bool | None = None, theme: str | None = None) -> None:
        self.speed, self.start_at, self.start_paused = speed, at, paused
        self.replaying = session_dir is not None
        """False while the app follows a live session (the home screen's app opens running
        sessions live and finished ones in replay): the player's keys and frames rest."""
        self._no_recording()
        super().__init__(session_dir, interval_s=interval_s, ascii_mode=ascii_mode, theme=theme)

    def bind_session(self, session_dir: Path, **kwargs: Any) -> None:
        super().bind_session(session_dir, **kwargs)
        self._no_recording()

    def bind_job(self, root: Path, job_id: str, *, replay: bool = False,
                 **kwargs: Any) -> None:
        """A job of many nodes: followed live, or (`replay`) every node's recording on one
        cursor."""
        super().bind_job(root, job_id, **kwargs)
        self.replaying = replay

    def _no_recording(self) -> None:
        """Nothing loaded yet: the poll worker loads the bound session's recording."""
        self.timeline: Timeline | JobTimeline | None = None
        self.view: TimelineView | JobTimelineView | None = None
        self.replay_clock: ReplayClock | None = None
        self.open_error: str | None = None
        self.bar = ReplayBar()

    def leave_session(self) -> None:
        super().leave_session()
        self._no_recording()
        self.replaying = False

    def show_session(self, session_dir: Path, *, replay: bool = True) -> None:
        """Open a session: replayed from its start, or (`replay` False) followed live."""
        self.replaying = replay
        self.start_at, self.start_paused = None, False
        super().show_session(session_dir)

    def make_dashboard(self) -> DashboardScreen:
        if not self.replaying:
            return super().make_dashboard()
        from neurotui.ui.screens.dashboard import DashboardScreen

        return DashboardScreen(id="dashboard", bar=self.bar, replay=True,
                               job=self.job is not None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.replaying:
            if action in PLAYER_ACTIONS:
                return False
            return super().check_action(action, parameters)
        if action in ("stop_training", "adopt"):
            return False  # a recording has nothing to stop or adopt: hidden from the footer
        from neurotui.ui.screens.breakdown import BreakdownScreen
        from neurotui.ui.screens.cpu_heat import CpuHeatScreen

        if action in PLAYER_ACTIONS and isinstance(self.screen, CpuHeatScreen | BreakdownScreen):
            return True  # these follow the cursor: play and seek from them too
        return super().check_action(action, parameters)

    # -- frames (in the poll worker) --------------------------------------------------------
    def refresh_frame(self, wanted: LogChoice | None) -> None:
        if not self.replaying:
            super().refresh_frame(wanted)
            return
        if not self.following or (self.timeline is None and not self._open()):
            return
        clock, view = self.replay_clock, self.view
        if clock is None or view is None:
            return  # the session was left meanwhile
        # Going back in time, the model starts over by itself (TimelineView.take_steps).
        view.seek(clock.tick())
        super().refresh_frame(wanted)
        self.post_message(ReplayMoved(self.position()))

    def _open(self) -> bool:
        """Load the recording (once); on failure say why in the bar and stop trying."""
        from neurotui.live.model import DashboardModel
        from neurotui.session.jobtimeline import JobTimeline
        from neurotui.session.timeline import Timeline

        if self.open_error is not None:
            return False
        session_dir = self.session_dir
        try:
            timeline: Timeline | JobTimeline = (
                Timeline(session_dir) if self.job is None else
                JobTimeline(self.model.reader.root, self.job))  # type: ignore[union-attr]
        except Exception as exc:
            self.open_error = f"cannot read the recording: {exc}"
            self.post_message(ReplayMoved(None, self.open_error))
            return False
        if session_dir != self.session_dir or not self.following:
            return False  # left while it loaded: the session now bound opens on its own
        self.timeline, self.view = timeline, timeline.view()
        clock = ReplayClock(timeline.start, timeline.end, speed=self.speed)
        if self.start_at:
            try:
                clock.seek(self._position_of(self.start_at))
            except ValueError as exc:
                self.call_from_thread(self.notify, f"--at: {exc}", severity="error",
                                      markup=False)
        self.replay_clock = self.clock = clock

        status: Callable[[], SessionStatus] | None = None  # (a job's view says its nodes')
        if isinstance(timeline, Timeline):
            def status() -> SessionStatus:
                return timeline.status_at(clock.now())

        # throttle=False: each frame is the exact picture at its time, like the live view
        # would have shown it (no CPU budget spreads work over frames).
        self.model = DashboardModel(self.view, clock, throttle=False, status=status)
        if not self.start_paused:
            clock.play(True)
        return True

    def _position_of(self, text: str) -> float:
        from neurotui.session.timeline import parse_position

        assert self.timeline is not None
        if text.strip().lower() == "end":
            return self.timeline.end
        return parse_position(text, self.timeline.time_of_step, self.timeline.start)

    def log_limits(self) -> Mapping[str, int] | None:
        """Each log as far as it had been written at the cursor: the supervisor records that
        every few seconds (`log_offsets`). Older recordings lack it: their logs show whole."""
        if not self.replaying:
            return None
        timeline, view = self.timeline, self.view
        if timeline is None or view is None or not timeline.has_log_offsets:
            return None
        from neurotui.session.jobtimeline import JobTimelineView
        from neurotui.session.reader import LOG_OFFSETS

        if isinstance(view, JobTimelineView):  # each node's logs, under its folder's name
            return {f"{p.dir.name}/{name}": at for p in view.parts
                    for name, at in _written(p.reader.last(LOG_OFFSETS)).items()}
        return _written(view.last(LOG_OFFSETS))

    def on_log_lines(self, message: LogLines) -> None:
        """Names the panel; DashboardApp's handler then draws the lines. Textual calls each
        class's handler along the MRO by itself: calling it here too drew them twice."""
        from neurotui.ui.widgets.logs import LogPanel

        if self.replaying and self._dashboard is not None and self.timeline is not None \
                and not self.timeline.has_log_offsets:
            self.dashboard.query_one(LogPanel).label = "Log (whole run)"

    def position(self) -> ReplayPosition | None:
        clock = self.replay_clock
        if clock is None:
            return None
        return ReplayPosition(clock.now(), clock.start, clock.end, clock.playing, clock.speed)

    def next_frame_in(self) -> float:
        clock = self.replay_clock if self.replaying else None
        if clock is None or not clock.playing:
            return super().next_frame_in()
        return 0.0 if clock.fastest else min(self.interval_s, PLAYING_FRAME_S)

    def on_replay_moved(self, message: ReplayMoved) -> None:
        if not self.replaying or self._dashboard is None:
            return  # sent before the session was left
        self._show_position(message.position, message.error)

    def _show_position(self, position: ReplayPosition | None, error: str = "") -> None:
        if position is not None and self.last_state is not None:
            position = replace(position, step=self.last_state.header.step)
        self.bar.show(position, error)

    # -- keys ------------------------------------------------------------------------------
    def _moved(self) -> None:
        self._show_position(self.position())
        self.poll_now()

    def action_play(self) -> None:
        if self.replay_clock is not None:
            self.replay_clock.play()
            self._moved()

    def action_speed(self, delta: int) -> None:
        if self.replay_clock is not None:
            speed = self.replay_clock.faster(delta)
            self.notify("as fast as possible" if math.isinf(speed) else f"{speed:g}x",
                        timeout=1.5)
            self._moved()

    def seek_to(self, t: float) -> None:
        if self.replay_clock is not None:
            self.replay_clock.seek(t)
            self._moved()

    def action_seek(self, percent: int) -> None:
        clock = self.replay_clock
        if clock is not None:
            span = max(1.0, (clock.end - clock.start) * abs(percent) / 100)
            self.seek_to(clock.now() + math.copysign(span, percent))

    def action_seek_start(self) -> None:
        if self.replay_clock is not None:
            self.seek_to(self.replay_clock.start)

    def action_seek_end(self) -> None:
        if self.replay_clock is not None:
            self.replay_clock.play(False)
            self.seek_to(self.replay_clock.end)

    def action_go_to(self) -> None:
        if self.timeline is None:
            self.notify("still loading the recording")
            return

        def went(t: float | None) -> None:
            if t is not None:
                self.seek_to(t)

        self.push_screen(GoTo(self.timeline), went)

    def action_help(self) -> None:
        if not self.replaying:
            super().action_help()
        elif not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(REPLAY_HELP + HELP))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        if not self.replaying:
            yield from super().get_system_commands(screen)
            return
        for command in super().get_system_commands(screen):
            if command.title != "Stop training":
                yield command
        yield SystemCommand("Play / pause", "Play or pause the replay", self.action_play)
        yield SystemCommand("Go to", "Go to a time or a step", self.action_go_to)
        yield SystemCommand("Jump to the end", "Show the run as it ended",
                            self.action_seek_end)
        yield SystemCommand("Replay from the start", "Back to the start",
                            self.action_seek_start)

    def exit_code_for_cli(self) -> int:
        if not self.replaying:
            return super().exit_code_for_cli()
        return 0  # replaying says nothing about the run's exit


def run_replay(session_dir: Path, *, speed: float = 10.0, at: str | None = None,
               paused: bool = False, interval_s: float | None = None,
               ascii_mode: bool | None = None, theme: str | None = None) -> int:
    """Replay a recorded session in the dashboard until the user quits. Blocking. Display
    defaults come from the environment, as for run_dashboard."""
    app = ReplayApp(session_dir, speed=speed, at=at, paused=paused,
                    interval_s=env_interval() if interval_s is None else interval_s,
                    ascii_mode=ascii_mode, theme=theme)
    app.run()
    return app.return_code or 0


def _written(record: Mapping[str, Any] | None) -> dict[str, int]:
    """How far each log had been written, from a `log_offsets` record."""
    files = record.get("files") if record else None
    return {str(k): int(v) for k, v in files.items() if isinstance(v, int)} \
        if isinstance(files, dict) else {}
