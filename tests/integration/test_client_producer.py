"""samsa's producer (``Producer`` and ``AsyncProducer``) against a real broker process.

What the producer sent is read back by confluent-kafka (librdkafka), an
independent consumer, byte for byte; the batches the broker stored are read
from its segment files; keyed records are compared with where librdkafka's
Java-compatible ``murmur2_random`` partitioner puts the same keys.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer
from tests.client_records import codecs_on_disk, make_record

from samsa import Admin, AsyncProducer, Producer
from samsa.client.admin import NewTopic
from samsa.client.errors import BufferExhaustedError, ClientClosedError, ClientTimeoutError
from samsa.client.producer import RecordMetadata
from samsa.errors import ConfigError, for_code
from samsa.records import CompressionType, iter_batches
from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(180)

QUIET = {"log_level": 3}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
MessageTooLargeError = for_code(10)
HANG_S = 30  # a deadline that only detects a hang, never a measure of speed
LINGER_FOR_AN_HOUR_MS = 3_600_000


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])


def _create_limited(bootstrap: str, topic: str, max_message_bytes: int) -> None:
    """One partition that takes batches of ``max_message_bytes`` at most."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        config = {"max.message.bytes": str(max_message_bytes)}
        admin.create_topics([NewTopic(topic, 1, configs=config)])


def _consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
         **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is not None:
                    raise KafkaException(message.error())
                messages.append(message)
    finally:
        consumer.close()
    return messages


def _batches(data_dir: Path, topic: str, partition: int) -> list[Any]:
    batches = []
    for log_file in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        batches += list(iter_batches(log_file.read_bytes()))
    return batches


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path / "data")
    try:
        yield broker
    finally:
        broker.kill()


@pytest.mark.parametrize("codec", CODECS)
def test_records_arrive_byte_exact_under_each_codec(
    samsa_broker: BrokerProcess, codec: str
) -> None:
    topic = _topic(f"produce-{codec}")
    _create(samsa_broker.bootstrap, topic, 3)
    base_ts = int(time.time() * 1000) - 100_000
    sent = []
    with Producer({"bootstrap.servers": samsa_broker.bootstrap, "compression.type": codec}) as p:
        for i in range(10_000):
            key, value, headers = make_record(i)
            future = p.send(topic, value, key=key, headers=headers, timestamp=base_ts + i)
            sent.append((key, value, headers, base_ts + i, future))
        p.flush()
    received = _consume(samsa_broker.bootstrap, topic, 3, len(sent))
    assert len(received) == len(sent)
    by_position = {(m.partition(), m.offset()): m for m in received}
    for key, value, headers, ts, future in sent:
        metadata: RecordMetadata = future.result()
        assert (metadata.topic, metadata.timestamp) == (topic, ts)
        message = by_position[metadata.partition, metadata.offset]
        assert message.key() == key
        assert message.value() == value
        assert message.headers() == headers
        assert message.timestamp() == (1, ts)  # CreateTime
    for partition in range(3):
        offsets = sorted(m.offset() for m in received if m.partition() == partition)
        assert offsets == list(range(len(offsets)))
    stored = codecs_on_disk(samsa_broker.data_dir, topic)
    assert CompressionType[codec.upper()] in stored


def test_idempotent_batches_carry_a_producer_id_and_consecutive_sequences(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic("idempotent")
    _create(samsa_broker.bootstrap, topic, 1)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap, "batch.size": 2000}) as p:
        for i in range(2000):
            p.send(topic, b"value-%d" % i)
    batches = _batches(samsa_broker.data_dir, topic, 0)
    assert len(batches) > 5
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    assert {b.producer_epoch for b in batches} == {0}
    expected_sequence = 0
    for batch in batches:
        assert batch.base_sequence == expected_sequence
        expected_sequence += batch.record_count
    assert expected_sequence == 2000


def test_without_idempotence_batches_carry_no_producer_id(samsa_broker: BrokerProcess) -> None:
    topic = _topic("plain")
    _create(samsa_broker.bootstrap, topic, 1)
    config = {"bootstrap.servers": samsa_broker.bootstrap, "enable.idempotence": False}
    with Producer(config) as p:
        p.send(topic, b"x").result(HANG_S)
    (batch,) = _batches(samsa_broker.data_dir, topic, 0)
    assert (batch.producer_id, batch.base_sequence) == (-1, -1)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_records_are_delivered_with_each_acks_setting(
    samsa_broker: BrokerProcess, acks: str
) -> None:
    topic = _topic(f"acks{acks}")
    _create(samsa_broker.bootstrap, topic, 2)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap, "acks": acks}) as p:
        futures = [p.send(topic, b"v%d" % i, key=b"k%d" % i) for i in range(500)]
        p.flush()
        offsets = [f.result().offset for f in futures]
    if acks == "0":
        assert set(offsets) == {-1}  # the broker does not answer
    else:
        assert (
            min(offsets) == 0
            and len(set(zip(offsets, [f.result().partition for f in futures], strict=True))) == 500
        )
    assert len(_consume(samsa_broker.bootstrap, topic, 2, 500)) == 500


def test_sending_to_a_new_topic_creates_it(samsa_broker: BrokerProcess) -> None:
    topic = _topic("autocreated")
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as p:
        metadata = p.send(topic, b"first").result(30)
        assert p.partitions_for(topic) == [0]
    assert (metadata.partition, metadata.offset) == (0, 0)
    assert [m.value() for m in _consume(samsa_broker.bootstrap, topic, 1, 1)] == [b"first"]


def test_keyed_records_land_where_librdkafka_murmur2_random_puts_them(
    samsa_broker: BrokerProcess,
) -> None:
    ours, theirs = _topic("keys-samsa"), _topic("keys-librdkafka")
    _create(samsa_broker.bootstrap, ours, 7)
    _create(samsa_broker.bootstrap, theirs, 7)
    keys = [b"key-%d" % i for i in range(300)] + [
        bytes([i, 255 - i]) * (i % 9) for i in range(1, 60)
    ]
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as p:
        placed = {key: p.send(ours, b"v", key=key).result(30).partition for key in keys}
    reference = ConfluentProducer(
        {"bootstrap.servers": samsa_broker.bootstrap, "partitioner": "murmur2_random", **QUIET}
    )
    for key in keys:
        reference.produce(theirs, b"v", key)
    assert reference.flush(30) == 0
    received = _consume(samsa_broker.bootstrap, theirs, 7, len(keys))
    assert {m.key(): m.partition() for m in received} == placed
    assert len(set(placed.values())) == 7


def test_null_key_records_stick_to_a_partition_per_batch(samsa_broker: BrokerProcess) -> None:
    topic = _topic("sticky")
    _create(samsa_broker.bootstrap, topic, 4)
    config = {"bootstrap.servers": samsa_broker.bootstrap, "batch.size": 4000, "linger.ms": 100}
    with Producer(config) as p:
        partitions = [p.send(topic, b"x" * 79) for _ in range(400)]
        runs = [f.result(30).partition for f in partitions]
    changes = sum(1 for a, b in itertools.pairwise(runs) if a != b)
    assert 2 <= changes <= 400 * 100 // 4000 + 1  # moves about every batch.size bytes
    assert len(set(runs)) > 1


def test_futures_and_callbacks_report_the_same_delivery(samsa_broker: BrokerProcess) -> None:
    topic = _topic("callbacks")
    _create(samsa_broker.bootstrap, topic, 2)
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []
    threads: set[str] = set()

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        delivered.append((metadata, error))
        threads.add(threading.current_thread().name)

    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as p:
        futures = [p.send(topic, b"v%d" % i, key=b"%d" % (i % 5), on_delivery=on_delivery)
                   for i in range(1000)]  # fmt: skip
        p.flush()
        assert all(f.done() for f in futures)
    assert len(delivered) == 1000 and all(error is None for _, error in delivered)
    assert Counter(m for m, _ in delivered) == Counter(f.result() for f in futures)
    assert threading.current_thread().name not in threads
    by_partition: dict[int, list[int]] = {}
    for metadata, _ in delivered:
        assert metadata is not None
        by_partition.setdefault(metadata.partition, []).append(metadata.offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())


def test_flush_sends_lingering_records_at_once(samsa_broker: BrokerProcess) -> None:
    topic = _topic("flush")
    _create(samsa_broker.bootstrap, topic, 1)
    config = {"bootstrap.servers": samsa_broker.bootstrap, "linger.ms": LINGER_FOR_AN_HOUR_MS}
    with Producer(config) as p:
        futures = [p.send(topic, b"v%d" % i) for i in range(10)]
        time.sleep(0.2)  # a window for a wrong early send; a slow machine cannot make it fail
        assert not any(f.done() for f in futures)
        flush = threading.Thread(target=p.flush, daemon=True)
        flush.start()
        flush.join(HANG_S)  # only a hang detector: a flush that waited for linger.ms waits an hour
        assert not flush.is_alive(), "flush() waited for linger.ms"
        assert [f.result(0).offset for f in futures] == list(range(10))


def test_close_delivers_what_was_sent_and_refuses_more(samsa_broker: BrokerProcess) -> None:
    topic = _topic("close")
    _create(samsa_broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap, "linger.ms": 60_000})
    futures = [p.send(topic, b"v%d" % i) for i in range(100)]
    p.close()
    assert [f.result(0).offset for f in futures] == list(range(100))
    with pytest.raises(ClientClosedError):
        p.send(topic, b"late")


def test_full_buffer_blocks_for_max_block_ms_then_raises(own_broker: BrokerProcess) -> None:
    topic = _topic("full")
    _create(own_broker.bootstrap, topic, 1)
    config = {"bootstrap.servers": own_broker.bootstrap, "buffer.memory": 2000,
              "max.block.ms": 500}  # fmt: skip
    with Producer(config) as p:
        assert p.send(topic, b"warm-up").result(30).offset == 0
        assert own_broker.process is not None
        os.kill(own_broker.process.pid, signal.SIGSTOP)  # sent, never answered: memory held
        try:
            held = [p.send(topic, b"x" * 500) for _ in range(3)]
            started = time.monotonic()
            with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms=500"):
                p.send(topic, b"x" * 500)
            blocked = time.monotonic() - started
            # What a user sees: the send waited max.block.ms for memory (a busy machine can only
            # make the wait longer, so this lower bound holds on any machine).
            assert blocked >= 0.4
            # Only a hang detector, yet well under the 60 s default max.block.ms: the configured
            # 500 ms is the one in force.
            assert blocked < HANG_S
        finally:
            os.kill(own_broker.process.pid, signal.SIGCONT)
        assert [f.result(30).offset for f in held] == [1, 2, 3]
        assert p.send(topic, b"fits again").result(30).offset == 4


def test_records_for_a_missing_partition_fail_after_max_block_ms(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic("nopartition")
    _create(samsa_broker.bootstrap, topic, 1)
    config = {"bootstrap.servers": samsa_broker.bootstrap, "max.block.ms": 300}
    with Producer(config) as p:
        future = p.send(topic, b"x", partition=9)
        with pytest.raises(ClientTimeoutError, match="partition 9"):
            future.result(HANG_S)
        assert p.send(topic, b"y", partition=0).result(HANG_S).offset == 0


def test_record_larger_than_max_request_size_is_refused(samsa_broker: BrokerProcess) -> None:
    config = {"bootstrap.servers": samsa_broker.bootstrap, "max.request.size": 1000}
    with Producer(config) as p, pytest.raises(MessageTooLargeError, match=r"max\.request\.size"):
        p.send(_topic("large"), b"x" * 2000)


@pytest.mark.parametrize("idempotence", [True, False])
def test_a_batch_over_the_topics_max_message_bytes_is_split_until_each_part_fits(
    samsa_broker: BrokerProcess, idempotence: bool
) -> None:
    # 400 records of 100 B linger into one 40 KB batch; the topic takes 3,000 B at most.
    topic = _topic("split")
    _create_limited(samsa_broker.bootstrap, topic, 3000)
    values = [b"%04d" % i + b"x" * 96 for i in range(400)]
    config = {"bootstrap.servers": samsa_broker.bootstrap, "batch.size": 200_000,
              "linger.ms": 200, "enable.idempotence": idempotence}  # fmt: skip
    with Producer(config) as p:
        futures = [p.send(topic, value) for value in values]
        offsets = [future.result(HANG_S).offset for future in futures]
    assert offsets == list(range(400))
    batches = _batches(samsa_broker.data_dir, topic, 0)
    assert len(batches) >= 16 and all(batch.size <= 3000 for batch in batches)
    if idempotence:  # the parts kept the refused batch's sequences, in order
        assert [b.base_sequence for b in batches] == list(
            itertools.accumulate((b.record_count for b in batches[:-1]), initial=0)
        )
        assert len({(b.producer_id, b.producer_epoch) for b in batches}) == 1
    assert [m.value() for m in _consume(samsa_broker.bootstrap, topic, 1, 400)] == values


def test_batches_queued_behind_a_split_one_follow_its_parts_in_order(
    samsa_broker: BrokerProcess,
) -> None:
    # The first batch (40 x 100 B) is refused as too large; the next ones (one 2,000 B
    # record, then small ones) fit: they go after the first one's parts, keeping their
    # sequences, and every record lands in the order it was sent.
    topic = _topic("split-behind")
    _create_limited(samsa_broker.bootstrap, topic, 3000)
    values = [b"%03d" % i + b"x" * 97 for i in range(40)] + [b"b" * 2000] + [b"c" * 100] * 5
    config = {"bootstrap.servers": samsa_broker.bootstrap, "batch.size": 5000,
              "linger.ms": 200}  # fmt: skip
    with Producer(config) as p:
        futures = [p.send(topic, value) for value in values]
        offsets = [future.result(HANG_S).offset for future in futures]
    assert offsets == list(range(len(values)))
    batches = _batches(samsa_broker.data_dir, topic, 0)
    assert [b.base_sequence for b in batches] == list(
        itertools.accumulate((b.record_count for b in batches[:-1]), initial=0)
    )
    assert [m.value() for m in _consume(samsa_broker.bootstrap, topic, 1, len(values))] == values


def test_a_single_record_over_the_topics_max_message_bytes_fails_with_message_too_large(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic("one-too-large")
    _create_limited(samsa_broker.bootstrap, topic, 1000)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap, "linger.ms": 200}) as p:
        small = p.send(topic, b"s" * 100)
        large = p.send(topic, b"L" * 2000)
        after = p.send(topic, b"a" * 100)
        with pytest.raises(MessageTooLargeError):
            large.result(HANG_S)
        assert small.result(HANG_S).offset == 0
        assert after.result(HANG_S).offset == 1


def test_values_must_be_bytes_unless_a_serializer_is_configured(
    samsa_broker: BrokerProcess,
) -> None:
    topic = _topic("serializers")
    with (
        Producer({"bootstrap.servers": samsa_broker.bootstrap}) as p,
        pytest.raises(TypeError, match=r"value\.serializer"),
    ):
        p.send(topic, "text")
    config = {"bootstrap.servers": samsa_broker.bootstrap,
              "key.serializer": str.encode, "value.serializer": str.encode}  # fmt: skip
    with Producer(config) as p:
        p.send(topic, "héllo", key="k").result(30)
    (message,) = _consume(samsa_broker.bootstrap, topic, 1, 1)
    assert (message.key(), message.value()) == (b"k", "héllo".encode())


def test_unknown_producer_config_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"lingr\.ms"):
        Producer({"bootstrap.servers": "127.0.0.1:9", "lingr.ms": 1})


def test_async_producer_sends_from_asyncio(samsa_broker: BrokerProcess) -> None:
    topic = _topic("async")
    _create(samsa_broker.bootstrap, topic, 2)
    called: list[RecordMetadata | None] = []

    async def main() -> list[RecordMetadata]:
        config = {"bootstrap.servers": samsa_broker.bootstrap, "compression.type": "lz4"}
        async with AsyncProducer(config) as producer:
            futures = [
                await producer.send(topic, b"v%d" % i, key=b"k%d" % i,
                                    on_delivery=lambda m, e: called.append(m))
                for i in range(200)
            ]  # fmt: skip
            last = await producer.send_and_wait(topic, b"last", key=b"k0")
            await producer.flush()
            return [*(await asyncio.gather(*futures)), last]

    results = asyncio.run(main())
    assert len(results) == 201 and len(called) == 200
    assert len(_consume(samsa_broker.bootstrap, topic, 2, 201)) == 201
    assert results[-1].partition == results[0].partition  # same key, same partition


def test_records_sent_across_a_broker_restart_arrive_once_and_in_order(
    own_broker: BrokerProcess,
) -> None:
    topic = _topic("restart")
    _create(own_broker.bootstrap, topic, 3)
    config = {"bootstrap.servers": own_broker.bootstrap, "linger.ms": 20,
              "reconnect.backoff.ms": 20, "retry.backoff.ms": 20}  # fmt: skip
    errors: list[BaseException] = []
    with Producer(config) as p:
        for i in range(3000):
            p.send(topic, b"%d" % i, key=b"%d" % (i % 30),
                   on_delivery=lambda m, e: e is not None and errors.append(e))  # fmt: skip
            if i == 1500:
                own_broker.restart()
            if i % 100 == 0:
                time.sleep(0.01)
        p.flush()
    assert errors == []
    received = _consume(own_broker.bootstrap, topic, 3, 3000)
    values = [int(m.value()) for m in received]
    assert Counter(values) == Counter(range(3000))  # none lost, none twice
    by_key: dict[bytes, list[int]] = {}
    for message in sorted(received, key=lambda m: (m.partition(), m.offset())):
        by_key.setdefault(message.key(), []).append(int(message.value()))
    assert all(v == sorted(v) for v in by_key.values())
