"""Operating a cluster: rolling restarts with controlled shutdown, coordinators that move."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, KafkaError
from tests.cluster.test_failover import (
    PARTITIONS,
    TOPIC,
    Writer,
    check_replicas_and_acknowledgements,
    create_failover_topic,
)

from samsa.coordinator.group.records import partition_for
from samsa.testing.cluster import LocalCluster

QUIET = {"log_level": 3}


class GroupReader(threading.Thread):
    """A confluent-kafka group member reading the topic, noting every error it is given."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                **QUIET,
            }
        )
        self.values: set[bytes] = set()
        self.errors: list[KafkaError] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([TOPIC])
        while not self.stopping.is_set():
            for message in self.consumer.consume(500, 0.2):
                error = message.error()
                if error is None:
                    value = message.value()
                    assert value is not None
                    self.values.add(value)
                elif error.code() != KafkaError._PARTITION_EOF:
                    self.errors.append(error)
        self.consumer.close()

    def finish(self) -> None:
        self.stopping.set()
        self.join(60)


@pytest.mark.timeout(300)
def test_a_rolling_restart_under_load_shows_clients_only_retriable_errors_and_loses_nothing(
    cluster: LocalCluster,
) -> None:
    create_failover_topic(cluster)
    writer = Writer(cluster.bootstrap)
    reader = GroupReader(cluster.bootstrap, "rolling")
    writer.start()
    reader.start()
    try:
        cluster.wait_until(lambda: writer.acked_count() >= 2000, "writes before the restarts")
        for broker_id in sorted(cluster.brokers):
            before = writer.acked_count()
            cluster.restart(broker_id)  # SIGTERM: leadership moves first, then it stops
            cluster.wait_until(
                lambda: all(len(cluster.isr_of(TOPIC, p)) == 3 for p in range(PARTITIONS)),
                f"broker {broker_id} back in every ISR",
            )
            cluster.wait_until(
                lambda before=before: writer.acked_count() >= before + 1000,  # type: ignore[misc]
                f"writes go on after broker {broker_id} restarted",
            )
    finally:
        writer.finish()
        acked = set(writer.acks.acked)
        cluster.wait_until(lambda: acked <= reader.values, "the group read every record",
                           timeout=60)  # fmt: skip
        reader.finish()
    assert writer.acks.failed == 0, "a record was given up"
    fatal = [e for e in reader.errors if not e.retriable()]
    assert fatal == [], fatal
    check_replicas_and_acknowledgements(cluster, writer)


def test_a_group_goes_on_when_its_coordinators_broker_is_killed(cluster: LocalCluster) -> None:
    create_failover_topic(cluster)
    writer = Writer(cluster.bootstrap)
    reader = GroupReader(cluster.bootstrap, "moving")
    writer.start()
    reader.start()
    try:
        cluster.wait_until(lambda: len(reader.values) >= 2000, "the group reads")
        coordinator = cluster.leader_of("__consumer_offsets", partition_for("moving", 50))
        cluster.kill(coordinator)
        cluster.wait_for_leader("__consumer_offsets", partition_for("moving", 50),
                                not_in=[coordinator])  # fmt: skip
        seen = len(reader.values)
        cluster.wait_until(lambda: len(reader.values) >= seen + 2000,
                           "the group reads on with a new coordinator")  # fmt: skip
        cluster.start_broker(coordinator)
    finally:
        writer.finish()
        acked = set(writer.acks.acked)
        cluster.wait_until(lambda: acked <= reader.values, "the group read every record",
                           timeout=60)  # fmt: skip
        reader.finish()
    assert [e for e in reader.errors if not e.retriable()] == []
