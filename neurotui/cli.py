"""Command line: run, attach, ls, stop, profile, replay, compare, export, patterns, serve."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from neurotui import __version__, export, fmt, patterns, serve
from neurotui.argtypes import positive_number
from neurotui.compare import command as compare_command
from neurotui.exporter.options import add_options as add_metrics_options
from neurotui.exporter.options import metrics_config
from neurotui.importing import command as import_command
from neurotui.importing import describe as import_describe
from neurotui.profiling import command as profile_command
from neurotui.session import layout
from neurotui.session.create import new_session_folder, write_first_meta
from neurotui.session.jobid import job_identity
from neurotui.session.jobs import job_of, job_parts, last_heard, node_of
from neurotui.session.meta import SessionFormatError, load_meta
from neurotui.session.paths import (
    SessionNotFound,
    broken_sessions,
    find_session,
    list_sessions,
    sessions_root,
)
from neurotui.session.status import session_status, status_of, supervisor_alive
from neurotui.supervisor import spool
from neurotui.supervisor.launch import job_argv, resolve_executable, torchrun_position
from neurotui.supervisor.spawn import adopt, start_supervisor
from neurotui.terminal import on_a_terminal

PEAK_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8", "mxfp8", "mxfp4")
"""`run --peak-dtype`: the peak table's data types (pricing/peaks.py; a test holds them equal),
spelled here so that the command line does not load the table to start."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neurotui", description=__doc__)
    p.add_argument("--version", action="version", version=f"neurotui {__version__}")
    p.add_argument("--sessions-dir", help="where sessions live (default ./sessions, or "
                                           "$NEUROTUI_SESSIONS)")
    sub = p.add_subparsers(dest="command")

    run = sub.add_parser("run", help="launch and supervise a training command, recording it")
    run.add_argument("--headless", action="store_true", help="print progress lines, no dashboard")
    run.add_argument("--name", help="short name for the session folder")
    run.add_argument("--preset", help="a named run of the reference workload (see --list-presets)")
    run.add_argument("--list-presets", action="store_true")
    run.add_argument("--shell", action="store_true", help="run the command through $SHELL")
    run.add_argument("--max-restarts", type=int, default=0)
    run.add_argument("--restart-backoff", type=float, default=5.0, metavar="SECONDS")
    run.add_argument("--stop-timeout", type=float, default=20.0, metavar="SECONDS",
                     help="after SIGINT, wait this long before SIGTERM (and as long again "
                          "before SIGKILL)")
    run.add_argument("--step-target", type=int, help="steps the run will take (for ETA)")
    run.add_argument("--dataset-size", type=positive_number, metavar="N",
                     help="samples in one epoch (one pass over the training data, all ranks): "
                          "shows an epoch's time and cost at the steady rate, and epochs done")
    run.add_argument("--peak-dtype", choices=PEAK_DTYPES, metavar="DTYPE",
                     help="the data type the model computes in, whose peak NeuronCore FLOPs "
                          "utilisation is measured against: " + ", ".join(PEAK_DTYPES) +
                          " (default bf16, said so on screen)")
    run.add_argument("--step-pattern", action="append", default=[], metavar="REGEX",
                     help="extra step-line pattern with named groups (step, loss, samples, ...)")
    run.add_argument("--log-cap", type=_log_size, default=None, metavar="SIZE",
                     help="the most of the job's output the session's logs keep, e.g. 200M "
                          "(default 1G); what is dropped past it is said in the log and "
                          "counted in meta.json")
    run.add_argument("--loss-spike-factor", type=positive_number, metavar="X",
                     help="raise the loss-spike alert for a loss above X times the median of "
                          "its rank's last 50 (default 3)")
    run.add_argument("--memory-creep-window", type=positive_number, metavar="SECONDS",
                     help="judge a rank's resident memory for a steady creep over this long "
                          "(default 600)")
    run.add_argument("--samples-per-step", type=positive_number, metavar="N",
                     help="samples in one step of the whole job (global batch, all nodes), "
                          "for steps that do not say (log lines without a batch or "
                          "throughput)")
    run.add_argument("--group-readable", action="store_true",
                     help="let the session folder's group read the session (default: only you)")
    run.add_argument("--no-auto-probe", action="store_true",
                     help="do not time each optimizer step inside the ranks (the automatic "
                          "probe: on by default for any PyTorch job)")
    run.add_argument("--neuron-metrics-url", type=_metrics_url, metavar="URL",
                     help="where neuron-monitor is absent, read Neuron metrics from this "
                          "Prometheus page (neuron-monitor-prometheus.py's, e.g. "
                          "http://HOST:8000/metrics); a user:password in it is never recorded")
    run.add_argument("--detach", action="store_true", help="start, print the session, return")
    many = run.add_argument_group("a job of many nodes (each node runs `neurotui run`)")
    many.add_argument("--job", metavar="ID", help="the job's id, the same on every node (else "
                      "SLURM_JOB_ID, else torchrun's --rdzv-id)")
    many.add_argument("--node", metavar="NAME", help="this node's name (default: the host name)")
    add_display_options(run)
    add_metrics_options(run)
    price = run.add_argument_group("price (default: detect the instance, built-in price table)")
    price.add_argument("--instance-type", help="e.g. trn1.2xlarge (else neuron-ls / IMDSv2)")
    price.add_argument("--price-per-hour", help="USD per hour, overriding the table")
    price.add_argument("--region", help="AWS region of the instance")
    price.add_argument("--spot", action="store_true", help="price as spot (needs --live-prices "
                                                           "or --price-per-hour)")
    price.add_argument("--price-file", help="TOML file overriding/extending the price table")
    price.add_argument("--live-prices", action="store_true",
                       help="ask the AWS Pricing API (boto3 and credentials needed)")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ...")

    attach = sub.add_parser("attach", help="follow a running session")
    attach.add_argument("session", nargs="?")
    attach.add_argument("--headless", action="store_true")
    attach.add_argument("--no-adopt", action="store_true",
                        help="leave a job whose supervisor died unsupervised (by default a new "
                             "supervisor adopts it: telemetry, log steps and its end recorded)")
    add_display_options(attach)

    replay = sub.add_parser("replay", help="replay a recorded session in the dashboard")
    replay.add_argument("session", nargs="?")
    replay.add_argument("--speed", type=_speed, default=10.0,
                        help="recorded seconds per second, 1 to 100, or 'max' (default 10)")
    replay.add_argument("--at", metavar="POSITION",
                        help="start there: 12:30, 1h5m, 90s from the start, 'step 500' or 'end'")
    replay.add_argument("--paused", action="store_true", help="start paused")
    add_display_options(replay, headless=False)

    sub.add_parser("ls", help="list sessions")

    stop = sub.add_parser("stop", help="stop a running session's training gracefully")
    stop.add_argument("session", nargs="?",
                      help="a session, or a job id: every node of the job (each node's "
                           "supervisor stops its own part)")
    stop.add_argument("--restart", action="store_true", help="stop and start it again")
    stop.add_argument("--wait", type=float, default=120.0, metavar="SECONDS")

    profile_command.add_parser(sub)
    compare_command.add_parser(sub)
    import_command.add_parser(sub)
    export.add_parser(sub)
    patterns.add_parser(sub)
    serve.add_parser(sub)
    return p


def add_display_options(parser: argparse.ArgumentParser, *, headless: bool = True) -> None:
    parser.add_argument("--interval", type=float, default=None, metavar="SECONDS",
                        help="seconds between dashboard refreshes (default 2, or "
                             "$NEUROTUI_INTERVAL)" + ("; headless: between progress lines "
                                                      "(default 5)" if headless else ""))
    parser.add_argument("--ascii", action="store_true", default=None,
                        help="no block or braille characters (or NEUROTUI_ASCII=1)")
    parser.add_argument("--theme", choices=("dark", "light"),
                        help="colour theme (or NEUROTUI_THEME=light)")


def _compare_screen(root: Path, chosen: list[Path], baseline: Path | None) -> int:
    """`compare --tui`: the dashboard's compare screen (Textual imported only for it)."""
    from neurotui.ui.compare_app import run_compare_app

    return run_compare_app(root, chosen, baseline=baseline)


def _log_size(text: str) -> int:
    """`--log-cap`: a size such as 200M or 1G, above nothing."""
    from neurotui.supervisor.logcap import parse_size

    try:
        size = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size <= 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return size


def _speed(text: str) -> float:
    if text.strip().lower() in ("max", "inf", "fastest"):
        return math.inf
    try:
        speed = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a speed: {text!r}") from None
    if not 0 < speed <= 1000:
        raise argparse.ArgumentTypeError("speed must be above 0 and at most 1000 (or 'max')")
    return speed


def main(argv: list[str] | None = None) -> int:
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(argv)
        code = run_command(args)
        sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
        return code
    except BrokenPipeError:
        return output_closed(args)


OUTPUT_CLOSED = 128 + signal.SIGPIPE
"""The exit code of a command that SIGPIPE ended, as `yes | head -1` reports it."""


def output_closed(args: argparse.Namespace | None) -> int:
    """Our stdout's reader went away (`neurotui ls | head -1`): end quietly, as a command
    that SIGPIPE ends would. What is still buffered goes to /dev/null, or Python would fail
    again flushing it at exit (Python's docs, "Note on SIGPIPE"). A run's supervisor is
    detached: only this printing view ends, and training goes on."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    if args is not None and args.command in ("run", "attach") \
            and not getattr(args, "list_presets", False):
        with contextlib.suppress(OSError):
            print("neurotui: output closed; training goes on (`neurotui ls` lists it, "
                  "`neurotui attach` follows it again)", file=sys.stderr, flush=True)
    return OUTPUT_CLOSED


def run_command(args: argparse.Namespace) -> int:
    root = sessions_root(args.sessions_dir)
    try:
        if args.command == "run":
            return cmd_run(args, root)
        if args.command == "ls":
            return cmd_ls(root)
        if args.command == "stop":
            return cmd_stop(args, root)
        if args.command == "attach":
            return cmd_attach(args, root)
        if args.command == "replay":
            return cmd_replay(args, root)
        if args.command == "profile":
            return profile_command.run(args, root)
        if args.command == "compare":
            return compare_command.run(args, root, show_screen=_compare_screen)
        if args.command == "export":
            return export.run(args, root)
        if args.command == "import":
            return import_command.run(args, root)
        if args.command == "patterns":
            return patterns.run(args)
        if args.command == "serve":
            return serve.run(args, root)
        # `neurotui` alone: the dashboard on the running session; with none running (or
        # several), the home screen lists the folder's sessions.
        args.session, args.headless = None, not on_a_terminal()  # (a browser too)
        args.interval, args.ascii, args.theme = None, None, None
        if not args.headless and len(running_sessions(root)) != 1:
            from neurotui.ui.home_app import run_app

            return run_app(root, **display_settings(args))
        return cmd_attach(args, root)
    except (SessionNotFound, SessionFormatError) as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2


# -- run ------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace, root: Path) -> int:
    from runner.presets import PRESETS

    if args.list_presets:
        for name, preset in PRESETS.items():
            print(f"{name:24} {preset.description}")
        return 0
    user_cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else list(args.cmd)
    env: dict[str, str] = {}
    step_target = args.step_target
    if args.preset:
        if args.preset not in PRESETS:
            print(f"neurotui: unknown preset {args.preset!r}; known: {', '.join(PRESETS)}",
                  file=sys.stderr)
            return 2
        preset = PRESETS[args.preset]
        user_cmd = user_cmd or preset.argv()
        env = dict(preset.env)
        step_target = step_target or preset.step_target
    if not user_cmd:
        print("neurotui: nothing to run: give `-- COMMAND ...` or --preset NAME",
              file=sys.stderr)
        return 2
    if args.step_pattern:
        from neurotui.sources.steplog import StepLineParser

        try:  # refused here, with its reason, rather than by a supervisor that cannot start
            StepLineParser.from_patterns(args.step_pattern)
        except ValueError as exc:
            print(f"neurotui: {exc}", file=sys.stderr)
            return 2
    if not args.shell and shutil.which(user_cmd[0]) is None:
        print(f"neurotui: command not found: {user_cmd[0]}", file=sys.stderr)
        return 127
    name = args.name or args.preset or Path(user_cmd[-1] if torchrun_position(user_cmd)
                                            else user_cmd[0]).stem
    pricing = {"instance_type": args.instance_type, "price_per_hour": args.price_per_hour,
               "region": args.region, "spot": args.spot, "price_file": args.price_file,
               "live": args.live_prices}
    session_dir = create_session(root, name, user_cmd, shell=args.shell, config={
        "pricing": pricing, "metrics": metrics_config(args),
        "max_restarts": args.max_restarts, "restart_backoff_s": args.restart_backoff,
        "stop_timeout_s": args.stop_timeout, "kill_timeout_s": args.stop_timeout,
        "step_target": step_target, "preset": args.preset, "env": env,
        "step_patterns": args.step_pattern or None, "auto_probe": not args.no_auto_probe,
        "samples_per_step": args.samples_per_step, "dataset_size": args.dataset_size,
        "peak_dtype": args.peak_dtype, "log_cap": args.log_cap,
        "loss_spike_factor": args.loss_spike_factor,
        "memory_creep_window_s": args.memory_creep_window,
        "group_readable": args.group_readable, "job": args.job, "node": args.node,
        "neuron_metrics_url": _recorded_url(args.neuron_metrics_url)})
    supervisor = _start_with_metrics_url(session_dir, args.neuron_metrics_url)
    if not wait_started(session_dir, supervisor):
        return 1
    print(f"neurotui: session {session_dir.name} in {session_dir.parent}", flush=True)
    print(f"neurotui: price: {load_meta(session_dir)['price']['note']}", flush=True)
    if args.detach:
        return 0
    return follow_session(session_dir, args, headless=args.headless)


def _metrics_url(text: str) -> str:
    """`--neuron-metrics-url`: an http(s) URL with a host, or argparse's error saying why."""
    from neurotui.collect.observer import BadMetricsURL, check_url

    try:
        return check_url(text)
    except BadMetricsURL as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _recorded_url(url: str | None) -> str | None:
    """The URL as meta.json records it: without a user:password."""
    if url is None:
        return None
    from neurotui.collect.observer import redact

    return redact(url)


def _start_with_metrics_url(session_dir: Path, url: str | None) -> subprocess.Popen[bytes]:
    """The supervisor, given the credentials of the metrics URL in its environment only (not
    in meta.json, not in argv); it takes them out before it launches the job."""
    from neurotui.collect.metricsurl import METRICS_URL_ENV

    secret = url if url is not None and _recorded_url(url) != url else None
    if secret is None:
        os.environ.pop(METRICS_URL_ENV, None)
        return start_supervisor(session_dir)
    os.environ[METRICS_URL_ENV] = secret
    try:
        return start_supervisor(session_dir)
    finally:
        del os.environ[METRICS_URL_ENV]  # this process keeps no copy beyond the start


def create_session(root: Path, name: str, user_cmd: list[str], *, shell: bool,
                   config: dict[str, Any]) -> Path:
    now = time.time()
    at = None if shell else torchrun_position(user_cmd)
    identity = job_identity(None if at is None else user_cmd[at:], os.environ,
                            job=config.get("job"), node=config.get("node"))
    if identity.multi_node:  # a job's parts side by side in a shared folder: named by node
        name = f"{name}-{identity.node}"
    session_dir = new_session_folder(root, name, now,
                                     group_readable=bool(config.get("group_readable")))
    # The job writes its output into memory, copied into logs/ by the supervisor: a full
    # sessions disk then cannot fail the job's own writes (supervisor/spool.py).
    spool_dir = spool.create(session_dir)
    logs_root = spool_dir if spool_dir is not None else session_dir / layout.LOGS_DIR
    argv = resolve_executable(job_argv(user_cmd, logs_root, shell=shell))
    # Pricing (IMDSv2 over HTTP) loads for `run` only: every other command starts sooner.
    from neurotui.pricing.record import instance_record, price_record
    from neurotui.pricing.resolve import resolve_price

    price = resolve_price(**config.get("pricing", {}))
    config = {**config, "torchrun_logs": argv != user_cmd and not shell
              and torchrun_position(user_cmd) is not None}
    write_first_meta(session_dir, name=name, started_at=now, command=argv,
                     user_command=user_cmd, shell=shell, instance=instance_record(price),
                     price=price_record(price), config=config,
                     spool=None if spool_dir is None else str(spool_dir),
                     job=identity.to_meta())
    return session_dir


def wait_started(session_dir: Path, supervisor: subprocess.Popen[bytes],
                 timeout_s: float = 30.0) -> bool:
    # meta.json names the job as the supervisor launches it: read that, not the events
    # (the reader and pandas are imported once the job runs, not before).
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if load_meta(session_dir).get("job_pid"):
            return True
        if supervisor.poll() is not None:
            if load_meta(session_dir).get("job_pid"):
                return True  # a job so short that it already ended
            break
        time.sleep(0.05)
    log = (session_dir / layout.SUPERVISOR_LOG).read_text(errors="replace")[-2000:]
    print(f"neurotui: the supervisor did not start the job.\n{log}", file=sys.stderr)
    return False


def follow_session(session_dir: Path, args: argparse.Namespace, *, headless: bool) -> int:
    if not headless:
        if on_a_terminal():
            from neurotui.ui.home_app import run_app

            # It says how to come back if training goes on; `l` leads to the home screen.
            return run_app(session_dir.parent, session_dir, **display_settings(args))
        print("neurotui: not a terminal; following in headless mode", file=sys.stderr)
    # Only here: it loads the live model (numpy), which the dashboard loads after its first
    # frame.
    from neurotui import headless as headless_mode

    try:
        ended = headless_mode.follow(headless_mode.model_for(session_dir),
                                     interval_s=args.interval or 5.0,
                                     alive=lambda: session_status(session_dir).running)
    except KeyboardInterrupt:
        print(f"\nneurotui: detached; training goes on. `neurotui attach {session_dir.name}` "
              f"follows it again, `neurotui stop {session_dir.name}` stops it.", file=sys.stderr)
        return 130
    if ended is None:
        status = session_status(session_dir)
        print(f"neurotui: session {status.state}: {status.detail}", file=sys.stderr)
        return 1
    wait_summary(session_dir)
    code = ended.get("code")
    how = f"exit code {code}" + (f", signal {ended['signal']}" if ended.get("signal") else "")
    if ended.get("reason") == "ended":
        how = "exit code unknown: it was adopted after its supervisor died"
    print(f"neurotui: {ended.get('reason')} ({how}); recorded in {session_dir}", flush=True)
    # The training's exit code; 1 when it failed by a signal or cannot be known.
    return code if isinstance(code, int) and code >= 0 else 1


def follow_job(root: Path, job: str, args: argparse.Namespace, *, headless: bool) -> int:
    """A job of many nodes as one run: its dashboard, or headless its progress and its
    nodes' lines, until no node runs; the job's exit code (the worst of its nodes')."""
    from neurotui import headless as headless_mode
    from neurotui.live.clock import WallClock
    from neurotui.live.model import TELEMETRY_HISTORY, DashboardModel
    from neurotui.session.jobreader import JobReader

    if not headless:
        if on_a_terminal():
            from neurotui.ui.home_app import run_app

            return run_app(root, job=job, **display_settings(args))
        print("neurotui: not a terminal; following in headless mode", file=sys.stderr)
    model = DashboardModel(JobReader(root, job, telemetry_history=TELEMETRY_HISTORY),
                           WallClock())
    try:
        ended = headless_mode.follow(model, interval_s=args.interval or 5.0,
                                     alive=lambda: model.reader.status().running)
    except KeyboardInterrupt:
        print(f"\nneurotui: detached; training goes on. `neurotui attach {job}` follows it "
              f"again, `neurotui stop {job}` stops every node.", file=sys.stderr)
        return 130
    status = model.reader.status()
    print(f"neurotui: job {job}: {status.state}"
          + (f" ({status.detail})" if status.detail else ""), flush=True)
    code = (ended or {}).get("code")
    return code if isinstance(code, int) and code >= 0 else 1


def wait_summary(session_dir: Path, timeout_s: float = 120.0) -> None:
    """The supervisor adds the run's summary to meta.json just after the exit record (the
    exit is not held back while it reads the run): wait for it, so a caller that reads
    meta.json once we return finds the whole record. Not past the supervisor's end."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            meta = load_meta(session_dir)
        except SessionFormatError:
            return
        if "summary" in meta or not supervisor_alive(meta):
            return
        time.sleep(0.02)


# -- ls, attach, stop -------------------------------------------------------------------------
def cmd_ls(root: Path) -> int:
    from neurotui.metrics import finite_or_none

    sessions = list_sessions(root)
    broken = broken_sessions(root)
    if not sessions and not broken:
        print(f"no sessions under {root}")
        return 0
    print(f"{'SESSION':44} {'STATE':13} {'DURATION':>9}  COMMAND")
    jobs: dict[str, list[str]] = {}  # a job of many nodes: a line per node, after the table
    for path in sessions:
        try:  # once: its state comes from what is read here
            meta = load_meta(path)
        except SessionFormatError as exc:  # that session's problem alone, named on its row
            problem = str(exc).removeprefix(f"{path / layout.META}: ")
            print(f"{path.name:44} {'unreadable':13} {'':>9}  {layout.META}: {problem}")
            continue
        status = status_of(meta)
        take_leftovers_of_lost(path, status.state)
        start = finite_or_none(meta.get("started_at"))
        end = finite_or_none(meta.get("ended_at")) or (time.time() if status.running else None)
        took = fmt.short_duration(end - start if start is not None and end is not None else None)
        cmd = " ".join(meta.get("user_command") or meta.get("command") or [])
        cmd = import_describe.ls_marker(meta) or cmd
        print(f"{path.name:44} {status.state:13} {took:>9}  {cmd[:80]}")
        if (job := job_of(meta)) is not None:
            jobs.setdefault(job, []).append(_node_line(path, meta, status.state))
    for path in broken:
        print(f"{path.name:44} {'broken':13} {'':>9}  no meta.json (its other files are there)")
    for job, nodes in jobs.items():
        print(f"\njob {job}: {len(nodes)} node{'s' if len(nodes) > 1 else ''} "
              f"(as one run: `neurotui compare {job}`)")
        for line in sorted(nodes):
            print(f"  {line}")
    return 0


def _node_line(path: Path, meta: dict[str, Any], state: str) -> str:
    """A node of a job in `ls`: its name, session and state; a lost one, when it was last
    heard from (its last record)."""
    line = f"{node_of(meta) or '?':20} {path.name:44} {state}"
    if state == "lost":
        heard = last_heard(path)
        line += (", never heard from" if heard is None else
                 f", last heard from {fmt.short_duration(time.time() - heard)} ago")
    return line


def running_sessions(root: Path) -> list[Path]:
    return [p for p in list_sessions(root) if session_status(p).running]


def display_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The dashboard's keyword arguments from --interval/--ascii/--theme (None: from the
    environment, as run_dashboard documents)."""
    return {"interval_s": args.interval, "ascii_mode": args.ascii,
            "theme": f"neurotui-{args.theme}" if args.theme else None}


def take_leftovers_of_lost(session_dir: Path, state: str) -> None:
    """A lost session's output still in memory goes into its logs/ (supervisor/leftovers.py)."""
    if state != "lost":
        return
    from neurotui.supervisor.leftovers import take_leftovers

    try:
        done = take_leftovers(session_dir)
    except (OSError, ValueError) as exc:
        done = f"could not take its leftover output from memory: {exc}"
    if done:
        print(f"neurotui: {session_dir.name}: {done}", file=sys.stderr)


def cmd_attach(args: argparse.Namespace, root: Path) -> int:
    if args.session and job_parts(root, args.session):
        return follow_job(root, args.session, args, headless=args.headless)
    session_dir = find_session(root, args.session)
    state = session_status(session_dir).state
    take_leftovers_of_lost(session_dir, state)
    if state == "unsupervised" and not getattr(args, "no_adopt", False):
        problem = adopt(session_dir)
        print(f"neurotui: {problem}" if problem else "neurotui: its supervisor had died; a new "
              "one adopted the running job", file=sys.stderr)
    return follow_session(session_dir, args, headless=args.headless)


def cmd_replay(args: argparse.Namespace, root: Path) -> int:
    job = args.session if args.session and job_parts(root, args.session) else None
    if job is None:
        session_dir = find_session(root, args.session)
        load_meta(session_dir)  # a clear error now for a folder that is not a session
        take_leftovers_of_lost(session_dir, session_status(session_dir).state)
    if not on_a_terminal():
        print("neurotui: replay needs a terminal; `neurotui compare` and `neurotui export` "
              "work without one", file=sys.stderr)
        return 2
    from neurotui.ui.home_app import run_app

    if job is not None:  # every node's part, on one cursor
        return run_app(root, job=job, replay=True, speed=args.speed, at=args.at,
                       paused=args.paused, **display_settings(args))
    return run_app(session_dir.parent, session_dir, replay=True, speed=args.speed, at=args.at,
                   paused=args.paused, **display_settings(args))


def cmd_stop(args: argparse.Namespace, root: Path) -> int:
    from neurotui.supervisor.direct_stop import stop_job

    if args.session and (parts := job_parts(root, args.session)):
        return stop_whole_job(args.session, parts, restart=args.restart, wait_s=args.wait)
    session_dir = find_session(root, args.session, running_only=True)
    load_meta(session_dir)  # a clear error now for a session whose meta.json cannot be read
    answer = stop_job(session_dir, by="cli", restart=args.restart, going_direct=lambda why:
                      print(f"neurotui: {why}", file=sys.stderr, flush=True))
    if not answer.ok or answer.direct:
        print(f"neurotui: {answer.message}", file=sys.stdout if answer.ok else sys.stderr)
        return 0 if answer.ok else 1
    if args.restart:
        print(f"neurotui: restarting {session_dir.name}")
        return 0
    print(f"neurotui: stopping {session_dir.name} (SIGINT, then SIGTERM, then SIGKILL)...",
          flush=True)
    deadline = time.time() + args.wait
    while time.time() < deadline:
        if not session_status(session_dir).running:
            print(f"neurotui: {session_status(session_dir).state}")
            return 0
        time.sleep(0.2)
    print("neurotui: still running after --wait; the supervisor keeps escalating",
          file=sys.stderr)
    return 1


TAKEN_WITHIN_S = 10.0
"""A node's supervisor looks for requests once a second: one not taken in this long has no
supervisor to take it (gone, or its host is)."""


def stop_whole_job(job: str, parts: list[Path], *, restart: bool, wait_s: float) -> int:
    """Stop (or restart) every node of a job of many nodes: a request left in each running
    node's session folder, which its own supervisor takes and acts on (supervisor/
    requests.py); from any node, or a login node that sees the shared sessions folder."""
    from neurotui.supervisor.direct_stop import stop_job
    from neurotui.supervisor.requests import ask_running, request_pending

    running = ask_running(parts, "restart" if restart else "stop", by="cli")
    if not running:
        print(f"neurotui: no node of job {job} is running", file=sys.stderr)
        return 1
    names = {part: node_of(load_meta(part)) or part.name for part in running}
    print(f"neurotui: asked {', '.join(names.values())} to {'restart' if restart else 'stop'} "
          f"(job {job})", flush=True)
    start = time.time()
    waiting = set(running)
    ok = True
    while waiting and time.time() - start < max(wait_s, TAKEN_WITHIN_S):
        for part in list(waiting):
            taken = not request_pending(part)
            status = session_status(part)
            if taken and (restart or not status.running):
                waiting.discard(part)
                print(f"neurotui: {names[part]}: {'restarting' if restart else status.state}",
                      flush=True)
            elif not taken and time.time() - start >= TAKEN_WITHIN_S:
                waiting.discard(part)
                if load_meta(part).get("host") == socket.gethostname():
                    answer = stop_job(part, by="cli", restart=restart)  # here: its socket
                    print(f"neurotui: {names[part]}: {answer.message}", flush=True)
                    ok &= answer.ok
                else:
                    ok = False
                    print(f"neurotui: {names[part]} did not take the request: its supervisor "
                          "(or its host) is gone; stop its training on that node",
                          file=sys.stderr)
        time.sleep(0.2)
    if waiting:
        print(f"neurotui: still running after --wait: {', '.join(names[p] for p in waiting)}",
              file=sys.stderr)
    return 0 if ok and not waiting else 1


# -- helpers ----------------------------------------------------------------------------------
if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
