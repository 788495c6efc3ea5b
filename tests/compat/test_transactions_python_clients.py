"""Transactional producers of kafka-python and aiokafka against a real broker process.

What a user of transactions relies on, checked by reading back: committed records are
read by read_committed consumers, aborted ones only by read_uncommitted consumers,
offsets sent to a transaction become the group's committed offsets with the commit and
not before, a second producer with the same transactional id fences the first, and a
consume–transform–produce loop writes every input exactly once.

Reads end at partition EOF (confluent-kafka) or at the end offset for the isolation
level (aiokafka's ``end_offsets``: the last stable offset for read_committed), so a
test never waits a fixed time for records that must not come. pytest-asyncio is not a
dependency: aiokafka phases run under ``asyncio.run`` with a deadline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import ProducerFenced as AioProducerFenced
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import CommitFailedError, KafkaTimeoutError, ProducerFencedError
from kafka.structs import OffsetAndMetadata
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
PARTITIONS = 2
DEADLINE_S = 20
OFFSET_FETCH = 9
UNSTABLE_OFFSET_COMMIT = 88

T = TypeVar("T")
Record = tuple[int, int, bytes]  # (partition, offset, value)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("txn-clients") / "data",
        overrides=["group.initial.rebalance.delay.ms=0"],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def names() -> tuple[str, str, str]:
    """A fresh (topic, group, transactional id): no test sees another's records or state."""
    suffix = uuid.uuid4().hex[:8]
    return f"txn-{suffix}", f"group-{suffix}", f"txn-id-{suffix}"


def _create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def _read(
    bootstrap: str, topic: str, isolation_level: str, partitions: int = PARTITIONS
) -> list[Record]:
    """Every record of ``topic`` a consumer with ``isolation_level`` reads, up to partition EOF.

    librdkafka reports EOF at the last stable offset for read_committed and at the high
    watermark for read_uncommitted, so this returns once everything readable was read.
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "txn-reader",
        "isolation.level": isolation_level, "enable.auto.commit": False,
        "enable.partition.eof": True, **QUIET,
    })  # fmt: skip
    records: list[Record] = []
    at_end: set[int] = set()
    try:
        consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + DEADLINE_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"timed out reading {topic}: {records}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(message.partition())
            else:
                records.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    return sorted(records)


def _values(records: Sequence[Record]) -> list[bytes]:
    return sorted(value for _, _, value in records)


# -- kafka-python -----------------------------------------------------------------------------


def _kafka_python_producer(bootstrap: str, transactional_id: str) -> KafkaProducer:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=transactional_id, max_block_ms=10_000
    )
    producer.init_transactions()
    return producer


def _kafka_python_send(
    producer: KafkaProducer, topic: str, values: Mapping[int, list[bytes]]
) -> None:
    """Send ``values[p]`` to partition ``p`` and wait until the broker acknowledged them."""
    futures = [
        producer.send(topic, value, partition=partition)
        for partition, batch in values.items()
        for value in batch
    ]
    for future in futures:
        future.get(timeout=10)


def test_kafka_python_committed_transaction_is_read_by_read_committed_consumers(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, _, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    producer = _kafka_python_producer(broker.bootstrap, transactional_id)
    try:
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, b"p0-%d" % i, partition=0)
            producer.send(topic, b"p1-%d" % i, partition=1)
        producer.commit_transaction()  # sends what is pending first
    finally:
        producer.close(timeout=10)

    committed = _read(broker.bootstrap, topic, "read_committed")
    # Offsets 0-2 in each partition hold the records, offset 3 the commit marker.
    assert committed == [(p, i, b"p%d-%d" % (p, i)) for p in range(PARTITIONS) for i in range(3)]
    assert _read(broker.bootstrap, topic, "read_uncommitted") == committed


def test_kafka_python_aborted_transaction_is_read_only_by_read_uncommitted_consumers(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, _, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    producer = _kafka_python_producer(broker.bootstrap, transactional_id)
    try:
        producer.begin_transaction()
        # Waiting for the acknowledgements puts the records in the log: kafka-python's
        # abort_transaction() drops records it has not sent yet, as Java's producer does.
        _kafka_python_send(producer, topic, {0: [b"aborted-0"], 1: [b"aborted-1"]})
        producer.abort_transaction()
        producer.begin_transaction()
        _kafka_python_send(producer, topic, {0: [b"committed-0"], 1: [b"committed-1"]})
        producer.commit_transaction()
    finally:
        producer.close(timeout=10)

    assert _values(_read(broker.bootstrap, topic, "read_committed")) == [
        b"committed-0",
        b"committed-1",
    ]
    # Each partition: the aborted record (0), the abort marker (1), the committed record (2).
    uncommitted = _read(broker.bootstrap, topic, "read_uncommitted")
    assert uncommitted == [
        (0, 0, b"aborted-0"),
        (0, 2, b"committed-0"),
        (1, 0, b"aborted-1"),
        (1, 2, b"committed-1"),
    ]


def _offset_fetch_require_stable(bootstrap: str, group: str, topic: str) -> list[int]:
    """OffsetFetch v7 with require_stable: the error code of each partition of ``topic``."""
    response = exchange(bootstrap, OFFSET_FETCH, 7, {
        "group_id": group, "require_stable": True,
        "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}],
    })  # fmt: skip
    assert response.error_code.value == 0
    [fetched] = response.topics
    return [
        int(p.error_code.value) for p in sorted(fetched.partitions, key=lambda p: p.partition_index)
    ]


def test_kafka_python_offsets_sent_to_a_transaction_are_committed_with_it(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, group, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    partitions = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
    offsets = {
        partitions[0]: OffsetAndMetadata(3, "after three", -1),
        partitions[1]: OffsetAndMetadata(5, "", -1),
    }
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    stable = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                           isolation_level="read_committed", enable_auto_commit=False)  # fmt: skip
    plain = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                          enable_auto_commit=False)  # fmt: skip
    producer = _kafka_python_producer(broker.bootstrap, transactional_id)
    try:
        # Both consumers know the group's coordinator before anything is pending.
        assert stable.committed(partitions[0], timeout_ms=5000) is None
        assert plain.committed(partitions[0], timeout_ms=5000) is None
        producer.begin_transaction()
        _kafka_python_send(producer, topic, {0: [b"output"]})
        producer.send_offsets_to_transaction(offsets, group)

        # Before the commit the offsets are pending: OffsetFetch answers them
        # UNSTABLE_OFFSET_COMMIT to a require_stable request, and nothing otherwise.
        unstable = _offset_fetch_require_stable(broker.bootstrap, group, topic)
        assert unstable == [UNSTABLE_OFFSET_COMMIT] * PARTITIONS
        # kafka-python asks require_stable for read_committed consumers and retries the
        # retriable UNSTABLE_OFFSET_COMMIT until its timeout.
        with pytest.raises(KafkaTimeoutError):
            stable.committed(partitions[0], timeout_ms=500)
        assert [plain.committed(tp) for tp in partitions] == [None, None]
        assert admin.list_group_offsets({group: None}) == {group: {}}

        producer.commit_transaction()

        assert _offset_fetch_require_stable(broker.bootstrap, group, topic) == [0] * PARTITIONS
        assert [stable.committed(tp, timeout_ms=5000) for tp in partitions] == [3, 5]
        assert [plain.committed(tp) for tp in partitions] == [3, 5]
        listed = admin.list_group_offsets({group: None})[group]
        assert {tp: (o.offset, o.metadata) for tp, o in listed.items()} == {
            partitions[0]: (3, "after three"),
            partitions[1]: (5, ""),
        }
    finally:
        producer.close(timeout=10)
        for client in (stable, plain, admin):
            client.close()


def test_kafka_python_offsets_of_an_aborted_transaction_are_never_committed(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, group, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    tp = KafkaTopicPartition(topic, 0)
    producer = _kafka_python_producer(broker.bootstrap, transactional_id)
    try:
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(7, "", -1)}, group)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)

    assert _offset_fetch_require_stable(broker.bootstrap, group, topic) == [0] * PARTITIONS
    stable = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                           isolation_level="read_committed", enable_auto_commit=False)  # fmt: skip
    try:
        assert stable.committed(tp, timeout_ms=5000) is None
    finally:
        stable.close()


def test_kafka_python_offsets_with_a_stale_consumer_generation_fail_and_the_retry_commits(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    """KIP-447: offsets sent with the consumer's group metadata are checked against the
    group, so a consumer that was rebalanced away cannot commit through a transaction."""
    topic, group, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    source = f"{topic}-in"
    _create_topic(broker.bootstrap, source)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(6):
        producer.produce(source, b"in-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(10) == 0

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    transactional = _kafka_python_producer(broker.bootstrap, transactional_id)
    try:
        consumer.subscribe([source])
        # Metadata first: a kafka-python leader that assigns before it knows the topic
        # joins again as soon as it does (see test_groups_python_clients).
        assert source in consumer.topics()
        consumed: dict[KafkaTopicPartition, int] = {}
        deadline = time.monotonic() + DEADLINE_S
        while sum(consumed.values()) < 6:
            assert time.monotonic() < deadline, f"timed out consuming {source}: {consumed}"
            for tp, records in consumer.poll(timeout_ms=200).items():
                consumed[tp] = consumed.get(tp, 0) + len(records)
        offsets = {tp: OffsetAndMetadata(count, "", -1) for tp, count in consumed.items()}
        current = consumer.group_metadata()
        assert current.generation_id >= 1

        transactional.begin_transaction()
        _kafka_python_send(transactional, topic, {0: [b"stale"]})
        stale = current._replace(generation_id=current.generation_id + 1)
        with pytest.raises(CommitFailedError):
            transactional.send_offsets_to_transaction(offsets, stale)
        transactional.abort_transaction()  # the error is abortable, not fatal

        transactional.begin_transaction()
        _kafka_python_send(transactional, topic, {0: [b"current"]})
        transactional.send_offsets_to_transaction(offsets, consumer.group_metadata())
        transactional.commit_transaction()
        assert {tp: consumer.committed(tp, timeout_ms=5000) for tp in offsets} == {
            KafkaTopicPartition(source, p): 3 for p in range(PARTITIONS)
        }
    finally:
        transactional.close(timeout=10)
        consumer.close()
    assert _values(_read(broker.bootstrap, topic, "read_committed")) == [b"current"]


def test_kafka_python_second_producer_with_the_same_transactional_id_fences_the_first(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, _, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    first = _kafka_python_producer(broker.bootstrap, transactional_id)
    second: KafkaProducer | None = None
    try:
        first.begin_transaction()
        _kafka_python_send(first, topic, {0: [b"from-the-first"]})
        # The second InitProducerId aborts the first producer's open transaction and bumps
        # the epoch: the first producer's next request is refused.
        second = _kafka_python_producer(broker.bootstrap, transactional_id)
        with pytest.raises(ProducerFencedError):
            first.commit_transaction()
        second.begin_transaction()
        _kafka_python_send(second, topic, {0: [b"from-the-second"]})
        second.commit_transaction()
    finally:
        first.close(timeout=10)
        if second is not None:
            second.close(timeout=10)

    assert _values(_read(broker.bootstrap, topic, "read_committed")) == [b"from-the-second"]
    assert _values(_read(broker.bootstrap, topic, "read_uncommitted")) == [
        b"from-the-first",
        b"from-the-second",
    ]


# -- aiokafka ---------------------------------------------------------------------------------


def _run(coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coroutine

    return asyncio.run(bounded())


async def _aiokafka_producer(bootstrap: str, transactional_id: str) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await producer.start()  # InitProducerId
    return producer


async def _aiokafka_read(
    bootstrap: str, topic: str, isolation_level: str, partitions: int = PARTITIONS
) -> list[Record]:
    """Every record an AIOKafkaConsumer with ``isolation_level`` reads, up to the end offsets.

    aiokafka's ``end_offsets`` asks ListOffsets with the consumer's isolation level: the
    last stable offset for read_committed. Control records are skipped but move the position.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation_level,
        enable_auto_commit=False, auto_offset_reset="earliest",
    )  # fmt: skip
    await consumer.start()
    records: list[Record] = []
    try:
        assigned = [AioTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        ends = await consumer.end_offsets(assigned)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            positions = [await consumer.position(tp) for tp in assigned]
            if all(position >= ends[tp] for tp, position in zip(assigned, positions, strict=True)):
                break
            assert time.monotonic() < deadline, f"timed out reading {topic}: {records}"
            for batch in (await consumer.getmany(timeout_ms=100)).values():
                records += [(r.partition, r.offset, r.value) for r in batch]
    finally:
        await consumer.stop()
    return sorted(records)


def test_aiokafka_transaction_context_commits_on_exit_and_aborts_on_an_exception(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, _, transactional_id = names
    _create_topic(broker.bootstrap, topic)

    async def scenario() -> tuple[list[Record], list[Record]]:
        producer = await _aiokafka_producer(broker.bootstrap, transactional_id)
        try:
            async with producer.transaction():
                for p in range(PARTITIONS):
                    await producer.send_and_wait(topic, b"committed-%d" % p, partition=p)
            with pytest.raises(RuntimeError, match="give up"):
                async with producer.transaction():
                    for p in range(PARTITIONS):
                        await producer.send_and_wait(topic, b"aborted-%d" % p, partition=p)
                    raise RuntimeError("give up")
            async with producer.transaction():
                await producer.send_and_wait(topic, b"committed-again", partition=0)
        finally:
            await producer.stop()
        return (
            await _aiokafka_read(broker.bootstrap, topic, "read_committed"),
            await _aiokafka_read(broker.bootstrap, topic, "read_uncommitted"),
        )

    committed, uncommitted = _run(scenario())
    # Each partition: a committed record, its marker, an aborted record, its marker, ...
    assert committed == [(0, 0, b"committed-0"), (0, 4, b"committed-again"), (1, 0, b"committed-1")]
    assert uncommitted == [
        (0, 0, b"committed-0"),
        (0, 2, b"aborted-0"),
        (0, 4, b"committed-again"),
        (1, 0, b"committed-1"),
        (1, 2, b"aborted-1"),
    ]


def test_aiokafka_offsets_sent_to_a_transaction_are_committed_with_it(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, group, transactional_id = names
    _create_topic(broker.bootstrap, topic)
    partitions = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]

    async def committed(consumer: AIOKafkaConsumer) -> list[int | None]:
        return [await consumer.committed(tp) for tp in partitions]

    async def scenario() -> None:
        producer = await _aiokafka_producer(broker.bootstrap, transactional_id)
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                                    enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"output", partition=0)
                await producer.send_offsets_to_transaction(
                    {partitions[0]: 4, partitions[1]: 9}, group
                )
                # aiokafka's OffsetFetch (v1-v3) has no require_stable: pending offsets
                # are simply not there yet.
                assert await committed(consumer) == [None, None]
            assert await committed(consumer) == [4, 9]

            with pytest.raises(RuntimeError, match="give up"):
                async with producer.transaction():
                    await producer.send_offsets_to_transaction(
                        {partitions[0]: 40, partitions[1]: 90}, group
                    )
                    raise RuntimeError("give up")
            assert await committed(consumer) == [4, 9]
        finally:
            await consumer.stop()
            await producer.stop()

    _run(scenario())


def test_aiokafka_second_producer_with_the_same_transactional_id_fences_the_first(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    topic, _, transactional_id = names
    _create_topic(broker.bootstrap, topic)

    async def scenario() -> None:
        first = await _aiokafka_producer(broker.bootstrap, transactional_id)
        second: AIOKafkaProducer | None = None
        try:
            await first.begin_transaction()
            await first.send_and_wait(topic, b"from-the-first", partition=0)
            second = await _aiokafka_producer(broker.bootstrap, transactional_id)
            with pytest.raises(AioProducerFenced):
                await first.commit_transaction()
        finally:
            await first.stop()
            if second is not None:
                await second.stop()

    _run(scenario())
    assert _read(broker.bootstrap, topic, "read_committed") == []


# -- aiokafka: consume, transform, produce ----------------------------------------------------

LOOP_INPUT = 1000
LOOP_PARTITIONS = 4
LOOP_TRANSACTION = 100
LOOP_ABORTED = 3  # this transaction is aborted and its input processed again
LOOP_HANDOVER = 5  # after this transaction a new consumer takes over the group


def _transform(value: bytes) -> bytes:
    return b"out-" + value


def test_aiokafka_consume_transform_produce_loop_writes_each_input_exactly_once(
    broker: BrokerProcess, names: tuple[str, str, str]
) -> None:
    """1000 inputs, transactions of 100 with the consumer's offsets; one transaction is
    aborted (the consumer seeks back to the committed offsets) and halfway a new consumer
    of the group resumes from the offsets the transactions committed."""
    topic, group, transactional_id = names
    source, sink = f"{topic}-in", f"{topic}-out"
    _create_topic(broker.bootstrap, source, LOOP_PARTITIONS)
    _create_topic(broker.bootstrap, sink, LOOP_PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for i in range(LOOP_INPUT):
        producer.produce(source, b"in-%04d" % i, partition=i % LOOP_PARTITIONS)
    assert producer.flush(10) == 0
    inputs = _read(broker.bootstrap, source, "read_uncommitted", LOOP_PARTITIONS)

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            source, bootstrap_servers=broker.bootstrap, group_id=group,
            isolation_level="read_committed", enable_auto_commit=False,
            auto_offset_reset="earliest",
        )  # fmt: skip

    async def take(reader: AIOKafkaConsumer, count: int) -> list[Any]:
        taken: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(taken) < count:
            assert time.monotonic() < deadline, f"timed out: {len(taken)} of {count} inputs"
            batches = await reader.getmany(timeout_ms=100, max_records=count - len(taken))
            for batch in batches.values():
                taken += batch
        return taken

    async def rewind(reader: AIOKafkaConsumer) -> None:
        for tp in reader.assignment():
            committed = await reader.committed(tp)
            if committed is None:
                await reader.seek_to_beginning(tp)
            else:
                reader.seek(tp, committed)

    async def scenario() -> int:
        writer = await _aiokafka_producer(broker.bootstrap, transactional_id)
        reader = consumer()
        await reader.start()
        transactions = aborted = 0
        try:
            done = 0
            while done < LOOP_INPUT:
                taken = await take(reader, min(LOOP_TRANSACTION, LOOP_INPUT - done))
                await writer.begin_transaction()
                sends = [
                    await writer.send(sink, _transform(r.value), partition=r.partition)
                    for r in taken
                ]
                await asyncio.gather(*sends)
                positions = {}
                for r in taken:
                    positions[AioTopicPartition(r.topic, r.partition)] = r.offset + 1
                await writer.send_offsets_to_transaction(positions, group)
                transactions += 1
                if transactions == LOOP_ABORTED:
                    await writer.abort_transaction()
                    aborted += len(taken)
                    await rewind(reader)
                    continue
                await writer.commit_transaction()
                done += len(taken)
                if transactions == LOOP_HANDOVER:
                    await reader.stop()
                    reader = consumer()
                    await reader.start()
        finally:
            await reader.stop()
            await writer.stop()
        return aborted

    aborted = _run(scenario())
    outputs = _read(broker.bootstrap, sink, "read_committed", LOOP_PARTITIONS)
    assert len({value for _, _, value in outputs}) == len(outputs) == LOOP_INPUT
    for partition in range(LOOP_PARTITIONS):
        expected = [_transform(v) for p, _, v in inputs if p == partition]
        assert [v for p, _, v in outputs if p == partition] == expected
    assert aborted == LOOP_TRANSACTION
    written = _read(broker.bootstrap, sink, "read_uncommitted", LOOP_PARTITIONS)
    assert len(written) == LOOP_INPUT + aborted
