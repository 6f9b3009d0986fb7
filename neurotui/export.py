"""Export a session's records as a table file (CSV or Parquet) for notebooks and spreadsheets.

`neurotui export SESSION [--what steps|telemetry|events] --format csv|parquet [--out PATH]`

- steps: the reader's steps table (one row per rank per step, probe records winning over
  log-parsed ones), with the script's phase timings as phase_<name> columns when it gave any;
- telemetry: one row per host / procs / neuron / gpu sample, flattened (per-CPU use as mean
  and max, the process tree as counts and sums, one column per NeuronCore or GPU figure);
- events: everything else (compile, process starts and exits, restarts, stops, warnings...),
  nested fields as JSON text.

Missing values stay missing (empty in CSV, null in Parquet), never 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurotui.session.jsonfile import dumps_strict
from neurotui.session.meta import SessionFormatError
from neurotui.session.paths import SessionNotFound, find_session

if TYPE_CHECKING:
    import pandas as pd

    from neurotui.session.reader import SessionReader

# pandas, numpy and the reader are imported where a table is made, not with this module: the
# command line builds its parser from here, and `neurotui run` must start without them.

WHATS = ("steps", "telemetry", "events")
FORMATS = ("csv", "parquet")
_TELEMETRY_ORDER = ("host", "procs", "neuron", "gpu")
# Per-device lists in telemetry: the key naming each item, and the column prefix.
_DEVICE_LISTS = {"cores": ("core", "nc"), "gpus": ("index", "gpu")}


# -- tables ---------------------------------------------------------------------------------

def steps_table(reader: SessionReader) -> pd.DataFrame:
    """The steps table with phase timings (phase_<name> columns) joined on (t, rank)."""
    steps = reader.steps().copy()
    steps["src"] = steps["src"].astype(str)
    phases = reader.phases()
    if not len(phases) or not {"t", "rank"} <= set(phases.columns):
        return steps
    phases = phases.drop_duplicates(["t", "rank"], keep="last")
    phases = phases.rename(columns={c: f"phase_{c}" for c in phases.columns
                                    if c not in ("t", "rank")})
    return steps.merge(phases, on=["t", "rank"], how="left", validate="many_to_one")


def telemetry_table(reader: SessionReader) -> pd.DataFrame:
    """One row per telemetry sample, in time order; needs a reader keeping all telemetry
    (telemetry_history=None)."""
    import pandas as pd

    rows = [flatten_telemetry(record) for kind in _TELEMETRY_ORDER
            for record in reader.events.get(kind, ())]
    if not rows:
        return pd.DataFrame({"t": pd.Series(dtype=float), "kind": pd.Series(dtype=object)})
    df = _frame(rows).sort_values("t", kind="stable", ignore_index=True)
    return _columns_first(df, ("t", "kind"))


def flatten_telemetry(record: dict[str, Any]) -> dict[str, Any]:
    """One telemetry event as flat columns (see the module docstring)."""
    import numpy as np

    out: dict[str, Any] = {"t": record.get("t"), "kind": record.get("kind")}
    for key, value in record.items():
        if key in ("t", "kind"):
            continue
        if key == "cpu" and isinstance(value, list):
            cpus = [float(x) for x in value if _is_number(x)]
            out["cpu_count"] = len(value)
            out["cpu_mean"] = float(np.mean(cpus)) if cpus else None
            out["cpu_max"] = max(cpus) if cpus else None
        elif key == "load" and isinstance(value, list):
            for minutes, x in zip((1, 5, 15), value, strict=False):
                out[f"load_{minutes}"] = x
        elif key == "procs" and isinstance(value, list):
            out.update(_procs_figures(value))
        elif key in _DEVICE_LISTS and isinstance(value, list):
            id_key, prefix = _DEVICE_LISTS[key]
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                ident = item.get(id_key, i)
                for field, x in item.items():
                    if field != id_key and (x is None or _is_number(x) or isinstance(x, str)):
                        out[f"{prefix}{ident}_{field}"] = x
        else:
            out[key] = _scalar(value)
    return out


def _procs_figures(procs: list[Any]) -> dict[str, Any]:
    items = [p for p in procs if isinstance(p, dict)]
    cpu = [float(p["cpu"]) for p in items if _is_number(p.get("cpu"))]
    rss = [float(p["rss"]) for p in items if _is_number(p.get("rss"))]
    roles = [p.get("role") for p in items]
    return {"procs": len(items), "procs_ranks": roles.count("rank"),
            "procs_workers": roles.count("worker"), "procs_compilers": roles.count("compiler"),
            "procs_cpu": sum(cpu) if cpu else None, "procs_rss": sum(rss) if rss else None}


def events_table(reader: SessionReader) -> pd.DataFrame:
    """The events that are neither steps nor telemetry (nor log offsets), in time order."""
    import pandas as pd

    from neurotui.session.reader import BOUNDED_KINDS

    rows = []
    for kind, records in reader.events.items():
        if kind in BOUNDED_KINDS:
            continue
        rows.extend({k: _scalar(v) for k, v in record.items()} for record in records)
    if not rows:
        return pd.DataFrame({"t": pd.Series(dtype=float), "kind": pd.Series(dtype=object)})
    df = _frame(rows).sort_values("t", kind="stable", ignore_index=True)
    return _columns_first(df, ("t", "kind"))


def export_table(session_dir: Path, what: str = "steps") -> tuple[pd.DataFrame, str | None]:
    """The table to export and the reader's problems (skipped lines, with file:line)."""
    from neurotui.session.reader import SessionReader

    if what not in WHATS:
        raise ValueError(f"unknown table {what!r}; one of {', '.join(WHATS)}")
    history = None if what == "telemetry" else 0
    reader = SessionReader(session_dir, telemetry_history=history).load()
    build = {"steps": steps_table, "telemetry": telemetry_table, "events": events_table}[what]
    return build(reader), reader.problems.summary()


def job_table(parts: list[Path], what: str = "steps") -> tuple[pd.DataFrame, str | None]:
    """A job of many nodes as one table: its nodes' tables (export_table) together, in time
    order, each row with its `node`. Its steps' ranks are the job's global ranks already."""
    import pandas as pd

    from neurotui.session.jobs import node_of
    from neurotui.session.meta import load_meta

    frames, problems = [], []
    for part in parts:
        df, problem = export_table(part, what)
        df.insert(0, "node", node_of(load_meta(part)) or part.name)
        frames.append(df)
        if problem:
            problems.append(f"{part.name}: {problem}")
    joined = pd.concat(frames, ignore_index=True).sort_values("t", kind="stable",
                                                               ignore_index=True)
    return _columns_first(joined, ("t", "node")), "; ".join(problems) or None


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of differing keys as a table whose whole-number columns stay whole numbers (a
    pid is not 5.0 because another kind of event has no pid: missing is <NA>)."""
    import pandas as pd

    keys = list(dict.fromkeys(k for row in rows for k in row))
    columns: dict[str, Any] = {}
    for key in keys:
        values = [row.get(key) for row in rows]
        present = [v for v in values if v is not None]
        if present and all(type(v) is int for v in present):
            columns[key] = pd.array(values, dtype="Int64")
        else:
            columns[key] = values
    return pd.DataFrame(columns)


def _scalar(value: Any) -> Any:
    """Nested values as JSON text: one type per column, whatever each event held."""
    if isinstance(value, dict | list):
        return dumps_strict(value, sort_keys=True, default=str)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _columns_first(df: pd.DataFrame, first: Iterable[str]) -> pd.DataFrame:
    lead = [c for c in first if c in df.columns]
    return df[lead + [c for c in df.columns if c not in lead]]


# -- writing --------------------------------------------------------------------------------

def write_table(df: pd.DataFrame, fmt: str, out: Path | None, *, replace: bool = False
                ) -> None:
    """Write `df` as CSV or Parquet to `out` (None: CSV to stdout). Without `replace`, a file
    that exists is left as it is (FileExistsError); a file this made is removed again when
    writing it fails."""
    if fmt == "csv" and out is None:
        df.to_csv(sys.stdout, index=False)
        return
    if fmt not in FORMATS or out is None:
        raise ValueError("Parquet goes to a file: give --out PATH")
    if fmt == "parquet":
        import pyarrow  # noqa: F401  # ImportError before the file is made
    with open(out, "wb" if replace else "xb") as f:
        try:
            if fmt == "csv":
                df.to_csv(f, index=False)
            else:
                _parquet_safe(df).to_parquet(f, index=False)
        except BaseException:
            if not replace:
                out.unlink(missing_ok=True)
            raise


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Parquet wants one type per column: a column mixing text and numbers (an event field
    that differs between kinds) is written as text."""
    df = df.copy()
    for column in df.columns:
        if df[column].dtype != object:
            continue
        types = {type(v) for v in df[column] if v is not None and not _is_nan(v)}
        if len(types) > 1:
            df[column] = [None if v is None or _is_nan(v) else
                          v if isinstance(v, str) else dumps_strict(v) for v in df[column]]
    return df


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def default_out(session_dir: Path, what: str, fmt: str) -> Path:
    """./<session>-<what>.<csv|parquet>: in the current folder, not inside the session."""
    return Path.cwd() / f"{session_dir.name}-{what}.{fmt}"


# -- command line ---------------------------------------------------------------------------

def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "export", help="write a session's steps, telemetry or events as CSV or Parquet",
        description="Export one session's records as a table file (pandas; Parquet needs "
                    "pyarrow).")
    p.add_argument("session", metavar="SESSION",
                   help="folder name under sessions/ or any unique part of it, or a job id "
                        "(all its nodes in one table, with a node column)")
    p.add_argument("--what", choices=WHATS, default="steps", help="which table (default steps)")
    p.add_argument("--format", choices=FORMATS, default="csv")
    p.add_argument("--out", metavar="PATH",
                   help="file to write (default ./<session>-<what>.<format>; '-' for CSV on "
                        "stdout); never inside a session folder")
    p.add_argument("--force", action="store_true",
                   help="overwrite the --out file if it exists (refused otherwise)")
    return p


def refuse_out(out: Path, root: Path, sessions: Iterable[Path], *, force: bool) -> str | None:
    """Why `out` must not be written, or None. Never into a session folder (the exported one,
    wherever it is, or any folder under the sessions folder): a session's own files must not
    be replaced by a table. Never over an existing file without `force`."""
    target = out.resolve()  # a link is judged by where it leads
    folders = [path.resolve() for path in sessions]
    folders += [path.resolve() for path in _subfolders(root)]
    for folder in folders:
        if target.is_relative_to(folder):
            return (f"{out} is inside the session folder {folder}: export writes outside "
                    "sessions; give --out elsewhere")
    if target.is_dir():
        return f"{out} is a folder: give --out a file name"
    if (out.exists() or out.is_symlink()) and not force:
        return f"{out} exists: not overwritten (add --force to replace it)"
    return None


def _subfolders(root: Path) -> list[Path]:
    try:
        return [path for path in root.iterdir() if path.is_dir()]
    except OSError:
        return []


def run(args: argparse.Namespace, root: Path) -> int:
    """`neurotui export`: 0 written; 2 no such session, unreadable meta.json or bad output."""
    from neurotui.session.jobs import job_parts

    if args.out == "-" and args.format != "csv":
        print("neurotui: only CSV can go to stdout; give --out PATH for Parquet",
              file=sys.stderr)
        return 2
    try:
        if parts := job_parts(root, args.session):  # a job of many nodes
            session_dir = root / f"job-{args.session}"  # (names the default file only)
        else:
            session_dir = find_session(root, args.session)
        out = None if args.out == "-" else Path(args.out).expanduser() if args.out else \
            default_out(session_dir, args.what, args.format)
        # Before the session is read: a refusal costs nothing and leaves everything as it was.
        if out is not None and (why := refuse_out(out, root, parts or [session_dir],
                                                  force=args.force)):
            print(f"neurotui: {why}", file=sys.stderr)
            return 2
        if parts:
            df, problems = job_table(parts, args.what)
        else:
            df, problems = export_table(session_dir, args.what)
    except (SessionNotFound, SessionFormatError) as exc:
        print(f"neurotui: {exc}", file=sys.stderr)
        return 2
    if problems:
        print(f"neurotui: {session_dir}: {problems}", file=sys.stderr)
    if out is None:
        try:
            write_table(df, "csv", None)
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            # Python would complain again flushing stdout at exit: point it at nothing.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    try:
        write_table(df, args.format, out, replace=args.force)
    except FileExistsError:  # made since it was looked at
        print(f"neurotui: {out} exists: not overwritten (add --force to replace it)",
              file=sys.stderr)
        return 2
    except ImportError:
        print("neurotui: Parquet needs pyarrow: pip install 'neurotui[parquet]'",
              file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"neurotui: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"neurotui: wrote {len(df):,} {args.what} rows to {out}", file=sys.stderr)
    return 0
