"""Log compaction in a real broker: confluent-kafka writes overwrites and tombstones, reads back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

QUIET = {"log_level": 3}
TOPIC = "compacted"
KEYS = 40
ROUNDS = 8
TOMBSTONED = {f"key-{k}".encode() for k in range(0, KEYS, 4)}
HANG_S = 30  # a deadline that only detects a hang, never a measure of speed

Seen = dict[bytes, list[tuple[int, bytes | None]]]
"""Key → the (offset, value) of each of its records, in offset order."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with start_broker(tmp_path / "data", ["log.cleaner.backoff.ms=200"]) as process:
        yield process


def _create_compacted_topic(bootstrap: str) -> None:
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "3000",
        "file.delete.delay.ms": "1000",
    }
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(HANG_S)


def _produce(bootstrap: str) -> dict[bytes, tuple[int, bytes | None]]:
    """Overwrites, tombstones, then unique filler keys; return each key's last (offset, value)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **QUIET})
    latest: dict[bytes, tuple[int, bytes | None]] = {}

    def remember(err: KafkaError | None, message: Message) -> None:
        assert err is None, err
        key = message.key()
        assert key is not None
        latest[key] = (message.offset(), message.value())

    def send(key: bytes, value: bytes | None) -> None:
        producer.produce(TOPIC, value, key, on_delivery=remember)
        producer.poll(0)

    for n in range(ROUNDS):
        for k in range(KEYS):
            send(f"key-{k}".encode(), f"round-{n}-".encode() * 5)
        assert producer.flush(HANG_S) == 0
    for key in sorted(TOMBSTONED):
        send(key, None)
    assert producer.flush(HANG_S) == 0
    for i in range(60):  # unique keys, so the active segment holds no duplicate
        send(f"filler-{i}".encode(), b"f" * 100)
    assert producer.flush(HANG_S) == 0
    return latest


def _consume_from_beginning(bootstrap: str) -> Seen:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         **QUIET}
    )  # fmt: skip
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), HANG_S)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        seen: Seen = {}
        deadline = time.monotonic() + HANG_S
        last = -1
        while last < high - 1 and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is not None:
                    raise KafkaException(message.error())
                key = message.key()
                assert key is not None
                seen.setdefault(key, []).append((message.offset(), message.value()))
                last = max(last, message.offset())
        assert last == high - 1, f"read up to {last}, high watermark {high}"
        return seen
    finally:
        consumer.close()


def _wait_until(bootstrap: str, done: Callable[[Seen], bool], what: str) -> Seen:
    """Read the topic again and again until ``done`` holds (or HANG_S pass: a hang)."""
    last: list[Seen] = []

    def read() -> bool:
        last[:] = [_consume_from_beginning(bootstrap)]
        return done(last[0])

    wait_until(
        read,
        lambda: f"{what}: {sum(map(len, last[0].values()))} records left",
        timeout=HANG_S,
        interval=0.2,
    )
    return last[0]


def test_compaction_keeps_the_latest_value_per_key_and_drops_expired_tombstones(
    broker: BrokerProcess,
) -> None:
    _create_compacted_topic(broker.bootstrap)
    latest = _produce(broker.bootstrap)
    produced = ROUNDS * KEYS + len(TOMBSTONED) + 60

    def compacted(seen: Seen) -> bool:
        return all(len(records) == 1 for records in seen.values())

    seen = _wait_until(broker.bootstrap, compacted, f"one record per key of {produced}")
    for key, records in seen.items():
        assert records == [latest[key]], key  # the last value, at the offset it was written at
    live = {key for key, (_, value) in latest.items() if value is not None}
    assert live <= set(seen)

    def tombstones_gone(seen: Seen) -> bool:
        return not TOMBSTONED & set(seen)

    seen = _wait_until(broker.bootstrap, tombstones_gone, "the expired tombstones to go")
    assert set(seen) == live
    assert all(records == [latest[key]] for key, records in seen.items())
