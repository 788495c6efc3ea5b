"""The sink's write path: record batches built from Arrow columns, sent as producer batches.

The encoder's bytes are compared with what ``Producer.send`` builds for the same
rows (its ``prepare`` sizing, its partitioner, its accumulator's batches); the
batches then go through a real broker with idempotence and transactions, and
through Spark's batch and exactly-once streaming writers.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from tests.spark.conftest import new_topic, produce

from samsa import Admin, Consumer, Producer
from samsa.client.admin import NewTopic
from samsa.client.cluster import Backoff
from samsa.client.producer import AsyncProducer, BatchMetadata
from samsa.client.producer.accumulator import BufferMemory, RecordAccumulator
from samsa.client.producer.partitioner import partition_for_key
from samsa.errors import MessageTooLargeError
from samsa.records import CompressionType, iter_batches, read_batch
from samsa.records.builder import EncodedBatchBuilder
from samsa.records.reader import record_tuples
from samsa.spark import batches
from samsa.spark.batches import ArrowBatchEncoder, murmur2_partitions
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition

TIMESTAMP = 1_700_000_000_123
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
Row = dict[str, Any]


def _random_bytes(rng: random.Random, longest: int) -> bytes:
    return rng.randbytes(rng.randrange(longest + 1))


def _rows(kind: str, count: int = 1500) -> list[Row]:
    rng = random.Random(kind)
    rows = []
    for i in range(count):
        row: Row = {"key": _random_bytes(rng, 30), "value": _random_bytes(rng, 200)}
        if kind == "nulls":
            row["key"] = None if i % 3 == 0 else row["key"]
            row["value"] = None if i % 5 == 0 else row["value"]
        elif kind == "strings":
            row["key"] = f"key-{rng.randrange(10**6)}-é"
            row["value"] = "v" * rng.randrange(100) + "ü"
        elif kind == "headers":
            row["headers"] = (
                None
                if i % 4 == 0
                else [
                    {"key": f"h{j}-ß", "value": None if j == 1 else _random_bytes(rng, 20)}
                    for j in range(i % 3)
                ]
            )
        elif kind == "partitions":
            row["partition"] = None if i % 2 else rng.randrange(5)
        elif kind == "large":
            row["value"] = _random_bytes(rng, 9000)
        rows.append(row)
    return rows


def _columns(rows: list[Row], kind: str) -> dict[str, pa.Array]:
    binary = pa.string() if kind == "strings" else pa.binary()
    columns = {
        "values": pa.array([r["value"] for r in rows], binary),
        "keys": pa.array([r["key"] for r in rows], binary),
    }
    if kind == "sliced":  # arrays that start inside their buffers, as Arrow slices do
        before = [b"not-this-row-%d" % i for i in range(7)]
        columns = {
            "values": pa.array(before + [r["value"] for r in rows], binary).slice(7),
            "keys": pa.array(before + [r["key"] for r in rows], binary).slice(7),
        }
    if kind == "headers":
        columns["headers"] = pa.array([r["headers"] for r in rows], HEADERS)
    if kind == "partitions":
        columns["partitions"] = pa.array([r["partition"] for r in rows], pa.int32())
    return columns


def _encoded(encoder: ArrowBatchEncoder, rows: list[Row], kind: str) -> dict[int, list[bytes]]:
    batches: dict[int, list[bytes]] = {}
    for batch in encoder.encode("t", 5, timestamp=TIMESTAMP, **_columns(rows, kind)):
        batches.setdefault(batch.partition, []).append(EncodedBatchBuilder(batch.records).build())
    return batches


def _as_send_would(
    config: dict[str, Any], rows: list[Row], first_keyless: int
) -> dict[int, list[bytes]]:
    """The batches Producer.send builds for ``rows`` when nothing drains early: its prepare()
    sizing, its partitioner for keyed rows, its accumulator's batches. Keyless rows follow
    the encoder's documented placement (batch.size bytes, then the next partition), as the
    producer's random choice cannot be compared."""
    producer = AsyncProducer(config)
    settings = producer.config
    accumulator = RecordAccumulator(
        batch_size=settings["batch.size"],
        linger_ms=0,
        compression=CompressionType[settings["compression.type"].upper()],
        memory=BufferMemory(1 << 40),
        retry_backoff=Backoff(100, 1000),
        delivery_timeout_ms=120_000,
    )
    keyless, produced = first_keyless, 0
    for row in rows:
        headers = [(h["key"], h["value"]) for h in row.get("headers") or ()]
        key, value = row["key"], row["value"]
        record = producer.prepare(
            "t",
            value.encode() if isinstance(value, str) else value,
            key=key.encode() if isinstance(key, str) else key,
            headers=headers,
            partition=row.get("partition"),
            timestamp=TIMESTAMP,
        )
        if record.partition is not None:
            partition = record.partition
        elif record.key is not None and not settings["partitioner.ignore.keys"]:
            partition = partition_for_key(record.key, 5)
        else:
            partition, produced = keyless, produced + record.size
            if produced >= settings["batch.size"]:
                keyless, produced = (keyless + 1) % 5, 0
        accumulator.append(
            TopicPartition("t", partition), timestamp=record.timestamp, key=record.key,
            value=record.value, headers=record.headers, future=None, callback=None,
            reserved=record.size, now=0.0,
        )  # fmt: skip
    return {tp.partition: [b.encode() for b in q] for tp, q in accumulator.batches.items()}


CASES = {
    "binary keys and values": ("binary", {}),
    "string key and value columns": ("strings", {}),
    "null keys and null values": ("nulls", {}),
    "headers with null values and empty lists": ("headers", {}),
    "a partition column with nulls": ("partitions", {}),
    "values needing multi-byte varints": ("large", {}),
    "sliced key and value columns": ("sliced", {}),
    "gzip compression": ("binary", {"compression.type": "gzip"}),
    "partitioner.ignore.keys": ("binary", {"partitioner.ignore.keys": True}),
}


@pytest.fixture(params=["c", "numpy"])
def encode_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The C helper's encoding of rows without headers, or the numpy one."""
    if request.param == "c":
        assert batches._native is not None, "setup.py did not build samsa.records._native"
    monkeypatch.setattr(batches, "_encode_in_c", request.param == "c")
    return str(request.param)


@pytest.mark.parametrize("case", CASES)
def test_encoded_batches_are_the_bytes_producer_send_builds_for_the_same_rows(
    case: str, encode_path: str
) -> None:
    kind, extra = CASES[case]
    config = {"bootstrap.servers": "localhost:1", "batch.size": 4096, **extra}
    settings = AsyncProducer(config).config
    encoder = ArrowBatchEncoder(
        batch_size=settings["batch.size"],
        max_request_size=settings["max.request.size"],
        buffer_memory=settings["buffer.memory"],
        compression=CompressionType[settings["compression.type"].upper()],
        ignore_keys=settings["partitioner.ignore.keys"],
        first_partition=3,
    )
    rows = _rows(kind)
    expected = _as_send_would(config, rows, first_keyless=3)
    assert _encoded(encoder, rows, kind) == expected
    assert sum(map(len, expected.values())) > 5  # several batches per partition


def test_murmur2_of_a_key_column_is_the_producers_partition_for_every_key_length(
    encode_path: str,
) -> None:
    rng = random.Random(7)
    keys: list[bytes | None] = [rng.randbytes(n) for n in range(64) for _ in range(20)]
    keys[5::17] = [None] * len(keys[5::17])
    column = pa.array([b"not-this-key"] * 3 + keys).slice(3)
    for partitions in (1, 3, 7, 100):
        expected = [-1 if k is None else partition_for_key(k, partitions) for k in keys]
        assert murmur2_partitions(column, partitions).tolist() == expected


def test_keyless_rows_fill_batch_size_bytes_of_one_partition_then_move_to_the_next() -> None:
    encoder = ArrowBatchEncoder(
        batch_size=1000, max_request_size=1 << 20, buffer_memory=1 << 25, first_partition=1
    )
    # 100 bytes each as the producer counts them (21 + 79): ten rows reach batch.size
    values = pa.array([b"%079d" % i for i in range(65)])
    placed: dict[int, list[int]] = {}
    for rows in (values[:60], values[60:]):  # the placement carries over to the next call
        for batch in encoder.encode("t", 3, values=rows, timestamp=TIMESTAMP):
            built = read_batch(EncodedBatchBuilder(batch.records).build())
            placed.setdefault(batch.partition, []).extend(
                int(value) for _o, _t, _k, value, _h in record_tuples(built)
            )
    assert placed == {
        1: [*range(10), *range(30, 40), *range(60, 65)],
        2: [*range(10, 20), *range(40, 50)],
        0: [*range(20, 30), *range(50, 60)],
    }


def test_a_row_larger_than_max_request_size_is_refused_as_send_refuses_it() -> None:
    encoder = ArrowBatchEncoder(batch_size=16384, max_request_size=1000, buffer_memory=1 << 25)
    with pytest.raises(MessageTooLargeError, match=r"max\.request\.size=1000"):
        list(encoder.encode("t", 1, values=pa.array([b"x", b"y" * 1000]), timestamp=TIMESTAMP))


def test_a_row_partition_outside_the_topic_is_refused_naming_it() -> None:
    encoder = ArrowBatchEncoder(batch_size=16384, max_request_size=1 << 20, buffer_memory=1 << 25)
    partitions = pa.array([0, 4], pa.int32())
    with pytest.raises(ValueError, match="partition 4 "):
        list(
            encoder.encode(
                "t", 2, values=pa.array([b"a", b"b"]), partitions=partitions, timestamp=TIMESTAMP
            )
        )


def _read(bootstrap: str, topic: str, partitions: int, count: int, **extra: Any) -> list[Any]:
    config = {"bootstrap.servers": bootstrap, "enable.auto.commit": False, **extra}
    records: list[Any] = []
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        for _ in range(200):
            records += consumer.poll(0.2)
            if len(records) >= count:
                break
    return records


def _batches(topic: str, count: int, rows: int) -> Iterator[Any]:
    encoder = ArrowBatchEncoder(batch_size=2048, max_request_size=1 << 20, buffer_memory=1 << 25)
    values = pa.array([b"value-%d" % i for i in range(count)])
    keys = pa.array([b"key-%d" % i for i in range(count)])
    yield from encoder.encode(topic, rows, values=values, keys=keys, timestamp=TIMESTAMP)


def test_sent_batches_get_consecutive_offsets_and_read_back_with_keys_and_values(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=2)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as producer:
        producer.partitions_for(topic)
        futures = [
            (b, producer.send_batch(b.topic, b.partition, b.records))
            for b in _batches(topic, 500, 2)
        ]
        metadata = [(b.partition, f.result(30)) for b, f in futures]
    next_offset = {0: 0, 1: 0}
    for partition, meta in metadata:
        assert (meta.partition, meta.base_offset) == (partition, next_offset[partition])
        next_offset[partition] += meta.record_count
    records = _read(samsa_broker.bootstrap, topic, 2, 500)
    assert sorted((r.key, r.value) for r in records) == sorted(
        (b"key-%d" % i, b"value-%d" % i) for i in range(500)
    )
    assert {(r.partition, r.key) for r in records} == {
        (partition_for_key(b"key-%d" % i, 2), b"key-%d" % i) for i in range(500)
    }


def test_sent_batches_carry_the_producer_id_and_consecutive_sequences(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=1)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as producer:
        producer.partitions_for(topic)
        for b in _batches(topic, 300, 1):
            producer.send_batch(b.topic, b.partition, b.records)
        producer.flush()
        identity = producer.producer_identity
    headers = []
    for segment in sorted((Path(samsa_broker.data_dir) / f"{topic}-0").glob("*.log")):
        for view in iter_batches(segment.read_bytes()):
            view.validate()
            headers.append((view.producer_id, view.producer_epoch, view.base_sequence,
                            view.record_count))  # fmt: skip
    assert identity is not None and len(headers) > 3
    sequence = 0
    for producer_id, epoch, base_sequence, count in headers:
        assert (producer_id, epoch, base_sequence) == (*identity, sequence)
        sequence += count
    assert sequence == 300


def test_batches_sent_in_a_transaction_are_read_committed_only_after_the_commit(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=2)
    config = {"bootstrap.servers": samsa_broker.bootstrap, "transactional.id": f"tx-{topic}"}
    committed = {"bootstrap.servers": samsa_broker.bootstrap, "isolation.level": "read_committed"}
    with Producer(config) as producer, Consumer(committed) as consumer:
        producer.init_transactions()
        producer.partitions_for(topic)
        producer.begin_transaction()
        for b in _batches(topic, 200, 2):
            producer.send_batch(b.topic, b.partition, b.records)
        producer.flush()
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        assert consumer.end_offsets(tps) == dict.fromkeys(tps, 0)  # the open transaction's
        producer.commit_transaction()
    records = _read(samsa_broker.bootstrap, topic, 2, 200, **{"isolation.level": "read_committed"})
    assert sorted(r.value for r in records) == sorted(b"value-%d" % i for i in range(200))


def _read_back(spark: SparkSession, bootstrap: str, topics: str) -> list[Any]:
    return (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics)
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .collect()
    )


def _row(r: Any) -> tuple[Any, ...]:
    key = None if r.key is None else bytes(r.key)
    headers = tuple((h.key, bytes(h.value)) for h in r.headers or ())
    return r.topic, key, bytes(r.value), headers


def _sorted(rows: Any) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)  # keys may be None


def test_batch_write_of_keyless_rows_to_a_topic_column_writes_every_row_once(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    first = new_topic(samsa_broker.bootstrap, partitions=3)
    second = new_topic(samsa_broker.bootstrap, partitions=2)
    df = spark.range(600, numPartitions=2).selectExpr(
        f"if(id % 3 = 0, '{second}', '{first}') as topic",
        "if(id % 2 = 0, null, cast(id as string)) as key",
        "concat('v', id) as value",  # a string column
    )
    df.write.mode("append").format("samsa").option(
        "kafka.bootstrap.servers", samsa_broker.bootstrap
    ).save()
    back = _read_back(spark, samsa_broker.bootstrap, f"{first},{second}")
    assert _sorted(_row(r) for r in back) == _sorted(
        (second if i % 3 == 0 else first, None if i % 2 == 0 else b"%d" % i, b"v%d" % i, ())
        for i in range(600)
    )
    keyed = [r for r in back if r.key is not None and r.topic == first]
    assert {r.partition for r in keyed} == {partition_for_key(bytes(r.key), 3) for r in keyed}
    # Under batch.size bytes per task: each task's keyless rows stay on its first partition,
    # the task's number modulo the partition count.
    assert {r.partition for r in back if r.key is None and r.topic == first} == {0, 1}


def test_exactly_once_stream_write_reads_back_every_row_once_with_keys_headers_partitions(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    source = new_topic(samsa_broker.bootstrap, partitions=2)
    sink = new_topic(samsa_broker.bootstrap, partitions=3)
    values = [b"%04d" % i for i in range(200)]
    produce(samsa_broker.bootstrap, source, values)
    (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "120")
        .load()
        .selectExpr(
            "key",
            "value",
            "if(cast(value as string) % 4 = 0, 2, null) as partition",
            "array(named_struct('key', 'n', 'value', value)) as headers",
        )
        .writeStream.format("samsa")
        .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination(120)
    )
    back = _read_back(spark, samsa_broker.bootstrap, sink)
    assert sorted(_row(r) for r in back) == [(sink, v, v, (("n", v),)) for v in values]
    assert all(
        r.partition == (2 if int(r.value) % 4 == 0 else partition_for_key(bytes(r.key), 3))
        for r in back
    )


def test_the_asyncio_producer_delivers_a_sent_batch_to_its_future_and_callback(
    samsa_broker: BrokerProcess,
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=1)
    (batch,) = _batches(topic, 10, 1)
    called: list[Any] = []

    async def send() -> Any:
        async with AsyncProducer({"bootstrap.servers": samsa_broker.bootstrap}) as producer:
            await producer.partitions_for(topic)
            future = await producer.send_batch(
                topic, 0, batch.records, on_delivery=lambda m, e: called.append((m, e))
            )
            return await future

    metadata = asyncio.run(send())
    assert metadata == BatchMetadata(topic, 0, 0, 10)
    assert called == [(metadata, None)]


def test_batch_write_fits_its_batches_to_a_topics_max_message_bytes(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    """The sink's batches are 512 KiB unless kafka.batch.size says otherwise; a topic that
    takes less gets batches that fit, as with the `topic` option and a topic column."""
    small = f"small-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": samsa_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(small, 2, configs={"max.message.bytes": "20000"})])
    df = spark.range(6000, numPartitions=2).selectExpr(
        "cast(id as string) as key", "repeat('v', 100) as value", f"'{small}' as topic"
    )
    df.drop("topic").write.mode("append").format("samsa").option(
        "kafka.bootstrap.servers", samsa_broker.bootstrap
    ).option("topic", small).save()
    df.write.mode("append").format("samsa").option(
        "kafka.bootstrap.servers", samsa_broker.bootstrap
    ).save()
    back = _read_back(spark, samsa_broker.bootstrap, small)
    assert len(back) == 12_000
