"""Committed offsets of simple (assign-only) consumer groups, through real clients."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata
from tests.conftest import read_log

from samsa.coordinator.group.coordinator import OFFSETS_TOPIC
from samsa.coordinator.group.records import decode_offset_key, decode_offset_value
from samsa.storage import LogConfig, load_log
from samsa.testing import BrokerProcess, start_broker

QUIET = {"log_level": 3}
HANG_S = 30  # a deadline that only detects a hang, never a measure of speed


def _topic_with_records(bootstrap: str, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(HANG_S)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(HANG_S) == 0


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET}
    )


def test_confluent_commit_is_returned_by_committed_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        _topic_with_records(broker.bootstrap, "orders", 100)
        consumer = _consumer(broker.bootstrap, "billing")
        consumer.assign([TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0)])
        consumer.consume(100, 5)
        consumer.commit(
            offsets=[TopicPartition("orders", 0, 31), TopicPartition("orders", 1, 17)],
            asynchronous=False,
        )
        # Only a hang detector, yet under librdkafka's socket.timeout.ms (60 s) and
        # session.timeout.ms (45 s) defaults: a close left waiting for an answer the broker
        # never sends still fails here.
        started = time.monotonic()
        consumer.close()
        assert time.monotonic() - started < HANG_S
        broker.restart()
        again = _consumer(broker.bootstrap, "billing")
        committed = again.committed(
            [TopicPartition("orders", 0), TopicPartition("orders", 1)], timeout=HANG_S
        )
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 31), (1, 17)]
        again.close()
    finally:
        broker.stop()


def test_a_group_that_never_committed_has_no_offsets(samsa_broker: BrokerProcess) -> None:
    _topic_with_records(samsa_broker.bootstrap, "never-committed", 4)
    consumer = _consumer(samsa_broker.bootstrap, "nobody")
    committed = consumer.committed([TopicPartition("never-committed", 0)], timeout=HANG_S)
    assert committed[0].offset < 0  # OFFSET_INVALID
    consumer.close()


def test_kafka_python_commits_with_metadata_and_reads_it_back(
    samsa_broker: BrokerProcess,
) -> None:
    _topic_with_records(samsa_broker.bootstrap, "kp-commits", 10)
    consumer = KafkaConsumer(
        bootstrap_servers=samsa_broker.bootstrap, group_id="kp-group", enable_auto_commit=False
    )
    tp = KafkaTopicPartition("kp-commits", 1)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(4, "checkpoint-a", -1)})
    assert consumer.committed(tp) == 4
    consumer.close()


def test_commits_are_stored_in_kafkas_offsets_topic_format(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        _topic_with_records(broker.bootstrap, "fmt", 4)
        consumer = _consumer(broker.bootstrap, "fmt-group")
        consumer.commit(offsets=[TopicPartition("fmt", 0, 2)], asynchronous=False)
        consumer.close()
    finally:
        broker.stop()
    found = []
    for directory in (tmp_path / "data").glob(f"{OFFSETS_TOPIC}-*"):
        log = load_log(directory, LogConfig(), clean_shutdown=True)
        for record in read_log(log):
            assert record.key is not None and record.value is not None
            found.append((decode_offset_key(record.key), decode_offset_value(record.value)))
        log.close()
    assert [(k.group, k.topic, k.partition, v.offset) for k, v in found] == [
        ("fmt-group", "fmt", 0, 2)
    ]
