"""``python -m samsa.testing.run_cluster`` (``make cluster``): ZooKeeper and brokers on
127.0.0.1, each broker's address, data and log printed, all stopped on Ctrl-C.

A broker that exits on its own (a crash, ``kill -9``) is reported at once, with its exit
code, its log and how to start it again: ``restart N`` typed here (Enter), which also
restarts a running broker (a clean stop first)."""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading
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
        pid = broker.process.pid if broker.process is not None else "?"
        print(f"broker {broker_id}: {broker.bootstrap}  pid {pid}  data {broker.data_dir}  "
              f"log {broker.log_path}", flush=True)  # fmt: skip
    print(f"bootstrap.servers={cluster.bootstrap}   (Ctrl-C stops them all)", flush=True)
    commands: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
    reported: set[int] = set()
    try:
        while not stop:
            for broker_id, broker in cluster.brokers.items():
                code = broker.process.poll() if broker.process is not None else None
                if code is not None and broker_id not in reported:
                    reported.add(broker_id)
                    print(f"broker {broker_id} exited with code {code} (its log: "
                          f"{broker.log_path}); type 'restart {broker_id}' and Enter to "
                          "start it again", flush=True)  # fmt: skip
            try:
                command = commands.get(timeout=0.2)
            except queue.Empty:
                continue
            _run_command(cluster, command, reported)
    finally:
        print("stopping the brokers and ZooKeeper…", flush=True)
        cluster.close()
    return 0


def _read_commands(commands: queue.Queue[str]) -> None:
    for line in sys.stdin:
        commands.put(line.strip())


def _run_command(cluster: LocalCluster, command: str, reported: set[int]) -> None:
    verb, _, which = command.partition(" ")
    if not command:
        return
    if verb != "restart" or not which.strip().isdigit():
        print(f"unknown command {command!r}: type 'restart N' (N a broker id)", flush=True)
        return
    broker_id = int(which)
    broker = cluster.brokers.get(broker_id)
    if broker is None:
        print(f"no broker {broker_id}: the brokers are {sorted(cluster.brokers)}", flush=True)
        return
    print(f"restarting broker {broker_id}…", flush=True)
    if broker.process is not None and broker.process.poll() is not None:
        broker.process = None  # exited on its own: nothing to stop
    try:
        broker.restart()
    except RuntimeError as exc:
        print(f"broker {broker_id} did not start: {exc}", flush=True)
        return
    reported.discard(broker_id)
    print(f"broker {broker_id}: running again on {broker.bootstrap}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
