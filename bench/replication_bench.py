"""Replication benchmark: a three-broker samsa cluster (real ZooKeeper) and confluent-kafka.

Not a test. The script starts ZooKeeper and brokers 1-3 on loopback
(``samsa.testing.cluster``, data in a temporary directory) and measures:

1. **throughput** — N records of 1 KiB produced with ``acks=all`` to a topic of one
   partition with replication factor 3, and to one with replication factor 1, on the
   same cluster; records/s, MB/s (payload, 10^6 B) and the brokers' CPU-seconds;
2. **latency** — ``acks=all``, replication factor 3, a producer sending 1 KiB records
   at a fixed rate (default 5,000/s) for some seconds with ``linger.ms=0``: the
   time from ``produce()`` to the delivery report, p50/p99/p99.9;
3. **failover** — an ``acks=all`` producer sending one record every millisecond to a
   replicated partition; the leader is SIGKILLed, and the time from the kill to the
   first acknowledgement of a record sent after it is reported, with the ZooKeeper
   session timeout it ran with (a dead broker is noticed when its session expires).

    .venv/bin/python bench/replication_bench.py            # default run (~2 minutes)
    .venv/bin/python bench/replication_bench.py --quick    # smaller run

Results: bench/RESULTS.md, section "Replication".
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from samsa.testing.cluster import LocalCluster

CLK_TCK = os.sysconf("SC_CLK_TCK")
QUIET = {"log_level": 3}
SIZE = 1024
THROUGHPUT_PRODUCER = {
    "acks": "all",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "enable.idempotence": False,
}


def cpu_s(cluster: LocalCluster) -> float:
    """User + system CPU seconds of every live broker process so far."""
    total = 0
    for broker in cluster.brokers.values():
        if broker.process is None:
            continue
        fields = Path(f"/proc/{broker.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def create(cluster: LocalCluster, topic: str, replicas: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, replicas, config=config)])[topic].result(30)
    cluster.wait_for_leader(topic)


def throughput(cluster: LocalCluster, topic: str, count: int) -> tuple[float, float, float]:
    """(records/s, MB/s, broker CPU-s per GB) for ``count`` 1 KiB records, acks=all."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, **THROUGHPUT_PRODUCER, **QUIET})
    value = b"x" * SIZE
    failed = []

    def report(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(error)

    producer.produce(topic, value, on_delivery=report)  # warm: connection and metadata
    producer.flush(30)
    cpu0, t0 = cpu_s(cluster), time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0 and not failed, failed[:3]
    elapsed = time.perf_counter() - t0
    cpu = cpu_s(cluster) - cpu0
    megabytes = count * SIZE / 1e6
    return count / elapsed, megabytes / elapsed, cpu / (megabytes / 1000)


def latency(cluster: LocalCluster, topic: str, rate: int, seconds: float) -> list[float]:
    """Produce-to-acknowledgement times (ms) of records sent at ``rate``/s, acks=all."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, **QUIET}
    )
    times: list[float] = []
    value = b"y" * SIZE

    def report(sent: float) -> object:
        def done(error: KafkaError | None, message: Message) -> None:
            if error is None:
                times.append((time.perf_counter() - sent) * 1000)

        return done

    producer.produce(topic, value)
    producer.flush(30)
    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(max(due - now, 0))
        producer.produce(topic, value, on_delivery=report(time.perf_counter()))
        producer.poll(0)
    producer.flush(30)
    return times


def failover(cluster: LocalCluster, topic: str) -> float:
    """Seconds from SIGKILL of the leader to the first acknowledged record sent after it."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200,
            # librdkafka backs off its reconnects to the dead leader up to 10 s by default,
            # and learns of the new leader at its next metadata refresh after one.
            "reconnect.backoff.max.ms": 200,
            "topic.metadata.refresh.interval.ms": 250,
            **QUIET,
        }
    )
    killed_at: list[float] = []
    first_after: list[float] = []
    stop = threading.Event()

    def report(sent: float) -> object:
        def done(error: KafkaError | None, message: Message) -> None:
            if error is None and killed_at and sent > killed_at[0] and not first_after:
                first_after.append(time.perf_counter())

        return done

    def send() -> None:
        while not stop.is_set():
            producer.produce(topic, b"z" * 100, on_delivery=report(time.perf_counter()))
            producer.poll(0.001)
        producer.flush(60)

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(2)
    leader = cluster.leader_of(topic)
    killed_at.append(time.perf_counter())
    cluster.kill(leader)
    deadline = time.perf_counter() + 120
    while not first_after and time.perf_counter() < deadline:
        time.sleep(0.01)
    stop.set()
    sender.join()
    cluster.start_broker(leader)
    return first_after[0] - killed_at[0]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--session-timeouts", default="6000,18000")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.latency_seconds, args.session_timeouts = 50_000, 5.0, "6000"
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="samsa-replication-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", 3).start()
        try:
            create(cluster, "rf1", 1)
            create(cluster, "rf3", 3, **{"min.insync.replicas": "2"})
            rf1, rf3 = [], []
            for _ in range(3):  # interleaved, so drift on a shared machine hits both alike
                rf1.append(throughput(cluster, "rf1", args.records))
                rf3.append(throughput(cluster, "rf3", args.records))
            mid1, mid3 = sorted(rf1)[1], sorted(rf3)[1]
            print(f"throughput, {args.records} x 1 KiB, acks=all (median of 3, interleaved):")
            for name, (rps, mbs, cpu_per_gb) in (("RF 1", mid1), ("RF 3", mid3)):
                print(f"  {name}: {rps:,.0f} records/s  {mbs:.1f} MB/s  "
                      f"{cpu_per_gb:.2f} broker CPU-s per GB (all brokers)")  # fmt: skip
            print(f"  RF 3 / RF 1: {mid3[0] / mid1[0]:.0%}  (runs: RF 1 "
                  f"{', '.join(f'{r[0]:,.0f}' for r in rf1)}; RF 3 "
                  f"{', '.join(f'{r[0]:,.0f}' for r in rf3)} records/s)")  # fmt: skip
            times = latency(cluster, "rf3", args.rate, args.latency_seconds)
            print(f"latency, acks=all RF 3, {args.rate}/s x 1 KiB for {args.latency_seconds:.0f} s "
                  f"({len(times)} records): p50 {statistics.median(times):.2f} ms  "
                  f"p99 {pct(times, 0.99):.2f} ms  p99.9 {pct(times, 0.999):.2f} ms  "
                  f"max {max(times):.2f} ms")  # fmt: skip
        finally:
            cluster.close()
        for timeout_ms in (int(t) for t in args.session_timeouts.split(",")):
            cluster = LocalCluster(
                Path(tmp) / f"failover-{timeout_ms}", 3, session_timeout_ms=timeout_ms
            ).start()
            try:
                create(cluster, "failover", 3, **{"min.insync.replicas": "2"})
                seconds = failover(cluster, "failover")
                print(f"failover, zookeeper.session.timeout.ms={timeout_ms}: first acknowledged "
                      f"write {seconds:.2f} s after SIGKILL of the leader "
                      f"(target <= {timeout_ms / 1000 + 1:.0f} s)")  # fmt: skip
            finally:
                cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
