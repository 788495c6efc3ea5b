"""Clients of the Kafka 0.8–0.11 era against a real samsa broker: kafka-python pinned to old
``api_version`` values (no ApiVersions request: it speaks the versions those brokers served).

- (0, 8, 2): Produce v0 and Fetch v0 (message format v0), ListOffsets v0, OffsetCommit v1
  and OffsetFetch v1 through FindCoordinator v0; no group membership (Kafka 0.8.2 had none);
- (0, 9): the same formats, plus JoinGroup/SyncGroup/Heartbeat v0 and OffsetCommit v2;
- (0, 10, 1): Produce v2 and Fetch v3 (message format v1, timestamps), JoinGroup v1;
- (0, 11): Produce v3 / Fetch v5 (RecordBatch v2), JoinGroup v2 — already Kafka 4's floor for
  most APIs, it checks nothing regressed at the boundary.

librdkafka (confluent-kafka) with ``api.version.request=false`` and
``broker.version.fallback`` 0.8.2, 0.9.0 or 0.10.0 speaks the same old versions from another
implementation (C): Produce v0/v2 with its own message sets, Fetch v0/v2.

aiokafka is not among them: since 0.13 it ignores ``api_version`` and negotiates.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

API_VERSIONS = [(0, 8, 2), (0, 9), (0, 10, 1), (0, 11)]
IDS = ["0.8.2", "0.9", "0.10.1", "0.11"]
CODECS = ["none", "gzip", "snappy", "lz4"]
TIMEOUT_MS = 15_000
COUNT = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("legacy") / "data",
        ["group.initial.rebalance.delay.ms=0"],
    )
    try:
        yield process
    finally:
        process.stop()


def _name(api_version: tuple[int, ...]) -> str:
    return "-".join(map(str, api_version))


def _produce(
    bootstrap: str, topic: str, api_version: tuple[int, ...], codec: str = "none"
) -> list[tuple[bytes, bytes, int]]:
    """Send COUNT records to partition 0 with explicit timestamps; (key, value, timestamp)."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, api_version=api_version,
        compression_type=None if codec == "none" else codec, linger_ms=20,
        max_block_ms=TIMEOUT_MS, request_timeout_ms=TIMEOUT_MS,
    )  # fmt: skip
    base_ts = int(time.time() * 1000) - 60_000
    sent = [(b"key-%d" % i, bytes(range(i % 256)) + b"value-%d" % i, base_ts + i) for i in
            range(COUNT)]  # fmt: skip
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0, timestamp_ms=ts)
                   for k, v, ts in sent]  # fmt: skip
        producer.flush(timeout=30)
        offsets = [f.get(timeout=TIMEOUT_MS / 1000).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(offsets[0], offsets[0] + COUNT))
    return sent


def _consumer(bootstrap: str, api_version: tuple[int, ...], group: str | None) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=api_version, group_id=group,
        enable_auto_commit=False, auto_offset_reset="earliest",
        request_timeout_ms=TIMEOUT_MS + 1000, session_timeout_ms=10_000,
        heartbeat_interval_ms=1000,
    )  # fmt: skip


def _poll(consumer: KafkaConsumer, expected: int) -> list:
    received: list = []
    deadline = time.monotonic() + 60
    while len(received) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500, max_records=expected).values():
            received += records
    return received


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("api_version", API_VERSIONS, ids=IDS)
def test_an_old_kafka_python_reads_back_what_it_produced_byte_exact(
    broker: BrokerProcess, api_version: tuple[int, ...], codec: str
) -> None:
    topic = f"legacy-{_name(api_version)}-{codec}"
    sent = _produce(broker.bootstrap, topic, api_version, codec)
    consumer = _consumer(broker.bootstrap, api_version, None)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        received = _poll(consumer, COUNT)
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value) for r in received] == [
        (i, k, v) for i, (k, v, _) in enumerate(sent)
    ]
    if api_version >= (0, 10):  # message format v1 and later carry the producer's timestamps
        assert [r.timestamp for r in received] == [ts for *_, ts in sent]
    else:
        assert {r.timestamp for r in received} in ({None}, {-1})


@pytest.mark.parametrize("api_version", API_VERSIONS, ids=IDS)
def test_an_old_kafka_python_commits_and_fetches_its_group_offsets(
    broker: BrokerProcess, api_version: tuple[int, ...]
) -> None:
    topic, group = f"legacy-commit-{_name(api_version)}", f"legacy-commit-{_name(api_version)}"
    _produce(broker.bootstrap, topic, api_version)
    tp = TopicPartition(topic, 0)
    consumer = _consumer(broker.bootstrap, api_version, group)
    try:
        consumer.assign([tp])
        offset = (
            OffsetAndMetadata(7, "meta", -1) if api_version >= (0, 11)
            else OffsetAndMetadata(7, "meta")
        )  # fmt: skip
        consumer.commit({tp: offset})
    finally:
        consumer.close()
    reader = _consumer(broker.bootstrap, api_version, group)
    try:
        assert reader.committed(tp) == 7
        reader.assign([tp])
        assert [r.offset for r in _poll(reader, COUNT - 7)] == list(range(7, COUNT))
    finally:
        reader.close()


@pytest.mark.parametrize("api_version", API_VERSIONS[1:], ids=IDS[1:])
def test_an_old_kafka_python_joins_a_group_and_is_assigned_the_partitions(
    broker: BrokerProcess, api_version: tuple[int, ...]
) -> None:
    topic, group = f"legacy-join-{_name(api_version)}", f"legacy-join-{_name(api_version)}"
    _produce(broker.bootstrap, topic, api_version)
    consumer = _consumer(broker.bootstrap, api_version, group)
    try:
        consumer.subscribe([topic])
        received = _poll(consumer, COUNT)
        assert consumer.assignment() == {TopicPartition(topic, 0)}
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == COUNT
    finally:
        consumer.close()
    assert len(received) == COUNT


def test_an_old_consumer_reads_what_confluent_kafka_wrote_with_headers(
    broker: BrokerProcess,
) -> None:
    topic = "legacy-from-confluent"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd",
                         "log_level": 3})  # fmt: skip
    base_ts = int(time.time() * 1000) - 10_000
    for i in range(COUNT):
        producer.produce(topic, b"v%d" % i, b"k%d" % i, partition=0, timestamp=base_ts + i,
                         headers=[("h", b"%d" % i)])  # fmt: skip
    assert producer.flush(30) == 0
    for api_version in [(0, 9), (0, 10, 1)]:
        consumer = _consumer(broker.bootstrap, api_version, None)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            received = _poll(consumer, COUNT)
        finally:
            consumer.close()
        assert [(r.key, r.value) for r in received] == [(b"k%d" % i, b"v%d" % i)
                                                         for i in range(COUNT)]  # fmt: skip
        if api_version >= (0, 10):
            assert [r.timestamp for r in received] == [base_ts + i for i in range(COUNT)]


def test_confluent_kafka_reads_what_an_old_producer_wrote_stamped_with_the_broker_time(
    broker: BrokerProcess,
) -> None:
    topic = "legacy-to-confluent"
    before = int(time.time() * 1000)
    sent = _produce(broker.bootstrap, topic, (0, 9), "gzip")
    after = int(time.time() * 1000)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "legacy-to-confluent",
                         "enable.auto.commit": False, "log_level": 3})  # fmt: skip
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        received = []
        deadline = time.monotonic() + 60
        while len(received) < COUNT and time.monotonic() < deadline:
            received += [m for m in consumer.consume(COUNT, 1.0) if m.error() is None]
    finally:
        consumer.close()
    assert [(m.key(), m.value()) for m in received] == [(k, v) for k, v, _ in sent]
    # Message format v0 has no timestamp: the broker stamps its own time, as Kafka did.
    assert all(before <= m.timestamp()[1] <= after for m in received)


FALLBACKS = ["0.8.2", "0.9.0", "0.10.0"]


def _librdkafka(bootstrap: str, fallback: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "api.version.request": False,
            "broker.version.fallback": fallback, "log_level": 3}  # fmt: skip


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("fallback", FALLBACKS)
def test_librdkafka_speaking_an_old_broker_version_reads_back_what_it_produced(
    broker: BrokerProcess, fallback: str, codec: str
) -> None:
    topic = f"legacy-librdkafka-{fallback}-{codec}"
    conf = _librdkafka(broker.bootstrap, fallback)
    producer = Producer({**conf, "compression.type": codec, "linger.ms": 5})
    base_ts = int(time.time() * 1000) - 30_000
    for i in range(COUNT):
        producer.produce(topic, b"v%d" % i, b"k%d" % i, partition=0, timestamp=base_ts + i)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": topic, "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        received = []
        deadline = time.monotonic() + 60
        while len(received) < COUNT and time.monotonic() < deadline:
            received += [m for m in consumer.consume(COUNT, 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert [(m.offset(), m.key(), m.value()) for m in received] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(COUNT)
    ]
    if fallback == "0.10.0":  # message format v1: the producer's timestamps come back
        assert [m.timestamp()[1] for m in received] == [base_ts + i for i in range(COUNT)]


@pytest.mark.parametrize("fallback", FALLBACKS[1:])
def test_librdkafka_speaking_an_old_broker_version_joins_a_group_and_commits(
    broker: BrokerProcess, fallback: str
) -> None:
    topic = group = f"legacy-librdkafka-group-{fallback}"
    _produce(broker.bootstrap, topic, (0, 9))
    conf = _librdkafka(broker.bootstrap, fallback)
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.subscribe([topic])
        received = []
        deadline = time.monotonic() + 60
        while len(received) < COUNT and time.monotonic() < deadline:
            received += [m for m in consumer.consume(COUNT, 0.5) if m.error() is None]
        consumer.commit(asynchronous=False)
        [committed] = consumer.committed([ConfluentPartition(topic, 0)], 30)
    finally:
        consumer.close()
    assert len(received) == COUNT
    assert committed.offset == COUNT
