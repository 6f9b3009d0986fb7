"""The dashboard app: follows one session folder and shows it; never touches the job itself
except for a confirmed stop.

Data flow: a thread worker, re-armed by a timer only after it finished (so polls never
overlap and a slow disk never freezes the UI), asks the model for a fresh `DashboardState`
and the log follower for new lines, and posts them as messages. `StateUpdated` messages
coalesce: if the UI falls behind, it draws only the newest.

Replay-ready: the app takes the clock and the model; a replay passes a recorded clock and a
reader positioned in time, and the same screens show it.
"""

from __future__ import annotations

import argparse
import contextlib
import locale
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from neurotui.live import heap
from neurotui.live.budget import FramePacer
from neurotui.live.clock import Clock, WallClock
from neurotui.live.logtail import LAUNCHER, STREAMS, LogChoice, ShownLogFollower
from neurotui.live.memory import Trimmer
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.terminal import control_allowed
from neurotui.ui.driver import quiet
from neurotui.ui.messages import JobActionAnswered, LogLines, StateUpdated
from neurotui.ui.screens.confirm_stop import ConfirmStop
from neurotui.ui.screens.help import HelpScreen
from neurotui.ui.themes import DARK, LIGHT, THEMES

# The dashboard's own modules load when a session is bound, not with the app: the home screen,
# which has none yet, draws its first frame without them. Its screens and widgets need no
# numpy; the live model and the reader (numpy among their modules: a quarter of a second) load
# in the poll worker, which makes the model after the dashboard's first frame.
if TYPE_CHECKING:
    from neurotui.live.joblogs import JobLogFollower
    from neurotui.live.model import DashboardModel, DashboardState
    from neurotui.session.status import SessionStatus
    from neurotui.ui.screens.dashboard import DashboardScreen

FRAME_CPU_SHARE = 0.025
"""Frames are spaced so as to take at most this share of one core (each frame's whole cost:
reading, working out, drawing). Runs of one node stay at the interval; a job of 64 nodes x
32 ranks, a frame of about 0.1 s of CPU, refreshes every 4 s or so."""
PROFILE_STEPS = 5
"""Steps `p` profiles in each rank (`neurotui profile --steps N` for another count)."""
DEFAULT_INTERVAL_S = 2.0
"""A refresh every 2 s (btop's default): enough to follow training, cheap over SSH and on a
busy host. Keys answer at once regardless; `--interval` changes it."""


def want_ascii() -> bool:
    """ASCII mode when asked (NEUROTUI_ASCII=1) or when the terminal's encoding is not UTF-8."""
    flag = os.environ.get("NEUROTUI_ASCII")
    if flag is not None:
        return flag not in ("", "0", "no", "false")
    encoding = getattr(sys.stdout, "encoding", None) or locale.getpreferredencoding(False)
    return "utf" not in encoding.lower()


class DashboardApp(App[int]):
    CSS_PATH = Path(__file__).with_name("dashboard.tcss")  # absolute: works as __main__ too
    TITLE = "neurotui"
    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="close the dashboard; training keeps running"),
        Binding("S", "stop_training", "Stop training"),
        Binding("A", "adopt", "Adopt job",
                tooltip="its supervisor died: start a new one that takes the job over"),
        Binding("c", "compare", "Compare"),
        Binding("p", "profile", "Profile", show=False,
                tooltip="profile the next steps inside every rank (asks first)"),
        # Out of the footer (at 80 columns it would push Help off): the host panel's title
        # names the key, as do the help and the command palette.
        Binding("h", "cpu_heat", "CPU heat map", show=False),
        Binding("b", "breakdown", "Step breakdown", show=False),
        Binding("left_square_bracket", "rank(-1)", "Rank", key_display="["),
        Binding("right_square_bracket", "rank(1)", "Rank", key_display="]"),
        Binding("e", "toggle_stream", "stdout/stderr", show=False),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("t", "toggle_theme", "Theme", show=False),
        Binding("a", "toggle_ascii", "ASCII", show=False),
        Binding("z", "zoom", "Zoom", show=False),
        Binding("escape", "unzoom", "Unzoom", show=False),
    ]
    ascii_mode: reactive[bool] = reactive(False)
    dashboard_actions = frozenset({"stop_training", "adopt", "compare", "rank", "toggle_stream",
                                   "zoom", "unzoom", "cpu_heat", "breakdown"})
    """Keys that act on the dashboard: they rest while another screen is over it."""
    control_actions = frozenset({"stop_training", "adopt"})
    """Keys that act on the job: refused where `neurotui serve` is read-only."""

    def __init__(self, session_dir: Path | None, *, clock: Clock | None = None,
                 model: DashboardModel | None = None, interval_s: float = DEFAULT_INTERVAL_S,
                 ascii_mode: bool | None = None, theme: str | None = None,
                 status: Callable[[], SessionStatus] | None = None) -> None:
        """`session_dir` None: no session yet (the home screen's app opens one later with
        `show_session`)."""
        super().__init__()
        self.interval_s = interval_s
        self._trimmer = Trimmer()
        self._pacer = FramePacer(FRAME_CPU_SHARE)
        self._poll_timer: Timer | None = None
        self._first_read_timer: Timer | None = None
        self._poll_soon = False
        self._polling = False
        self._unmade: Callable[[], DashboardModel] | None = None
        """Makes the bound session's model, until its first poll did (`model` unset)."""
        self._dashboard: DashboardScreen | None = None
        self.following = False
        """Whether a session is bound: its attributes below are set only then."""
        self.job: str | None = None
        """The id of the job of many nodes bound (bind_job); None: one session."""
        if session_dir is not None:
            self.bind_session(session_dir, clock=clock, model=model, status=status)
        for t in THEMES:
            self.register_theme(t)
        self.theme = theme or (LIGHT.name if os.environ.get("NEUROTUI_THEME") == "light"
                               else DARK.name)
        self._ascii_default = want_ascii() if ascii_mode is None else ascii_mode
        self.control = control_allowed()  # False: read-only, served to a browser

    def bind_session(self, session_dir: Path, *, clock: Clock | None = None,
                     model: DashboardModel | None = None,
                     status: Callable[[], SessionStatus] | None = None) -> None:
        """The state of following one session: set anew for each session the app opens.

        Without `model`, the session's live model is made by its first poll, in the worker
        (`self.model` is unset until then); meta.json is read here all the same, so that a
        session that cannot be read raises SessionFormatError before the app runs."""
        self.session_dir = Path(session_dir)
        self.job = None
        self.clock = clock or WallClock()
        self.forget_model()
        if model is not None:
            self.model = model
        else:
            load_meta(self.session_dir)
            self._unmade = partial(live_model, self.session_dir, self.clock, status)
        self.follower: ShownLogFollower | JobLogFollower = ShownLogFollower(self.session_dir)
        self.log_choice: LogChoice | None = None  # None: let the follower pick
        self.last_state: DashboardState | None = None
        self.following = True

    def bind_job(self, root: Path, job_id: str, *, clock: Clock | None = None,
                 throttle: bool = True) -> None:
        """Follow a job of many nodes (every node's part under `root`) as one run;
        `throttle` as DashboardModel's."""
        from neurotui.live.joblogs import JobLogFollower
        from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
        from neurotui.session.jobreader import JobReader

        reader = JobReader(root, job_id, telemetry_history=TELEMETRY_HISTORY)
        clock = clock or WallClock()
        self.bind_session(reader.parts[0].dir, clock=clock,
                          model=DashboardModel(reader, clock, throttle=throttle))
        self.job = job_id
        self.follower = JobLogFollower(lambda: self.model.reader)  # (a reset replaces it)

    def show_session(self, session_dir: Path) -> None:
        """Open a session's dashboard over the screen shown now (the home screen's Enter)."""
        self.bind_session(session_dir)
        self._dashboard = self.make_dashboard()
        self._dashboard.set_class(self.ascii_mode, "-ascii")
        self.push_screen(self._dashboard)
        self._start_following()

    def leave_session(self) -> None:
        """Stop following (back to the home screen). A poll still running ends unseen: its
        frame belongs to a model no longer bound (refresh_frame checks)."""
        for timer in (self._poll_timer, self._first_read_timer):
            if timer is not None:
                timer.stop()
        self._poll_timer = self._first_read_timer = None
        self._poll_soon = False
        self._dashboard = None
        self.following = False
        # What it read goes with it (a replayed recording can hold hundreds of MB).
        self.forget_model()
        self.last_state = None

    def forget_model(self) -> None:
        """No model bound (none made yet, or the session left)."""
        self._unmade = None
        with contextlib.suppress(AttributeError):
            del self.model
        heap.release()  # (what the session's first frame set aside goes with it)

    # -- set-up --------------------------------------------------------------------------
    def get_driver_class(self) -> type[Driver]:
        return quiet(super().get_driver_class())  # an input thread that sleeps until input

    def get_default_screen(self) -> Screen[None]:
        self._dashboard = self.make_dashboard()
        return self._dashboard

    def make_dashboard(self) -> DashboardScreen:
        from neurotui.ui.screens.dashboard import DashboardScreen

        return DashboardScreen(id="dashboard", job=self.job is not None)

    @property
    def dashboard(self) -> DashboardScreen:
        if self._dashboard is None:
            raise LookupError("no dashboard screen yet")
        return self._dashboard

    def on_mount(self) -> None:
        self.ascii_mode = self._ascii_default
        if self.following:
            self._start_following()

    def on_unmount(self) -> None:
        heap.release()  # (an app run in a process that goes on: tests, the home app's)

    def _start_following(self) -> None:
        if self._unmade is not None:
            # Its first poll makes the model (a quarter of a second of imports, which would
            # share the CPU with drawing): once the first frame is drawn, footer included
            # (Textual's footer draws its keys a refresh after the screen's first).
            self.call_after_refresh(self.call_after_refresh, self._poll)
        else:
            self._poll()
        self._first_read_timer = self.set_interval(0.5, self._show_first_read)

    def _show_first_read(self) -> None:
        """Until the first frame, how far the first read has got (seconds on a long run)."""
        if not self.following:
            return  # a tick due as the session was left
        if self.last_state is not None:
            if self._first_read_timer is not None:
                self._first_read_timer.stop()
            return
        from textual.css.query import NoMatches

        from neurotui.ui.widgets.header import SessionHeader

        model = getattr(self, "model", None)  # (none before the first poll made it)
        progress = None if model is None else getattr(model.reader, "first_read", None)
        # No dashboard, or one whose header is not there (not composed yet, or taken down as
        # the app ends: CI met a tick then): nothing to show it on.
        with contextlib.suppress(LookupError, NoMatches):
            self.dashboard.query_one(SessionHeader).show_first_read(progress)

    def watch_ascii_mode(self, value: bool) -> None:
        try:
            screen = self.dashboard
        except LookupError:
            return
        screen.set_class(value, "-ascii")
        screen.redraw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.dashboard_actions and self.screen is not self._dashboard:
            # Over the compare screen, help or a prompt, `S` or `]` would act on a view out
            # of sight (and space or `g` are the other screen's own keys).
            return False
        if action == "adopt" and (self.job is not None or not (  # only for a job running on
                self.last_state is not None  # without its supervisor
                and self.last_state.header.status == "unsupervised")):
            return False
        if action in self.control_actions and not self.control:
            return None  # greyed in the footer; on_key says why a press does nothing
        return super().check_action(action, parameters)

    def on_key(self, event: events.Key) -> None:
        """Read-only: a key bound to stopping or adopting says why it does nothing."""
        bound = self.active_bindings.get(event.key)
        if not self.control and bound is not None and \
                bound.binding.action in self.control_actions:
            self.refuse_control()

    def refuse_control(self) -> bool:
        """Whether job control is off here (and if so, a note saying so)."""
        if not self.control:
            self.notify("Control is off: this dashboard is served read-only (`neurotui serve` "
                        "without --allow-control). Training goes on.", severity="warning",
                        markup=False)
        return not self.control

    # -- polling -------------------------------------------------------------------------
    def _poll(self) -> None:
        if not self.following:
            return
        if self._polling:
            self._poll_soon = True
            return
        self._polling = True
        self._refresh_worker(self.log_choice)

    @work(thread=True, group="poll", exit_on_error=False)
    def _refresh_worker(self, wanted: LogChoice | None) -> None:
        self.refresh_frame(wanted)

    def refresh_frame(self, wanted: LogChoice | None) -> None:
        """One frame, in the poll worker's thread: the model's state and new log lines."""
        model = getattr(self, "model", None)  # gone once the session is left
        if model is None:
            model = self._make_model()
            if model is None:
                return
        state = model.refresh()
        if not self.following or model is not getattr(self, "model", None):
            return  # the session was left (or another opened) while it was read
        self.post_message(StateUpdated(state, model))
        self._trimmer.maybe_trim(now=self.model.fetched_table)
        lines, reset = self.follower.poll(wanted, state.now, self.log_limits())
        if lines or reset:
            choice = self.follower.choice or LogChoice()
            path = self.follower.path
            # (A job's logs are named from the sessions folder: the node's folder first.)
            base = self.session_dir if self.job is None else self.session_dir.parent
            shown = None if path is None else (
                str(path.relative_to(base)) if path.is_relative_to(base) else str(path))
            if path is not None and not path.exists():
                shown = None
            self.post_message(LogLines(choice, lines, reset, shown, model))

    def _make_model(self) -> DashboardModel | None:
        """In the worker: the bound session's model, made by its first poll; None when none
        is to be made (the session was left)."""
        make = self._unmade
        if make is None:
            return None
        model = make()
        if make is not self._unmade:
            return None  # left (or another session bound) while it was made
        self.model, self._unmade = model, None
        return model

    def log_limits(self) -> Mapping[str, int] | None:
        """How far each log may be read (a replay's cursor); None: to the end."""
        return None

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "poll" or event.state not in (
                WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        self._polling = False
        if event.state == WorkerState.ERROR:
            # A dashboard bug must not take the view down: say so, and keep following.
            self.notify(f"refresh failed: {event.worker.error!r}", severity="error",
                        timeout=10, markup=False)
        delay = 0.0 if self._poll_soon else self.next_frame_in()
        self._poll_soon = False
        if self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None
        if delay <= 0:  # (a zero-interval timer divides by zero when it runs late)
            self.call_later(self._poll)
        else:
            self._poll_timer = self.set_timer(delay, self._poll)

    def next_frame_in(self) -> float:
        """Seconds until the next frame: the interval, or longer where a frame costs more
        than FRAME_CPU_SHARE of a core (a replay plays faster)."""
        model = getattr(self, "model", None)
        big_read = model is not None and model.fetched_table  # (an attach's first read)
        return self._pacer.next_in(self.interval_s, count=not big_read)

    def poll_now(self) -> None:
        """A frame as soon as possible (after a key changed what to show)."""
        if self._poll_timer is not None:
            self._poll_timer.stop()
        self._poll()

    def _for_bound_session(self, message: StateUpdated | LogLines) -> bool:
        """Whether `message` was read for the session shown now: not one sent before it was
        left (and another perhaps opened since)."""
        return self._dashboard is not None and \
            message.source is getattr(self, "model", None)

    def on_state_updated(self, message: StateUpdated) -> None:
        from neurotui.ui.screens.breakdown import BreakdownScreen
        from neurotui.ui.screens.cpu_heat import CpuHeatScreen

        if not self._for_bound_session(message):
            return
        if not self.dashboard.children:
            return  # its panels not composed yet, or taken down as the app ends
        before = self.last_state
        self.last_state = message.state
        self.dashboard.show_state(message.state)
        if before is None:  # the session's first frame: what it built stays (heap.py)
            self.call_after_refresh(heap.settle)
        if isinstance(self.screen, CpuHeatScreen):  # it follows the frames too
            self.screen.show_state(message.state)
        if isinstance(self.screen, BreakdownScreen):  # so does the step breakdown
            self.screen.show_state(message.state)
        if before is None or before.header.status != message.state.header.status:
            self.refresh_bindings()  # keys that depend on it (adopt) come and go

    def on_log_lines(self, message: LogLines) -> None:
        from neurotui.ui.widgets.logs import LogPanel

        if not self._for_bound_session(message):
            return
        if self.log_choice is not None and message.choice != self.log_choice:
            return  # lines of a choice already left behind
        panels = self.dashboard.query(LogPanel)
        if not panels:
            return  # not composed yet, or taken down as the app ends
        panel = panels.first()
        if message.reset or panel.choice != message.choice:
            panel.set_choice(message.choice, message.path, len(self.follower.ranks))
        panel.add_lines(message.lines, reset=message.reset)

    # -- actions -------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Close the dashboard only: the supervisor owns the job, which keeps running."""
        self.exit(self.exit_code_for_cli())

    def exit_code_for_cli(self) -> int:
        """The training's exit code once it ended (as --headless returns), else 0."""
        if not self.following:
            return 0
        model = getattr(self, "model", None)
        try:  # (no model yet: quit before the first poll made it)
            meta = model.reader.meta if model is not None else load_meta(self.session_dir)
        except SessionFormatError:
            return 0
        ended = meta.get("exit")
        if not isinstance(ended, dict):
            return 0
        code = ended.get("code")
        return code if isinstance(code, int) and code >= 0 else 1

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_compare(self) -> None:
        """Compare this session with others of its sessions folder, side by side."""
        # Imported here: comparing loads whole sessions with pandas, which following one
        # never needs (a third of a second and 70 MB of every dashboard's start).
        from neurotui.ui.screens.compare import CompareScreen

        if not isinstance(self.screen, CompareScreen):
            self.push_screen(CompareScreen(self.session_dir.parent, chosen=[self.session_dir]))

    def action_cpu_heat(self) -> None:
        """The CPU heat map on the whole screen (escape returns)."""
        from neurotui.ui.screens.cpu_heat import CpuHeatScreen

        if not isinstance(self.screen, CpuHeatScreen):
            self.push_screen(CpuHeatScreen(self.last_state))

    def action_breakdown(self) -> None:
        """Where a step's time goes, on the whole screen (escape returns)."""
        from neurotui.ui.screens.breakdown import BreakdownScreen

        if not isinstance(self.screen, BreakdownScreen):
            self.push_screen(BreakdownScreen(self.last_state, replay=self.dashboard.replay))

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT.name if self.current_theme.dark else DARK.name

    def action_toggle_ascii(self) -> None:
        self.ascii_mode = not self.ascii_mode

    def action_zoom(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        elif screen.focused is not None:
            screen.maximize(screen.focused)

    def action_unzoom(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()

    def log_choices(self) -> list[LogChoice]:
        ranks = set(self.follower.ranks)
        if self.last_state is not None:
            ranks |= set(self.last_state.ranks)
        stream = (self.log_choice or self.follower.choice or LogChoice()).stream
        return [LogChoice(), *(LogChoice(r, stream) for r in sorted(ranks))]

    def action_rank(self, delta: int) -> None:
        choices = self.log_choices()
        current = self.log_choice or self.follower.choice or LogChoice()
        ranks = [c.rank for c in choices]
        i = ranks.index(current.rank) if current.rank in ranks else 0
        self.show_log(choices[(i + delta) % len(choices)])

    def action_toggle_stream(self) -> None:
        current = self.log_choice or self.follower.choice or LogChoice()
        if current.rank == LAUNCHER:
            self.notify("the launcher log has one stream; pick a rank with [ or ]")
            return
        other = STREAMS[(STREAMS.index(current.stream) + 1) % len(STREAMS)]
        self.show_log(LogChoice(current.rank, other))

    def show_log(self, choice: LogChoice) -> None:
        from neurotui.ui.widgets.logs import LogPanel

        self.log_choice = choice
        panel = self.dashboard.query_one(LogPanel)
        panel.set_choice(choice, None, len(self.follower.ranks))
        panel.clear()
        self.poll_now()

    def action_stop_training(self) -> None:
        if self.refuse_control():  # (the command palette, or any caller besides the key)
            return
        state = self.last_state
        if state is not None and not state.header.running:
            self.notify(f"training is not running ({state.header.status})")
            return
        name = state.header.session if state else self.session_dir.name
        self.push_screen(ConfirmStop(name), self._stop_confirmed)

    def _stop_confirmed(self, stop: bool | None) -> None:
        if stop:
            self.notify("stopping training...")
            self._stop_worker()
        else:
            self.notify("training keeps running")

    @work(thread=True, group="stop", exit_on_error=False)
    def _stop_worker(self) -> None:
        from neurotui.supervisor.direct_stop import stop_job

        if self.job is not None:
            self.post_message(JobActionAnswered(*self._stop_every_node()))
            return
        try:
            answer = stop_job(self.session_dir, by="dashboard")
        except Exception as exc:  # a session folder gone, unreadable meta.json, ...
            self.post_message(JobActionAnswered(False, f"could not stop the job: {exc}"))
            return
        message = ("stopped (no supervisor answered)" if answer.direct and answer.ok else
                   answer.message + ("; the dashboard shows when it ends" if answer.ok else ""))
        self.post_message(JobActionAnswered(answer.ok, message))

    def _stop_every_node(self) -> tuple[bool, str]:
        """A job of many nodes: a stop request in each running node's folder, which its own
        supervisor takes (as `neurotui stop JOB`)."""
        from neurotui.supervisor.requests import ask_running

        names = {part.dir: part.name for part in getattr(self.model.reader, "parts", ())}
        try:
            asked = ask_running(names, "stop", by="dashboard")
        except OSError as exc:
            return False, f"could not ask every node to stop: {exc}"
        if not asked:
            return False, "no node of the job is running"
        return True, (f"asked {', '.join(names[part] for part in asked)} to stop; the "
                      "dashboard shows when they end")

    def action_profile(self) -> None:
        if self.refuse_control():  # (it writes a request into the session folder)
            return
        state = self.last_state
        if state is not None and not state.header.running:
            self.notify(f"training is not running ({state.header.status}): nothing to profile")
            return
        if self.job is not None:
            self.notify("a job of many nodes: profile one node's part with `neurotui profile "
                        "SESSION`", markup=False)
            return
        from neurotui.ui.screens.confirm_profile import ConfirmProfile

        name = state.header.session if state else self.session_dir.name
        self.push_screen(ConfirmProfile(name, PROFILE_STEPS), self._profile_confirmed)

    def _profile_confirmed(self, profile: bool | None) -> None:
        if profile:
            self.notify(f"asking every rank to profile its next {PROFILE_STEPS} steps...")
            self._profile_worker()

    @work(thread=True, group="profile", exclusive=True, exit_on_error=False)
    def _profile_worker(self) -> None:
        from neurotui.profiling.take import CannotProfile, ProfileOptions, take_profile

        try:
            outcome = take_profile(self.session_dir, ProfileOptions(steps=PROFILE_STEPS))
        except (CannotProfile, OSError) as exc:
            self.post_message(JobActionAnswered(False, f"cannot profile: {exc}"))
            return
        folder = outcome.request.folder(self.session_dir)
        said = [f"traces of rank {', '.join(map(str, outcome.written))} in {folder}"
                if outcome.written else "no trace written"]
        said += [f"rank {rank} failed: {error}" for rank, error in outcome.failed.items()]
        if outcome.silent:
            said.append(f"rank {', '.join(map(str, outcome.silent))} did not answer")
        self.post_message(JobActionAnswered(outcome.complete, "; ".join(said)))

    def action_adopt(self) -> None:
        if self.refuse_control():
            return
        self.notify("starting a new supervisor for the job...")
        self._adopt_worker()

    @work(thread=True, group="adopt", exclusive=True, exit_on_error=False)
    def _adopt_worker(self) -> None:
        from neurotui.supervisor.spawn import adopt

        problem = adopt(self.session_dir)
        self.post_message(JobActionAnswered(problem is None, problem or (
            "a new supervisor adopted the job: telemetry and log steps are recorded again")))

    def on_job_action_answered(self, message: JobActionAnswered) -> None:
        self.notify(message.text, severity="information" if message.ok else "error",
                    markup=False)
        self._poll_soon = True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if not self.following:
            return  # no session (the home screen): nothing for these to act on
        if self.control:
            yield SystemCommand("Stop training", "Stop the job (asks first)",
                                self.action_stop_training)
        yield SystemCommand("Help", "Keys and what the panels show", self.action_help)
        yield SystemCommand("Compare sessions", "This run beside others, like the study's "
                            "table", self.action_compare)
        if self.control:
            yield SystemCommand("Profile", f"The next {PROFILE_STEPS} steps of every rank "
                                "under torch.profiler (asks first)", self.action_profile)
        yield SystemCommand("CPU heat map", "Every CPU over time on the whole screen, the "
                            "ranks' and DataLoader workers' CPUs marked", self.action_cpu_heat)
        yield SystemCommand("Step breakdown", "Where a step's time goes: data loading, "
                            "forward, backward... per rank and over time",
                            self.action_breakdown)
        yield SystemCommand("Light / dark", "Switch between the light and dark theme",
                            self.action_toggle_theme)
        yield SystemCommand("ASCII mode", "Draw charts with plain ASCII characters",
                            self.action_toggle_ascii)
        for choice in self.log_choices():
            yield SystemCommand(f"Log: {choice.label()}", "Show this log in the log panel",
                                lambda c=choice: self.show_log(c))


def live_model(session_dir: Path, clock: Clock,
               status: Callable[[], SessionStatus] | None = None) -> DashboardModel:
    """The live model of a session followed as it is recorded."""
    from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
    from neurotui.session.reader import SessionReader

    return DashboardModel(SessionReader(session_dir, telemetry_history=TELEMETRY_HISTORY),
                          clock, status=status)


def run_dashboard(session_dir: Path, *, interval_s: float | None = None,
                  ascii_mode: bool | None = None, theme: str | None = None) -> int:
    """Show the dashboard until the user quits; returns the training's exit code once it has
    ended, else 0 (training goes on). Blocking.

    Defaults come from the environment: NEUROTUI_INTERVAL (seconds between refreshes),
    NEUROTUI_ASCII=1 (no block characters), NEUROTUI_THEME=light.
    """
    session_dir = Path(session_dir)
    if interval_s is None:
        interval_s = env_interval()
    try:
        app = DashboardApp(session_dir, interval_s=interval_s, ascii_mode=ascii_mode,
                           theme=theme)
    except SessionFormatError as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    return after_run(app, app.run())


def after_run(app: DashboardApp, code: object) -> int:
    """Once the app closed: say how to come back to a run that goes on; the exit code."""
    state = app.last_state if app.following and not getattr(app, "replaying", False) \
        else None
    if state is not None and state.header.running:
        name = app.job or app.session_dir.name
        print(f"neurotui: dashboard closed; training goes on. `neurotui attach {name}` "
              f"follows it again, `neurotui stop {name}` stops it.", file=sys.stderr)
    if app.return_code not in (0, None):
        return app.return_code or 1
    return code if isinstance(code, int) else 0


def env_interval() -> float:
    try:
        value = float(os.environ.get("NEUROTUI_INTERVAL", DEFAULT_INTERVAL_S))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return min(60.0, max(0.1, value))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neurotui.ui.app",
                                     description="Show the neurotui dashboard for a session.")
    parser.add_argument("session_dir", type=Path)
    parser.add_argument("--interval", type=float, default=None,
                        help=f"seconds between refreshes (default {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--ascii", action="store_true", default=None)
    parser.add_argument("--theme", choices=[t.name for t in THEMES])
    args = parser.parse_args(argv)
    return run_dashboard(args.session_dir, interval_s=args.interval, ascii_mode=args.ascii,
                         theme=args.theme)


if __name__ == "__main__":
    sys.exit(main())
