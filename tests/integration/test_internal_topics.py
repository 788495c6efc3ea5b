"""Internal topics are the coordinators' own: clients cannot write, delete, grow or truncate them.

Each test drives a real broker process with real clients (confluent-kafka, samsa's
Admin, raw requests) and, where the damage would show only then, restarts it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from tests.rawclient import exchange

from samsa import Admin
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC
from samsa.coordinator.group.records import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from samsa.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from samsa.errors import for_code
from samsa.records import RecordBatchBuilder
from samsa.storage import LogConfig, load_log
from samsa.testing import BrokerProcess, start_broker
from samsa.types import TopicPartition as SamsaTopicPartition

QUIET = {"log_level": 3}
INVALID_TOPIC_EXCEPTION = 17
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions
PRODUCE, METADATA = 0, 3


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        [found] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(found.offset)
    finally:
        consumer.close()


def _forged_commit(group: str, topic: str, offset: int) -> tuple[bytes, bytes]:
    """The key and value of a commit record, as the group coordinator would write it."""
    key = encode_offset_key(OffsetKey(group, topic, 0))
    return key, encode_offset_value(OffsetValue(offset, -1, "", 1_700_000_000_000))


@pytest.fixture
def broker_with_a_commit(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own on which group ``billing`` committed offset 5 of ``orders-0``."""
    broker = start_broker(tmp_path / "data")
    try:
        _create_topic(broker.bootstrap, "orders")
        _commit(broker.bootstrap, "billing", "orders", 5)
        yield broker
    finally:
        broker.stop()


def test_a_forged_commit_produced_to_the_offsets_topic_is_refused_and_changes_nothing(
    broker_with_a_commit: BrokerProcess,
) -> None:
    broker = broker_with_a_commit
    key, value = _forged_commit("billing", "orders", 999)
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0, **QUIET})
    producer.produce(
        OFFSETS_TOPIC,
        value,
        key,
        partition=partition_for("billing", OFFSETS_PARTITIONS),
        on_delivery=lambda err, _msg: errors.append(err),
    )
    assert producer.flush(20) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]
    broker.restart()  # the loader would have replayed an appended record
    assert _committed(broker.bootstrap, "billing", "orders") == 5


def test_a_raw_produce_to_the_transaction_log_is_refused_per_partition(
    samsa_broker: BrokerProcess,
) -> None:
    bootstrap = samsa_broker.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t-1", **QUIET})
    producer.init_transactions(10)  # creates __transaction_state
    builder = RecordBatchBuilder()
    builder.append(b"\x00\x01value", key=b"\x00\x00\x00\x03t-1", timestamp=1)
    response = exchange(bootstrap, PRODUCE, 9, {
        "transactional_id": None, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": TRANSACTION_STATE_TOPIC, "partition_data": [
            {"index": 0, "records": builder.build()}]}],
    })  # fmt: skip
    [partition] = response.responses[0].partition_responses
    assert partition.error_code.value == INVALID_TOPIC_EXCEPTION
    assert partition.base_offset == -1


def test_deleting_the_offsets_topic_is_refused_and_offsets_survive_a_restart(
    broker_with_a_commit: BrokerProcess,
) -> None:
    broker = broker_with_a_commit
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    future = admin.delete_topics([OFFSETS_TOPIC], operation_timeout=10)[OFFSETS_TOPIC]
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    broker.restart()
    assert _committed(broker.bootstrap, "billing", "orders") == 5


def test_deleting_the_transaction_log_is_refused(samsa_broker: BrokerProcess) -> None:
    producer = Producer(
        {"bootstrap.servers": samsa_broker.bootstrap, "transactional.id": "t-2", **QUIET}
    )
    producer.init_transactions(10)
    with Admin({"bootstrap.servers": samsa_broker.bootstrap}) as admin:
        results = admin.delete_topics([TRANSACTION_STATE_TOPIC], raise_on_error=False)
        assert TRANSACTION_STATE_TOPIC in admin.list_topics(include_internal=True)
    error = results[TRANSACTION_STATE_TOPIC]
    assert error is not None and error.code == INVALID_TOPIC_EXCEPTION


def test_adding_partitions_to_the_offsets_topic_is_refused(
    samsa_broker: BrokerProcess,
) -> None:
    _create_topic(samsa_broker.bootstrap, "grow-me")
    _commit(samsa_broker.bootstrap, "grower", "grow-me", 1)  # creates __consumer_offsets
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap, **QUIET})
    future = admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 60)])[OFFSETS_TOPIC]
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    topics = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics
    assert len(topics[OFFSETS_TOPIC].partitions) == OFFSETS_PARTITIONS


def test_deleting_records_of_the_offsets_topic_is_refused(samsa_broker: BrokerProcess) -> None:
    _create_topic(samsa_broker.bootstrap, "truncate-me")
    _commit(samsa_broker.bootstrap, "truncator", "truncate-me", 1)
    tp = SamsaTopicPartition(OFFSETS_TOPIC, partition_for("truncator", OFFSETS_PARTITIONS))
    with (
        Admin({"bootstrap.servers": samsa_broker.bootstrap}) as admin,
        pytest.raises(for_code(INVALID_TOPIC_EXCEPTION)),
    ):
        admin.delete_records({tp: -1})
    assert _committed(samsa_broker.bootstrap, "truncator", "truncate-me") == 1


def test_a_metadata_request_creates_the_offsets_topic_as_its_coordinator_does(
    tmp_path: Path,
) -> None:
    with start_broker(tmp_path / "data") as broker:  # no __consumer_offsets yet
        bootstrap = broker.bootstrap
        response = exchange(bootstrap, METADATA, 9, {
            "topics": [{"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        })  # fmt: skip
        [topic] = response.topics
        assert (topic.error_code.value, topic.is_internal) == (0, True)
        assert len(topic.partitions) == OFFSETS_PARTITIONS
        _create_topic(bootstrap, "orders")
        _commit(bootstrap, "billing", "orders", 5)  # its offsets partition is not partition 0
        assert partition_for("billing", OFFSETS_PARTITIONS) != 0
        assert _committed(bootstrap, "billing", "orders") == 5


def _non_utf8_group_commit() -> tuple[bytes, bytes]:
    """A commit record whose group name is not UTF-8 (Kafka's strings are)."""
    key = struct.pack(">hh", 1, 2) + b"\xff\xfe" + struct.pack(">h", 6) + b"orders"
    return key + struct.pack(">i", 0), encode_offset_value(OffsetValue(7, -1, "", 1))


def test_an_undecodable_offsets_record_is_skipped_and_logged_at_start_up(
    broker_with_a_commit: BrokerProcess,
) -> None:
    broker = broker_with_a_commit
    broker.stop()
    partition = partition_for("billing", OFFSETS_PARTITIONS)
    offsets_log = load_log(
        broker.data_dir / f"{OFFSETS_TOPIC}-{partition}", LogConfig(), clean_shutdown=True
    )
    builder = RecordBatchBuilder()
    bad_key, bad_value = _non_utf8_group_commit()
    builder.append(bad_value, key=bad_key, timestamp=1)
    key, value = _forged_commit("billing", "orders", 42)  # after it, in the same batch
    builder.append(value, key=key, timestamp=1)
    appended = offsets_log.append_as_leader(bytearray(builder.build()))
    offsets_log.close()
    broker.start()
    assert _committed(broker.bootstrap, "billing", "orders") == 42
    log_text = broker.log_path.read_text(errors="replace")
    assert (
        f"skipping an unreadable record of {OFFSETS_TOPIC}-{partition} "
        f"at offset {appended.first_offset}"
    ) in log_text
