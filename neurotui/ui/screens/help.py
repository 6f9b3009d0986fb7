"""What the panels mean and which keys do what."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
neurotui dashboard: follows one session folder live (it reads files, never the job).

Keys
  q, ctrl+q   close the dashboard; training keeps running (neurotui attach reopens it)
  S           stop training (asks first): SIGINT, then SIGTERM, then SIGKILL
  A           adopt the job, when its supervisor died: a new one records it again
  c           compare this run with other sessions side by side (escape returns)
  p           profile the next 5 steps inside every rank (asks first); the alerts
              panel says where the traces are (neurotui profile: the summary)
  h           CPU heat map on the whole screen: every CPU over time (escape returns)
  b           step breakdown: where a step's time goes, per rank and over time
              (escape returns)
  [ ]         previous / next rank in the log panel (the launcher log comes first)
  e           log panel: switch between the rank's stdout and stderr
  tab         move between panels;  z  zoom the focused panel;  escape  unzoom
  t           light / dark theme
  a           ASCII mode (no block characters; for terminals without them)
  ctrl+p      command palette;  ? or f1  this help

Panels
  header      session, instance, price per hour, elapsed, cost so far, phase; step,
              ETA and projected cost when the run has a step target
  Throughput  samples/s now (last 30 s) and steady (warm-up steps left out); step
              time over the whole run; per-rank median step time (recent steps),
              straggler marked; samples per dollar now, steady, and all-in (the
              whole bill so far, compile and idle time included)
  Accelerator per NeuronCore / GPU utilisation and memory, or why there is none;
              on Neuron: logical cores in use of the instance's, LNC, core version,
              each core's FLOPs utilisation against its dense peak (BF16 unless run
              --peak-dtype says), the physical split (trn2), memory by kind,
              execution errors, latency p50/p99, ECC
  Host        CPU heat map: a row per CPU (grouped, busiest shown, when they do not
              fit), time to the right, darker = busier, pinned (>= 90%) coloured;
              R / W: a rank / DataLoader worker last ran on a CPU of the row; memory, load
  Processes   the job's process tree with CPU% (of one core) and RSS
  Alerts      each with the numbers it was raised on
  Breakdown   (b) each step phase's share of the step (data loading, forward,
              backward, optimizer, as the script reports them with
              probe.step(phases=...)): median ms of the last 50 steady steps, the
              job and each rank, each phase's share over time, and the phase whose
              median grew >= 10% against the first steady steps (marked with ▲)
  Nodes       (a job of many nodes: `neurotui attach JOB`) a row per node: state, ranks,
              samples/s, median step (the slowest marked), accelerator and host
              load, last heard from; [ ] pick a rank by the job's number and the
              Accelerator, Host and Processes panels show its node
  Log         the chosen log's tail, shown literally (escapes appear as \\x1b...)

Missing numbers are shown as n/a with the reason, never as zero.
"""

REPLAY_HELP = """neurotui replay: the dashboard as it stood at each moment of a recorded session.

Replay keys
  space       play / pause (playing from the end starts over)
  + -         faster / slower: 1x 2x 5x 10x 20x 50x 100x, then as fast as possible
  , .         back / forward 1% of the run;  < >  10%
  home end    the start / the end
  g           go to a time from the start (12:30, 1h5m, 90s) or a step (step 500)
  q           quit the replay

The log panel shows the recorded log files as they are at the end of the run: log lines
carry no time of their own, so they cannot follow the cursor.

"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss_help", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 96; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, text: str = HELP) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "Help (escape closes)"
            yield Static(self.text, markup=False)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
