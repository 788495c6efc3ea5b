"""Incremental fetch sessions (KIP-227) against a real broker: raw Fetch requests, then
confluent-kafka, kafka-python and aiokafka consumers of 50 partitions.

The raw tests hold a session the way a client does: a full fetch with epoch 0
creates it, each later fetch carries the next epoch and names only the
partitions it changed. The client tests count, from the broker's metrics, the
sessions made and the incremental fetches served while every record is read
exactly once. Of the three clients only kafka-python has a KIP-227 side;
librdkafka (confluent-kafka) and aiokafka always fetch sessionless, and must
be served as before.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from prometheus_client.parser import text_string_to_metric_families
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

FETCH, METADATA, DELETE_RECORDS = 1, 3, 21
UNKNOWN_TOPIC_OR_PARTITION = 3
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
QUIET = {"log_level": 3}
WAIT_S = 30
SMALL = "small"  # 4 partitions, for the raw tests (each test its own topic below)
CLIENT_PARTITIONS = 50
CLIENT_RECORDS = 400
CACHE = "kafka_server_fetchsessioncache_"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("sessions") / "data",
        overrides=["metrics.listeners=http://127.0.0.1:0"],
    )
    try:
        yield process
    finally:
        process.stop()


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(WAIT_S)


def _produce(broker: BrokerProcess, topic: str, partitions: dict[int, int]) -> None:
    """``partitions[p]`` records into each partition ``p``, acknowledged."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for partition, count in partitions.items():
        for i in range(count):
            producer.produce(topic, b"%d-%d" % (partition, i), partition=partition)
    assert producer.flush(WAIT_S) == 0


def _fetch(
    broker: BrokerProcess,
    session_id: int,
    epoch: int,
    offsets: dict[int, int],
    *,
    topic: str,
    forgotten: tuple[int, ...] = (),
    max_wait_ms: int = 0,
    version: int = 12,
    topic_id: uuid.UUID | None = None,
) -> Any:
    """Fetch ``offsets`` (partition: fetch offset) of ``topic`` in a session."""
    partitions = [
        {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
        for p, o in offsets.items()
    ]
    name: dict[str, Any] = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    values: dict[str, Any] = {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 24,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{**name, "partitions": partitions}] if partitions else [],
        "forgotten_topics_data": (
            [{**name, "partitions": list(forgotten)}] if forgotten else []
        ),
    }  # fmt: skip
    return exchange(broker.bootstrap, FETCH, version, values)


def _answered(response: Any) -> dict[int, Any]:
    """The partitions a response lists, by index."""
    assert response.error_code == 0
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def _new_session(broker: BrokerProcess, topic: str, partitions: int) -> tuple[int, dict[int, Any]]:
    response = _fetch(broker, 0, 0, dict.fromkeys(range(partitions), 0), topic=topic)
    assert response.session_id != 0
    return response.session_id, _answered(response)


def test_a_full_fetch_with_epoch_zero_creates_a_session_and_answers_every_partition(
    broker: BrokerProcess,
) -> None:
    _create(broker, "created", 4)
    _produce(broker, "created", {1: 3})
    _, answered = _new_session(broker, "created", 4)
    assert sorted(answered) == [0, 1, 2, 3]
    assert answered[1].high_watermark == 3
    assert len(answered[1].records) > 0


def test_a_sessionless_full_fetch_answers_session_id_zero(broker: BrokerProcess) -> None:
    _create(broker, "sessionless", 2)
    response = _fetch(broker, 0, -1, {0: 0, 1: 0}, topic="sessionless")
    assert response.session_id == 0
    assert sorted(_answered(response)) == [0, 1]


def test_an_incremental_fetch_with_nothing_new_answers_no_partitions(
    broker: BrokerProcess,
) -> None:
    _create(broker, "idle", 4)
    _produce(broker, "idle", {0: 2})
    session_id, _ = _new_session(broker, "idle", 4)
    response = _fetch(broker, session_id, 1, {0: 2}, topic="idle")
    assert response.session_id == session_id
    assert _answered(response) == {}
    assert _answered(_fetch(broker, session_id, 2, {}, topic="idle")) == {}


def test_a_produce_makes_exactly_that_partition_appear_in_the_next_incremental_fetch(
    broker: BrokerProcess,
) -> None:
    _create(broker, "one-active", 4)
    session_id, _ = _new_session(broker, "one-active", 4)
    _produce(broker, "one-active", {2: 5})
    answered = _answered(_fetch(broker, session_id, 1, {}, topic="one-active"))
    assert sorted(answered) == [2]
    assert answered[2].high_watermark == 5
    assert len(answered[2].records) > 0


def test_a_partition_whose_data_was_not_fetched_on_is_answered_again(
    broker: BrokerProcess,
) -> None:
    _create(broker, "resent", 2)
    session_id, _ = _new_session(broker, "resent", 2)
    _produce(broker, "resent", {0: 2})
    assert sorted(_answered(_fetch(broker, session_id, 1, {}, topic="resent"))) == [0]
    # The client did not move partition 0's fetch offset: the records are still owed.
    assert sorted(_answered(_fetch(broker, session_id, 2, {}, topic="resent"))) == [0]
    assert _answered(_fetch(broker, session_id, 3, {0: 2}, topic="resent")) == {}


def test_a_moved_log_start_offset_makes_the_partition_appear(broker: BrokerProcess) -> None:
    _create(broker, "log-start", 2)
    _produce(broker, "log-start", {0: 3})
    session_id = _fetch(broker, 0, 0, {0: 3, 1: 0}, topic="log-start").session_id
    assert _answered(_fetch(broker, session_id, 1, {}, topic="log-start")) == {}
    deleted = exchange(broker.bootstrap, DELETE_RECORDS, 2, {
        "topics": [{"name": "log-start", "partitions": [{"partition_index": 0, "offset": 2}]}],
        "timeout": 10_000,
    })  # fmt: skip
    assert deleted.topics[0].partitions[0].error_code == 0
    answered = _answered(_fetch(broker, session_id, 2, {}, topic="log-start"))
    assert sorted(answered) == [0]
    assert answered[0].log_start_offset == 2


def test_a_forgotten_partition_leaves_the_session(broker: BrokerProcess) -> None:
    _create(broker, "forgotten", 3)
    session_id, _ = _new_session(broker, "forgotten", 3)
    response = _fetch(broker, session_id, 1, {}, topic="forgotten", forgotten=(1,))
    assert _answered(response) == {}
    _produce(broker, "forgotten", {1: 4, 2: 1})
    assert sorted(_answered(_fetch(broker, session_id, 2, {}, topic="forgotten"))) == [2]


def test_a_partition_added_by_an_incremental_fetch_is_answered_and_kept(
    broker: BrokerProcess,
) -> None:
    _create(broker, "added", 3)
    response = _fetch(broker, 0, 0, {0: 0}, topic="added")
    session_id = response.session_id
    assert sorted(_answered(_fetch(broker, session_id, 1, {2: 0}, topic="added"))) == [2]
    _produce(broker, "added", {2: 1})
    assert sorted(_answered(_fetch(broker, session_id, 2, {}, topic="added"))) == [2]


def test_a_deleted_topic_answers_an_error_in_the_next_incremental_fetch(
    broker: BrokerProcess,
) -> None:
    _create(broker, "deleted", 2)
    session_id, _ = _new_session(broker, "deleted", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.delete_topics(["deleted"])["deleted"].result(WAIT_S)
    answered = _answered(_fetch(broker, session_id, 1, {}, topic="deleted"))
    assert sorted(answered) == [0, 1]
    assert {p.error_code for p in answered.values()} == {UNKNOWN_TOPIC_OR_PARTITION}


def test_a_wrong_epoch_is_answered_invalid_fetch_session_epoch(broker: BrokerProcess) -> None:
    _create(broker, "epochs", 1)
    session_id, _ = _new_session(broker, "epochs", 1)
    response = _fetch(broker, session_id, 5, {}, topic="epochs")
    assert response.error_code == INVALID_FETCH_SESSION_EPOCH
    assert response.responses == ()
    assert _fetch(broker, session_id, 1, {}, topic="epochs").error_code == 0


def test_an_unknown_session_id_is_answered_fetch_session_id_not_found(
    broker: BrokerProcess,
) -> None:
    _create(broker, "unknown-id", 1)
    response = _fetch(broker, 12345, 1, {0: 0}, topic="unknown-id")
    assert response.error_code == FETCH_SESSION_ID_NOT_FOUND


def test_epoch_minus_one_closes_the_session(broker: BrokerProcess) -> None:
    _create(broker, "closed", 1)
    session_id, _ = _new_session(broker, "closed", 1)
    closing = _fetch(broker, session_id, -1, {0: 0}, topic="closed")
    assert closing.error_code == 0
    assert closing.session_id == 0
    assert sorted(_answered(closing)) == [0]
    assert _fetch(broker, session_id, 1, {}, topic="closed").error_code == (
        FETCH_SESSION_ID_NOT_FOUND
    )


def test_an_incremental_long_poll_wakes_for_a_session_partition_not_in_the_request(
    broker: BrokerProcess,
) -> None:
    _create(broker, "long-poll", 3)
    session_id, _ = _new_session(broker, "long-poll", 3)
    producing = threading.Timer(0.5, _produce, (broker, "long-poll", {1: 1}))
    producing.start()
    try:
        response = _fetch(broker, session_id, 1, {}, topic="long-poll", max_wait_ms=20_000)
    finally:
        producing.join()
    assert sorted(_answered(response)) == [1]


def test_a_session_made_with_topic_ids_answers_by_topic_id(broker: BrokerProcess) -> None:
    _create(broker, "by-id", 2)
    metadata = exchange(broker.bootstrap, METADATA, 12, {"topics": [{"name": "by-id"}]})
    topic_id = metadata.topics[0].topic_id
    first = _fetch(broker, 0, 0, {0: 0, 1: 0}, topic="by-id", version=13, topic_id=topic_id)
    assert first.session_id != 0
    _produce(broker, "by-id", {0: 1})
    response = _fetch(broker, first.session_id, 1, {}, topic="by-id", version=13, topic_id=topic_id)
    assert [t.topic_id for t in response.responses] == [topic_id]
    assert sorted(_answered(response)) == [0]


def test_the_cache_holds_no_more_sessions_than_its_slots(tmp_path: Any) -> None:
    overrides = ["max.incremental.fetch.session.cache.slots=2"]
    with start_broker(tmp_path / "data", overrides) as small:
        _create(small, SMALL, 4)
        first = _fetch(small, 0, 0, {0: 0}, topic=SMALL)
        second = _fetch(small, 0, 0, {1: 0}, topic=SMALL)
        assert first.session_id != 0
        assert second.session_id not in (0, first.session_id)
        third = _fetch(small, 0, 0, {2: 0}, topic=SMALL)
        assert third.session_id == 0  # no slot, nothing it outranks: sessionless
        assert sorted(_answered(third)) == [2]
        assert _fetch(small, first.session_id, 1, {}, topic=SMALL).error_code == 0
        # A session of more partitions evicts the smallest consumer session.
        bigger = _fetch(small, 0, 0, {0: 0, 1: 0, 2: 0}, topic=SMALL)
        assert bigger.session_id != 0
        alive = [
            _fetch(small, s, e, {}, topic=SMALL).error_code
            for s, e in ((first.session_id, 2), (second.session_id, 1))
        ]
        assert sorted(alive) == [0, FETCH_SESSION_ID_NOT_FOUND]


# -- clients --------------------------------------------------------------------------------
def _metric(broker: BrokerProcess, name: str) -> float:
    with urllib.request.urlopen(broker.metrics_url, timeout=WAIT_S) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{name} not exported")


def _client_topic(broker: BrokerProcess, topic: str) -> set[bytes]:
    """A topic of CLIENT_PARTITIONS partitions holding CLIENT_RECORDS distinct values."""
    _create(broker, topic, CLIENT_PARTITIONS)
    per = CLIENT_RECORDS // CLIENT_PARTITIONS
    _produce(broker, topic, dict.fromkeys(range(CLIENT_PARTITIONS), per))
    return {b"%d-%d" % (p, i) for p in range(CLIENT_PARTITIONS) for i in range(per)}


def _counters(broker: BrokerProcess) -> tuple[float, float]:
    return (
        _metric(broker, f"{CACHE}incrementalfetchsessionscreated_total"),
        _metric(broker, f"{CACHE}incrementalfetches_total"),
    )


def test_a_confluent_kafka_consumer_reads_every_record_once_without_a_session(
    broker: BrokerProcess,
) -> None:
    # librdkafka sends every Fetch with session id 0 and epoch -1 (it has no KIP-227
    # client side): sessionless full fetches, which must make no session.
    expected = _client_topic(broker, "confluent-50")
    created, incremental = _counters(broker)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused",
         "enable.auto.commit": False, "fetch.wait.max.ms": 100, **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition("confluent-50", p, 0) for p in range(CLIENT_PARTITIONS)])
    read: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(read) < len(expected) and time.monotonic() < deadline:
            read += [m.value() for m in consumer.consume(500, 0.5) if m.error() is None]
        # A few more idle polls: the consumer keeps fetching incrementally, nothing doubles.
        read += [m.value() for m in consumer.consume(500, 1.0) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(read) == sorted(expected)
    assert _counters(broker) == (created, incremental)


def test_a_kafka_python_consumer_reads_every_record_once_through_a_session(
    broker: BrokerProcess,
) -> None:
    expected = list(_client_topic(broker, "kafka-python-50"))
    created, incremental = _counters(broker)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100)  # fmt: skip
    consumer.assign([KpTopicPartition("kafka-python-50", p) for p in range(CLIENT_PARTITIONS)])
    for p in range(CLIENT_PARTITIONS):
        consumer.seek(KpTopicPartition("kafka-python-50", p), 0)
    read: list[bytes] = []

    def read_until(count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(read) < count and time.monotonic() < deadline:
            for records in consumer.poll(500, max_records=500).values():
                read.extend(r.value for r in records)

    try:
        read_until(len(expected))
        # Records produced while the session is open reach the consumer too, once.
        _produce(broker, "kafka-python-50", {7: 1, 31: 2})
        expected += [b"7-0", b"31-0", b"31-1"]  # the values start again at 0
        read_until(len(expected))
        for records in consumer.poll(1000, max_records=500).values():
            read.extend(r.value for r in records)
    finally:
        consumer.close()
    assert sorted(read) == sorted(expected)
    now_created, now_incremental = _counters(broker)
    assert now_created > created
    assert now_incremental > incremental


def test_an_aiokafka_consumer_reads_every_record_once(broker: BrokerProcess) -> None:
    # aiokafka 0.14 sends sessionless fetches (it has no KIP-227 client side): the
    # broker's answers to them must be unchanged.
    expected = _client_topic(broker, "aiokafka-50")

    async def consume() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    enable_auto_commit=False, fetch_max_wait_ms=100)  # fmt: skip
        await consumer.start()
        tps = [AioTopicPartition("aiokafka-50", p) for p in range(CLIENT_PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        read: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        try:
            while len(read) < len(expected) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=500)
                read += [r.value for records in batches.values() for r in records if r.value]
            batches = await consumer.getmany(timeout_ms=1000)
            read += [r.value for records in batches.values() for r in records if r.value]
        finally:
            await consumer.stop()
        return read

    assert sorted(asyncio.run(consume())) == sorted(expected)
