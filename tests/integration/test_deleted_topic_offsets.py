"""Committed offsets and deleted topics; offset commits whose append fails.

Deleting a topic removes every group's committed offsets of it, as Kafka's group
coordinator does, so a topic created again under the name is read from its start.
A commit the offsets topic cannot take is answered per partition with Kafka's
error, never with a closed connection. Real broker processes, real clients.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
# Names of their own: the session's shared broker serves every test module.
ORDERS, KEEP, EVENTS = "deleted-orders", "deleted-keep", "deleted-events"
BILLING, AUDIT, READERS = "deleted-billing", "deleted-audit", "deleted-readers"
OFFSET_INVALID = -1001  # librdkafka's "no committed offset"
OFFSET_COMMIT, JOIN_GROUP, LEAVE_GROUP, DESCRIBE_GROUPS, DELETE_GROUPS = 8, 11, 13, 15, 42
COORDINATOR_NOT_AVAILABLE = 15
# Every acks=all append fails on a single broker, the coordinators' too.
NO_APPEND = ["min.insync.replicas=2", "group.initial.rebalance.delay.ms=0"]


def _create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(10)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", **QUIET,
    })  # fmt: skip


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    consumer = _consumer(bootstrap, group)
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, wanted: list[TopicPartition]) -> list[int]:
    consumer = _consumer(bootstrap, group)
    try:
        return [tp.offset for tp in consumer.committed(wanted, timeout=10)]
    finally:
        consumer.close()


def _topic_with_commits(bootstrap: str) -> None:
    """ORDERS (2 partitions) and KEEP, with commits of groups BILLING and AUDIT."""
    _create_topic(bootstrap, ORDERS, 2)
    _create_topic(bootstrap, KEEP)
    _commit(bootstrap, BILLING, [TopicPartition(ORDERS, 0, 10), TopicPartition(ORDERS, 1, 4),
                                   TopicPartition(KEEP, 0, 3)])  # fmt: skip
    _commit(bootstrap, AUDIT, [TopicPartition(ORDERS, 0, 7)])


ORDERS_AND_KEEP = [TopicPartition(ORDERS, 0), TopicPartition(ORDERS, 1),
                   TopicPartition(KEEP, 0)]  # fmt: skip


def test_deleting_a_topic_removes_every_groups_committed_offsets_of_it(
    samsa_broker: BrokerProcess,
) -> None:
    bootstrap = samsa_broker.bootstrap
    _topic_with_commits(bootstrap)
    _delete_topic(bootstrap, ORDERS)
    _create_topic(bootstrap, ORDERS, 2)
    assert _committed(bootstrap, BILLING, ORDERS_AND_KEEP) == [OFFSET_INVALID] * 2 + [3]
    assert _committed(bootstrap, AUDIT, ORDERS_AND_KEEP[:1]) == [OFFSET_INVALID]


def test_offsets_of_a_deleted_topic_stay_gone_after_a_restart(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        _topic_with_commits(broker.bootstrap)
        _delete_topic(broker.bootstrap, ORDERS)
        broker.restart()
        _create_topic(broker.bootstrap, ORDERS, 2)
        expected = [OFFSET_INVALID] * 2 + [3]
        assert _committed(broker.bootstrap, BILLING, ORDERS_AND_KEEP) == expected
        assert _committed(broker.bootstrap, AUDIT, ORDERS_AND_KEEP[:1]) == [OFFSET_INVALID]
    finally:
        broker.stop()


def test_a_group_consumer_reads_a_recreated_topic_from_its_start(
    samsa_broker: BrokerProcess,
) -> None:
    bootstrap = samsa_broker.bootstrap
    _create_topic(bootstrap, EVENTS)
    _produce(bootstrap, EVENTS, [b"old-0", b"old-1"])
    _commit(bootstrap, READERS, [TopicPartition(EVENTS, 0, 2)])
    _delete_topic(bootstrap, EVENTS)
    _create_topic(bootstrap, EVENTS)
    new = [b"new-%d" % i for i in range(4)]
    _produce(bootstrap, EVENTS, new)
    consumer = _consumer(bootstrap, READERS)
    try:
        consumer.subscribe([EVENTS])
        read: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(read) < len(new) and time.monotonic() < deadline:
            read += [m.value() for m in consumer.consume(len(new), 1) if m.error() is None]
        assert read == new  # from offset 0, not from the old topic's committed 2
    finally:
        consumer.close()


def test_an_offset_commit_the_offsets_topic_cannot_take_is_answered_per_partition(
    tmp_path: Path,
) -> None:
    # NOT_ENOUGH_REPLICAS from the offsets partition, answered as Kafka answers it.
    broker = start_broker(tmp_path / "data", NO_APPEND)
    try:
        _create_topic(broker.bootstrap, ORDERS, 2)
        response = exchange(broker.bootstrap, OFFSET_COMMIT, 8, {
            "group_id": BILLING, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": ORDERS, "partitions": [
                {"partition_index": i, "committed_offset": 5, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for i in (0, 1)]}],
        })  # fmt: skip
        [topic] = response.topics
        codes = [p.error_code.value for p in topic.partitions]
        assert codes == [COORDINATOR_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE]
        assert _committed(broker.bootstrap, BILLING, ORDERS_AND_KEEP[:2]) == [OFFSET_INVALID] * 2
    finally:
        broker.stop()


def _empty_group(bootstrap: str, group: str) -> None:
    """A group whose only member joined (JoinGroup v3: no member id round) and left."""
    subscription = struct.pack(">hih", 0, 1, 6) + b"orders" + struct.pack(">i", -1)
    joined = exchange(bootstrap, JOIN_GROUP, 3, {
        "group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": "", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription}],
    })  # fmt: skip
    assert joined.error_code.value == 0
    left = exchange(bootstrap, LEAVE_GROUP, 2, {"group_id": group, "member_id": joined.member_id})
    assert left.error_code.value == 0


def test_a_group_deletion_the_offsets_topic_cannot_take_is_answered_per_group(
    tmp_path: Path,
) -> None:
    broker = start_broker(tmp_path / "data", NO_APPEND)
    try:
        _empty_group(broker.bootstrap, BILLING)
        response = exchange(broker.bootstrap, DELETE_GROUPS, 2, {"groups_names": [BILLING]})
        assert [(r.group_id, r.error_code.value) for r in response.results] == [
            (BILLING, COORDINATOR_NOT_AVAILABLE)
        ]
        described = exchange(broker.bootstrap, DESCRIBE_GROUPS, 5, {"groups": [BILLING]})
        assert described.groups[0].group_state == "Empty"  # not deleted
    finally:
        broker.stop()
