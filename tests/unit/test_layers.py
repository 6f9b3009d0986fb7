"""The house's rooms keep to their floors (DESIGN.md): the Textual views live in ui/ and only
the command line reaches into them; every module of ui/ is a view (it imports Textual)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "neurotui"
COMMAND_LINE = {"cli.py", "compare/command.py"}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_below_the_views_imports_them() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "ui" or str(relative) in COMMAND_LINE:
            continue
        if any(name == "neurotui.ui" or name.startswith("neurotui.ui.")
               for name in imports(path)):
            offenders.append(str(relative))
    assert offenders == []


def test_every_module_of_ui_is_a_view() -> None:
    not_views = [str(path.relative_to(PACKAGE)) for path in (PACKAGE / "ui").rglob("*.py")
                 if path.name != "__init__.py"
                 and not any(name.split(".")[0] == "textual" for name in imports(path))]
    assert not_views == []


def test_the_figures_stand_on_their_own() -> None:
    """metrics/ is pure functions of the session's tables: nothing of neurotui but the
    shared thresholds, so summary, compare, export and the live model can all use it."""
    offenders = sorted(
        f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "metrics").rglob("*.py")
        for name in imports(path)
        if name.startswith("neurotui.") and not name.startswith(("neurotui.metrics",
                                                                 "neurotui.defaults")))
    assert offenders == []


def test_pricing_does_not_reach_up_into_compare() -> None:
    """pricing/ holds prices (tables, the live spot price, the instance's own); compare uses
    them, and the what-if prices that work on compare's sessions live in compare/."""
    offenders = sorted(
        f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "pricing").rglob("*.py")
        for name in imports(path)
        if name == "neurotui.compare" or name.startswith("neurotui.compare."))
    assert offenders == []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_when_loaded(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that loading `path` imports: its module-level imports (those
    under `if TYPE_CHECKING:` are for the type checker only; those in a function run later,
    when the function does)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody,
                              *(handler.body for handler in node.handlers)):
                    visit(block)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    found.add(submodule if submodule in modules else node.module)

    visit(ast.parse(path.read_text(), str(path)).body)
    return found & modules


def test_no_module_imports_itself_round_a_circle() -> None:
    """The import graph has no circle (issue #59): each module can be read, and loaded,
    after the ones it imports."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {name: imports_when_loaded(path, set(paths)) for name, path in paths.items()}
    circles = []
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> None:
        if name in trail:
            circles.append(" -> ".join([*trail[trail.index(name):], name]))
            return
        if name in done:
            return
        for imported in sorted(graph[name]):
            walk(imported, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])
    assert circles == []


def loaded_by(module: str, heavy: set[str]) -> list[str]:
    """Which of the `heavy` packages importing `module` loads, in a new interpreter."""
    import subprocess
    import sys

    return json.loads(subprocess.run(
        [sys.executable, "-c", f"import json, sys, {module}; "
         f"print(json.dumps(sorted({set(heavy)!r} & set(sys.modules))))"],
        capture_output=True, text=True, check=True, cwd=PACKAGE.parent).stdout)


def test_the_command_line_and_the_supervisor_start_without_pandas_or_textual() -> None:
    """`neurotui run` launches the job before anything imports pandas (a few hundred ms) or
    Textual; the supervisor runs beside training for days without either."""
    for module in ("neurotui.cli", "neurotui.supervisor.core"):
        assert loaded_by(module, {"pandas", "numpy", "textual"}) == [], module


def test_the_home_screen_starts_without_the_dashboards_modules() -> None:
    """Plain `neurotui` draws its sessions table before the live model, the reader and numpy
    load (issue #15: 500 sessions within 0.5 s); they load when a session is opened."""
    assert loaded_by("neurotui.ui.home_app", {"numpy", "pandas", "neurotui.live.model",
                                              "neurotui.session.reader",
                                              "neurotui.ui.screens.dashboard"}) == []


def test_the_dashboards_first_frame_needs_no_numpy() -> None:
    """`neurotui attach` draws the dashboard (its screen, panels and footer) before numpy, the
    live model and the reader load (issue #12: the first frame within 0.5 s of the command):
    the app checks meta.json only, and its poll worker makes the model after that frame."""
    import subprocess
    import sys

    code = """
import sys
from pathlib import Path
from neurotui.ui.app import DashboardApp
app = DashboardApp(Path("sessions") / "sample-cpu-gloo")
app.make_dashboard()
print(sorted({'numpy', 'pandas', 'neurotui.live.model', 'neurotui.session.reader'}
             & set(sys.modules)))
"""
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[]"


def test_attach_reaches_the_dashboard_without_numpy() -> None:
    """`neurotui attach` and `run` in a terminal hand the session to the app before anything
    loads numpy (the headless follower, which needs the live model, only when headless)."""
    import subprocess
    import sys

    code = """
import argparse, sys
from pathlib import Path
import neurotui.cli as cli
import neurotui.ui.home_app as home_app
seen = []
home_app.run_app = lambda *a, **k: seen.append(sorted(
    {'numpy', 'pandas', 'neurotui.live.model'} & set(sys.modules))) or 0
cli.on_a_terminal = lambda: True
args = argparse.Namespace(interval=None, ascii=None, theme=None)
cli.follow_session(Path("sessions") / "sample-cpu-gloo", args, headless=False)
print(seen)
"""
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[[]]"


def test_following_and_replaying_a_run_need_no_pandas() -> None:
    """The dashboard (run, attach) and replay work on numpy columns: pandas (a third of a
    second and 70 MB) is imported only by compare and export."""
    for module in ("neurotui.ui.app", "neurotui.ui.replay", "neurotui.headless"):
        assert loaded_by(module, {"pandas", "pyarrow"}) == [], module


def test_the_dashboard_and_replay_figures_are_computed_without_pandas() -> None:
    """Not only the imports: refreshing the live model over a recorded session (steps,
    compiles, phases, alerts) and replaying one leave pandas unloaded."""
    import subprocess
    import sys

    code = """
import sys
from pathlib import Path
from neurotui.live.clock import FixedClock
from neurotui.live.model import DashboardModel
from neurotui.session.reader import SessionReader
from neurotui.session.status import SessionStatus
from neurotui.session.timeline import Timeline
for name in ("sample-cpu-gloo", "sample-xla-cpu"):
    session = Path("sessions") / name
    reader = SessionReader(session, use_cache=False)
    end = float(reader.meta["ended_at"])
    model = DashboardModel(reader, FixedClock(end), throttle=False,
                           status=lambda: SessionStatus("exited", False, "done"))
    state = model.refresh()
    assert state.throughput.steady is not None, name
    view = Timeline(session).view()
    view.seek(end)
    replayed = DashboardModel(view, FixedClock(end), throttle=False,
                              status=lambda: SessionStatus("exited", False, "done")).refresh()
    assert replayed.throughput.steady == state.throughput.steady, name
print(sorted({'pandas', 'pyarrow'} & set(sys.modules)))
"""
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[]"
