"""The Prometheus exporter's cost beside a real run (`neurotui run --metrics-port`).

Starts the reference CPU workload detached with an exporter, then scrapes /metrics every
`--interval` seconds (Prometheus's usual 15 s) as a scraper would, and reports the exporter
process's CPU as a share of one core over the window, its CPU per scrape, its RSS, and its
wakeups (voluntary context switches, all threads) between scrapes: it should sleep then.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_log_follow import voluntary_switches as switches  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def train_cmd(steps: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
            str(REPO / "runner" / "train_vit.py"), "--model", "vit-tiny", "--image-size", "32",
            "--batch-size", "16", "--workers", "1", "--device", "cpu", "--steps", str(steps)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--interval", type=float, default=15.0, help="seconds between scrapes")
    p.add_argument("--scrapes", type=int, default=8)
    p.add_argument("--steps", type=int, default=100_000, help="long enough to outlast it")
    args = p.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        sessions = Path(tmp)
        subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions),
                        "run", "--detach", "--price-per-hour", "1.34375", "--metrics-port",
                        str(port), "--", *train_cmd(args.steps)], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)
        session = next(sessions.iterdir())
        try:
            meta = json.loads((session / "meta.json").read_text())
            exporter = psutil.Process(meta["metrics"]["pid"])
            url = meta["metrics"]["url"]
            time.sleep(args.interval)  # past the job's start and the exporter's imports
            urllib.request.urlopen(url, timeout=10).read()  # the first read of the session
            cpu0, wall0, sw0 = sum(exporter.cpu_times()[:2]), time.time(), switches(exporter)
            rss, sizes, idle = 0, [], []
            for _ in range(args.scrapes):
                before = switches(exporter)
                time.sleep(args.interval)
                idle.append(switches(exporter) - before)
                sizes.append(len(urllib.request.urlopen(url, timeout=10).read()))
                rss = max(rss, exporter.memory_info().rss)
            cpu = sum(exporter.cpu_times()[:2]) - cpu0
            wall = time.time() - wall0
            print(f"exporter over {wall:.0f} s, {args.scrapes} scrapes every "
                  f"{args.interval:g} s, beside a 2-rank vit-tiny run:")
            print(f"  CPU {cpu:.3f} s = {100 * cpu / wall:.3f}% of one core; "
                  f"{1000 * cpu / args.scrapes:.1f} ms per scrape")
            print(f"  RSS {rss / 2**20:.1f} MiB; exposition {max(sizes)} bytes")
            print(f"  wakeups between scrapes (voluntary switches): {idle}; in all "
                  f"{switches(exporter) - sw0}")
        finally:
            subprocess.run([sys.executable, "-m", "neurotui", "--sessions-dir", str(sessions),
                            "stop", session.name], cwd=REPO, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
