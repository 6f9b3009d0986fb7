"""Where a server of ours listens (`serve`, the Prometheus exporter): the port and host the
user gives, and whether only this machine can reach that host."""

from __future__ import annotations

import argparse
import ipaddress

LOOPBACK = "127.0.0.1"
"""The default host: nothing of a run is shown beyond this machine unless the user says so."""


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError("a port is 1 to 65535")
    return port


def is_local(host: str) -> bool:
    """Whether only this machine can reach `host` (a loopback address or name)."""
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
