"""The one app of plain `neurotui`: the home screen (every session of the folder) and the
dashboard, replay and compare views it opens, in one Textual App (a browser served by
textual-serve runs exactly one App per process).

It is the replay-capable dashboard (ReplayApp) started without a session or with one: Enter
on the home screen binds a session to it, live when it runs, in replay when it ended; `l`
leaves the session and shows the home screen again. Started on a running session (as
`neurotui` with one running, `attach` and `run` do), the dashboard comes first and `l` still
leads home.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from neurotui.session.meta import SessionFormatError
from neurotui.ui.app import after_run, env_interval
from neurotui.ui.replay import ReplayApp
from neurotui.ui.screens.help import HELP, REPLAY_HELP, HelpScreen
from neurotui.ui.screens.home import HomeScreen, OpenSession

HOME_HELP = """\
neurotui home: every session of the sessions folder (it reads their meta.json only).

Keys
  enter       open the session: a running one live, a finished one in replay
              (l returns here from its dashboard)
  space       mark / unmark the session;  c  compare the marked ones (or the highlighted)
  d, delete   delete the session's folder (asks first; never a running session)
  s           sort by the next column (or click a header);  r  reverse the order
  /           filter: words of the name, state, instance or command;  escape  clears it
  t  a        light / dark theme;  ASCII mode
  q, ctrl+q   quit (sessions go on running)

Columns
  STATE       running, completed, crashed, stopped, lost (its supervisor died without an
              end record), ended (adopted: no exit code); unreadable and broken sessions
              are listed with their problem under NOTE
  SAMPLES/S   steady samples/s (warm-up steps left out), as `neurotui compare` shows
  SAMPLES/$   steady samples per dollar; n/a without a recorded price
  A finished run's figures come from the summary in its meta.json; others are read from
  its steps after the list shows ("reading...").
"""

SESSIONS_KEY = "l: back to the home screen, every session of the folder\n\n"


class NeurotuiApp(ReplayApp):
    BINDINGS = [Binding("l", "sessions", "Sessions", show=False)]
    # Out of the footer, as h and b: at 80 columns it would push Help off.

    def __init__(self, root: Path, session_dir: Path | None = None, *, replay: bool = False,
                 interval_s: float | None = None, ascii_mode: bool | None = None,
                 theme: str | None = None, **replay_options: object) -> None:
        """`root`: the sessions folder of the home screen; `session_dir`: a session to show
        first (in replay when `replay`, with ReplayApp's speed, at and paused)."""
        super().__init__(session_dir, interval_s=env_interval() if interval_s is None
                         else interval_s, ascii_mode=ascii_mode, theme=theme,
                         **replay_options)  # type: ignore[arg-type]
        self.root = Path(root)
        self.replaying = replay and session_dir is not None
        self.first_session = None if session_dir is None else Path(session_dir)

    def get_default_screen(self) -> Screen[None]:
        # The home screen is always at the bottom: started on a session, its dashboard is
        # pushed over it at once, and `l` pops back to it.
        return HomeScreen(self.root)

    def on_mount(self) -> None:
        # DashboardApp's on_mount (which starts following) runs after this one: Textual calls
        # each class's handler itself, and calling it here too started following twice.
        if self.following:
            self._dashboard = self.make_dashboard()
            self.push_screen(self._dashboard)

    def on_open_session(self, message: OpenSession) -> None:
        self.show_session(message.path, replay=not message.live)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "sessions":
            return self.following
        return super().check_action(action, parameters)

    def action_sessions(self) -> None:
        """Leave the session for the home screen (its views close; training goes on)."""
        self.leave_session()
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.refresh_bindings()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if self.following:
            yield SystemCommand("Sessions", "Back to the home screen: every session of the "
                                "folder", self.action_sessions)

    def exit_code_for_cli(self) -> int:
        """The training's exit code, as the dashboard returns it, only for the session the
        command was started on (`attach` and `run` return it); else 0."""
        if not self.following or self.session_dir != self.first_session:
            return 0
        return super().exit_code_for_cli()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        if not self.following:
            text = HOME_HELP
        else:
            text = SESSIONS_KEY + (REPLAY_HELP if self.replaying else "") + HELP
        self.push_screen(HelpScreen(text))


def run_app(root: Path, session_dir: Path | None = None, *, replay: bool = False,
            interval_s: float | None = None, ascii_mode: bool | None = None,
            theme: str | None = None, job: str | None = None,
            **replay_options: object) -> int:
    """The home screen (or `session_dir`'s dashboard, or its replay, or job `job`'s
    dashboard, first) until the user quits; returns as run_dashboard does. Blocking."""
    try:
        app = NeurotuiApp(root, session_dir, replay=replay, interval_s=interval_s,
                          ascii_mode=ascii_mode, theme=theme, **replay_options)
        if job is not None:
            app.bind_job(root, job, replay=replay)
            app.first_session = app.session_dir
    except SessionFormatError as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    return after_run(app, app.run())
