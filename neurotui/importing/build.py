"""The session of an imported run: built in a folder beside the sessions, renamed into place
whole at the end, so that a failed import leaves no half session for a view to read.

Log lines go through the step recorder the supervisor records with (the same rules for bars,
running totals, printed throughput), each stamped with the time the run itself gave it;
TensorBoard's scalars are written as step records of their own (with the learning rate).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

from neurotui import __version__
from neurotui.importing import sources, timing
from neurotui.importing.logs import PARSE_BATCH, ImportProblem, TimedPart, time_part
from neurotui.importing.tensorboard import TensorBoardRun, read_run
from neurotui.session import layout
from neurotui.session.create import new_session_folder, write_first_meta
from neurotui.session.paths import list_sessions
from neurotui.session.steprecord import NO_PHASES, StepRecord, encode_steps
from neurotui.session.writer import EventWriter, read_meta, update_meta
from neurotui.sources.steplog import StepLineParser
from neurotui.supervisor.steprecorder import StepRecorder

FLUSH_EVERY = 50_000
"""Records written in one go (the writer holds what waits in memory)."""


@dataclass
class ImportOptions:
    name: str | None = None
    instance_type: str | None = None
    price_per_hour: str | None = None
    region: str | None = None
    samples_per_step: float | None = None
    started: float | None = None
    force: bool = False


@dataclass
class Imported:
    """The session made, and what the command says of it."""

    session_dir: Path
    meta: dict[str, Any]
    said: list[str] = field(default_factory=list)


def parse_started(text: str) -> float:
    """`--started`: an ISO date-time (local time where it names no zone) as unix seconds."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError as exc:
        raise ImportProblem(f"--started {text!r}: not an ISO date-time (like "
                            "2024-05-01T12:00:03 or 2024-05-01 12:00:03+00:00)") from exc


def import_run(root: Path, paths: list[Path], options: ImportOptions,
               argv: list[str]) -> Imported:
    """The session of the run at `paths` under `root` (ImportProblem: nothing written)."""
    resolved = [p.resolve() for p in paths]
    if not options.force:
        _refuse_twice(root, resolved)
    found = sources.find(resolved)
    kind = _kind(found.kinds)
    if found.event_files:
        run = read_run(found.event_files)
        return _build(root, resolved, options, argv, kind, tensorboard_run=run)
    parser = StepLineParser.default()
    parts, problems = [], []
    for part in found.logs:
        try:  # one log alone: its lines to the recorder whole, where their stamps allow
            parts.append(time_part(part, parser, options.started,
                                   whole=len(found.logs) == 1))
        except ImportProblem as exc:
            problems.append(str(exc))
    if not parts:
        raise ImportProblem("; ".join(problems[:4]) + (
            f" (and {len(problems) - 4} more)" if len(problems) > 4 else "") +
            ". Tried the built-in step formats: `neurotui patterns FILE` shows what is read "
            "of a log, and what is not")
    imported = _build(root, resolved, options, argv, kind, parts=parts, parser=parser)
    if problems:  # logs of the run that hold no step (a torchrun rank's stderr, mostly)
        imported.said.append(f"{len(problems)} log(s) with no step line: "
                             + "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else ""))
    return imported


def _kind(kinds: dict[str, str]) -> str:
    distinct = sorted(set(kinds.values()))
    return distinct[0] if len(distinct) == 1 else "+".join(distinct)


def _refuse_twice(root: Path, resolved: list[Path]) -> None:
    wanted = sorted(str(p) for p in resolved)
    for path in list_sessions(root):
        try:
            imported = read_meta(path).get("imported")
        except (OSError, ValueError):
            continue
        if isinstance(imported, dict) and sorted(imported.get("sources") or []) == wanted:
            raise ImportProblem(f"already imported as {path.name} (--force imports it again)")


def _build(root: Path, resolved: list[Path], options: ImportOptions, argv: list[str],
           kind: str, *, parts: list[TimedPart] | None = None,
           tensorboard_run: TensorBoardRun | None = None,
           parser: StepLineParser | None = None) -> Imported:
    root.mkdir(parents=True, exist_ok=True)
    beside = Path(tempfile.mkdtemp(prefix=".import-", dir=root))
    try:
        if tensorboard_run is not None:
            times = [wall for _, wall, *_ in tensorboard_run.steps]
        else:
            assert parts is not None
            times = [t for part in parts for t in (
                part.stamped if part.stamped is not None else
                [t for t, _, _ in part.entries])]
        started, ended = min(times), max(times)
        name = options.name or _default_name(resolved)
        session_dir = new_session_folder(beside, name, started)
        writer = EventWriter(session_dir / layout.EVENTS)
        try:
            if tensorboard_run is not None:
                imported, said = _write_tensorboard(writer, tensorboard_run, options)
            else:
                assert parts is not None and parser is not None
                imported, said = _write_logs(session_dir, writer, parts, parser)
            writer.flush(final=True)
        finally:
            writer.close()
        if writer.failed_writes:  # the writer drops rather than fails: a run must not stop
            raise ImportProblem(f"could not write {writer.failed_writes:,} records into "
                                f"{root} (a full disk?)")
        imported = {"sources": [str(p) for p in resolved], "kind": kind,
                    "imported_at": time.time(),
                    "samples_per_step": options.samples_per_step, **imported}
        price = _price(options)
        said.append(f"price: {price['note']}")
        attempts = 1 + max((p.attempt for p in parts or ()), default=0)
        write_first_meta(
            session_dir, name=name, started_at=started,
            command=["neurotui", "import", *argv], user_command=["neurotui", "import", *argv],
            shell=False, host=None, cwd=None,
            versions={"python": None, "torch": None, "torch_xla": None, "torch_neuronx": None,
                      "neuronx_cc": None, "neurotui": __version__},
            instance=price["instance"], price=price["price"],
            # The reader shares --samples-per-step among a log's ranks; TensorBoard's steps
            # carry theirs (one rank).
            config={"samples_per_step": None if tensorboard_run is not None
                    else options.samples_per_step},
            imported=imported)
        meta = update_meta(session_dir, ended_at=ended, exit={
            "code": None, "signal": None, "reason": "ended", "attempts": attempts})
        meta = _with_summary(session_dir, meta, said)
        final = _move_into(root, session_dir)
        return Imported(final, meta, said)
    finally:
        shutil.rmtree(beside, ignore_errors=True)


def _default_name(resolved: list[Path]) -> str:
    first = resolved[0]
    return first.stem if first.is_file() else first.name


def _price(options: ImportOptions) -> dict[str, Any]:
    """Priced as `run` prices a run, from what the user says alone: the machine importing is
    not the one that ran, so nothing is detected (no IMDS)."""
    from neurotui.pricing.record import instance_record, price_record
    from neurotui.pricing.resolve import resolve_price

    price = resolve_price(instance_type=options.instance_type,
                          price_per_hour=options.price_per_hour, region=options.region,
                          use_imds=False)
    return {"instance": instance_record(price), "price": price_record(price),
            "note": price.note}


def _write_logs(session_dir: Path, writer: EventWriter, parts: list[TimedPart],
                parser: StepLineParser) -> tuple[dict[str, Any], list[str]]:
    """Every part's lines through the step recorder of its rank and attempt (a torchrun
    rank's stdout and stderr share one: a step both print is recorded once), in time order
    across parts; each log's text kept in logs/ for replay's log panel."""
    by_rank: dict[tuple[int | None, int], StepRecorder] = {}
    for part in parts:
        if (part.rank, part.attempt) not in by_rank:
            by_rank[part.rank, part.attempt] = StepRecorder(writer, parser, attempt=part.attempt)
    recorders = [by_rank[part.rank, part.attempt] for part in parts]
    for recorder, part in zip(recorders, parts, strict=True):
        if part.stamped is not None and part.lines is not None:
            # Each line at its stamp, through the recorder's one-line door (record_line:
            # the supervisor's batch door changes with its followers' needs).
            record_line, rank = recorder.record_line, part.rank
            read = part.bodies if part.bodies is not None else part.lines
            for at in range(0, len(part.lines), PARSE_BATCH):
                lines = part.lines[at:at + PARSE_BATCH]
                for record, line, t in zip(parser.parse_values_many(read[at:at + PARSE_BATCH]),
                                           lines, part.stamped[at:at + PARSE_BATCH],
                                           strict=True):
                    if record is not None:
                        record_line(record, rank, line, t)
                writer.flush()
            part.steps = recorder.steps_written
    merged = [(t, index, record, line) for index, part in enumerate(parts)
              for t, record, line in part.entries]
    merged.sort(key=itemgetter(0))
    for count, (t, index, record, line) in enumerate(merged, 1):
        recorders[index].record_line(record, parts[index].rank, line, t)
        if count % FLUSH_EVERY == 0:
            writer.flush()
    for part in parts:
        _keep_log(session_dir, part)
    steps = sum(r.steps_written for r in by_rank.values())
    ranks = sorted({rank for r in by_rank.values() for rank in r.step_counters})
    main = max(parts, key=lambda p: p.steps)
    said = [f"{steps:,} steps of {len(ranks)} rank{'s' if len(ranks) != 1 else ''} "
            f"from {len(parts)} log{'s' if len(parts) != 1 else ''}",
            _times_said(main.times_from, main.resolution_s)]
    said.extend(dict.fromkeys(note for part in parts for note in part.notes))
    imported = {
        "times": main.times_from, "resolution_s": main.resolution_s,
        "span_steps": main.span_steps, "steps": steps,
        "parts": [{"source": str(p.source), "kind": p.kind, "rank": p.rank,
                   "attempt": p.attempt, "times": p.times_from,
                   "resolution_s": p.resolution_s, "span_steps": p.span_steps,
                   "step_lines": p.steps} for p in parts],
        "notes": list(dict.fromkeys(note for part in parts for note in part.notes))}
    return imported, said


def _keep_log(session_dir: Path, part: TimedPart) -> None:
    """The log's text in logs/rank-R.log (a torchrun folder's stdout and stderr, and its
    attempts, one after another), as a recorded run keeps it."""
    target = session_dir / layout.LOGS_DIR / f"rank-{part.rank or 0}.log"
    if part.kind == sources.CLOUDWATCH:
        with open(target, "a", encoding="utf-8") as f:
            f.writelines(f"{line}\n" for line in part.lines or ())
        return
    with open(part.source, "rb") as src, open(target, "ab") as dst:
        shutil.copyfileobj(src, dst)


def _write_tensorboard(writer: EventWriter, run: TensorBoardRun,
                       options: ImportOptions) -> tuple[dict[str, Any], list[str]]:
    """A step record per step of the loss tag (or the most-logged one), at its wall time, of
    rank 0 (a TensorBoard run is written by one process): its samples --samples-per-step's
    (as the reader would share them out: one rank has them all), else a logged throughput
    over the step's time."""
    previous: tuple[int, float] | None = None
    per_step = options.samples_per_step
    from_option = None if per_step is None else "samples_per_step"
    isfinite = math.isfinite
    batch: list[StepRecord] = []
    for step, wall, loss, lr, rate in run.steps:
        samples, samples_from = per_step, from_option
        if rate is not None and per_step is None and previous is not None and \
                step > previous[0] and wall > previous[1]:
            samples = rate * (wall - previous[1]) / (step - previous[0])
            samples_from = "throughput"
        previous = (step, wall)
        if isfinite(wall) and all(v is None or isfinite(v) for v in (loss, samples, lr, rate)):
            record = StepRecord(wall, 0, step, samples, loss, None, NO_PHASES, "log", 0)
            if rate is not None:
                record.throughput = rate
            if samples_from is not None:
                record.samples_from = samples_from
            if lr is not None:
                record.lr = lr
            batch.append(record)
            if len(batch) == FLUSH_EVERY:
                writer.write_encoded_lines("step", len(batch), encode_steps(batch))
                writer.flush()
                batch.clear()
            continue
        # A NaN loss: null, named in `nonfinite` (FORMAT.md), by the writer's encoder; the
        # records before it first, in order.
        writer.write_encoded_lines("step", len(batch), encode_steps(batch))
        batch.clear()
        extra = {key: value for key, value in (("throughput", rate), ("lr", lr),
                                               ("samples_from", samples_from))
                 if value is not None}
        writer.write("step", t=wall, rank=0, step=step, samples=samples, loss=loss, dt=None,
                     phases=None, src="log", attempt=0, **extra)
    if batch:
        writer.write_encoded_lines("step", len(batch), encode_steps(batch))
    written = len(run.steps)
    resolution = timing.resolution_of([wall for _, wall, *_ in run.steps])
    said = [f"{written:,} steps from {len(run.files)} TensorBoard event file"
            f"{'s' if len(run.files) != 1 else ''}",
            f"loss: tag {run.loss_tag!r}" if run.loss_tag else
            f"no loss tag among {', '.join(run.tags[:8])}: steps from the most-logged tag",
            _times_said(timing.TENSORBOARD_WALL_TIME, resolution)]
    if run.skipped_records:
        said.append(f"{run.skipped_records} record(s) skipped (bad CRC or cut short)")
    imported = {"times": timing.TENSORBOARD_WALL_TIME, "resolution_s": resolution,
                "span_steps": None, "steps": written,
                "tags": {"loss": run.loss_tag, "lr": run.lr_tag,
                         "throughput": run.throughput_tag},
                "skipped_records": run.skipped_records, "notes": []}
    return imported, said


def _times_said(times_from: str, resolution: float | None) -> str:
    if times_from == timing.NO_TIMES:
        return "times: none (steps counted, never timed: no step time or rate)"
    if resolution is None:
        return f"times: {times_from}"
    return f"times: {times_from} (resolution {resolution:g} s)"


def _with_summary(session_dir: Path, meta: dict[str, Any], said: list[str]) -> dict[str, Any]:
    """The run's figures in meta.json, as the supervisor leaves them at a run's end (for
    `ls` and the home screen)."""
    try:
        from neurotui.session.columns import Columns
        from neurotui.session.reader import SessionReader
        from neurotui.summary import summarize

        reader = SessionReader(session_dir, telemetry_history=1).load()
        return update_meta(session_dir, summary=summarize(
            meta, reader.step_columns(),
            Columns.of_records(reader.events.get("compile", ()), ("t", "rank")),
            phases=reader.phase_columns(), probe_info=list(reader.events.get("probe_info", ())),
            samples_from=reader.samples_from))
    except Exception as exc:  # the session stands without it; views compute the figures
        said.append(f"no summary: {exc}")
        return meta


def _move_into(root: Path, session_dir: Path) -> Path:
    """`session_dir` renamed under `root`, under its name or with `-2`, `-3`... (meta.json's
    `id` follows)."""
    suffix = 1
    while True:
        target = root / (session_dir.name if suffix == 1 else f"{session_dir.name}-{suffix}")
        if not target.exists():
            if target.name != session_dir.name:
                update_meta(session_dir, id=target.name)
            try:
                os.rename(session_dir, target)
                return target
            except OSError as exc:
                if not target.exists():  # not a name taken meanwhile: say why
                    raise ImportProblem(f"cannot move the session into {root}: "
                                        f"{exc.strerror or exc}") from exc
        suffix += 1
