"""neurotui's automatic probe: one step record per optimizer step, from inside each rank.

Armed by neurotui's sitecustomize in the processes of a job neurotui launched. It does nothing
until the process imports torch; then it hooks:

- every optimizer's `step()`, through torch's public global post-hook
  (`torch.optim.optimizer.register_optimizer_step_post_hook`): the step's completion time;
- every batch a DataLoader iterator hands out (and, under torch-xla, every batch its device
  loader hands the training loop): the first dimension of the batch's first tensor, summed
  per thread until that thread steps an optimizer, so gradient-accumulation micro-batches add
  up, and batches that torch-xla's loader thread prefetches are counted once, when the
  training loop takes them. Batches handed out while autograd is off (an evaluation loop
  under torch.no_grad or inference_mode, Lightning's sanity check) are not training samples.
  A loader that reads one batch ahead (accelerate, some Lightning fetchers) shifts a batch
  between neighbouring steps; totals and rates stay right.

It never reads a tensor's value and never forces a device sync: shapes are known on the host.
Under XLA the times are therefore host-side (when the step was traced and dispatched); in
steady state the host runs at the device's pace, so their rate is the training's rate.

Once the process imports torch._dynamo (torch.compile does, at its first call), it also
records each TorchDynamo compile as it starts and ends (`compile` records, `_Compiles`): the
frame, whether it is a recompile and the guard that failed, its seconds. Nothing runs per step
for that: Dynamo calls the hooks only while it compiles.

Each step record also says how far the rank's stdout and stderr had been written when the
step was done (`out`, `err`: the file's device, inode and offset, where they are files): the
supervisor places each printed line after the step it follows by that offset, so a loss printed
right after `optimizer.step()` goes with that step, which the log's modification time (a coarse
clock, milliseconds behind) could not tell.

On request (`neurotui profile`: profiles/request.json in the session folder, looked at with
one os.stat at most every half second from the step hook), it wraps the rank's next N optimizer
steps in torch.profiler.profile and writes the Chrome trace gzipped to
profiles/<id>/rank-<RANK>.json.gz, with `profile` records saying so (`_Profiles`).

Records go to <session>/probe/auto-rank-<RANK>.jsonl (O_APPEND), written at least every
WRITE_EVERY_S and at exit (one os.write for the steps since the last), opened at the first
optimizer step, so processes that never step an optimizer (the torchrun launcher, DataLoader
workers) write nothing. A full disk drops steps, counted (RecordFile); any other error switches
the probe off for the rest of the process: it never raises into training. Standard library
only (torch is used only once the job itself imported it), because the job's Python may not
be able to import neurotui.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable
from time import perf_counter
from typing import Any

SESSION_ENV = "NEUROTUI_SESSION"
ENABLE_ENV = "NEUROTUI_AUTO_PROBE"
ATTEMPT_ENV = "NEUROTUI_ATTEMPT"
SPOOL_ENV = "NEUROTUI_SPOOL"

PROFILES_DIR = "profiles"
PROFILE_REQUEST = "request.json"
"""profiles/request.json in the session folder: `neurotui profile`'s request (_Profiles)."""

WRITE_EVERY_S = 0.05
"""Steps are written at least this often (and at exit): a kill -9 loses at most this much."""
_MAX_BATCH_DEPTH = 4  # how deep into nested tuples/dicts to look for the first tensor
_SAMPLES, _WAITED, _BATCHES, _INSIDE = range(4)  # a thread's tally
_SEQUENCES = (list, tuple)

_state: _Probe | None = None


def arm() -> None:
    """Watch for torch (and torch-xla) being imported; hook them when they are."""
    global _state
    if _state is not None or os.environ.get(ENABLE_ENV) != "1" or \
            not os.environ.get(SESSION_ENV):
        return
    _state = _Probe(os.environ[SESSION_ENV])
    if "torch" in sys.modules:  # imported before us (unusual): hook it now
        _state.on_import("torch", sys.modules["torch"])
    if "torch._dynamo" in sys.modules:
        _state.on_import("torch._dynamo", sys.modules["torch._dynamo"])
    sys.meta_path.insert(0, _ImportWatcher(_state))


class RecordFile:
    """A rank's append-only record file that a full disk cannot turn into an exception, nor
    switch off: a batch of records that cannot be written is dropped whole (a partial write
    is taken back) and counted, and the first write that works again begins with a `lost`
    record saying how many, from when to when. Until then the count waits in the job's spool
    (memory, not the full disk: $NEUROTUI_SPOOL), where the supervisor finds it if the job
    ends first. Used by neurotui.probe too."""

    def __init__(self, path: str, rank: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.rank = rank
        self.lost = 0
        self.lost_from = self.lost_to = 0.0
        self.error = ""
        spool = os.environ.get(SPOOL_ENV)
        self.pending_loss = os.path.join(spool, f"lost-{os.path.basename(path)}.json") \
            if spool else None

    def write(self, text: str, records: int, now: float) -> None:
        data = text.encode()
        if self.lost:
            data = (json.dumps(self._loss(now)) + "\n").encode() + data
        done = 0
        try:
            while done < len(data):
                done += os.write(self.fd, data[done:])
        except OSError as exc:
            if done:  # only this process appends here: the file ended `done` bytes ago
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, os.fstat(self.fd).st_size - done)
            if not self.lost:
                self.lost_from, self.error = now, exc.strerror or str(exc)
            self.lost += records
            self.lost_to = now
            self._keep_loss(now)
            return
        if self.lost:
            self.lost = 0
            if self.pending_loss:
                with contextlib.suppress(OSError):
                    os.unlink(self.pending_loss)

    def _loss(self, now: float) -> dict[str, Any]:
        return {"t": now, "kind": "lost", "what": "probe steps", "rank": self.rank,
                "count": self.lost, "from": self.lost_from, "to": self.lost_to,
                "error": self.error}

    def _keep_loss(self, now: float) -> None:
        if self.pending_loss is None:
            return
        with contextlib.suppress(OSError):
            tmp = f"{self.pending_loss}.tmp"
            with open(tmp, "w") as f:
                json.dump(self._loss(now), f)
            os.replace(tmp, self.pending_loss)


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Calls `probe.on_import` right after a watched module has been executed.

    It finds the module's spec through the other finders, then wraps only that loader
    instance's `exec_module`, so the module, its loader and its spec stay torch's own."""

    WATCHED = ("torch", "torch_xla.distributed.parallel_loader", "torch._dynamo")

    def __init__(self, probe: _Probe) -> None:
        self.probe = probe
        self.pending = set(self.WATCHED)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.pending:
            return None
        self.pending.discard(fullname)
        if not self.pending:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec
        probe = self.probe

        def exec_module(module: Any) -> None:
            run(module)
            with contextlib.suppress(AttributeError):
                del loader.exec_module  # back to the loader's own method
            probe.on_import(fullname, module)

        # A loader that takes no attributes: that module is left alone.
        with contextlib.suppress(AttributeError, TypeError):
            loader.exec_module = exec_module
        return spec


class _Probe:
    def __init__(self, session_dir: str) -> None:
        self.session_dir = session_dir
        self.on = True
        self.file: RecordFile | None = None
        self.rank = 0
        self.local_rank = 0
        self.attempt = 0
        self.step = 0
        self.last_t: float | None = None
        self.primary: int | None = None  # id() of the optimizer whose steps are counted
        self.primary_ref: Callable[[], Any] = lambda: None
        self.others: dict[int, str] = {}  # other optimizers seen stepping: id -> class name
        # Thread id -> its tally(). An id a dead thread leaves may be reused: only threads that
        # never step (loader threads) come and go, and their tallies are never taken.
        self.tallies: dict[int, list[Any]] = {}
        # Steps wait here at most WRITE_EVERY_S: formatting and writing each line at once
        # cost ~20 us a step inside a real optimizer step; slower steps are written at once.
        self.pending: list[tuple[float, int, int | None, float | None, float | None, str]] = []
        self.logs: list[tuple[str, int, int, int]] = []
        """(key, fd, device, inode) of stdout and stderr where they are files (_first_step)."""
        self.written_at = -float("inf")
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.wake_writer = threading.Event()
        self.writer_waiting = False
        self.told_no_batches = False
        self.seen_batches = False
        self.grad_enabled: Callable[[], bool] = lambda: True
        self.tensor_type: type | None = None
        self.primary_name = ""
        self.compiles: _Compiles | None = None
        self.profiles = _Profiles(self)
        self.profile_due = 0.0
        """When on_step next hands the step to `profiles` (every step while one is taken)."""

    # -- hooking -----------------------------------------------------------------------------
    def on_import(self, name: str, module: Any) -> None:
        try:
            if name == "torch":
                self._hook_torch(module)
            elif name == "torch_xla.distributed.parallel_loader":
                self._hook_iterator(getattr(module, "PerDeviceLoader", None))
            elif name == "torch._dynamo":
                self.compiles = _Compiles(self)
        except Exception:
            self.on = False

    def _hook_torch(self, torch: Any) -> None:
        self.tensor_type = torch.Tensor
        self.grad_enabled = torch.is_grad_enabled
        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        register_optimizer_step_post_hook(self.on_step)
        self._hook_iterator(_BaseDataLoaderIter)

    def _hook_iterator(self, cls: type | None) -> None:
        original = getattr(cls, "__next__", None)
        if cls is None or original is None or getattr(original, "_neurotui", False):
            return
        count = self.count_batch
        tallies = self.tallies
        ident = threading.get_ident

        def __next__(it: Any) -> Any:
            # The hot path of every batch: local names only, one dict lookup for the thread.
            mine = tallies.get(ident())
            if mine is None:
                mine = tallies[ident()] = [0, 0.0, 0, False]
            elif mine[_INSIDE]:  # a hooked iterator inside another: counted once
                return original(it)
            mine[_INSIDE] = True
            start = perf_counter()
            try:
                batch = original(it)
            finally:
                mine[_INSIDE] = False
            count(mine, batch, perf_counter() - start)
            return batch

        __next__._neurotui = True  # type: ignore[attr-defined]
        __next__.__wrapped__ = original  # type: ignore[attr-defined]
        cls.__next__ = __next__  # type: ignore[method-assign]

    # -- the two hot paths ---------------------------------------------------------------
    def tally(self) -> list[Any]:
        """This thread's [samples, seconds waited, batches, inside a loader] since its last
        optimizer step (a loader's own prefetch thread never steps: its batches stay there)."""
        return self.tallies.setdefault(threading.get_ident(), [0, 0.0, 0, False])

    def count_batch(self, mine: list[Any], batch: Any, waited: float) -> None:
        """A batch handed out in this thread, after `waited` seconds in the loader."""
        if not self.on or not self.grad_enabled():
            return  # autograd off: an evaluation loop's batch (torch.no_grad), not training's
        try:
            mine[_WAITED] += waited
            # The default collate's (inputs, targets): sized at once; anything else searched.
            first = batch[0] if type(batch) in _SEQUENCES and batch else None
            n = first.shape[0] if type(first) is self.tensor_type and first.dim() else \
                self._first_dim(batch, 0)  # (shape[0], not len(): a fifth of the cost)
            if n is not None:
                mine[_SAMPLES] += n
                mine[_BATCHES] += 1
        except Exception:
            self.on = False

    def on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.on:
            return
        try:
            now = time.time()
            key = id(optimizer)
            if self.primary is None:
                self._first_step(optimizer, now)
            elif key != self.primary and self.primary_ref() is None:
                # The optimizer whose steps were counted is gone (a new one per phase of
                # training): this one's steps are the training's steps now.
                self.primary, self.primary_ref = key, weakref.ref(optimizer)
                self.primary_name = type(optimizer).__name__
            if key != self.primary:
                if key not in self.others:
                    self.others[key] = type(optimizer).__name__
                    self._info(now, "optimizers", count=len(self.others) + 1, message=(
                        f"{len(self.others) + 1} optimizers step in this rank; a step is "
                        "counted each time the first one to step does "
                        f"({self.primary_name}), the others "
                        f"({', '.join(sorted(set(self.others.values())))}) are not counted"))
                return
            mine = self.tally()
            # No batch since the last step: 0 samples if batches came before (a loader that
            # reads one ahead took this step's batch then: totals and rates stay right), and
            # unknown if none ever came.
            samples = mine[_SAMPLES] if mine[_BATCHES] else (0 if self.seen_batches else None)
            waited = mine[_WAITED] if mine[_BATCHES] else None
            self.seen_batches |= bool(mine[_BATCHES])
            mine[_SAMPLES] = mine[_BATCHES] = 0
            mine[_WAITED] = 0.0
            if samples is None and not self.told_no_batches:
                self.told_no_batches = True
                self._info(now, "no_batches", message=(
                    "the optimizer stepped with no DataLoader batch taken since its last step "
                    "in this thread: samples per step are unknown"))
            self.step += 1
            where = self._log_offsets() if self.logs else ""
            with self.lock:
                self.pending.append((now, self.step, samples, self.last_t, waited, where))
            self.last_t = now
            if now >= self.profile_due:  # a profile asked or taken (one compare per step)
                self.profiles.tick(self.step, now)
            if now - self.written_at >= WRITE_EVERY_S:
                self.write_pending()
            elif not self.writer_waiting:  # the writer thread writes it if no step follows soon
                self.writer_waiting = True
                self.wake_writer.set()
        except Exception:
            self.on = False

    def _writer(self) -> None:
        """Writes steps that waited WRITE_EVERY_S with no step after them (a long evaluation
        or checkpoint must not hide the last steps before it)."""
        while True:
            self.wake_writer.wait()
            self.wake_writer.clear()
            time.sleep(WRITE_EVERY_S)
            self.writer_waiting = False
            try:
                self.write_pending()
            except Exception:
                self.on = False

    def write_pending(self) -> None:
        """Format and write the steps taken since the last write, in one os.write."""
        if os.getpid() != self.pid:
            return  # a forked child holds its parent's steps (and maybe a lock held for good)
        with self.lock:
            pending, self.pending = self.pending, []
            if not pending:
                return
            self.written_at = time.time()
            lines = []
            for now, step, samples, last_t, waited, where in pending:
                if last_t is None:
                    dt = phases = "null"
                else:
                    elapsed = now - last_t
                    dt = repr(elapsed)
                    # The study's "step" (batch in hand to optimizer step done) and the time spent
                    # waiting in the loader (on XLA the previous step's graph runs there).
                    phases = ("null" if waited is None else
                              f'{{"data":{waited!r},"step":{max(0.0, elapsed - waited)!r}}}')
                lines.append(f'{{"t":{now!r},"kind":"step","rank":{self.rank},'
                             f'"local_rank":{self.local_rank},"step":{step},'
                             f'"samples":{"null" if samples is None else samples},"loss":null,'
                             f'"dt":{dt},"phases":{phases},"src":"auto",'
                             f'"attempt":{self.attempt}{where}}}\n')
            assert self.file is not None
            self.file.write("".join(lines), len(lines), time.time())

    def write_at_exit(self) -> None:
        # The process is leaving: nothing to switch off, nothing to raise into.
        with contextlib.suppress(Exception):
            self.profiles.at_exit()
        with contextlib.suppress(Exception):
            self.write_pending()

    # -- helpers ---------------------------------------------------------------------------
    def _log_offsets(self) -> str:
        """`,"out":[dev,ino,offset]` (and `err`): how far this process had written its log
        files when the step was done (a line printed after it begins there or later)."""
        try:
            return "".join(f',"{key}":[{dev},{ino},{os.lseek(fd, 0, os.SEEK_CUR)}]'
                           for key, fd, dev, ino in self.logs)
        except OSError:  # the descriptor was closed or replaced: offsets no more
            self.logs = []
            return ""

    def _find_logs(self) -> None:
        """stdout and stderr, where each is a file (torchrun's log files, neurotui's spool):
        a pipe or a terminal has no offset to place lines by."""
        for key, fd in (("out", 1), ("err", 2)):
            with contextlib.suppress(OSError):
                status = os.fstat(fd)
                if stat.S_ISREG(status.st_mode):
                    self.logs.append((key, fd, status.st_dev, status.st_ino))

    def open_file(self) -> RecordFile:
        """This rank's record file, opened at its first record (a step, or a compile, which
        comes before the first step)."""
        if self.file is not None:
            if self.pid == os.getpid():
                return self.file
            self.pending = []  # a forked child: those steps are its parent's to write
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", str(self.rank)))
        self.attempt = int(os.environ.get(ATTEMPT_ENV, "0"))
        probe_dir = os.path.join(self.session_dir, "probe")
        os.makedirs(probe_dir, exist_ok=True)
        self.file = RecordFile(os.path.join(probe_dir, f"auto-rank-{self.rank}.jsonl"),
                               self.rank)
        self.pid = os.getpid()
        return self.file

    def _first_step(self, optimizer: Any, now: float) -> None:
        """Open this rank's file and say what is being timed."""
        self.primary = id(optimizer)
        self.primary_ref = weakref.ref(optimizer)
        self.primary_name = type(optimizer).__name__
        self.open_file()
        self._find_logs()
        atexit.register(self.write_at_exit)
        threading.Thread(target=self._writer, name="neurotui-autoprobe", daemon=True).start()
        device = _device_type(optimizer)
        asynchronous = device in ("xla", "cuda")
        self._info(now, "armed", optimizer=self.primary_name, device=device, timing="host",
                   pid=os.getpid(), message=(
                       f"steps timed at each {self.primary_name}.step() on the host"
                       + (f" ({device} runs the step asynchronously: the times are host-side, "
                          "and their steady rate is the training's rate)" if asynchronous
                          else "")))
        if self.compiles is not None:
            self.compiles.tell_missing()

    def _info(self, now: float, what: str, **fields: Any) -> None:
        self.record(now, "probe_info", what=what, **fields)

    def record(self, now: float, kind: str, **fields: Any) -> None:
        """One record now (after the steps waiting, in time order)."""
        file = self.open_file()
        self.write_pending()
        record = {"t": now, "kind": kind, "rank": self.rank, "attempt": self.attempt, **fields}
        file.write(json.dumps(record) + "\n", 1, now)

    def _first_dim(self, obj: Any, depth: int) -> int | None:
        """The first dimension of the first tensor in a batch (tuple, list, dict, ...)."""
        if self.tensor_type is not None and isinstance(obj, self.tensor_type):
            shape = obj.shape  # known on the host: no device sync, no value read
            return int(shape[0]) if len(shape) else None
        if depth >= _MAX_BATCH_DEPTH or isinstance(obj, (str, bytes)):
            return None
        if isinstance(obj, (list, tuple)):  # the default collate's batch: checked first
            items = obj
        elif isinstance(obj, dict) or (hasattr(obj, "values") and hasattr(obj, "keys")):
            items = obj.values()
        else:
            return None
        for item in items:
            n = self._first_dim(item, depth + 1)
            if n is not None:
                return n
        return None


class _Compiles:
    """TorchDynamo's compiles in this rank, each recorded as it starts and as it ends.

    Armed when the process imports torch._dynamo (torch.compile does, at its first call), so a
    script without torch.compile pays nothing; it runs only inside a compile, never per step,
    and reads no tensor. The hooks: torch._dynamo.callback's start and end callbacks (the
    compile's id "frame/compile": a compile > 0 of a frame is a recompile), the guard failures
    Dynamo works out before a recompile (convert_frame's get_and_maybe_log_recompilation_reasons,
    wrapped: nothing is logged that was not), the frame being compiled (convert_frame._compile's
    `code`, found up the stack) and counters["graph_break"]. Where one is missing in this torch,
    a `probe_info` record says so once and the others go on."""

    TRIGGERS = {"DYNAMO": "dynamo", "LAZY_BACKWARD": "backward"}

    def __init__(self, probe: _Probe) -> None:
        self.probe = probe
        self.started: dict[tuple[str, str], float] = {}
        self.frames: dict[str, dict[str, Any]] = {}  # compile id -> its frame (for backward)
        self.reasons: list[str] = []
        self.counters: Any = None
        self.missing: list[str] = []
        dynamo = sys.modules["torch._dynamo"]
        try:
            self.handler = dynamo.callback.callback_handler
            self._register()
        except Exception as exc:
            # Said at this rank's first step (a process that never steps, the launcher or a
            # compile worker, writes nothing).
            self.missing.append(f"compile hooks unavailable: no torch._dynamo.callback "
                                f"({exc!r}); compiles are not recorded")
            return
        reset = getattr(dynamo, "reset", None)
        if reset is not None:  # reset() clears every callback: ours come back after it

            def reset_and_rearm(*args: Any, **kwargs: Any) -> Any:
                try:
                    return reset(*args, **kwargs)
                finally:
                    with contextlib.suppress(Exception):
                        self._register()

            reset_and_rearm.__wrapped__ = reset  # type: ignore[attr-defined]
            dynamo.reset = reset_and_rearm
        try:
            convert_frame = sys.modules["torch._dynamo.convert_frame"]
            find_reasons = convert_frame.get_and_maybe_log_recompilation_reasons

            def reasons_kept(*args: Any, **kwargs: Any) -> Any:
                found = find_reasons(*args, **kwargs)
                with contextlib.suppress(Exception):
                    self.reasons = [str(r) for r in found]
                return found

            reasons_kept.__wrapped__ = find_reasons  # type: ignore[attr-defined]
            convert_frame.get_and_maybe_log_recompilation_reasons = reasons_kept
        except Exception as exc:
            self.missing.append(f"recompile reasons unavailable ({exc!r})")
        try:
            self.counters = sys.modules["torch._dynamo.utils"].counters
        except Exception as exc:
            self.missing.append(f"graph break counts unavailable ({exc!r})")

    def _register(self) -> None:
        if self.on_start not in self.handler.start_callbacks:
            self.handler.register_start_callback(self.on_start)
        if self.on_end not in self.handler.end_callbacks:
            self.handler.register_end_callback(self.on_end)

    def tell_missing(self) -> None:
        """Say once, in the session, which of the hooks this torch lacks."""
        if self.missing:
            message, self.missing = "; ".join(self.missing), []
            with contextlib.suppress(Exception):
                self.probe.record(time.time(), "probe_info", what="compile_hooks",
                                  message=message)

    def on_start(self, args: Any) -> None:
        if not self.probe.on:
            return
        try:
            self.tell_missing()
            now = time.time()
            trigger, compile_id = self._ids(args)
            self.started[(trigger, compile_id)] = now
            recompile = trigger == "dynamo" and _compile_number(compile_id) > 0
            reasons, self.reasons = self.reasons, []
            frame = _compiled_frame()
            if trigger == "dynamo":
                self.frames[compile_id] = frame
            elif frame["function"] is None:  # a graph's backward, compiled at its first use
                frame = self.frames.get(compile_id, frame)
            self.probe.record(now, "compile", what="compile", src="torch.compile",
                              id=compile_id, trigger=trigger, recompile=recompile,
                              reason=(reasons[0] if reasons else None) if recompile else None,
                              **frame)
        except Exception:
            self.probe.on = False

    def on_end(self, args: Any) -> None:
        if not self.probe.on:
            return
        try:
            now = time.time()
            trigger, compile_id = self._ids(args)
            began = self.started.pop((trigger, compile_id), None)
            breaks = None
            if self.counters is not None:
                breaks = sum(self.counters.get("graph_break", {}).values())
            self.probe.record(now, "compile", what="compiled", src="torch.compile",
                              id=compile_id, trigger=trigger,
                              dur_s=None if began is None else now - began,
                              graph_breaks=breaks)
        except Exception:
            self.probe.on = False

    def _ids(self, args: Any) -> tuple[str, str]:
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "")
        return self.TRIGGERS.get(trigger, trigger.lower() or "dynamo"), \
            str(getattr(args, "compile_id", ""))


class _Profiles:
    """Profiles on request (`neurotui profile`): the next N optimizer steps of this rank wrapped
    in torch.profiler.profile, the trace written gzipped to profiles/<id>/rank-<R>.json.gz.

    The request is profiles/request.json in the session folder, written whole (renamed into
    place) by the command. While none is being taken, on_step calls `tick` at most every
    LOOK_EVERY_S: one os.stat, and the file read only when it changed (a new inode each
    request). A request is taken once, by the ranks it names (all when none), until it
    expires. Each rank records `profile` records (`started`, then `done` or `failed`) in its
    probe file. Anything that goes wrong ends the capture with a `failed` record and leaves
    training, and the step records, alone."""

    LOOK_EVERY_S = 0.5
    MAX_STEPS = 1000
    MAX_REQUEST_BYTES = 4096

    def __init__(self, probe: _Probe) -> None:
        self.probe = probe
        self.request_path = os.path.join(probe.session_dir, PROFILES_DIR, PROFILE_REQUEST)
        self.seen: tuple[int, int, int] | None = None
        self.taken: set[str] = set()
        self.capture: dict[str, Any] | None = None

    def tick(self, step: int, now: float) -> None:
        """After the counted optimizer step `step`: end a capture whose last step this is, or
        look for a request (and start its capture here: the next step is its first)."""
        probe = self.probe
        if self.capture is not None:
            if step >= self.capture["last_step"]:
                self.finish(step, now)
            return
        probe.profile_due = now + self.LOOK_EVERY_S
        try:
            request = self._new_request()
        except Exception:  # a request that cannot be read or understood: the next one may
            return
        if request is not None:
            self.start(request, step, now)

    def _new_request(self) -> dict[str, Any] | None:
        try:
            status = os.stat(self.request_path)
        except OSError:
            self.seen = None
            return None
        seen = (status.st_ino, status.st_mtime_ns, status.st_size)
        if seen == self.seen or status.st_size > self.MAX_REQUEST_BYTES:
            return None
        self.seen = seen
        with open(self.request_path, encoding="utf-8") as f:
            request = json.loads(f.read(self.MAX_REQUEST_BYTES))
        if not isinstance(request, dict):
            return None
        request_id, steps, ranks = request.get("id"), request.get("steps"), request.get("ranks")
        expires = request.get("expires")
        if not (isinstance(request_id, str) and request_id.isalnum() and len(request_id) <= 64
                and isinstance(steps, int) and 0 < steps <= self.MAX_STEPS
                and isinstance(expires, (int, float))):
            return None
        if request_id in self.taken or time.time() > expires:
            return None
        if isinstance(ranks, list) and self.probe.rank not in ranks:
            return None
        self.taken.add(request_id)
        return request

    def start(self, request: dict[str, Any], step: int, now: float) -> None:
        probe = self.probe
        request_id = request["id"]
        first, last = step + 1, step + int(request["steps"])
        relative = f"{PROFILES_DIR}/{request_id}/rank-{probe.rank}.json.gz"
        fields = {"id": request_id, "first_step": first, "last_step": last, "file": relative}
        try:
            torch = sys.modules["torch"]
            folder = os.path.join(probe.session_dir, PROFILES_DIR, request_id)
            os.makedirs(folder, exist_ok=True)
            profiler, activities, notes = _new_profiler(
                torch, memory=bool(request.get("memory")),
                device_trace=bool(request.get("device_trace")), folder=folder)
            profiler.start()
        except Exception as exc:
            probe.record(now, "profile", what="failed", error=_error_text(exc), **fields)
            return
        self.capture = {**fields, "profiler": profiler, "started": now,
                        "path": os.path.join(probe.session_dir, relative)}
        probe.profile_due = 0.0  # every step now, to end the capture at its last step
        probe.record(now, "profile", what="started", activities=activities,
                     memory=bool(request.get("memory")), notes=notes, **fields)

    def finish(self, step: int, now: float, *, early: bool = False) -> None:
        """Stop the profiler after the capture's last step (or at exit) and write its trace."""
        capture, self.capture = self.capture, None
        self.probe.profile_due = now + self.LOOK_EVERY_S
        if capture is None:
            return
        fields = {key: capture[key] for key in ("id", "first_step", "last_step", "file")}
        fields["last_step"] = min(step, capture["last_step"])
        try:
            capture["profiler"].stop()
            stopped = time.time()
            size = _write_trace(capture["profiler"], capture["path"])
            done = time.time()
            self.probe.record(done, "profile", what="done", bytes=size,
                              capture_s=stopped - capture["started"], export_s=done - stopped,
                              ended_early=early, **fields)
        except Exception as exc:
            self.probe.record(time.time(), "profile", what="failed", error=_error_text(exc),
                              **fields)

    def at_exit(self) -> None:
        """The process leaves during a capture: the steps taken so far are written."""
        if self.capture is not None and self.probe.pid == os.getpid():
            self.finish(self.probe.step, time.time(), early=True)


def _new_profiler(torch: Any, *, memory: bool, device_trace: bool,
                  folder: str) -> tuple[Any, list[str], list[str]]:
    """torch.profiler.profile for this process's devices: CPU always, CUDA where torch sees a
    GPU, and on Neuron (torch_neuronx importable) PrivateUse1 with a NeuronConfig of the
    runtime and CPU-utilisation modes (the device mode only with `device_trace`: it reserves
    HBM). Returns it (not started), the activities' names, and notes on what was left out."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    notes: list[str] = []
    extra: dict[str, Any] = {}
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    neuron = _neuron_config(device_trace, folder, notes)
    if neuron is not None:
        activities.append(ProfilerActivity.PrivateUse1)
        extra["experimental_config"] = neuron
    try:
        profiler = profile(activities=activities, profile_memory=memory, record_shapes=False,
                           **extra)
    except TypeError as exc:  # this torch takes no NeuronConfig there: the host's side alone
        if not extra:
            raise
        notes.append(f"NeuronConfig refused ({_error_text(exc)}): CPU activity only")
        activities = [a for a in activities if a != ProfilerActivity.PrivateUse1]
        profiler = profile(activities=activities, profile_memory=memory, record_shapes=False)
    return profiler, [str(a.name) for a in activities], notes


def _neuron_config(device_trace: bool, folder: str, notes: list[str]) -> Any:
    """Neuron Explorer's NeuronConfig (runtime and CPU-utilisation modes, device mode on
    request), or None where torch_neuronx is not installed or has none."""
    if importlib.util.find_spec("torch_neuronx") is None:
        return None
    for where in ("torch_neuronx.profiler", "torch_neuronx.experimental.profiler",
                  "torch_neuronx"):
        try:
            module = importlib.import_module(where)
            config, modes = module.NeuronConfig, module.ProfileMode
        except (ImportError, AttributeError):
            continue
        chosen = [modes.RUNTIME, modes.CPU_UTIL] + ([modes.DEVICE] if device_trace else [])
        try:
            return config(modes=chosen, output_dir=folder)
        except TypeError:
            return config(modes=chosen)
    notes.append("torch_neuronx has no NeuronConfig here: Neuron runtime activity not captured")
    return None


def _write_trace(profiler: Any, path: str) -> int:
    """The profiler's Chrome trace, gzipped at `path` (whole: renamed into place); its size."""
    import gzip
    import shutil

    plain = f"{path}.{os.getpid()}.json"
    packed = f"{path}.{os.getpid()}.tmp"
    try:
        profiler.export_chrome_trace(plain)
        with open(plain, "rb") as source, gzip.open(packed, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target, 1 << 20)
        os.replace(packed, path)
    finally:
        for leftover in (plain, packed):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    return os.path.getsize(path)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _compile_number(compile_id: str) -> int:
    """The compile's number within its frame: "3/1" -> 1 (the frame's second compile)."""
    try:
        return int(compile_id.rsplit("/", 1)[1].split("_")[0])
    except (IndexError, ValueError):
        return 0


def _compiled_frame() -> dict[str, Any]:
    """The user's function being compiled: the `code` of Dynamo's _compile, up the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            found = frame.f_locals
            target = found.get("code")
            if target is not None and hasattr(target, "co_filename"):
                if target.co_name == "inner" and target.co_filename.endswith("external_utils.py"):
                    # torch.compile(module) compiles a wrapper around the module's call
                    target = _wrapped_code(found.get("closure")) or target
                return {"function": getattr(target, "co_qualname", target.co_name),
                        "file": target.co_filename, "line": target.co_firstlineno}
        frame = frame.f_back
    return {"function": None, "file": None, "line": None}


def _wrapped_code(closure: Any) -> Any:
    """The code a Dynamo wrapper (`inner` of wrap_inline) calls: a module's forward, or a
    function's own code."""
    for cell in closure or ():
        with contextlib.suppress(ValueError):  # an empty cell
            fn = cell.cell_contents
            forward = getattr(type(fn), "forward", None)
            for candidate in (getattr(forward, "__code__", None),
                              getattr(getattr(fn, "__func__", fn), "__code__", None)):
                if candidate is not None:
                    return candidate
    return None


def _device_type(optimizer: Any) -> str | None:
    try:
        return str(optimizer.param_groups[0]["params"][0].device.type)
    except Exception:
        return None
