"""Collectors the supervisor runs: host and process telemetry (psutil), and the accelerator
tools (neuron-monitor, neuron-ls, nvidia-smi) as argv-list subprocesses whose output the
parsers in sources/ turn into session events. May import: sources/, session/ (the writer)."""
