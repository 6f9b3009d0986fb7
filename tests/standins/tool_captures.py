"""Stand-ins for the Neuron and NVIDIA tools, which these machines cannot have.

Each replays a real capture from ../shared/fixtures/telemetry/ on stdout, the way the tool
prints it, so the collectors are tested through the real subprocess path. `install(bin_dir)`
writes executables named like the tools that run this file.

Environment knobs: STANDIN_PERIOD (seconds between records, default 0.1) and
STANDIN_EXIT_AFTER (die with code 1 after that many records: tests the restart path).
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "telemetry"
MONITOR_RECORDS = (
    "neuron-monitor_trn1.2xlarge_first-record_no-runtime_real-capture_all-smi.ndjson",
    "neuron-monitor_trn1.2xlarge_full-report_2022_wandb-test-fixture_python-dict_first-element"
    ".py.txt",
)
NEURON_LS_TABLE = "neuron-ls_trn1.2xlarge_idle_real-capture_gnosia93-xla-torch.txt"
NEURON_LS_JSON = "neuron-ls_trn1.2xlarge_json_idle_real-capture_all-smi.json"
NVIDIA_QUERY = "nvidia-smi_query-gpu_csv_with-timestamp_test-fixture.txt"
TOOLS = ("neuron-monitor", "neuron-ls", "nvidia-smi")


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
    _emit(monitor_lines())


def neuron_ls(args: list[str]) -> None:
    name = NEURON_LS_JSON if "--json-output" in args or "-j" in args else NEURON_LS_TABLE
    text = (FIXTURES / name).read_text()
    if name == NEURON_LS_TABLE:  # the capture starts with the shell prompt line
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
