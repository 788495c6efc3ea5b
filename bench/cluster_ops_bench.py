"""Cluster-operations benchmark: a three-broker samsa cluster (real ZooKeeper) and confluent-kafka.

Not a test. The script starts ZooKeeper and brokers 1-3 on loopback
(``samsa.testing.cluster``, data in a temporary directory, ZooKeeper sessions of
6 s) and measures:

1. **group resume** — a consumer group of two members reads a topic of 6 partitions
   (replication factor 3) that a producer writes 1,000 records/s to; the broker of the
   group's coordinator is SIGKILLed, and the time from the kill to the first record
   polled that was produced after the kill is reported (then the broker is started
   again and the cluster waits for full ISRs before the next round);
2. **rolling restart** — under the same producer (idempotent, ``acks=all``) and
   group, every broker in turn is stopped with SIGTERM (controlled shutdown) and
   started again, the next one once every replica is back in its ISR: the total time,
   each broker's stop and start times, and what the clients saw — failed deliveries,
   errors reported to the producer's and consumers' error callbacks, and acknowledged
   records missing afterwards;
3. **reassignment** — a partition holding N MB (1 KiB records) on broker 1 alone is
   moved to brokers 2 and 3 (AlterPartitionReassignments through samsa's admin
   client); the time from the request until the move is complete (the new replicas
   in the ISR, broker 1 gone from the assignment), and MB/s.

    .venv/bin/python bench/cluster_ops_bench.py            # default run (~3 minutes)
    .venv/bin/python bench/cluster_ops_bench.py --quick    # smaller run

Results: bench/RESULTS.md, section "Cluster operations".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from samsa import Admin
from samsa.coordinator.group.records import partition_for
from samsa.testing.cluster import LocalCluster
from samsa.types import TopicPartition

QUIET = {"log_level": 3}
SESSION_TIMEOUT_MS = 6000
TOPIC = "ops"
PARTITIONS = 6
FAST_FAILOVER = {  # give up on a dead or frozen broker's requests within seconds
    "request.timeout.ms": 3000,
    "socket.timeout.ms": 5000,
    "topic.metadata.refresh.interval.ms": 1000,
}


class Load:
    """A producer at ``rate`` records/s (value: the send time) and a group of two."""

    def __init__(self, cluster: LocalCluster, group: str, rate: int = 1000) -> None:
        self.errors: list[str] = []
        self.failed = 0
        self.acked: set[bytes] = set()
        self.polled: set[bytes] = set()
        self.newest_polled_send_time = 0.0
        self.stopping = threading.Event()
        self.rate = rate
        self.producer = Producer({
            "bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 300_000, "error_cb": self._error,
            **FAST_FAILOVER, **QUIET,
        })  # fmt: skip
        self.consumers = [
            Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "group.id": group,
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 1000,
                    "error_cb": self._error,
                    **FAST_FAILOVER,
                    **QUIET,
                }
            )
            for _ in range(2)
        ]
        self.threads = [threading.Thread(target=self._produce, daemon=True)] + [
            threading.Thread(target=self._consume, args=(c,), daemon=True) for c in self.consumers
        ]

    def _error(self, error: KafkaError) -> None:
        self.errors.append(error.str())

    def _report(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acked.add(message.value() or b"")
        else:
            self.failed += 1

    def _produce(self) -> None:
        started, sent = time.monotonic(), 0
        while not self.stopping.is_set():
            while sent < (time.monotonic() - started) * self.rate:
                value = f"{time.monotonic():.6f}-{sent}".encode()
                self.producer.produce(TOPIC, value, on_delivery=self._report)
                sent += 1
            self.producer.poll(0.005)
        self.producer.flush(120)

    def _consume(self, consumer: Consumer) -> None:
        consumer.subscribe([TOPIC])
        while not self.stopping.is_set():
            for message in consumer.consume(500, 0.1):
                if message.error() is not None:
                    continue
                value = message.value() or b""
                self.polled.add(value)
                sent_at = float(value.split(b"-")[0])
                self.newest_polled_send_time = max(self.newest_polled_send_time, sent_at)
        consumer.close()

    def start(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(180)


def create(cluster: LocalCluster, topic: str, partitions: int, replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    topic_spec = NewTopic(topic, partitions, replicas, config={"min.insync.replicas": "2"}
                          if replicas > 1 else {})  # fmt: skip
    admin.create_topics([topic_spec])[topic].result(30)
    for partition in range(partitions):
        cluster.wait_for_leader(topic, partition)


def full_isrs(cluster: LocalCluster, topics: list[str]) -> None:
    def full() -> bool:
        for topic in topics:
            partitions = 50 if topic.startswith("__") else PARTITIONS
            for p in range(partitions):
                if len(cluster.isr_of(topic, p)) != len(cluster.replicas_of(topic, p)):
                    return False
        return True

    cluster.wait_until(full, "every replica back in every ISR", 180)


def group_resume(cluster: LocalCluster, rounds: int) -> list[float]:
    load = Load(cluster, "resume-group").start()
    times = []
    try:
        cluster.wait_until(lambda: len(load.polled) > 2000, "the group reading", 60)
        for _ in range(rounds):
            coordinator = cluster.leader_of("__consumer_offsets", partition_for("resume-group", 50))
            killed_at = time.monotonic()
            cluster.kill(coordinator)
            cluster.wait_until(lambda t=killed_at: load.newest_polled_send_time > t,
                               "the group reading records sent after the kill", 120)  # fmt: skip
            times.append(time.monotonic() - killed_at)
            print(f"  coordinator on broker {coordinator} killed: the group read on after "
                  f"{times[-1]:.2f} s", flush=True)  # fmt: skip
            cluster.start_broker(coordinator)
            full_isrs(cluster, [TOPIC, "__consumer_offsets"])
    finally:
        load.stop()
    return times


def rolling_restart(cluster: LocalCluster) -> dict[str, Any]:
    load = Load(cluster, "rolling-group").start()
    steps = []
    try:
        cluster.wait_until(lambda: len(load.polled) > 2000, "the group reading", 60)
        errors_before = len(load.errors)
        started = time.monotonic()
        for broker_id in sorted(cluster.brokers):
            t0 = time.monotonic()
            cluster.stop(broker_id)
            t1 = time.monotonic()
            cluster.start_broker(broker_id)
            t2 = time.monotonic()
            full_isrs(cluster, [TOPIC, "__consumer_offsets"])
            t3 = time.monotonic()
            steps.append((broker_id, t1 - t0, t2 - t1, t3 - t2))
        total = time.monotonic() - started
        time.sleep(3)  # the group reads what was written last
    finally:
        load.stop()
    missing = load.acked - load.polled
    return {
        "total_s": total, "steps": steps, "failed_deliveries": load.failed,
        "client_errors": load.errors[errors_before:], "acked": len(load.acked),
        "acked_not_polled": len(missing),
    }  # fmt: skip


def reassignment(cluster: LocalCluster, megabytes: int) -> tuple[float, float]:
    create(cluster, "moving", 1, 1)
    replicas = cluster.replicas_of("moving")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 10, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, **QUIET})  # fmt: skip
    value = b"x" * 1024
    failed: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed.append(error)

    for i in range(megabytes * 1000):
        while True:
            try:
                producer.produce("moving", value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) or failed:
        raise RuntimeError(f"the partition was not filled: {failed[:3]}")
    if (held := len(cluster.replica_records(replicas[0], "moving", 0))) != megabytes * 1000:
        raise RuntimeError(f"the partition holds {held} records, not {megabytes * 1000}")
    source = replicas[0]
    target = [b for b in sorted(cluster.brokers) if b != source][:2]

    started = time.monotonic()
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        errors = admin.alter_partition_reassignments({TopicPartition("moving", 0): target})
    if any(errors.values()):
        raise RuntimeError(f"the move was refused: {errors}")
    cluster.wait_until(
        lambda: sorted(cluster.replicas_of("moving")) == sorted(target)
        and sorted(cluster.isr_of("moving")) == sorted(target),
        "the move complete", 600,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    for broker_id in target:  # the new replicas hold every record
        if (held := len(cluster.replica_records(broker_id, "moving", 0))) != megabytes * 1000:
            raise RuntimeError(f"broker {broker_id}'s replica holds {held} records")
    return elapsed, megabytes * 1.024 / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds, megabytes = (1, 50) if args.quick else (3, 300)
    with tempfile.TemporaryDirectory(prefix="samsa-ops-bench-") as scratch:
        cluster = LocalCluster(Path(scratch), 3, ["group.initial.rebalance.delay.ms=0",
                                                   "group.min.session.timeout.ms=1000"],
                               session_timeout_ms=SESSION_TIMEOUT_MS)  # fmt: skip
        with cluster:
            cluster.start()
            create(cluster, TOPIC, PARTITIONS, 3)
            print(f"1. group resume after its coordinator's broker is killed "
                  f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}):", flush=True)  # fmt: skip
            times = group_resume(cluster, rounds)
            print(f"   median {statistics.median(times):.2f} s, min {min(times):.2f} s, "
                  f"max {max(times):.2f} s over {len(times)} kills", flush=True)  # fmt: skip
            print("2. rolling restart (SIGTERM, controlled shutdown) under load:", flush=True)
            result = rolling_restart(cluster)
            for broker_id, stop_s, start_s, isr_s in result["steps"]:
                print(f"   broker {broker_id}: stop {stop_s:.2f} s, start {start_s:.2f} s, "
                      f"back in every ISR {isr_s:.2f} s", flush=True)  # fmt: skip
            print(f"   total {result['total_s']:.1f} s; {result['acked']} records "
                  f"acknowledged, {result['failed_deliveries']} failed deliveries, "
                  f"{len(result['client_errors'])} client error callbacks "
                  f"{sorted(set(result['client_errors']))[:4]}, "
                  f"{result['acked_not_polled']} acknowledged records not read",
                  flush=True)  # fmt: skip
            print(f"3. reassignment of a {megabytes} MB partition to two new brokers:", flush=True)
            elapsed, rate = reassignment(cluster, megabytes)
            print(f"   {elapsed:.1f} s, {rate:.0f} MB/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
