"""The supervisor: owns the training job, records it, and obeys the control channel.

It runs detached from any terminal (its own session), and the job runs in a session of its own
with its output going to files, never to a pipe: so neither a lost SSH connection, nor the
dashboard's death, nor the supervisor's own death can stop training.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from neurotui import autoprobe
from neurotui.collect.host import HostSampler, ProcessRows
from neurotui.collect.metricsurl import metrics_url
from neurotui.session import layout
from neurotui.session.writer import EventWriter, read_meta, update_meta
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor import control, fdlimit, spool
from neurotui.supervisor.alerting import AlertRecorder, low_disk
from neurotui.supervisor.cachekeeping import CacheKeeper
from neurotui.supervisor.exporting import MetricsExporter
from neurotui.supervisor.floodgate import FloodGate
from neurotui.supervisor.globalranks import GlobalRanks
from neurotui.supervisor.logcap import DEFAULT_LOG_CAP, LogCap
from neurotui.supervisor.logfollow import LogFollower, resume_point
from neurotui.supervisor.losswatch import NONFINITE, SPIKE, LossWatch
from neurotui.supervisor.memwatch import CREEP, DEVICE_CREEP, MemoryCreepWatch
from neurotui.supervisor.process_tree import JobTree
from neurotui.supervisor.requests import RequestInbox
from neurotui.supervisor.stallwatch import StallWatch
from neurotui.supervisor.wakeups import ExitClock, SignalWake, Waits, exit_descriptor

if TYPE_CHECKING:
    from neurotui.collect.telemetry import Telemetry

TICK_S = 0.25
"""How often the supervisor looks whether the job exited where the kernel cannot say so (no
pidfd: see wakeups.py); with one, it wakes only when there is something to do."""
LOG_WATCH_ENV = "NEUROTUI_LOG_WATCH"
"""'0': poll the logs every logfollow.POLL_S instead of reading them as they change (cheaper
with very many step lines a second; their times are then up to POLL_S late, and the session
says so)."""
TELEMETRY_S = 1.0
SWEEP_GRACE_S = 3.0


@dataclass
class StopPlan:
    """Graceful stop: SIGINT, then SIGTERM, then SIGKILL, each after its timeout."""

    int_timeout_s: float = 20.0
    term_timeout_s: float = 10.0


@dataclass
class _Stopping:
    stage: signal.Signals
    deadline: float
    restart_after: bool


class Supervisor:
    def __init__(self, session_dir: Path, adopt: bool = False) -> None:
        """`adopt`: take over the running job of a session whose supervisor died, instead of
        launching it (see `_adopt`)."""
        self.dir = session_dir.resolve()
        self.adopt = adopt
        self.meta = read_meta(self.dir)
        config: dict[str, Any] = self.meta.get("config", {})
        self.argv: list[str] = self.meta["command"]
        self.max_restarts = int(config.get("max_restarts", 0))
        self.backoff_s = float(config.get("restart_backoff_s", 5.0))
        self.stop_plan = StopPlan(float(config.get("stop_timeout_s", 20.0)),
                                  float(config.get("kill_timeout_s", 10.0)))
        self.job_env: dict[str, str] = dict(config.get("env") or {})
        self.auto_probe = bool(config.get("auto_probe", True))
        # `run --neuron-metrics-url`; read (and its credentials taken out of the environment)
        # before the job is launched with that environment.
        self.neuron_metrics_url = metrics_url(config)
        self.writer = EventWriter(self.dir / layout.EVENTS, reserve=True)
        self.alerts = AlertRecorder(self.writer)
        self._meta_unsaved: dict[str, Any] = {}  # changes a full disk refused, retried
        self._told_meta = False
        self._failed: set[str] = set()  # work that raised once (see _guarded)
        self.spool = Path(self.meta["spool"]) if self.meta.get("spool") else None
        self.parser = (StepLineParser.from_patterns(config["step_patterns"], include_defaults=True)
                       if config.get("step_patterns") else StepLineParser.default())
        self.follower = LogFollower(self.dir, self.writer, self.parser,
                                    parse_launcher=not config.get("torchrun_logs", False),
                                    spool_dir=self.spool,
                                    watch=os.environ.get(LOG_WATCH_ENV) != "0",
                                    flood=FloodGate(
                                        LogCap(int(config.get("log_cap") or DEFAULT_LOG_CAP)),
                                        step_patterns=tuple(config.get("step_patterns") or ())))
        self.stalls = StallWatch(self.dir)
        self.cache_keeper = CacheKeeper(self.dir)  # attach/replay open fast (cachekeeping.py)
        self.follower.stalls = self.stalls
        # The loss as recorded (NaN, spikes) and the ranks' resident memory (creep).
        self.losses = LossWatch(self.dir, spike_factor=config.get("loss_spike_factor"))
        self.creep = MemoryCreepWatch(config.get("memory_creep_window_s"))
        # A node of a job of many nodes: its ranks are recorded as the job numbers them.
        self.job_identity: dict[str, Any] = dict(self.meta.get("job") or {})
        self.global_ranks = GlobalRanks() if self.job_identity.get("id") else None
        if self.global_ranks is not None:
            self.follower.global_ranks = {}
        self.exporter = MetricsExporter.of_config(self.dir, config, self.writer, self._save_meta)
        # Requests left in the session folder: a job of many nodes is stopped from any node.
        self.inbox = RequestInbox(self.dir, since=time.time())
        self.waits = Waits()
        self.socket_path = control.socket_path(self.dir)
        self.server = control.listen(self.socket_path)
        self.waits.register(self.server, _CONTROL)
        self._logs_listened = False  # a log's change wakes the supervisor (_listen_to_logs)
        self._exit_fd: int | None = None  # readable when the job's leader exits (pidfd)
        self._exit_clock: ExitClock | None = None  # when it exited (see ExitClock)
        self.ended_at: float | None = None
        """When the last attempt's leader exited: the end recorded (proc_exit, meta.json)."""
        self._signal_wake: SignalWake | None = None
        self.job: subprocess.Popen[bytes] | None = None
        self.job_limits: Callable[[], None] | None = None
        """Run in the job's process before it execs: the limits this process raised for
        itself (fdlimit), as they were."""
        self.tree: JobTree | None = None
        self.process_rows = ProcessRows()
        self.host = HostSampler()
        self.stopping: _Stopping | None = None
        self.stop_requested = False
        self.leaving = False  # the supervisor was told to go; the job is left running
        self._next_batch_at = 0.0  # while busy logs are read in batches: the next read
        self.attempt = 0
        self.adopted_pid: int | None = None
        self.telemetry: Telemetry | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def run(self) -> int:
        # Caught, not ignored: an ignored signal stays ignored in the job across exec, so a
        # plain script would never see `neurotui stop`'s SIGINT (its Ctrl-C handling, its
        # checkpoint on interrupt). Caught ones are back to their defaults in the job.
        signal.signal(signal.SIGHUP, _ignore)
        signal.signal(signal.SIGINT, _ignore)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._signal_wake = SignalWake()
        self.waits.register(self._signal_wake, _SIGNAL)
        self._save_meta(supervisor_pid=os.getpid(), control_socket=str(self.socket_path))
        code: int | None = None
        sig_name: str | None = None
        try:
            if self.adopt and not self._adopt():
                return 1
            if self.exporter is not None:  # `run --metrics-port`: a view beside the job
                self._guarded("starting the metrics exporter", self.exporter.start)
            adopted = False
            while True:
                try:
                    if self.adopted_pid is None:
                        self._launch()
                except OSError as exc:  # not executable, vanished since `run` checked, ...
                    self.writer.write("proc_exit", attempt=self.attempt, pid=None, code=None,
                                      signal=None, tail={"launcher": [f"cannot start: {exc}"]})
                    self._save_meta(ended_at=time.time(), exit={
                        "code": None, "signal": None, "reason": f"failed to start: {exc}",
                        "attempts": self.attempt + 1, "lost_events": self.writer.failed_writes})
                    return 1
                if self.telemetry is None:  # once the job runs (_start_telemetry)
                    self._guarded("starting the accelerator telemetry", self._start_telemetry)
                code, sig_name, restart_asked = self._watch()
                adopted, self.adopted_pid = self.adopted_pid is not None, None
                if self.leaving:
                    return 0
                if restart_asked:
                    self.attempt += 1
                    continue
                if adopted and not self.stop_requested:
                    break  # its exit code is unknown: no grounds for a restart
                if self.stop_requested or code == 0 or self.attempt >= self.max_restarts:
                    break
                delay = min(self.backoff_s * 2 ** self.attempt, 300.0)
                self.writer.write("restart", attempt=self.attempt + 1, delay_s=delay,
                                  reason=f"exit code {code}" if sig_name is None
                                  else f"signal {sig_name}")
                if not self._wait_backoff(delay):
                    break
                self.attempt += 1
            self._finish(code, sig_name, adopted)
            return 0
        finally:
            self._close()

    def _launch(self) -> None:
        env = autoprobe.job_env({
            **os.environ, **self.job_env,
            "NEUROTUI_SESSION": str(self.dir), "NEUROTUI_ATTEMPT": str(self.attempt),
            **({"NEUROTUI_SPOOL": str(self.spool)} if self.spool is not None else {}),
            "PYTHONUNBUFFERED": os.environ.get("PYTHONUNBUFFERED", "1")}, self.auto_probe)
        log_path = self.follower.logs_root / layout.LAUNCHER_LOG_NAME
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.job = subprocess.Popen(  # argv list; a shell only if the user asked (launch.py)
                self.argv, cwd=self.meta.get("cwd") or None, env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=self.job_limits)  # the open files limit it has bare (fdlimit)
        self.tree = JobTree(self.job.pid)
        self._watch_exit_of(self.job.pid)
        self.follower.attempt = self.attempt
        self.stalls.new_attempt(self.attempt)
        self.losses.new_attempt(self.attempt)
        if self.global_ranks is not None:  # a new rendezvous may order the nodes anew
            self.global_ranks.new_attempt()
            self.follower.global_ranks = {}
        self.stopping = None
        create_time = next(iter(self.tree.known), (0, 0.0))[1]
        self._save_meta(job_pid=self.job.pid, job_pgid=self.job.pid,
                        job_create_time=create_time, attempt=self.attempt,
                        log_timing=self.follower.timing)
        self.writer.write("proc_start", attempt=self.attempt, pid=self.job.pid,
                          pgid=self.job.pid, argv=self.argv)

    def _adopt(self) -> bool:
        """Take over the session's running job: its supervisor died and the job ran on.

        The job is not this process's child, so its exit code cannot be known: its end is
        recorded as "ended". The logs are read on from the last `log_offsets` mark; step lines
        the old supervisor had already recorded are not recorded again.
        """
        from neurotui.session.status import pid_alive

        pid, created = self.meta.get("job_pid"), self.meta.get("job_create_time")
        if self.meta.get("exit") is not None or not pid_alive(pid, created):
            print("neurotui: nothing to adopt: the job is not running", file=sys.stderr)
            return False
        assert isinstance(pid, int)
        self.attempt = int(self.meta.get("attempt") or 0)
        self.follower.attempt = self.attempt
        self.follower.resume(*resume_point(self.dir / layout.EVENTS, self.attempt))
        self.stalls.new_attempt(self.attempt)
        self.stalls.skip_history()
        self.losses.skip_history()
        self.creep.skip_history(self.dir)
        self.tree = JobTree(pid)
        self._watch_exit_of(pid)
        self.adopted_pid = pid
        self._save_meta(adopted_at=time.time())
        self.writer.write("warning", source="supervisor", message=(
            f"a new supervisor adopted the running job (pid {pid}); host and accelerator "
            "telemetry since the old one died is missing, and its exit code will be unknown"))
        return True

    def _watch_exit_of(self, pid: int) -> None:
        """Wake when `pid` (this attempt's leader) exits, instead of looking every TICK_S."""
        self._forget_exit()
        self._exit_fd = exit_descriptor(pid)
        if self._exit_fd is not None:
            self.waits.register(self._exit_fd, _EXIT)
        self._exit_clock = ExitClock(pid)

    def _forget_exit(self) -> None:
        """The leader is gone (or another one is watched): its descriptor stays readable for
        good, and a wait on it would never sleep again."""
        if self._exit_fd is not None:
            self.waits.unregister(self._exit_fd)
            os.close(self._exit_fd)
            self._exit_fd = None
        if self._exit_clock is not None:
            self._exit_clock.close()

    def _job_exit(self) -> tuple[bool, int | None]:
        """(whether the job's leader has exited, its return code when it is our child)."""
        if self.job is not None and self.adopted_pid is None:
            code = self.job.poll()
            return code is not None, code
        assert self.tree is not None
        return not any(p.pid == self.tree.leader_pid for p in self.tree.alive()), None

    def _watch(self) -> tuple[int | None, str | None, bool]:
        """Run until the job's leader exits; returns (code, signal name, restart asked)."""
        assert self.tree is not None
        restart_asked = False
        next_logs = next_telemetry = time.time()
        while True:
            now = time.time()
            # While busy logs are read in batches, work due before the next batch is done in
            # this wakeup (_wait_tick returned early for it), not in one of its own.
            soon = now + self.follower.pause_s
            telemetry_due = soon >= next_telemetry
            if telemetry_due:
                # Before the logs: their lines are placed by the probe's steps (stepoffsets).
                self._guarded("reading the probe files", self.stalls.read_probes)
            if soon >= next_logs:
                self._guarded("reading the job's logs", self.follower.poll, now)
                restart_asked |= self._take_request()
                next_logs = _next_due(next_logs, self.follower.poll_s, now)
            if telemetry_due:
                self._sample_telemetry(now)
                self._watch_alerts(now)
                self._guarded("keeping the session's cache", self.cache_keeper.tick, now)
                next_telemetry = _next_due(next_telemetry, TELEMETRY_S, now)
            self.writer.flush()
            if self._meta_unsaved:
                self._save_meta()
            ended, returncode = self._job_exit()
            if ended:
                # The clock's time, not now: this look came as late as the work before it.
                clock = self._exit_clock
                self.ended_at = min(clock.at, time.time()) if clock and clock.at else time.time()
                break
            if self.leaving:
                self._guarded("reading the job's logs", self.follower.take_read)
                return None, None, False
            self._escalate_stop(now)
            wake_at = min(next_logs, next_telemetry)
            if self.stopping is not None:
                wake_at = min(wake_at, self.stopping.deadline)
            if self._exit_fd is None:  # the kernel will not say when the job exits
                wake_at = min(wake_at, now + TICK_S)
            restart_asked |= self._wait_tick(wake_at)
        self._forget_exit()
        self._sweep()
        self._guarded("reading the probe files", self.stalls.read_probes)  # all, at its exit
        self._guarded("reading the job's logs", self.follower.poll, time.time(), True)
        # A recompile (or a rank's extra graph) in the last second is judged before the end.
        self._guarded("judging the compiles", self._watch_compiles, time.time())
        # The last steps, on disk for the loss watch to read; on a full disk into the reserve
        # (a plain flush would drop what waits, the probe's last losses' record among it).
        self.writer.flush(final=True)
        self._guarded("watching the losses", self._watch_losses, time.time())
        code = returncode if returncode is None or returncode >= 0 else None
        sig_name = signal.Signals(-returncode).name if returncode and returncode < 0 else None
        self.writer.write("proc_exit", t=self.ended_at, attempt=self.attempt,
                          pid=self.tree.leader_pid, code=code, signal=sig_name,
                          tail=self.follower.tail_lines())
        self.writer.flush(final=True)  # on a full disk, into the reserve
        restart_asked = restart_asked or bool(self.stopping and self.stopping.restart_after)
        return code, sig_name, restart_asked and not self.leaving

    def _wait_tick(self, until: float) -> bool:
        """Until `until`, read each log the moment it changes (its lines are stamped then) and
        answer the control channel; the timed work waits for `until`. Returns early, True when
        a restart was asked for, on a request, the job's exit or a caught signal.

        While busy logs are read in batches, their changes do not wake the supervisor (the
        kernel is not asked to say them then): it waits for the batch's time (answering the
        control channel, and a new log's folder, meanwhile) and then looks, one wakeup a
        batch, whether or not a log changed since (a busy log's next line is due about
        then)."""
        restart = False
        self._listen_to_logs(True)
        while (timeout := until - time.time()) > 0:
            rest = self._next_batch_at - time.time()
            batch_due = 0 < rest <= timeout
            woken = self.waits.wait(min(rest, timeout) if rest > 0 else timeout)
            for why in woken:
                if why == _CONTROL:
                    restart |= self._serve_one()
                    return restart  # a stop or restart is acted on at once
                if why == _EXIT:
                    return restart
                if why == _SIGNAL:
                    assert self._signal_wake is not None
                    self._signal_wake.drain()
                    if self.leaving:
                        return restart
                    continue
                if self._read_logs(until, self.follower.on_change):
                    return restart
            if batch_due and not woken and self._read_logs(until, self.follower.on_batch):
                return restart
        return restart

    def _read_logs(self, until: float, read: Callable[[float], None]) -> bool:
        """Look at what the logs gained (the follower's on_change, or on_batch at a batch's
        time; the lines are taken at the next poll); True when the tick's work falls due
        before the next batch of busy logs, and is better done in this wakeup than one of
        its own."""
        self._guarded("reading the job's logs", read, time.time())
        if (pause := self.follower.pause_s) <= 0:
            # A new log's first lines (read as it is found): on disk now, not at the next
            # timed wakeup.
            self.writer.flush()
            self._next_batch_at = 0.0
            return False
        self._next_batch_at = time.time() + pause
        return until < self._next_batch_at

    def _listen_to_logs(self, listen: bool) -> None:
        """Whether a log's change wakes the supervisor (not during a restart's backoff)."""
        fd = self.follower.fileno()
        if fd is None or listen == self._logs_listened:
            return
        if listen:
            self.waits.register(fd, _LOGS)
        else:
            self.waits.unregister(fd)
        self._logs_listened = listen

    def _wait_backoff(self, delay: float) -> bool:
        """Sleep before a restart while still answering the control channel."""
        deadline = time.time() + delay
        self._listen_to_logs(False)  # no job: nothing to read, and a change must not spin this
        while time.time() < deadline:
            self.writer.flush()
            for why in self.waits.wait(min(TICK_S, deadline - time.time())):
                if why == _CONTROL:
                    self._serve_one()
                elif why == _SIGNAL:
                    assert self._signal_wake is not None
                    self._signal_wake.drain()
            if self.stop_requested or self.leaving:
                return False
        return True

    def _finish(self, code: int | None, sig_name: str | None, adopted: bool = False) -> None:
        if self.stop_requested:
            reason = "stopped"
        elif adopted:
            reason = "ended"  # not our child: how it exited is unknown
        elif code == 0:
            reason = "completed"
        elif sig_name:
            reason = f"killed by {sig_name}"
        else:
            reason = "failed"
        # The job's end as its leader's exit was timed (ExitClock), not this moment: reading
        # the last of a flood of output may have taken a while since, and the run's wall time
        # and cost are counted to here.
        now = self.ended_at if self.ended_at is not None else time.time()
        self.alerts.end_all(now, why=f"the job {reason}")
        self.writer.flush(final=True)
        if self.spool is not None:
            spool.remove(self.spool)  # every byte of it was read: the final poll read to the end
        # Every event is on disk before meta.json says the run ended.
        if not self._save_meta(ended_at=now, log_timing=self.follower.timing,
                               log_dropped=self.follower.flood.dropped, exit={
                "code": code, "signal": sig_name, "reason": reason,
                "attempts": self.attempt + 1, "lost_events": self.writer.failed_writes}):
            self.writer.release_reserve()  # a full disk: the reserve is room for this
            if not self._save_meta():
                return
        meta = read_meta(self.dir)
        try:  # the figures of the run, for `ls`, compare and anyone reading meta.json
            # Imported here (numpy, the reader): the supervisor needs them only now. Numpy
            # columns, not pandas: the command waiting for this returns a third of a second
            # sooner. Telemetry is not needed: one sample of each kind is parsed.
            from neurotui.session.columns import Columns
            from neurotui.session.reader import SessionReader
            from neurotui.summary import summarize

            reader = SessionReader(self.dir, telemetry_history=1).load()
            update_meta(self.dir, summary=summarize(
                meta, reader.step_columns(),
                Columns.of_records(reader.events.get("compile", ()), ("t", "rank")),
                phases=reader.phase_columns(),
                probe_info=list(reader.events.get("probe_info", ())),
                samples_from=reader.samples_from))
        except Exception as exc:
            print(f"neurotui: no summary for this run: {exc}", file=sys.stderr, flush=True)

    def _watch_alerts(self, now: float) -> None:
        self.alerts.update("disk-low", low_disk(self.dir), now)
        if self.exporter is not None:
            self._guarded("watching the metrics exporter", self.exporter.check)
        # A graceful stop silences ranks on purpose: no stall then.
        self.alerts.update("stalled", self.stalls.alert(now) if self.stopping is None else None,
                           now)
        self._watch_compiles(now)
        self._guarded("watching the losses", self._watch_losses, now)
        self._guarded("watching the ranks' memory", self._watch_memory, now)

    def _watch_losses(self, now: float) -> None:
        self.losses.read()
        nonfinite, spike = self.losses.alerts()
        self.alerts.update(NONFINITE, nonfinite, now)
        self.alerts.update(SPIKE, spike, now)

    def _watch_memory(self, now: float) -> None:
        self.alerts.update(CREEP, self.creep.alert(now), now)
        # (the accelerator telemetry as recorded)
        self.creep.read_devices(self.dir, steady=self.stalls.past_warmup())
        self.alerts.update(DEVICE_CREEP, self.creep.device_alert(now), now)

    def _keep_memory(self, now: float, rows: list[dict[str, Any]], host: dict[str, Any]) -> None:
        """The ranks' memory, kept from their steady steps on (warm-up's growth levels off)."""
        self.creep.add(now, rows, host, steady=self.stalls.past_warmup())

    def _watch_compiles(self, now: float) -> None:
        recompiled, mismatched = self.stalls.compiles.alerts(now)
        self.alerts.update("recompile", recompiled, now)
        self.alerts.update("compile-mismatch", mismatched, now)

    def _guarded(self, what: str, call: Callable[..., object], *args: object) -> None:
        """A failure of the supervisor's own reading (a bug, a file it cannot parse) is
        recorded, once per kind of work; supervision goes on."""
        try:
            call(*args)
        except Exception as exc:
            if what not in self._failed:
                self._failed.add(what)
                self.writer.write("warning", source="supervisor", message=(
                    f"{what} failed: {exc!r}; supervision goes on (see supervisor.log)"))
                traceback.print_exc()

    def _save_meta(self, **changes: Any) -> bool:
        """Write these changes (and any a full disk refused before) into meta.json; False,
        keeping them for the next try, while the disk refuses."""
        self._meta_unsaved.update(changes)
        try:
            update_meta(self.dir, **self._meta_unsaved)
        except OSError as exc:
            if not self._told_meta:
                self._told_meta = True
                print(f"neurotui: cannot update meta.json: {exc}; retrying", file=sys.stderr,
                      flush=True)
            return False
        self._meta_unsaved = {}
        return True

    def _close(self) -> None:
        self._forget_exit()
        if self._signal_wake is not None:
            self._signal_wake.close()
        self.follower.close()
        self.stalls.close()
        self.losses.close()
        self.creep.close()
        self.process_rows.close()
        self.host.close()
        if self.exporter is not None:
            self.exporter.close()
        if self.telemetry is not None:
            self.telemetry.close()
        self.writer.close()
        with contextlib.suppress(OSError):
            self.server.close()
            self.socket_path.unlink(missing_ok=True)

    def _on_sigterm(self, signum: int, frame: object) -> None:
        # Killing the supervisor must never kill training: it leaves, the job runs on.
        self.leaving = True
        self.writer.write("warning", source="supervisor",
                          message="supervisor terminated; training continues unsupervised")

    # -- telemetry ---------------------------------------------------------------------------
    def _start_telemetry(self) -> None:
        """The accelerator collectors, once the job is launched (or adopted): their parsers'
        imports and the tools they look for (neuron-ls, neuron-monitor, nvidia-smi) were
        80 ms of the time from `neurotui run` to the job's start on the dev VM."""
        from neurotui.collect.telemetry import Telemetry

        self.telemetry = Telemetry(self.dir, self.writer, time.time(),
                                   on_instance_type=self._instance_detected,
                                   metrics_url=self.neuron_metrics_url)

    def _sample_telemetry(self, now: float) -> None:
        rank_pids: frozenset[int] = frozenset()
        try:
            host = self.host.sample()
            self.writer.write_plain("host", t=now, **host)
            if self.tree is not None:
                procs = self.tree.sampled(now)
                rows = self.process_rows.sample(procs, self.tree.leader_pid)
                rank_pids = frozenset(r["pid"] for r in rows if r["role"] == "rank")
                if self.global_ranks is not None:
                    self._learn_global_ranks([p for p in procs if p.pid in rank_pids], now)
                self.writer.write_plain("procs", t=now, procs=rows)
                self._guarded("watching the ranks' memory", self._keep_memory, now, rows, host)
        except Exception as exc:  # a telemetry failure is recorded, never fatal
            self.writer.write("warning", source="host", message=f"host telemetry failed: {exc}")
        if self.telemetry is not None:
            try:
                self.telemetry.poll(now, rank_pids)
            except Exception as exc:
                self.writer.write("warning", source="telemetry",
                                  message=f"accelerator telemetry failed: {exc}")

    def _learn_global_ranks(self, ranks: list[psutil.Process], now: float) -> None:
        """A new rank's global rank, from its environment: recorded (a `ranks` event, and
        meta.json's job.global_ranks), and its held log lines taken."""
        assert self.global_ranks is not None
        if not self.global_ranks.learn(ranks):
            return
        mapping = self.global_ranks.mapping
        self.follower.set_global_ranks(mapping)
        self.writer.write("ranks", t=now, attempt=self.attempt,
                          global_ranks={str(local): rank for local, rank in mapping.items()})
        self.job_identity["global_ranks"] = sorted(mapping.values())
        self._save_meta(job=self.job_identity)

    def _instance_detected(self, instance_type: str, source: str) -> None:
        """neuron-ls / neuron-monitor named the instance: record it, and price it if we could
        not before (the user's overrides still win)."""
        # Imported here, not before the job's launch: pricing brings urllib (IMDS) with it,
        # 50 ms of the supervisor's start on the dev VM, and most runs are priced by `run`.
        from neurotui.pricing.record import price_record
        from neurotui.pricing.resolve import resolve_price

        meta = read_meta(self.dir)
        if meta.get("instance") and meta["instance"].get("type"):
            return
        overrides = meta.get("config", {}).get("pricing", {})
        price = resolve_price(detected_instance_type=instance_type, detected_by=source,
                              use_imds=False, **overrides)
        changes: dict[str, Any] = {"instance": {"type": instance_type, "source": source,
                                                "region": price.region}}
        if not (meta.get("price") or {}).get("usd_per_hour"):
            changes["price"] = price_record(price)
        self._save_meta(**changes)
        self.writer.write("instance", type=instance_type, source=source, price_note=price.note)

    # -- control -----------------------------------------------------------------------------
    def _serve_one(self) -> bool:
        """Answer one request; returns True when a restart was asked for."""
        try:
            conn, _ = self.server.accept()
        except OSError:
            return False
        with conn:
            try:
                uid = control.peer_uid(conn)
                request = control.read_request(conn)
                if uid is not None and uid != os.getuid():
                    conn.sendall(_json_line({"ok": False, "error": "not the session's user"}))
                    self.writer.write("warning", source="control", message=(
                        f"refused a control request from user id {uid}"))
                    return False
            except (OSError, ValueError):
                return False
            cmd = request.get("cmd")
            reply: dict[str, Any] = {"ok": True}
            restart = False
            if cmd == "stop":
                self.request_stop(by=str(request.get("by", "cli")))
            elif cmd == "restart":
                self.request_stop(by=str(request.get("by", "cli")), restart=True)
                restart = True
            elif cmd == "status":
                reply.update(attempt=self.attempt,
                             pid=self.tree.leader_pid if self.tree else None,
                             stopping=self.stopping.stage.name if self.stopping else None)
            else:
                reply = {"ok": False, "error": f"unknown command {cmd!r}"}
            with contextlib.suppress(OSError):
                conn.sendall(_json_line(reply))
            return restart

    def _take_request(self) -> bool:
        """A stop or restart left in the session folder (requests.py); True: a restart."""
        try:
            request = self.inbox.take()
        except OSError:
            return False
        if request is None:
            return False
        restart = request["cmd"] == "restart"
        self.request_stop(by=f"{request.get('by', 'cli')} from {request.get('from_host', '?')}",
                          restart=restart)
        return restart

    def request_stop(self, by: str, restart: bool = False) -> None:
        if not restart:
            self.stop_requested = True
        self.writer.write("stop_request", by=by, restart=restart)
        if self.stopping is None and self.tree is not None:
            self._send_stage(signal.SIGINT, time.time() + self.stop_plan.int_timeout_s, restart)

    def _send_stage(self, sig: signal.Signals, deadline: float, restart: bool) -> None:
        assert self.tree is not None
        self.stopping = _Stopping(sig, deadline, restart)
        self.writer.write("stop_escalate", signal=sig.name)
        self.tree.refresh()
        self.tree.signal_group(sig)  # SIGINT: the launcher forwards it to its ranks
        if sig != signal.SIGINT:
            self.tree.signal_all(sig)  # ranks live in sessions of their own (torchrun)

    def _escalate_stop(self, now: float) -> None:
        if self.stopping is None or now < self.stopping.deadline:
            return
        if self.stopping.stage == signal.SIGINT:
            self._send_stage(signal.SIGTERM, now + self.stop_plan.term_timeout_s,
                             self.stopping.restart_after)
        elif self.stopping.stage == signal.SIGTERM:
            self._send_stage(signal.SIGKILL, now + 3600, self.stopping.restart_after)

    def _sweep(self) -> None:
        """After the leader exits, no process of the job may stay behind."""
        assert self.tree is not None
        if not self.tree.alive():
            return
        self.tree.signal_all(signal.SIGTERM)
        deadline = time.time() + SWEEP_GRACE_S
        while self.tree.alive() and time.time() < deadline:
            time.sleep(0.1)
        if self.tree.alive():
            count = self.tree.signal_all(signal.SIGKILL)
            self.writer.write("warning", source="supervisor",
                              message=f"killed {count} leftover process(es) of the job")


def _next_due(due: float, period: float, now: float) -> float:
    """The first time after `now` on the grid of `due` + whole periods: timed work of periods
    that divide each other stays due at the same instants, one wakeup for all (each timed
    from its own last run drifts apart, and wakes the supervisor once more a second). Work
    done early (in a busy wakeup just before it was due) is next due a period on."""
    return due + period * (math.floor((max(now, due) - due) / period) + 1)


# What woke the supervisor (the `data` each descriptor is registered with in Waits).
_CONTROL, _LOGS, _EXIT, _SIGNAL = "control", "logs", "exit", "signal"


def _ignore(signum: int, frame: object) -> None:
    """The supervisor outlives its terminal and Ctrl-C: those signals are for the job."""


def _json_line(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode() + b"\n"


class _Unfailing(io.TextIOBase):
    """stdout/stderr for the supervisor: they go to supervisor.log, on the sessions disk, and
    a full disk must not turn a message into an exception that ends supervision."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with contextlib.suppress(OSError):
            os.write(self._fd, text.encode("utf-8", errors="replace"))
        return len(text)


def main(argv: list[str] | None = None) -> int:
    sys.stdout, sys.stderr = _Unfailing(1), _Unfailing(2)
    args = sys.argv[1:] if argv is None else argv
    adopt = "--adopt" in args
    args = [a for a in args if a != "--adopt"]
    if len(args) != 1:
        print("usage: python -m neurotui.supervisor [--adopt] SESSION_DIR", file=sys.stderr)
        return 2
    supervisor = Supervisor(Path(args[0]), adopt=adopt)
    supervisor.job_limits = fdlimit.as_it_was(fdlimit.raise_open_files())
    return supervisor.run()
