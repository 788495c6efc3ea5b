"""aiokafka against a real samsa broker process.

Consumers use ``assign()`` without a group and producers disable idempotence:
consumer groups and InitProducerId are not served yet. pytest-asyncio is not a
dependency, so each test drives its coroutine with ``asyncio.run`` under a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from tests.client_records import Sent, assert_round_trip, make_record

from samsa.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
TIMEOUT_MS = 10_000

T = TypeVar("T")


def _run(coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coroutine

    return asyncio.run(bounded())


async def _create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, partitions, 1)], timeout_ms=TIMEOUT_MS
        )
    finally:
        await admin.close()
    assert [error_code for _, error_code, *_ in response.topic_errors] == [0]


async def _produce(
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
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=False,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=TIMEOUT_MS,
    )
    await producer.start()
    try:
        pending = []
        for i in range(count):
            key, value, headers = make_record(i)
            ts = base_ts + i * ts_step
            partition = None if partition_of is None else i % partition_of
            future = await producer.send(
                topic, value=value, key=key, headers=headers, partition=partition, timestamp_ms=ts
            )
            pending.append((key, value, headers, ts, future))
        results = await asyncio.gather(*(future for *_, future in pending))
    finally:
        await producer.stop()
    return [
        Sent(key, value, headers, ts, metadata.partition, metadata.offset)
        for (key, value, headers, ts, _), metadata in zip(pending, results, strict=True)
    ]


def _consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=TIMEOUT_MS,
    )


async def _consume_all(bootstrap: str, topic: str, expected: int) -> list:
    consumer = _consumer(bootstrap)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        received = []
        deadline = time.monotonic() + 30
        while len(received) < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=expected)
            for records in batches.values():
                received += records
        # One more poll: nothing may arrive beyond what was produced.
        for records in (await consumer.getmany(timeout_ms=200)).values():
            received += records
    finally:
        await consumer.stop()
    return received


@pytest.mark.parametrize("codec", CODECS)
def test_records_round_trip_byte_exact_under_each_codec(
    samsa_broker: BrokerProcess, codec: str
) -> None:
    topic = f"aiokafka-roundtrip-{codec}"
    base_ts = int(time.time() * 1000) - 100_000

    async def scenario() -> tuple[list[Sent], list]:
        await _create_topic(samsa_broker.bootstrap, topic)
        sent = await _produce(samsa_broker.bootstrap, topic, 10_000, codec, base_ts=base_ts)
        return sent, await _consume_all(samsa_broker.bootstrap, topic, len(sent))

    sent, received = _run(scenario())

    assert_round_trip(
        sent, received, PARTITIONS, data_dir=samsa_broker.data_dir, topic=topic, codec=codec
    )


@pytest.fixture(scope="module")
def timed_topic(samsa_broker: BrokerProcess) -> Iterator[tuple[str, list[Sent]]]:
    """1 000 records 10 ms apart in partitions 0 and 1 of three; partition 2 stays empty."""
    topic = "aiokafka-times"
    base_ts = int(time.time() * 1000) - 100_000

    async def scenario() -> list[Sent]:
        await _create_topic(samsa_broker.bootstrap, topic)
        return await _produce(
            samsa_broker.bootstrap, topic, 1_000, base_ts=base_ts, ts_step=10, partition_of=2
        )

    yield topic, _run(scenario())


def test_offsets_for_times_answers_the_first_offset_at_or_after_a_timestamp(
    samsa_broker: BrokerProcess, timed_topic: tuple[str, list[Sent]]
) -> None:
    topic, sent = timed_topic
    first, last = sent[0].timestamp, sent[-1].timestamp
    targets = [first - 60_000, first, sent[123].timestamp, sent[456].timestamp + 5, last, last + 1]
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    async def scenario() -> list[dict]:
        consumer = _consumer(samsa_broker.bootstrap)
        await consumer.start()
        try:
            return [
                await consumer.offsets_for_times(dict.fromkeys(partitions, target))
                for target in targets
            ]
        finally:
            await consumer.stop()

    for target, found in zip(targets, _run(scenario()), strict=True):
        for tp in partitions:
            at_or_after = [s for s in sent if s.partition == tp.partition and s.timestamp >= target]
            if not at_or_after:
                assert found[tp] is None, (target, tp)
            else:
                assert (found[tp].offset, found[tp].timestamp) == (
                    at_or_after[0].offset,
                    at_or_after[0].timestamp,
                ), (target, tp)


def test_beginning_and_end_offsets_bound_each_partition(
    samsa_broker: BrokerProcess, timed_topic: tuple[str, list[Sent]]
) -> None:
    topic, sent = timed_topic
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    async def scenario() -> tuple[dict, dict]:
        consumer = _consumer(samsa_broker.bootstrap)
        await consumer.start()
        try:
            beginning = await consumer.beginning_offsets(partitions)
            return beginning, await consumer.end_offsets(partitions)
        finally:
            await consumer.stop()

    beginning, end = _run(scenario())
    assert beginning == dict.fromkeys(partitions, 0)
    assert end == {tp: sum(s.partition == tp.partition for s in sent) for tp in partitions}
    assert [end[tp] for tp in partitions] == [500, 500, 0]


def test_default_producer_settings_round_trip(samsa_broker: BrokerProcess) -> None:
    # aiokafka 0.14 defaults to enable_idempotence=False and acks=1.
    topic = "aiokafka-defaults"

    async def scenario() -> tuple[list, list]:
        await _create_topic(samsa_broker.bootstrap, topic)
        producer = AIOKafkaProducer(bootstrap_servers=samsa_broker.bootstrap)
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value=b"v%d" % i, key=b"k%d" % i) for i in range(100)
            ]
            sent = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        return sent, await _consume_all(samsa_broker.bootstrap, topic, len(sent))

    sent, received = _run(scenario())
    by_position = {(r.partition, r.offset): r for r in received}
    assert len(received) == 100
    for i, metadata in enumerate(sent):
        got = by_position[metadata.partition, metadata.offset]
        assert (got.key, got.value) == (b"k%d" % i, b"v%d" % i)
