"""samsa's consumer (``Consumer`` and ``AsyncConsumer``) with assigned partitions, against a
real broker process.

What the consumer returns is compared with what an independent client wrote:
confluent-kafka (librdkafka) produces records with every codec, null keys, values and
header values, and explicit timestamps, and the consumer must hand back exactly those
bytes at the offsets librdkafka's delivery reports named. Positions (seek, resets,
pause), the offset lookups, commits to a group without joining it, and
``isolation.level`` over transactions written by samsa's producer are checked by the
records and offsets a user sees. Group membership and rebalancing are not used here.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer
from tests.client_records import codecs_on_disk

from samsa import Admin, AsyncConsumer, Consumer, Producer
from samsa.client.admin import NewTopic, OffsetAndMetadata
from samsa.client.consumer import ConsumerRecord, NoOffsetForPartitionError
from samsa.client.errors import (
    ClientClosedError,
    IllegalStateError,
    RecordDeserializationError,
)
from samsa.errors import ConfigError, CorruptRecordError, for_code
from samsa.records import CompressionType, iter_batches
from samsa.testing import BrokerProcess, start_broker
from samsa.types import TopicPartition

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
HANG_S = 30  # a deadline that only detects a hang, never a measure of speed
OffsetOutOfRangeError = for_code(1)
CREATE_TIME, LOG_APPEND_TIME = 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("client-consumer") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(broker: BrokerProcess, partitions: int, configs: dict[str, str] | None = None) -> str:
    topic = _name("consume")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, configs or {})])
    return topic


def _consumer(broker: BrokerProcess, config: dict[str, Any] | None = None) -> Consumer:
    return Consumer(
        {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest", **(config or {})}
    )


def _fill(
    broker: BrokerProcess, topic: str, partitions: int, count: int, base_ts: int | None = None
) -> None:
    """``count`` records per partition: value ``p<partition>-<i>``, timestamp base_ts + 10 i
    (now without ``base_ts``)."""
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for partition in range(partitions):
        for i in range(count):
            timestamp = 0 if base_ts is None else base_ts + 10 * i
            producer.produce(topic, b"p%d-%d" % (partition, i), partition=partition,
                             timestamp=timestamp)  # fmt: skip
    assert producer.flush(30) == 0


def _fill_more(broker: BrokerProcess, topic: str, *, partition: int, values: list[bytes]) -> None:
    """Append ``values`` to one partition (one batch)."""
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


def _read(consumer: Consumer, count: int, max_records: int | None = None) -> list[ConsumerRecord]:
    """Poll until ``count`` records arrived (the deadline only stops a hung test)."""
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + 60
    while len(records) < count and time.monotonic() < deadline:
        records += consumer.poll(0.5, max_records=max_records)
    return records


def _by_partition(records: list[ConsumerRecord]) -> dict[int, list[ConsumerRecord]]:
    out: dict[int, list[ConsumerRecord]] = defaultdict(list)
    for record in records:
        out[record.partition].append(record)
    return out


def _offsets(records: list[ConsumerRecord]) -> dict[int, list[int]]:
    return {p: [r.offset for r in rs] for p, rs in _by_partition(records).items()}


# -- records written by another client come back byte for byte ------------------------------


Headers = list[tuple[str, str | bytes | None]]  # confluent-kafka's type; these hold bytes | None


def _interop_record(i: int) -> tuple[bytes | None, bytes | None, Headers]:
    """Record ``i``: null and binary keys, null, empty, binary and large values, headers with
    null and empty values, repeated and non-ASCII keys (and now and then none at all)."""
    key = None if i % 7 == 0 else b"key-%d-\x00\xff" % i
    if i % 11 == 0:
        value: bytes | None = None
    elif i % 11 == 1:
        value = b""
    elif i % 250 == 3:
        value = bytes(range(256)) * 600  # 150 KiB: more than a batch
    else:
        value = b"value-%d-" % i + bytes((i + j) % 256 for j in range(i % 50)) + b"x" * 40
    headers: Headers = (
        []
        if i % 5 == 0
        else [("h", b"%d" % i), ("null", None), ("empty", b""), ("h", b"\x00\x01"),
              ("ключ", "значение".encode())]
    )  # fmt: skip
    return key, value, headers


@pytest.mark.parametrize("codec", CODECS)
def test_records_from_librdkafka_are_returned_byte_exact_under_each_codec(
    broker: BrokerProcess, codec: str
) -> None:
    topic = _create(broker, 3)
    base_ts = int(time.time() * 1000) - 3_600_000
    producer = ConfluentProducer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5,
         **QUIET}
    )  # fmt: skip
    records = [_interop_record(i) for i in range(1500)]
    reports: list[tuple[int, Any, Any]] = []
    for i, (key, value, headers) in enumerate(records):

        def on_delivery(error: Any, message: Any, i: int = i) -> None:
            reports.append((i, error, message))

        producer.produce(topic, value, key, partition=i % 3, timestamp=base_ts + i,
                         headers=headers, on_delivery=on_delivery)  # fmt: skip
    assert producer.flush(30) == 0
    assert len(reports) == len(records) and all(error is None for _, error, _ in reports)
    sent: dict[tuple[int, int], tuple[Any, ...]] = {}  # (partition, offset) → what was sent
    for i, _error, message in reports:
        key, value, headers = records[i]
        sent[message.partition(), message.offset()] = (key, value, tuple(headers), base_ts + i)

    partitions = [TopicPartition(topic, p) for p in range(3)]
    with _consumer(broker) as consumer:
        consumer.assign(partitions)
        received = _read(consumer, len(sent))
        assert consumer.poll(0.2) == []
    assert len(received) == len(sent)
    for partition, got in _by_partition(received).items():
        assert [r.offset for r in got] == list(range(len(got)))  # in order, no gap, no repeat
        for record in got:
            key, value, headers, timestamp = sent[partition, record.offset]
            assert (record.topic, record.key, record.value) == (topic, key, value)
            assert record.headers == headers
            assert (record.timestamp, record.timestamp_type) == (timestamp, CREATE_TIME)
            assert record.serialized_key_size == (-1 if key is None else len(key))
            assert record.serialized_value_size == (-1 if value is None else len(value))
            assert record.topic_partition == TopicPartition(topic, partition)
    assert CompressionType[codec.upper()] in codecs_on_disk(broker.data_dir, topic)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_log_append_time_topic_returns_the_broker_timestamp(
    broker: BrokerProcess, codec: str
) -> None:
    topic = _create(broker, 1, {"message.timestamp.type": "LogAppendTime"})
    producer = ConfluentProducer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, **QUIET}
    )
    before = int(time.time() * 1000)
    for i in range(20):
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=1_000_000 + i)
    assert producer.flush(30) == 0
    after = int(time.time() * 1000)
    with _consumer(broker) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        received = _read(consumer, 20)
    assert [r.value for r in received] == [b"v%d" % i for i in range(20)]
    assert {r.timestamp_type for r in received} == {LOG_APPEND_TIME}
    assert all(before <= r.timestamp <= after for r in received)


def test_samsa_producer_records_round_trip_through_serializers(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    sent = [(f"key-{i % 10}", {"n": i, "text": "héllo"} if i % 9 else None) for i in range(300)]
    config = {"bootstrap.servers": broker.bootstrap, "compression.type": "lz4",
              "key.serializer": str.encode,
              "value.serializer": lambda v: json.dumps(v).encode()}  # fmt: skip
    with Producer(config) as producer:
        futures = [producer.send(topic, value, key=key) for key, value in sent]
        producer.flush()
        where = {(f.result().partition, f.result().offset): i for i, f in enumerate(futures)}
    consumer_config = {"key.deserializer": bytes.decode, "value.deserializer": json.loads}
    with _consumer(broker, consumer_config) as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        received = _read(consumer, len(sent))
    assert len(received) == len(sent)
    for record in received:
        key, value = sent[where[record.partition, record.offset]]
        assert (record.key, record.value) == (key, value)
        assert record.serialized_key_size == len(key.encode())
        expected_size = -1 if value is None else len(json.dumps(value).encode())
        assert record.serialized_value_size == expected_size
    for offsets in _offsets(received).values():
        assert offsets == list(range(len(offsets)))


# -- positions ------------------------------------------------------------------------------


def test_seek_moves_the_next_poll_to_that_offset_forwards_and_back(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 100)
    tp = TopicPartition(topic, 0)
    with _consumer(broker) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 42)
        assert [r.offset for r in _read(consumer, 58)] == list(range(42, 100))
        assert consumer.position(tp) == 100
        consumer.seek(tp, 10)
        assert consumer.position(tp) == 10
        assert [r.offset for r in _read(consumer, 90)] == list(range(10, 100))


def test_seek_discards_records_already_fetched_for_the_old_position(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 100)
    tp = TopicPartition(topic, 0)
    with _consumer(broker) as consumer:
        consumer.assign([tp])
        assert [r.offset for r in _read(consumer, 5, max_records=5)] == [0, 1, 2, 3, 4]
        consumer.seek(tp, 70)  # records 5.. are buffered by now; none of them may come back
        assert [r.offset for r in _read(consumer, 30)] == list(range(70, 100))


def test_seek_to_beginning_and_end_move_only_the_named_partitions(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 20)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _consumer(broker) as consumer:
        consumer.assign([tp0, tp1])
        assert len(_read(consumer, 40)) == 40
        consumer.seek_to_beginning([tp0])
        assert _offsets(_read(consumer, 20)) == {0: list(range(20))}
        consumer.seek(tp0, 5)
        consumer.seek(tp1, 5)
        consumer.seek_to_end()
        assert (consumer.position(tp0), consumer.position(tp1)) == (20, 20)
        _fill_more(broker, topic, partition=1, values=[b"new-0", b"new-1"])
        received = _read(consumer, 2)
        assert [(r.partition, r.offset, r.value) for r in received] == [
            (1, 20, b"new-0"),
            (1, 21, b"new-1"),
        ]


def test_position_starts_at_the_committed_offset_else_by_auto_offset_reset(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 30)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    group = _name("group")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_group_offsets(group, {tp0: OffsetAndMetadata(17)})
    for reset, tp1_position in [("latest", 30), ("earliest", 0)]:
        config = {"group.id": group, "auto.offset.reset": reset, "enable.auto.commit": False}
        with _consumer(broker, config) as consumer:
            consumer.assign([tp0, tp1])
            assert consumer.position(tp0) == 17
            assert consumer.position(tp1) == tp1_position


def test_position_of_an_unassigned_partition_raises_illegal_state(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    with _consumer(broker) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.position(TopicPartition(topic, 1))


def test_paused_partition_returns_nothing_and_resumes_without_gaps(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 200)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _consumer(broker) as consumer:
        consumer.assign([tp0, tp1])
        first = _read(consumer, 1, max_records=10)
        consumer.pause([tp0])
        assert consumer.paused() == {tp0}
        while_paused = _read(consumer, 200 - len(_by_partition(first)[1]))
        assert consumer.poll(0.5) == []  # partition 0 still has unread records
        assert 0 not in _by_partition(while_paused)
        consumer.resume([tp0])
        assert consumer.paused() == set()
        rest = _read(consumer, 400 - len(first) - len(while_paused))
    received = _offsets(first + while_paused + rest)
    assert received == {0: list(range(200)), 1: list(range(200))}


def test_assigning_again_keeps_the_positions_of_partitions_still_assigned(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 30)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _consumer(broker) as consumer:
        consumer.assign([tp0])
        assert len(_read(consumer, 30)) == 30
        consumer.assign([tp0, tp1])
        assert consumer.assignment() == {tp0, tp1}
        assert _offsets(_read(consumer, 30)) == {1: list(range(30))}
        assert consumer.position(tp0) == 30


def test_unassigned_consumer_cannot_poll_until_assigned_again(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 5)
    with _consumer(broker) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.unsubscribe()
        assert consumer.assignment() == set()
        with pytest.raises(IllegalStateError):
            consumer.poll(0.1)
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in _read(consumer, 5)] == [b"p0-%d" % i for i in range(5)]


def test_records_larger_than_the_fetch_size_limits_are_still_returned(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    values = [bytes([i]) * (20_000 + i) for i in range(12)]
    _fill_more(broker, topic, partition=0, values=values)
    config = {"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 1024}
    with _consumer(broker, config) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        received = _read(consumer, len(values))
    assert [(r.offset, r.value) for r in received] == list(enumerate(values))


def test_beginning_and_end_offsets_follow_deleted_and_appended_records(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 10)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.delete_records({tp0: 4}) == {tp0: 4}
    _fill_more(broker, topic, partition=1, values=[b"x"] * 3)
    with _consumer(broker) as consumer:
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 4, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 13}


def test_offsets_for_times_finds_the_first_record_at_or_after_each_time(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 3)
    base_ts = int(time.time() * 1000) - 3_600_000
    _fill(broker, topic, 3, 10, base_ts)  # timestamps base_ts, base_ts + 10, … base_ts + 90
    tp0, tp1, tp2 = (TopicPartition(topic, p) for p in range(3))
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({tp2: 5})
    with _consumer(broker) as consumer:
        found = consumer.offsets_for_times({tp0: base_ts + 25, tp1: base_ts + 91, tp2: base_ts})
    assert found == {tp0: (3, base_ts + 30), tp1: None, tp2: (5, base_ts + 50)}


def test_list_topics_and_partitions_for_name_the_partitions(broker: BrokerProcess) -> None:
    topic = _create(broker, 3)
    missing = _name("missing")
    with _consumer(broker, {"allow.auto.create.topics": False}) as consumer:
        assert consumer.list_topics()[topic] == [0, 1, 2]
        assert consumer.partitions_for(topic) == [0, 1, 2]
        assert consumer.partitions_for(missing) is None
        assert missing not in consumer.list_topics()


# -- auto.offset.reset ----------------------------------------------------------------------


def test_auto_offset_reset_latest_reads_only_records_written_after_it(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 5)
    tp = TopicPartition(topic, 0)
    with _consumer(broker, {"auto.offset.reset": "latest"}) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 5
        _fill_more(broker, topic, partition=0, values=[b"a", b"b", b"c"])
        received = _read(consumer, 3)
    assert [(r.offset, r.value) for r in received] == [(5, b"a"), (6, b"b"), (7, b"c")]


def test_auto_offset_reset_earliest_reads_from_the_log_start(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 10)
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({tp: 3})
    with _consumer(broker, {"group.id": _name("fresh"), "enable.auto.commit": False}) as consumer:
        consumer.assign([tp])
        assert [r.offset for r in _read(consumer, 7)] == list(range(3, 10))


@pytest.mark.parametrize("group", [None, "group"])
def test_auto_offset_reset_none_without_a_committed_offset_raises_from_poll(
    broker: BrokerProcess, group: str | None
) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 5)
    config = {"auto.offset.reset": "none",
              "group.id": group and _name(group), "enable.auto.commit": False}  # fmt: skip
    with _consumer(broker, config) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(NoOffsetForPartitionError, match=topic):
            for _ in range(20):
                consumer.poll(0.5)


def test_position_without_a_committed_offset_and_reset_none_raises(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    tp = TopicPartition(topic, 0)
    config = {"auto.offset.reset": "none", "group.id": _name("group"), "enable.auto.commit": False}
    with _consumer(broker, config) as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.position(tp)
        consumer.seek(tp, 0)
        assert consumer.position(tp) == 0


def test_auto_offset_reset_none_starts_at_a_committed_offset(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 10)
    tp = TopicPartition(topic, 0)
    group = _name("group")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_group_offsets(group, {tp: OffsetAndMetadata(6)})
    config = {"auto.offset.reset": "none", "group.id": group, "enable.auto.commit": False}
    with _consumer(broker, config) as consumer:
        consumer.assign([tp])
        assert [r.offset for r in _read(consumer, 4)] == [6, 7, 8, 9]


def test_position_below_the_log_start_resets_to_earliest(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 100)
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({tp: 50})
    with _consumer(broker) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 10)
        assert [r.offset for r in _read(consumer, 50)] == list(range(50, 100))


@pytest.mark.parametrize(("reset", "first"), [("earliest", 0), ("latest", 20)])
def test_position_beyond_the_log_end_resets_by_auto_offset_reset(
    broker: BrokerProcess, reset: str, first: int
) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 20)
    tp = TopicPartition(topic, 0)
    with _consumer(broker, {"auto.offset.reset": reset}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        if reset == "latest":
            # The broker's OFFSET_OUT_OF_RANGE answer resets the position to the log end,
            # with nothing returned meanwhile; a busy machine may need more than one poll.
            deadline = time.monotonic() + HANG_S
            while consumer.position(tp) != 20:
                assert time.monotonic() < deadline, f"position {consumer.position(tp)}"
                assert consumer.poll(0.2) == []
            _fill_more(broker, topic, partition=0, values=[b"after"])
        assert _read(consumer, 1)[0].offset == first


def test_position_below_the_log_start_with_reset_none_raises_offset_out_of_range(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 100)
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({tp: 50})
    with _consumer(broker, {"auto.offset.reset": "none"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 10)
        with pytest.raises(OffsetOutOfRangeError, match="10"):
            for _ in range(20):
                consumer.poll(0.5)


def test_seek_after_offset_out_of_range_reads_from_the_new_position(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 100)
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({tp: 50})
    with _consumer(broker, {"auto.offset.reset": "none"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 10)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(20):
                consumer.poll(0.5)
        consumer.seek(tp, consumer.beginning_offsets([tp])[tp])
        assert [r.offset for r in _read(consumer, 50)] == list(range(50, 100))


def _corrupt_batch_of(broker: BrokerProcess, topic: str, offset: int) -> tuple[int, int]:
    """Flip the last byte of the stored batch holding ``offset`` (partition 0); returns the
    batch's first offset and the offset after it."""
    (segment,) = (broker.data_dir / f"{topic}-0").glob("*.log")
    position = 0
    for batch in iter_batches(segment.read_bytes()):
        position += batch.size
        if batch.base_offset <= offset < batch.next_offset:
            break
    with open(segment, "r+b") as file:
        file.seek(position - 1)
        byte = file.read(1)[0]
        file.seek(position - 1)
        file.write(bytes([byte ^ 0xFF]))
    return batch.base_offset, batch.next_offset


def test_a_corrupt_batch_raises_after_the_records_before_it_and_can_be_skipped(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    values = [b"%d-%d" % (batch, i) for batch in range(3) for i in range(5)]
    for batch in range(3):
        _fill_more(broker, topic, partition=0, values=values[5 * batch : 5 * batch + 5])
    first, after = _corrupt_batch_of(broker, topic, 5)
    tp = TopicPartition(topic, 0)
    with _consumer(broker) as consumer:
        consumer.assign([tp])
        before: list[ConsumerRecord] = []
        with pytest.raises(CorruptRecordError, match=topic):
            for _ in range(20):
                before += consumer.poll(0.5)
        assert [r.offset for r in before] == list(range(first))
        assert consumer.position(tp) == first
        consumer.seek(tp, after)
        assert [r.value for r in _read(consumer, 15 - after)] == values[after:]


def test_a_failing_deserializer_raises_from_poll_after_the_records_before_it(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    _fill_more(broker, topic, partition=0, values=[b'{"n": 0}', b"not json", b'{"n": 2}'])
    tp = TopicPartition(topic, 0)
    with _consumer(broker, {"value.deserializer": json.loads}) as consumer:
        consumer.assign([tp])
        before: list[ConsumerRecord] = []
        with pytest.raises(RecordDeserializationError) as raised:
            for _ in range(20):
                before += consumer.poll(0.5)
        assert (raised.value.partition, raised.value.offset) == (tp, 1)
        assert isinstance(raised.value.__cause__, json.JSONDecodeError)
        assert [(r.offset, r.value) for r in before] == [(0, {"n": 0})]
        assert consumer.position(tp) == 1
        consumer.seek(tp, 2)
        assert [(r.offset, r.value) for r in _read(consumer, 1)] == [(2, {"n": 2})]


# -- commits without joining the group ------------------------------------------------------


def test_committed_positions_are_where_a_new_consumer_of_the_group_resumes(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 100)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    config = {"group.id": _name("group"), "enable.auto.commit": False}
    with _consumer(broker, config) as consumer:
        consumer.assign([tp0, tp1])
        first = _read(consumer, 30, max_records=7)
        positions = {tp0: consumer.position(tp0), tp1: consumer.position(tp1)}
        consumer.commit()
        committed = consumer.committed([tp0, tp1])
    assert {tp: c.offset for tp, c in committed.items() if c is not None} == positions
    with _consumer(broker, config) as consumer:
        consumer.assign([tp0, tp1])
        rest = _read(consumer, 200 - sum(positions.values()))
    read = _offsets(first + rest)
    assert read == {0: list(range(100)), 1: list(range(100))}


def test_commit_of_explicit_offsets_keeps_their_metadata(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with _consumer(broker, {"group.id": _name("group"), "enable.auto.commit": False}) as consumer:
        consumer.assign([tp0])  # commits may name partitions that are not assigned
        consumer.commit({tp0: 12, tp1: OffsetAndMetadata(3, "checkpoint-7")})
        committed = consumer.committed([tp0, tp1])
    assert (committed[tp0].offset, committed[tp0].metadata) == (12, "")  # type: ignore[union-attr]
    assert (committed[tp1].offset, committed[tp1].metadata) == (3, "checkpoint-7")  # type: ignore[union-attr]


def test_committed_is_none_for_a_partition_without_a_commit(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    tp = TopicPartition(topic, 0)
    with _consumer(broker, {"group.id": _name("group"), "enable.auto.commit": False}) as consumer:
        assert consumer.committed([tp]) == {tp: None}


def test_commit_async_calls_back_and_completes_its_future(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 20)
    tp = TopicPartition(topic, 0)
    calls: list[tuple[dict[TopicPartition, OffsetAndMetadata], BaseException | None]] = []
    called = threading.Event()

    def callback(
        offsets: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None
    ) -> None:
        calls.append((offsets, error))
        called.set()

    with _consumer(broker, {"group.id": _name("group"), "enable.auto.commit": False}) as consumer:
        consumer.assign([tp])
        assert len(_read(consumer, 20)) == 20
        future = consumer.commit_async(callback=callback)
        assert future.result(30) is None
        assert called.wait(30)
        assert consumer.committed([tp])[tp].offset == 20  # type: ignore[union-attr]
        consumer.commit_async({tp: 9}).result(30)
        assert consumer.committed([tp])[tp].offset == 9  # type: ignore[union-attr]
    ((offsets, error),) = calls
    assert error is None and {t: o.offset for t, o in offsets.items()} == {tp: 20}


def test_close_commits_the_positions_with_auto_commit(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 50)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    group = _name("group")
    config = {"group.id": group, "auto.commit.interval.ms": 600_000}
    with _consumer(broker, config) as consumer:
        consumer.assign([tp0, tp1])
        read = _read(consumer, 40, max_records=8)
        positions = {tp0: consumer.position(tp0), tp1: consumer.position(tp1)}
    assert sum(positions.values()) == len(read)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        committed = admin.list_group_offsets(group)
    assert {tp: c.offset for tp, c in committed.items()} == positions


def test_auto_commit_commits_the_positions_at_a_later_poll(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 20)
    tp = TopicPartition(topic, 0)
    group = _name("group")
    admin = Admin({"bootstrap.servers": broker.bootstrap})
    config = {"group.id": group, "auto.commit.interval.ms": 50}
    with admin, _consumer(broker, config) as consumer:
        consumer.assign([tp])
        assert len(_read(consumer, 20)) == 20
        committed: dict[TopicPartition, OffsetAndMetadata] = {}
        deadline = time.monotonic() + 30
        while committed.get(tp, OffsetAndMetadata(-1)).offset != 20:
            assert time.monotonic() < deadline, f"nothing auto-committed: {committed}"
            consumer.poll(0.1)
            committed = admin.list_group_offsets(group)


def test_commit_without_a_group_id_raises_illegal_state(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    with _consumer(broker) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(IllegalStateError, match=r"group\.id"):
            consumer.commit({TopicPartition(topic, 0): 1})


# -- isolation.level over transactions ------------------------------------------------------


def test_read_committed_returns_committed_records_up_to_the_last_stable_offset(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    expected_committed: dict[int, list[bytes]] = {0: [], 1: []}
    expected_all: dict[int, list[bytes]] = {0: [], 1: []}

    def send(producer: Producer, prefix: str, committed: bool) -> list[Any]:
        futures = []
        for i in range(10):
            value = b"%s%d" % (prefix.encode(), i)
            futures.append(producer.send(topic, value, partition=i % 2))
            expected_all[i % 2].append(value)
            if committed:
                expected_committed[i % 2].append(value)
        producer.flush()
        return futures

    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": _name("tid")}
    with Producer(config) as txn, Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        txn.init_transactions()
        txn.begin_transaction()
        send(txn, "committed-a", True)
        txn.commit_transaction()
        txn.begin_transaction()
        send(txn, "aborted-b", False)
        txn.abort_transaction()
        send(plain, "plain-n", True)
        txn.begin_transaction()
        send(txn, "committed-c", True)
        txn.commit_transaction()
        txn.begin_transaction()
        open_futures = send(txn, "open-d", False)
        last_stable = {tp: min(f.result().offset for f in open_futures[tp.partition :: 2])
                       for tp in tps}  # fmt: skip
        high_watermark = {tp: max(f.result().offset for f in open_futures[tp.partition :: 2]) + 1
                          for tp in tps}  # fmt: skip

        committed_reader = _consumer(broker, {"isolation.level": "read_committed"})
        uncommitted_reader = _consumer(broker, {"isolation.level": "read_uncommitted"})
        with committed_reader, uncommitted_reader:
            committed_reader.assign(tps)
            uncommitted_reader.assign(tps)
            assert committed_reader.end_offsets(tps) == last_stable
            assert uncommitted_reader.end_offsets(tps) == high_watermark
            read_committed = _read(committed_reader, sum(map(len, expected_committed.values())))
            assert committed_reader.poll(0.5) == []
            assert {tp: committed_reader.position(tp) for tp in tps} == last_stable
            read_uncommitted = _read(uncommitted_reader, sum(map(len, expected_all.values())))
            assert uncommitted_reader.poll(0.2) == []

            latest = _consumer(broker, {"isolation.level": "read_committed",
                                        "auto.offset.reset": "latest"})  # fmt: skip
            with latest:
                latest.assign(tps)
                assert {tp: latest.position(tp) for tp in tps} == last_stable

            txn.commit_transaction()
            for tp in tps:
                expected_committed[tp.partition] += [
                    v for v in expected_all[tp.partition] if v.startswith(b"open-d")
                ]
            after_commit = _read(committed_reader, 10)
            with_marker = {tp: offset + 1 for tp, offset in high_watermark.items()}
            assert committed_reader.end_offsets(tps) == with_marker  # + the COMMIT marker

    def values(records: list[ConsumerRecord]) -> dict[int, list[bytes]]:
        return {p: [r.value for r in rs] for p, rs in _by_partition(records).items()}

    assert values(read_committed + after_commit) == expected_committed
    assert values(read_uncommitted) == expected_all


def test_read_committed_skips_interleaved_aborted_batches_across_small_fetches(
    broker: BrokerProcess,
) -> None:
    topic = _create(broker, 1)
    tp = TopicPartition(topic, 0)
    bootstrap = broker.bootstrap
    committing = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("commit")})
    aborting = Producer({"bootstrap.servers": bootstrap, "transactional.id": _name("abort")})
    expected: list[bytes] = []
    everything: list[bytes] = []
    with committing, aborting:
        for producer in (committing, aborting):
            producer.init_transactions()
        for round_ in range(4):
            committing.begin_transaction()
            aborting.begin_transaction()
            for i in range(30):  # one batch per send: the two transactions interleave
                for producer, name in ((committing, b"keep"), (aborting, b"drop")):
                    value = b"%s-%d-%d-" % (name, round_, i) + b"x" * 200
                    producer.send(topic, value, partition=0).result(30)
                    everything.append(value)
                    if producer is committing:
                        expected.append(value)
            aborting.flush()
            aborting.abort_transaction()
            committing.commit_transaction()
    small = {"max.partition.fetch.bytes": 2048, "fetch.max.bytes": 2048}
    with _consumer(broker, {"isolation.level": "read_committed", **small}) as consumer:
        consumer.assign([tp])
        received = _read(consumer, len(expected))
        end = consumer.end_offsets([tp])[tp]
        while consumer.position(tp) < end:  # the last markers; nothing may come with them
            assert consumer.poll(0.5) == []
    assert [r.value for r in received] == expected
    with _consumer(broker, {"isolation.level": "read_uncommitted", **small}) as consumer:
        consumer.assign([tp])
        assert [r.value for r in _read(consumer, len(everything))] == everything


# -- asyncio --------------------------------------------------------------------------------


def test_async_consumer_polls_seeks_and_commits_from_asyncio(broker: BrokerProcess) -> None:
    topic = _create(broker, 2)
    _fill(broker, topic, 2, 25)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    group = _name("group")

    async def main() -> tuple[list[ConsumerRecord], dict[TopicPartition, Any], list[int]]:
        config = {"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
        async with AsyncConsumer(config) as consumer:
            consumer.assign(tps)
            records: list[ConsumerRecord] = []
            while len(records) < 50:
                records += await consumer.poll(1.0)
            await consumer.commit()
            committed = await consumer.committed(tps)
            consumer.seek(tps[1], 20)
            again: list[ConsumerRecord] = []
            deadline = time.monotonic() + HANG_S
            while len(again) < 5 and time.monotonic() < deadline:
                again += await consumer.poll(1.0)
            return records, committed, [r.offset for r in again if r.partition == 1]

    records, committed, again = asyncio.run(main())
    assert _offsets(records) == {0: list(range(25)), 1: list(range(25))}
    assert {tp: c.offset for tp, c in committed.items()} == {tps[0]: 25, tps[1]: 25}
    assert again == [20, 21, 22, 23, 24]


# -- misuse ---------------------------------------------------------------------------------


def test_unknown_consumer_config_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"fetch\.max\.wiat\.ms"):
        Consumer({"bootstrap.servers": "127.0.0.1:9", "fetch.max.wiat.ms": 100})
    with pytest.raises(ConfigError, match=r"auto\.ofset\.reset"):
        AsyncConsumer({"bootstrap.servers": "127.0.0.1:9", "auto.ofset.reset": "earliest"})


def test_poll_before_subscribe_or_assign_raises_illegal_state(broker: BrokerProcess) -> None:
    with _consumer(broker) as consumer, pytest.raises(IllegalStateError, match="assign"):
        consumer.poll(0.1)


def test_consumer_used_after_close_raises_client_closed(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    tp = TopicPartition(topic, 0)
    consumer = _consumer(broker, {"group.id": _name("group")})
    consumer.assign([tp])
    consumer.close()
    for call in (
        lambda: consumer.poll(0.1),
        lambda: consumer.assign([tp]),
        lambda: consumer.seek(tp, 0),
        lambda: consumer.position(tp),
        lambda: consumer.commit({tp: 1}),
        lambda: consumer.end_offsets([tp]),
    ):
        with pytest.raises(ClientClosedError):
            call()


def test_closing_a_consumer_twice_does_nothing(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    with _consumer(broker, {"group.id": _name("group")}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.close()
    consumer.close()


def test_async_consumer_used_after_close_raises_client_closed(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        consumer = AsyncConsumer({"bootstrap.servers": broker.bootstrap})
        async with consumer:
            consumer.assign([tp])
        with pytest.raises(ClientClosedError):
            await consumer.poll(0.1)
        with pytest.raises(ClientClosedError):
            consumer.assign([tp])

    asyncio.run(main())


# -- how much one poll returns --------------------------------------------------------------


def test_poll_returns_at_most_max_poll_records_or_max_records(broker: BrokerProcess) -> None:
    topic = _create(broker, 1)
    _fill(broker, topic, 1, 500)
    with _consumer(broker, {"max.poll.records": 7}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        sizes: list[int] = []
        records: list[ConsumerRecord] = []
        while len(records) < 250:
            batch = consumer.poll(1.0)
            sizes.append(len(batch))
            records += batch
        small = [len(consumer.poll(1.0, max_records=3)) for _ in range(10)]
        records += _read(consumer, 500 - len(records) - sum(small))
    assert max(sizes) == 7 and max(small) == 3
    assert len(records) + sum(small) == 500


def test_a_large_read_returns_every_record_once_in_order(broker: BrokerProcess) -> None:
    topic = _create(broker, 4)
    count = 200_000
    producer = ConfluentProducer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
         "queue.buffering.max.messages": 1_000_000, **QUIET}
    )  # fmt: skip
    for i in range(count):
        producer.produce(topic, b"%08d" % i + b"x" * 92, partition=i % 4)
    assert producer.flush(60) == 0
    next_offset = [0, 0, 0, 0]
    values = bytearray(count)
    with _consumer(broker) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        received = 0
        deadline = time.monotonic() + 100
        while received < count and time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                assert record.offset == next_offset[record.partition]
                next_offset[record.partition] += 1
                values[int(record.value[:8])] += 1
                received += 1
        assert consumer.poll(0.2) == []
    assert next_offset == [count // 4] * 4
    assert values == bytearray(b"\x01" * count)
