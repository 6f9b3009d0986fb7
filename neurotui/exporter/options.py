"""`neurotui run --metrics-port/--metrics-host`: the options, what they put in the run's
config, and the warning for an address others can reach. Light (no prometheus_client): the
command line imports it for every command."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from neurotui.listening import LOOPBACK, is_local, port_number

DEFAULT_HOST = LOOPBACK
STARTED_LINE = "neurotui exporter: serving "
"""How the exporter's line saying it serves begins: no reason for its end, if it ends."""


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Prometheus (see docs/prometheus.md)")
    group.add_argument("--metrics-port", type=port_number, metavar="PORT",
                       help="serve the live figures in Prometheus's format on "
                            "http://HOST:PORT/metrics while the run goes on")
    group.add_argument("--metrics-host", default=DEFAULT_HOST, metavar="HOST",
                       help="address to serve them on (default 127.0.0.1: this machine "
                            "only); 0.0.0.0 means every interface")


def metrics_config(args: argparse.Namespace, err: TextIO = sys.stderr) -> dict[str, Any] | None:
    """The run config's `metrics` (None: not asked for); warns when others can scrape."""
    if args.metrics_port is None:
        return None
    if not is_local(args.metrics_host):
        print(f"neurotui: WARNING: serving metrics on {args.metrics_host}, not only on this "
              "machine: anyone who can reach its port reads the run's figures (no password, "
              "no encryption)", file=err)
    return {"host": args.metrics_host, "port": args.metrics_port}
