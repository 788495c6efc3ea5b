"""confluent-kafka (librdkafka) against a real samsa broker process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import BrokerProcess, start_broker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
QUIET = {"log_level": 3}


def _create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
    futures[name].result(10)


def _produce(bootstrap: str, topic: str, count: int, codec: str = "none") -> list[tuple]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, **QUIET}
    )
    sent = []
    base_ts = int(time.time() * 1000) - 100_000
    for i in range(count):
        key = f"key-{i}".encode()
        value = f"value-{i}-".encode() * (1 + i % 7)
        headers = [("h", f"{i}".encode()), ("empty", b"")]
        ts = base_ts + i
        producer.produce(topic, value, key, headers=headers, timestamp=ts)
        sent.append((key, value, ts))
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return sent


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + 30
    while len(messages) < expected and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is not None:
                raise KafkaException(message.error())
            messages.append(message)
    consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_records_round_trip_byte_exact_under_each_codec(
    samsa_broker: BrokerProcess, codec: str
) -> None:
    topic = f"roundtrip-{codec}"
    _create_topic(samsa_broker.bootstrap, topic, 3)
    sent = _produce(samsa_broker.bootstrap, topic, 10_000, codec)
    received = _consume_all(samsa_broker.bootstrap, topic, 3, len(sent))
    assert len(received) == len(sent)
    by_key = {m.key(): m for m in received}
    for key, value, ts in sent:
        message = by_key[key]
        assert message.value() == value
        assert message.timestamp()[1] == ts
        assert message.headers() == [("h", key.split(b"-")[1]), ("empty", b"")]
    for partition in range(3):
        offsets = [m.offset() for m in received if m.partition() == partition]
        assert offsets == list(range(len(offsets)))


def test_offsets_for_times_answers_from_the_time_index(samsa_broker: BrokerProcess) -> None:
    topic = "times"
    _create_topic(samsa_broker.bootstrap, topic, 1)
    sent = _produce(samsa_broker.bootstrap, topic, 2_000)
    consumer = Consumer({"bootstrap.servers": samsa_broker.bootstrap, "group.id": "t", **QUIET})
    target = sent[1234][2]
    found = consumer.offsets_for_times([TopicPartition(topic, 0, target)], 10)
    assert found[0].offset == 1234
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    assert (low, high) == (0, 2_000)
    consumer.close()


def test_records_survive_a_broker_restart(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        _create_topic(broker.bootstrap, "durable", 2)
        sent = _produce(broker.bootstrap, "durable", 3_000, "lz4")
        broker.restart()
        received = _consume_all(broker.bootstrap, "durable", 2, len(sent))
        assert sorted(m.key() for m in received) == sorted(key for key, _, _ in sent)
    finally:
        broker.stop()


def test_deleting_a_topic_frees_its_files(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        _create_topic(broker.bootstrap, "doomed", 2)
        _produce(broker.bootstrap, "doomed", 100)
        assert (tmp_path / "data" / "doomed-0").exists()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        admin.delete_topics(["doomed"])["doomed"].result(10)
        deadline = time.monotonic() + 30  # only a hang detector: the files go in the background
        while time.monotonic() < deadline and any(
            p.name.startswith("doomed-") for p in (tmp_path / "data").iterdir()
        ):
            time.sleep(0.05)
        assert not any(p.name.startswith("doomed-") for p in (tmp_path / "data").iterdir())
        assert "doomed" not in admin.list_topics(timeout=10).topics
    finally:
        broker.stop()


def test_idempotent_producer_round_trips_without_duplicates(samsa_broker: BrokerProcess) -> None:
    topic = "idempotent"
    _create_topic(samsa_broker.bootstrap, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": samsa_broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            **QUIET,
        }
    )
    for i in range(5_000):
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode())
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    received = _consume_all(samsa_broker.bootstrap, topic, 2, 5_000)
    assert sorted(m.value() for m in received) == sorted(f"v{i}".encode() for i in range(5_000))
