"""What incremental fetch sessions (KIP-227) save a consumer of many partitions.

A real broker (``samsa serve``) with one topic of ``--partitions`` partitions,
one record in each. A raw Fetch v12 client, caught up on every partition,
sends ``--fetches`` fetches with ``max_wait`` 0 in four ways:

- *idle, sessionless*: every fetch names every partition (session id 0,
  epoch -1), and is answered every partition;
- *idle, session*: one full fetch makes the session, then incremental fetches
  naming nothing, answered nothing;
- *one active*: the same two, with one record produced to partition 0 before
  each fetch (the session client names partition 0 again once it has read it).

For each: the broker's CPU time per fetch (``/proc/<pid>/stat`` user+system,
which in the *one active* runs includes the produce), and the request and
response bytes per fetch. The session runs send ``--session-fetches`` fetches
(ten times as many by default): the kernel counts CPU time in 10 ms ticks.

Usage::

    PYTHONPATH=src:. .venv/bin/python bench/fetch_session_bench.py --partitions 2000

Prints one line per run. Nothing is asserted: see ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import read_response, recv_exactly, request_frame

from samsa.testing.broker import BrokerProcess

TOPIC = "sessions"
FETCH = 1
QUIET = {"log_level": 3}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch_values(session_id: int, epoch: int, offsets: dict[int, int]) -> dict[str, Any]:
    partitions = [
        {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
        for p, o in offsets.items()
    ]
    return {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": TOPIC, "partitions": partitions}] if partitions else [],
        "forgotten_topics_data": [],
    }  # fmt: skip


def exchange_sizes(sock: socket.socket, frame: bytes) -> tuple[int, int, int]:
    """Send ``frame``; the request's size, the response's size and its session id."""
    sock.sendall(frame)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    body = recv_exactly(sock, size)
    # v12 response: correlation id, header tags, throttle, error code, session id.
    session_id = struct.unpack_from(">i", body, 4 + 1 + 4 + 2)[0]
    return len(frame), size + 4, session_id


def run(
    broker: BrokerProcess, partitions: int, fetches: int, *, session: bool, active: bool
) -> str:
    pid = broker.process.pid if broker.process is not None else 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **QUIET})
    host, port = broker.bootstrap.rsplit(":", 1)
    offsets = dict.fromkeys(range(partitions), 1)
    offsets[0] = high_watermark_of_0(broker)
    sent = received = 0
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        session_id, epoch = 0, -1
        if session:
            _, _, session_id = exchange_sizes(
                sock, request_frame(FETCH, 12, fetch_values(0, 0, offsets))
            )
            assert session_id != 0, "no session was made"
            epoch = 1
        changed: dict[int, int] = {}
        start = cpu_seconds(pid)
        for i in range(fetches):
            if active:
                producer.produce(TOPIC, b"x" * 100, partition=0)
                producer.flush(30)
            if session:
                values = fetch_values(session_id, epoch, changed)
                epoch += 1
            else:
                values = fetch_values(0, -1, offsets)
            frame = request_frame(FETCH, 12, values, correlation_id=i + 2)
            out, back, _ = exchange_sizes(sock, frame)
            sent += out
            received += back
            changed = {}
            if active:
                offsets[0] += 1  # the record produced above was read
                changed = {0: offsets[0]}
        used = cpu_seconds(pid) - start
    del producer  # its connection goes before the broker does
    mode = "session" if session else "sessionless"
    load = "one active" if active else "idle"
    return (
        f"{partitions} partitions, {load:10s}, {mode:11s}: "
        f"broker CPU {used / fetches * 1000:7.2f} ms/fetch, "
        f"request {sent / fetches:9.0f} B, response {received / fetches:9.0f} B"
    )


def high_watermark_of_0(broker: BrokerProcess) -> int:
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(request_frame(FETCH, 12, fetch_values(0, -1, {0: 0})))
        response = read_response(sock, FETCH, 12)
    return int(response.responses[0].partitions[0].high_watermark)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--session-fetches", type=int, default=0, help="default: 10x --fetches")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start(60)
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(120)
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, **QUIET})
            for p in range(args.partitions):
                producer.produce(TOPIC, b"x" * 100, partition=p)
            assert producer.flush(60) == 0
            del producer
            for active in (False, True):
                for session in (False, True):
                    fetches = (
                        (args.session_fetches or 10 * args.fetches) if session else args.fetches
                    )
                    print(run(broker, args.partitions, fetches,
                              session=session, active=active), flush=True)  # fmt: skip
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
