"""Leaders die under an ``acks=all`` producer: nothing acknowledged is lost, nothing diverges.

Three brokers, a topic of three partitions with three replicas and
``min.insync.replicas=2``. An idempotent confluent-kafka producer writes
numbered records with ``acks=all`` while the test SIGKILLs the leader of a
partition and starts it again, then SIGSTOPs the new leader until its ZooKeeper
session expires and lets it run again. Afterwards every replica holds the same records at the same
offsets (read from the segment files), and every acknowledged record is there
exactly once, at its acknowledged offset.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.cluster.conftest import SESSION_TIMEOUT_MS, replica_records

from samsa.testing.cluster import LocalCluster

TOPIC = "failover"
PARTITIONS = 3
QUIET = {"log_level": 3}
IN_FLIGHT = 5000  # records sent and not yet reported, at most


class Acknowledgements:
    """Delivery reports: what the cluster promised to keep (served on the writer's thread)."""

    def __init__(self) -> None:
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed = 0

    @property
    def reported(self) -> int:
        return len(self.acked) + self.failed

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            value = message.value()
            assert value is not None
            self.acked[value] = (message.partition(), message.offset())
        else:
            self.failed += 1


class Writer(threading.Thread):
    """Produces numbered records until stopped, serving delivery reports as it goes."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 120_000,
                # A frozen broker answers nothing: give up on its requests soon and send
                # them to the new leader (they are retried, deduplicated by idempotence).
                "request.timeout.ms": 3000,
                # Nor wait a minute (the default) for a Metadata answer from a frozen broker.
                "socket.timeout.ms": 5000,
                **QUIET,
            }
        )
        self.acks = Acknowledgements()
        self.sent = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            if self.sent - self.acks.reported >= IN_FLIGHT:
                self.producer.poll(0.05)
                continue
            for _ in range(50):
                self.producer.produce(
                    TOPIC, f"record-{self.sent:08d}".encode(), key=str(self.sent).encode(),
                    on_delivery=self.acks,
                )  # fmt: skip
                self.sent += 1
            self.producer.poll(0.01)

    def acked_count(self) -> int:
        return len(self.acks.acked)

    def finish(self) -> None:
        self.stopping.set()
        self.join(30)
        assert self.producer.flush(120) == 0, "records still unacknowledged after two minutes"


def _acked_grows(cluster: LocalCluster, writer: Writer, by: int, what: str) -> None:
    target = writer.acked_count() + by
    cluster.wait_until(lambda: writer.acked_count() >= target, what, timeout=60)


def _full_isrs(cluster: LocalCluster) -> None:
    cluster.wait_until(
        lambda: all(len(cluster.isr_of(TOPIC, p)) == 3 for p in range(PARTITIONS)),
        "every replica back in every ISR",
    )


def test_killed_and_paused_leaders_lose_no_acknowledged_record(cluster: LocalCluster) -> None:
    create_failover_topic(cluster)
    writer = Writer(cluster.bootstrap)
    writer.start()
    try:
        _acked_grows(cluster, writer, 2000, "writes before any fault")

        # A leader killed: its partitions move to the ISR, writes go on; it comes back.
        killed = cluster.leader_of(TOPIC, 0)
        cluster.kill(killed)
        cluster.wait_for_leader(TOPIC, 0, not_in=[killed])
        _acked_grows(cluster, writer, 2000, f"writes after broker {killed} was killed")
        cluster.start_broker(killed)
        _full_isrs(cluster)

        # The new leader frozen past its session: leadership moves again; it thaws.
        paused = cluster.leader_of(TOPIC, 0)
        cluster.pause(paused)
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)
        cluster.wait_for_leader(TOPIC, 0, not_in=[paused])
        _acked_grows(cluster, writer, 2000, f"writes while broker {paused} is frozen")
        cluster.resume(paused)
        _full_isrs(cluster)
        _acked_grows(cluster, writer, 2000, "writes after every broker came back")
    finally:
        writer.finish()
    check_replicas_and_acknowledgements(cluster, writer)


def check_replicas_and_acknowledgements(cluster: LocalCluster, writer: Writer) -> None:
    """Once every replica is back in sync and stopped: the replicas hold the same records at
    the same offsets, no record twice, and every acknowledged record at its offset."""
    _full_isrs(cluster)
    for broker_id in cluster.alive():
        cluster.stop(broker_id)
    acked = writer.acks.acked
    assert acked, "nothing was acknowledged"
    for partition in range(PARTITIONS):
        replicas = {b: replica_records(cluster, b, TOPIC, partition) for b in cluster.brokers}
        reference = replicas[1]
        for broker_id, records in replicas.items():
            assert records == reference, (
                f"{TOPIC}-{partition}: broker {broker_id} holds other records than broker 1 "
                f"({len(records)} vs {len(reference)})"
            )
        offsets = [offset for offset, _ in reference]
        assert offsets == sorted(set(offsets)), f"{TOPIC}-{partition}: offsets repeat"
        stored = dict(reference)
        counts = Counter(stored.values())
        duplicated = [value for value, n in counts.items() if n > 1]
        assert not duplicated, f"{TOPIC}-{partition}: stored twice: {duplicated[:3]}"
        for value, (p, offset) in acked.items():
            if p == partition:
                assert stored.get(offset) == value, (
                    f"acknowledged {value!r} at {TOPIC}-{p}@{offset} is not there "
                    f"(found {stored.get(offset)!r})"
                )


def create_failover_topic(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    topic = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fast_repeated_failovers_lose_nothing_and_leave_identical_replicas(
    cluster: LocalCluster,
) -> None:
    """Twelve rounds: each kills or freezes the leader of some partition, waits for a new
    leader, brings the old one back and, once writes go on, starts the next round without
    waiting for it to catch up — so replicas that diverged at a failover must truncate,
    sometimes while the next failover happens."""
    create_failover_topic(cluster)
    writer = Writer(cluster.bootstrap)
    writer.start()
    rng = random.Random(14)
    try:
        _acked_grows(cluster, writer, 2000, "writes before any fault")
        for round_number in range(12):
            partition = rng.randrange(PARTITIONS)
            victim = cluster.leader_of(TOPIC, partition)
            if round_number % 3 == 2:
                cluster.pause(victim)
                time.sleep(SESSION_TIMEOUT_MS / 1000 + 0.5)
                cluster.wait_for_leader(TOPIC, partition, not_in=[victim])
                cluster.resume(victim)
            else:
                cluster.kill(victim)
                cluster.wait_for_leader(TOPIC, partition, not_in=[victim])
                cluster.start_broker(victim)
            _acked_grows(cluster, writer, 500, f"writes after round {round_number}")
    finally:
        writer.finish()
    check_replicas_and_acknowledgements(cluster, writer)
