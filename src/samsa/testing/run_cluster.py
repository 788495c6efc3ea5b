"""``python -m samsa.testing.run_cluster`` (``make cluster``): ZooKeeper and brokers on
127.0.0.1, each broker's address, data and log printed, all stopped on Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from samsa.testing.cluster import LocalCluster


def main(argv: Sequence[str] | None = None) -> int:
    """Run a local cluster until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m samsa.testing.run_cluster",
        description="ZooKeeper and samsa brokers on 127.0.0.1, stopped together on Ctrl-C.",
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path("./data-cluster"),
        help="where ZooKeeper and broker-N keep their data (default ./data-cluster: apart "
        "from a single broker's ./data, so neither takes the other's directories)",
    )
    parser.add_argument("--port", type=int, default=9092, help="the first broker's port")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    ports = [args.port + i for i in range(args.brokers)]
    cluster = LocalCluster(
        args.data, args.brokers, args.override, ports=ports, session_timeout_ms=18_000
    )
    stop = False

    def interrupted(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    cluster.start()
    print(f"ZooKeeper: {cluster.zookeeper_connect}", flush=True)
    for broker_id, broker in cluster.brokers.items():
        print(f"broker {broker_id}: {broker.bootstrap}  data {broker.data_dir}  "
              f"log {broker.log_path}", flush=True)  # fmt: skip
    print(f"bootstrap.servers={cluster.bootstrap}   (Ctrl-C stops them all)", flush=True)
    try:
        while not stop:
            time.sleep(0.2)
    finally:
        print("stopping the brokers and ZooKeeper…", flush=True)
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
