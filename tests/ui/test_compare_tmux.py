"""`neurotui compare` in a real terminal (tmux) of 80, 100, 120 and 200 columns, COLUMNS unset:
the width is the tty's, and no line wraps (tmux's joined capture would show a wrapped line as
one longer than the terminal)."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterator

import pytest

from tests.ui.test_tmux import REPO, Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    term = Tmux("cmp" + request.node.name[-6:].replace("[", "_").replace("]", ""))
    yield term
    term.close()


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_compare_fits_the_terminal_it_runs_in(tmux: Tmux, width: int) -> None:
    command = [sys.executable, "-m", "neurotui", "--sessions-dir", str(REPO / "sessions"),
               "compare", "sample-cpu", "sample-xla", "--price", "sample-cpu=1.34375",
               "--price", "sample-xla=0.7582"]
    tmux.start(f"cd {shlex.quote(str(REPO))} && {shlex.join(command)}", cols=width, rows=80)
    tmux.wait(lambda s: "[exited]" in s, 60, "compare to finish")
    # -J: wrapped lines joined into the line that was printed.
    printed = tmux.tmux("capture-pane", "-p", "-J", "-t", tmux.target).splitlines()
    printed = [line.rstrip() for line in printed[:printed.index("[exited]")]]
    assert max(len(line) for line in printed) <= width, "\n".join(printed)
    if width < 200:  # turned: a row per figure, a column per session
        assert printed[0].split() == ["SESSION", "sample-cpu-gloo", "sample-xla-cpu"]
        figures = {line.split("  ")[0].strip(): line.split()[-2:] for line in printed[1:20]
                   if line and not line.startswith(" ")}
        assert figures["SAMPLES/$"] == ["6,893,902", "4,704,010"]
        assert figures["RELATIVE"] == ["1.00x", "0.68x"]
        assert figures["PRICED AT"] == ["--price", "--price"]
    else:  # room for most columns: a row per session, the deciding columns first
        assert printed[0].split()[:9] == ["SESSION", "INSTANCE", "STEP", "MEDIAN",
                                          "SAMPLES/S", "PRICE/H", "SAMPLES/$", "RELATIVE",
                                          "PRICED"]
        assert printed[1].split()[:7] == ["sample-cpu-gloo", "n/a", "11.8", "ms", "2,573.2",
                                          "$1.34375", "6,893,902"]
    said = " ".join(" ".join(printed).split())
    assert "Better deal: sample-cpu-gloo, 1.47x (+47%) the samples per dollar of " \
           "sample-xla-cpu: 6.9M vs 4.7M, at $1.34375/h (--price) vs $0.7582/h (--price)." \
           in said
