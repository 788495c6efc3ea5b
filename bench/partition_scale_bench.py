"""How many partitions one ``samsa serve`` holds: descriptors, creation, serving, restarts.

With real broker processes (``samsa serve``) and librdkafka (confluent-kafka):

1. CreateTopics of ``--partitions`` partitions in one request, while another
   connection sends an ApiVersions request every 10 ms; the longest answer it
   waited for during the creation is the stall other clients see.
2. Descriptors (``/proc/<pid>/fd``) and memory (``VmRSS``/``VmHWM``) of the broker
   before and after, per partition.
3. Served: one record produced to every partition, then every partition fetched
   from offset 0 by one consumer (all records must come back).
4. Restarted after a clean stop, then after ``kill -9`` (just after a produce of
   one more record to every partition, so every log is past its recovery point):
   time from start to "ready" (loading and recovery), peak RSS (``VmHWM``),
   descriptors, and every record read back again.

Usage::

    PYTHONPATH=src .venv/bin/python bench/partition_scale_bench.py --partitions 10000

Prints one line per figure. Nothing is asserted: see ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing.broker import BrokerProcess

TOPIC = "scale"
PROBE_INTERVAL_S = 0.01


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def memory_mb(pid: int) -> tuple[float, float]:
    """``(VmRSS, VmHWM)`` of ``pid`` in MB."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def pid_of(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid


class StallProbe:
    """ApiVersions v0 requests every ``PROBE_INTERVAL_S`` on one connection; the longest wait.

    Paced, not back to back: a probe that keeps the broker's loop busy would take
    the GIL from the threads making the topic's files and slow the creation.
    """

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=120)
        self._stop = threading.Event()
        self.longest = 0.0
        self.answered = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StallProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def _run(self) -> None:
        client = b"probe"
        body = struct.pack(">hhih", 18, 0, 1, len(client)) + client
        frame = struct.pack(">i", len(body)) + body
        while not self._stop.is_set():
            started = time.perf_counter()
            self._sock.sendall(frame)
            size = struct.unpack(">i", self._recv(4))[0]
            self._recv(size)
            self.longest = max(self.longest, time.perf_counter() - started)
            self.answered += 1
            self._stop.wait(PROBE_INTERVAL_S)

    def _recv(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("broker closed the probe connection")
            data += chunk
        return bytes(data)


def create_topic(bootstrap: str, partitions: int) -> tuple[float, float, int]:
    """Create the topic; ``(seconds, longest probe wait, probe answers)``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with StallProbe(bootstrap) as probe:
        started = time.perf_counter()
        futures = admin.create_topics(
            [NewTopic(TOPIC, partitions, 1)], operation_timeout=600, request_timeout=600
        )
        futures[TOPIC].result()
        took = time.perf_counter() - started
    return took, probe.longest, probe.answered


def produce_one_each(bootstrap: str, partitions: int, tag: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    started = time.perf_counter()
    for partition in range(partitions):
        producer.produce(TOPIC, f"{tag}-{partition}".encode(), partition=partition,
                         on_delivery=delivered)  # fmt: skip
        producer.poll(0)
    remaining = producer.flush(600)
    took = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, failures: {failures[:3]}")
    return took


def fetch_all(bootstrap: str, partitions: int, expected_per_partition: int) -> float:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "scale-bench", "enable.auto.commit": False,
        "enable.partition.eof": False, "fetch.wait.max.ms": 100,
    })  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    wanted = partitions * expected_per_partition
    seen = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while seen < wanted and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                seen += 1
    took = time.perf_counter() - started
    consumer.close()
    if seen != wanted:
        raise RuntimeError(f"fetched {seen} records, expected {wanted}")
    return took


def restart(broker: BrokerProcess) -> tuple[float, float, float, int]:
    """Start again; ``(seconds to ready, VmRSS MB, VmHWM MB, descriptors)``."""
    started = time.perf_counter()
    broker.start(timeout=900)
    took = time.perf_counter() - started
    rss, hwm = memory_mb(pid_of(broker))
    return took, rss, hwm, fd_count(pid_of(broker))


def report(name: str, value: float | int | str, unit: str = "", note: str = "") -> None:
    shown = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}" if isinstance(
        value, int) else value  # fmt: skip
    print(f"{name:<44} {shown:>12} {unit:<6} {note}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the data dir")
    parser.add_argument("--override", action="append", default=[], help="broker key=value")
    args = parser.parse_args()
    n = args.partitions
    parent = Path(tempfile.mkdtemp(prefix="samsa-scale-", dir=args.dir))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    report("partitions", n)
    report("RLIMIT_NOFILE (soft/hard)", f"{soft}/{hard}")
    broker = BrokerProcess(parent / "data", args.override)
    try:
        broker.start(timeout=120)
        pid = pid_of(broker)
        fds_before = fd_count(pid)
        rss_before, _ = memory_mb(pid)
        report("descriptors, no topic", fds_before)
        took, stall, answers = create_topic(broker.bootstrap, n)
        report("CreateTopics", took, "s")
        report("  longest ApiVersions wait meanwhile", stall * 1000, "ms", f"{answers} answered")
        fds = fd_count(pid)
        report("descriptors after creation", fds, "", f"{(fds - fds_before) / n:.3f} per partition")
        rss, _ = memory_mb(pid)
        report("VmRSS after creation", rss, "MB", f"{(rss - rss_before) * 1024 / n:.1f} KB/part.")
        report("produce 1 record to each", produce_one_each(broker.bootstrap, n, "a"), "s")
        report("fetch every partition", fetch_all(broker.bootstrap, n, 1), "s")
        fds = fd_count(pid)
        report("descriptors after serving", fds, "", f"{(fds - fds_before) / n:.3f} per partition")
        rss, hwm = memory_mb(pid)
        report("VmRSS / VmHWM after serving", f"{rss:,.0f}/{hwm:,.0f}", "MB")

        stopped = time.perf_counter()
        code = broker.stop(timeout=900)
        report("clean stop", time.perf_counter() - stopped, "s", f"exit code {code}")
        took, rss, hwm, fds = restart(broker)
        report("start after clean stop", took, "s")
        report("  VmRSS / VmHWM", f"{rss:,.0f}/{hwm:,.0f}", "MB")
        report("  descriptors", fds)
        report("  fetch every partition", fetch_all(broker.bootstrap, n, 1), "s")

        produce_one_each(broker.bootstrap, n, "b")
        broker.kill()
        took, rss, hwm, fds = restart(broker)
        report("start after kill -9 (recovery)", took, "s")
        report("  VmRSS / VmHWM", f"{rss:,.0f}/{hwm:,.0f}", "MB")
        report("  descriptors", fds)
        report("  fetch every partition", fetch_all(broker.bootstrap, n, 2), "s")
        recovered = [
            line for line in broker.log_path.read_text(errors="replace").splitlines()
            if "loaded" in line and "logs from" in line
        ]  # fmt: skip
        if recovered:
            report("  broker says", "", "", recovered[-1].split(" - ")[-1][:100])
        broker.stop(timeout=900)
    finally:
        broker.kill()
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
