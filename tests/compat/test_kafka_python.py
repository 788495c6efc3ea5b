"""kafka-python against a real samsa broker process.

Consumers use ``assign()`` without a group and producers disable idempotence:
consumer groups and InitProducerId are not served yet.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from tests.client_records import Sent, assert_round_trip, make_record

from samsa.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
TIMEOUT_MS = 10_000


def _create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        response = admin.create_topics(
            {topic: {"num_partitions": partitions, "replication_factor": 1}},
            timeout_ms=TIMEOUT_MS,
            wait_for_metadata=True,
        )
    finally:
        admin.close()
    assert [t["error_code"] for t in response["topics"]] == [0]


def _producer(bootstrap: str, codec: str = "none") -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=False,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        max_block_ms=TIMEOUT_MS,
        request_timeout_ms=TIMEOUT_MS,
    )


def _produce(
    bootstrap: str,
    topic: str,
    count: int,
    codec: str = "none",
    *,
    base_ts: int,
    ts_step: int = 1,
    partition_of: int | None = None,
) -> list[Sent]:
    """Send ``count`` records with explicit timestamps ``base_ts + i * ts_step``; the key
    picks the partition unless ``partition_of`` (a modulus) does."""
    producer = _producer(bootstrap, codec)
    try:
        pending = []
        for i in range(count):
            key, value, headers = make_record(i)
            ts = base_ts + i * ts_step
            partition = None if partition_of is None else i % partition_of
            future = producer.send(
                topic, value=value, key=key, headers=headers, partition=partition, timestamp_ms=ts
            )
            pending.append((key, value, headers, ts, future))
        producer.flush(timeout=30)
        sent = []
        for key, value, headers, ts, future in pending:
            metadata = future.get(timeout=TIMEOUT_MS / 1000)
            sent.append(Sent(key, value, headers, ts, metadata.partition, metadata.offset))
    finally:
        producer.close(timeout=10)
    return sent


def _consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=TIMEOUT_MS + 1_000,
    )


def _consume_all(bootstrap: str, topic: str, expected: int) -> list:
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        received = []
        deadline = time.monotonic() + 30
        while len(received) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=expected).values():
                received += records
        # One more poll: nothing may arrive beyond what was produced.
        for records in consumer.poll(timeout_ms=200).values():
            received += records
    finally:
        consumer.close()
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_records_round_trip_byte_exact_under_each_codec(
    samsa_broker: BrokerProcess, codec: str
) -> None:
    topic = f"kafka-python-roundtrip-{codec}"
    _create_topic(samsa_broker.bootstrap, topic)
    base_ts = int(time.time() * 1000) - 100_000
    sent = _produce(samsa_broker.bootstrap, topic, 10_000, codec, base_ts=base_ts)
    received = _consume_all(samsa_broker.bootstrap, topic, len(sent))

    assert_round_trip(
        sent, received, PARTITIONS, data_dir=samsa_broker.data_dir, topic=topic, codec=codec
    )


@pytest.fixture(scope="module")
def timed_topic(samsa_broker: BrokerProcess) -> Iterator[tuple[str, list[Sent]]]:
    """1 000 records 10 ms apart in partitions 0 and 1 of three; partition 2 stays empty."""
    topic = "kafka-python-times"
    _create_topic(samsa_broker.bootstrap, topic)
    base_ts = int(time.time() * 1000) - 100_000
    yield (
        topic,
        _produce(samsa_broker.bootstrap, topic, 1_000, base_ts=base_ts, ts_step=10, partition_of=2),
    )


def test_offsets_for_times_answers_the_first_offset_at_or_after_a_timestamp(
    samsa_broker: BrokerProcess, timed_topic: tuple[str, list[Sent]]
) -> None:
    topic, sent = timed_topic
    first, last = sent[0].timestamp, sent[-1].timestamp
    targets = [first - 60_000, first, sent[123].timestamp, sent[456].timestamp + 5, last, last + 1]
    consumer = _consumer(samsa_broker.bootstrap)
    try:
        for target in targets:
            partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            found = consumer.offsets_for_times(
                dict.fromkeys(partitions, target), timeout_ms=TIMEOUT_MS
            )
            for tp in partitions:
                at_or_after = [
                    s for s in sent if s.partition == tp.partition and s.timestamp >= target
                ]
                if not at_or_after:
                    assert found[tp] is None, (target, tp)
                else:
                    assert (found[tp].offset, found[tp].timestamp) == (
                        at_or_after[0].offset,
                        at_or_after[0].timestamp,
                    ), (target, tp)
    finally:
        consumer.close()


def test_beginning_and_end_offsets_bound_each_partition(
    samsa_broker: BrokerProcess, timed_topic: tuple[str, list[Sent]]
) -> None:
    topic, sent = timed_topic
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = _consumer(samsa_broker.bootstrap)
    try:
        beginning = consumer.beginning_offsets(partitions, timeout_ms=TIMEOUT_MS)
        end = consumer.end_offsets(partitions, timeout_ms=TIMEOUT_MS)
    finally:
        consumer.close()
    assert beginning == dict.fromkeys(partitions, 0)
    assert end == {tp: sum(s.partition == tp.partition for s in sent) for tp in partitions}
    assert [end[tp] for tp in partitions] == [500, 500, 0]


def test_default_producer_settings_round_trip(samsa_broker: BrokerProcess) -> None:
    # kafka-python 3 enables idempotence by default (KIP-679): the producer first asks
    # for a producer id with InitProducerId (API key 22).
    topic = "kafka-python-defaults"
    _create_topic(samsa_broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=samsa_broker.bootstrap)
    try:
        assert producer.config["enable_idempotence"]
        futures = [producer.send(topic, value=b"v%d" % i, key=b"k%d" % i) for i in range(100)]
        producer.flush(timeout=30)
        sent = [(f.get(timeout=10), i) for i, f in enumerate(futures)]
    finally:
        producer.close(timeout=10)
    received = _consume_all(samsa_broker.bootstrap, topic, len(sent))
    by_position = {(r.partition, r.offset): r for r in received}
    assert len(received) == 100
    for metadata, i in sent:
        got = by_position[metadata.partition, metadata.offset]
        assert (got.key, got.value) == (b"k%d" % i, b"v%d" % i)
