"""Stand-ins for the Neuron and NVIDIA tools, which these machines cannot have.

Each replays a real capture from tests/fixtures/telemetry/ on stdout, the way the tool
prints it, so the collectors are tested through the real subprocess path. `install(bin_dir)`
writes executables named like the tools that run this file.

Environment knobs: STANDIN_PERIOD (seconds between records, default 0.1),
STANDIN_EXIT_AFTER (die with code 1 after that many records: tests the restart path) and
STANDIN_CAPTURE (`trn1`, the default, or `trn2`).

STANDIN_CAPTURE=trn2: neuron-ls prints the SDK 2.29 trn2n.48xlarge captures from the Neuron docs
(the table with NEURON CORE IDS, CPU AFFINITY and NUMA NODE, 16 devices and 64 logical cores;
`--json-output` prints the docs' JSON example, whose `...` line elides devices 1 to 14, as the
docs print it). neuron-monitor prints one record built, each time the stand-in runs, from the
SDK 2.30 user guide's fragments (`monitor_record_from_doc_fragments`): the guide has no whole
report, only a top-level skeleton and one fragment per metric group, none of them valid JSON.
They are made JSON by program, never by hand: `//` comments and the elision lines (`...`,
`[...]`) are dropped; brackets are closed by indentation, which is how the fragments' unbalanced
braces (memory_used, neuron_k8s_info) are read; commas between members are written anew; the
skeleton's `"neuron_runtime_tag", "my_app_1"` (a comma for a colon) is read as a member. Each
empty group of the skeleton is then filled with the fragment of that name. Every number comes
from the fragments, so the record shows what they show: two logical cores (0 and 1) with their
physical `v3d` split and memory, one device's ECC counters, not the 64 cores of a trn2.48xlarge
(those come from neuron-ls).
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script (the stand-in tools' command line), so tests/captures.py is not importable.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry"
MONITOR_RECORDS = (
    "neuron-monitor_trn1.2xlarge_first-record_no-runtime_real-capture_all-smi.ndjson",
    "neuron-monitor_trn1.2xlarge_full-report_2022_wandb-test-fixture_python-dict_first-element"
    ".py.txt",
)
NEURON_LS_TABLE = "neuron-ls_trn1.2xlarge_idle_real-capture_gnosia93-xla-torch.txt"
NEURON_LS_JSON = "neuron-ls_trn1.2xlarge_json_idle_real-capture_all-smi.json"
NVIDIA_QUERY = "nvidia-smi_query-gpu_csv_with-timestamp_test-fixture.txt"
TOOLS = ("neuron-monitor", "neuron-ls", "nvidia-smi")
TRN2_NEURON_LS_TABLE = "neuron-ls_trn2n.48xlarge_default_docs-2.29.txt"
TRN2_NEURON_LS_JSON = "neuron-ls_trn2n.48xlarge_json_docs-2.29_elided.txt"
TRN2_FRAGMENT = "neuron-monitor_docs-2.30_fragment_{}.txt"
TRN2_SKELETON = "toplevel-structure"


def capture() -> str:
    return os.environ.get("STANDIN_CAPTURE", "trn1")


# --- the SDK 2.30 doc fragments as one record -------------------------------------------------

_ELISIONS = {"...", "[...]", "…"}
_COMMA_FOR_COLON = re.compile(r'^("(?:[^"\\]|\\.)*")\s*,\s*(?=["\d\[{tfn-])')


def _strip_comment(line: str) -> str:
    """Drop a `//` comment that is not inside a string."""
    in_string = escaped = False
    for i, ch in enumerate(line):
        if in_string:
            escaped = ch == "\\" and not escaped
            if ch == '"' and not escaped:
                in_string = False
        elif ch == '"':
            in_string = True
        elif line.startswith("//", i):
            return line[:i]
    return line


def doc_fragment_json(text: str) -> str:
    """A doc fragment (`"name": {...}` members, or a `{...}` object) as valid JSON text.

    Line by line: comments and elision lines go; a line's own trailing commas and closing
    brackets are set aside, and every container opened on a line indented at or deeper than a
    line's indentation is closed before it (a closing line closes at least one). So the
    indentation decides where a container ends, which is how a reader reads the fragments
    whose braces do not balance."""
    out: list[str] = []
    stack: list[tuple[int, str]] = []  # (indentation of the opening line, closer)
    need_comma = False

    def close(indent: int, at_least_one: bool) -> None:
        nonlocal need_comma
        closed = False
        while stack and (stack[-1][0] >= indent or (at_least_one and not closed)):
            out.append(stack.pop()[1])
            closed = need_comma = True

    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        body = line.strip()
        if not body or body.rstrip(",").strip() in _ELISIONS:
            continue
        indent = len(line) - len(line.lstrip())
        body = body.rstrip(",").rstrip()
        if body in ("}", "]", "},", "],"):
            close(indent, at_least_one=True)
            continue
        close(indent, at_least_one=False)
        if need_comma:
            out.append(",")
        body = _COMMA_FOR_COLON.sub(r"\1: ", body)
        if body.endswith(("{", "[")):
            out.append(body)
            stack.append((indent, "}" if body.endswith("{") else "]"))
            need_comma = False
        else:
            out.append(body)
            need_comma = True
    close(-1, at_least_one=False)
    text = "".join(out)
    return text if text.startswith(("{", "[")) else "{" + text + "}"


def _fill(skeleton: Any, fragments: dict[str, Any]) -> Any:
    """Each empty group of the skeleton replaced by the fragment of that name."""
    if isinstance(skeleton, list):
        return [_fill(item, fragments) for item in skeleton]
    if not isinstance(skeleton, dict):
        return skeleton
    return {key: fragments[key] if value == {} and key in fragments else _fill(value, fragments)
            for key, value in skeleton.items()}


def monitor_record_from_doc_fragments() -> dict[str, Any]:
    """The SDK 2.30 user guide's fragments as one neuron-monitor report (see the docstring)."""
    fragments: dict[str, Any] = {}
    prefix, suffix = TRN2_FRAGMENT.split("{}")
    for path in sorted(FIXTURES.glob(TRN2_FRAGMENT.format("*"))):
        name = path.name[len(prefix):-len(suffix)]
        if name in (TRN2_SKELETON, "metric_group-generic"):  # not a group: the frame, a pattern
            continue
        fragments.update(json.loads(doc_fragment_json(path.read_text())))
    skeleton = json.loads(doc_fragment_json(
        (FIXTURES / TRN2_FRAGMENT.format(TRN2_SKELETON)).read_text()))
    return _fill(skeleton, fragments)


def monitor_lines() -> list[str]:
    lines = []
    for name in MONITOR_RECORDS:
        text = (FIXTURES / name).read_text()
        if name.endswith(".py.txt"):  # a Python literal: `MOCK_DATA = [ {...},` (first element)
            literal = text.split("=", 1)[1].strip().rstrip(",") + "]"
            record = ast.literal_eval(literal)[0]
            lines.append(json.dumps(record, separators=(",", ":")))
        else:
            lines.extend(line for line in text.splitlines() if line.strip())
    return lines


def _emit(lines: list[str], repeat_from: int = 0) -> None:
    period = float(os.environ.get("STANDIN_PERIOD", "0.1"))
    exit_after = int(os.environ.get("STANDIN_EXIT_AFTER", "0"))
    sent, i = 0, 0
    while True:
        print(lines[i], flush=True)
        sent += 1
        if exit_after and sent >= exit_after:
            sys.exit(1)
        i = i + 1 if i + 1 < len(lines) else repeat_from
        time.sleep(period)


def neuron_monitor(args: list[str]) -> None:
    if capture() == "trn2":
        _emit([json.dumps(monitor_record_from_doc_fragments(), separators=(",", ":"))])
    else:
        _emit(monitor_lines())


def neuron_ls(args: list[str]) -> None:
    as_json = "--json-output" in args or "-j" in args
    if capture() == "trn2":
        name = TRN2_NEURON_LS_JSON if as_json else TRN2_NEURON_LS_TABLE
    else:
        name = NEURON_LS_JSON if as_json else NEURON_LS_TABLE
    text = (FIXTURES / name).read_text()
    if text.startswith("$ "):  # a capture that starts with the shell prompt line
        text = text.split("\n", 1)[1]
    sys.stdout.write(text)


def nvidia_smi(args: list[str]) -> None:
    lines = (FIXTURES / NVIDIA_QUERY).read_text().splitlines()
    _emit(lines, repeat_from=1)  # the header once, then the rows again and again


def install(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        exe = bin_dir / tool
        exe.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "
                       f"{tool} \"$@\"\n")
        exe.chmod(0o755)
    return bin_dir


if __name__ == "__main__":
    tool, rest = sys.argv[1], sys.argv[2:]
    {"neuron-monitor": neuron_monitor, "neuron-ls": neuron_ls,
     "nvidia-smi": nvidia_smi}[tool](rest)
