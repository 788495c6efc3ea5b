"""Writing DataFrames to topics: the batch writer and the exactly-once streaming writer.

Input columns, as for Spark's Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``topic`` (string; the ``topic`` option wins when
set), ``partition`` (int) and ``headers`` (array of struct<key string, value
binary>). Other columns are ignored.

Each Arrow batch Spark hands a task becomes Kafka record batches built from its
columns (:mod:`samsa.spark.batches`: the bytes ``Producer.send`` would make row
by row, keyless rows placed deterministically), sent with ``Producer.send_batch``
so idempotence, transactions and retries apply as to any batch. All rows of one
Arrow batch carry the same timestamp: when it was encoded. The sink's producer
has ``batch.size`` 512 KiB unless ``kafka.batch.size`` says otherwise (the
producer's default, 16 KiB, costs 2–5× the throughput); a topic whose
``max.message.bytes`` is lower needs ``kafka.batch.size`` below it.

The batch writer is at-least-once (a retried task writes its rows again). The
streaming writer makes each micro-batch exactly-once for ``read_committed``
readers: each task writes in one transaction whose ``transactional.id`` is
stable per (query, task partition), adds the batch id as the offset of a group
of the same name, and leaves the transaction open; Spark's driver commits the
transactions of a micro-batch once all its tasks succeeded
(:mod:`samsa.spark.transactions` says why not earlier). A replay of a batch — a
retried task, or the whole batch after the driver died — first fences any
earlier attempt (``init_transactions`` aborts its open transaction), then reads
the group's offset and skips the batch when it is already committed. This holds
as long as a replayed batch puts the same rows in the same task partitions,
which Spark's deterministic planning of a checkpointed batch gives for
deterministic queries, and as long as a micro-batch commits within
``transaction.timeout.ms`` of its first task's write (else it fails, and is
written again when the query restarts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from samsa.client.admin import Admin, ConfigResource
from samsa.client.producer import BatchMetadata, ConsumerGroupMetadata, Producer
from samsa.errors import ConfigError, SamsaError
from samsa.records import CompressionType
from samsa.spark.batches import ArrowBatchEncoder
from samsa.spark.options import SinkOptions
from samsa.spark.rows import HEADERS_TYPE
from samsa.spark.transactions import (
    PreparedTransaction,
    end_transactions,
    prepared_transaction,
)
from samsa.spark.worker import settle_imports
from samsa.types import TopicPartition

__all__ = ["SamsaBatchWriter", "SamsaCommitMessage", "SamsaStreamWriter", "check_sink_schema"]

log = logging.getLogger(__name__)


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """ConfigError naming the column when the DataFrame cannot be written."""
    types = {f.name.lower(): f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[DataType, ...], words: str) -> None:
        # simpleString leaves out nullability, which does not matter here.
        if name in types and types[name].simpleString() not in {t.simpleString() for t in allowed}:
            raise ConfigError(f"column {name} must be {words}, not {types[name].simpleString()}")

    if "value" not in types:
        raise ConfigError("the DataFrame to write needs a value column (binary or string)")
    check("value", (BinaryType(), StringType()), "binary or string")
    check("key", (BinaryType(), StringType()), "binary or string")
    check("topic", (StringType(),), "string")
    check("partition", (IntegerType(),), "int")
    check("headers", (HEADERS_TYPE,), "array<struct<key:string,value:binary>>")
    if options.topic is None and "topic" not in types:
        raise ConfigError("set the option topic, or give the DataFrame a topic column")


@dataclass(frozen=True)
class SamsaCommitMessage(WriterCommitMessage):
    """What one task wrote: rows sent, whether it skipped a batch already committed, and
    the open transaction the driver commits (streaming writes of at least one row)."""

    partition_id: int
    rows: int
    skipped: bool = False
    transaction: PreparedTransaction | None = None


LIMITS_TTL_S = 60.0
"""How long a Python worker trusts a topic's ``max.message.bytes`` it has read."""
_limits_read: dict[tuple[str, str], tuple[float, int | None]] = {}


class _TopicLimits:
    """The batch size each topic takes: the sink's batches are 512 KiB unless
    ``kafka.batch.size`` says otherwise, and a topic whose ``max.message.bytes`` is smaller
    would refuse them (Kafka's producer splits a batch the broker refuses; the sink's are
    built before it knows). Read with DescribeConfigs once per topic and Python worker
    every LIMITS_TTL_S; cut at 15/16 of it, as the producer's size estimate may fall short
    by a byte a record. Without the right to describe the topic's configs (or any other
    failure) batches keep their size, and the broker's refusal fails the write."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options
        self._cluster = str(options.admin_props().get("bootstrap.servers", ""))

    def batch_bytes(self, topic: str) -> int | None:
        key = (self._cluster, topic)
        now = time.monotonic()
        found = _limits_read.get(key)
        if found is None or now - found[0] >= LIMITS_TTL_S:
            found = _limits_read[key] = (now, self._read(topic))
        limit = found[1]
        return None if limit is None else limit - limit // 16

    def _read(self, topic: str) -> int | None:
        resource = ConfigResource.topic(topic)
        try:
            with Admin(self._options.admin_props()) as admin:
                entry = admin.describe_configs([resource])[resource].get("max.message.bytes")
        except SamsaError as exc:
            log.info("writing to %s without its max.message.bytes: %s", topic, exc)
            return None
        if entry is None or entry.value is None:
            return None
        return int(entry.value)


class _Rows:
    """Sends the rows of Arrow record batches as producer batches built from their columns
    (:mod:`samsa.spark.batches`); records the first delivery failure."""

    def __init__(self, options: SinkOptions, producer: Producer, first_partition: int) -> None:
        self._topic = options.topic
        self._producer = producer
        config = producer.config
        self._encoder = ArrowBatchEncoder(
            batch_size=config["batch.size"],
            max_request_size=config["max.request.size"],
            buffer_memory=config["buffer.memory"],
            compression=CompressionType[config["compression.type"].upper()],
            ignore_keys=config["partitioner.ignore.keys"],
            first_partition=first_partition,
        )
        self._partition_counts: dict[str, int] = {}
        self._limits = _TopicLimits(options)
        self.error: BaseException | None = None
        self.first_topic: str | None = None
        self.count = 0

    def _on_delivery(self, metadata: BatchMetadata | None, error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = error

    def _partition_count(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = len(self._producer.partitions_for(topic))
        return count

    def send_all(self, batches: Iterator[pa.RecordBatch]) -> None:
        for batch in batches:
            if batch.num_rows:
                self._send(batch)
            if self.error is not None:
                raise self.error

    def _send(self, batch: pa.RecordBatch) -> None:
        names = {name.lower(): name for name in batch.schema.names}

        def column(name: str) -> pa.Array | None:
            return batch.column(names[name]) if name in names else None

        values = column("value")
        assert values is not None  # check_sink_schema requires it
        keys, partitions, headers = column("key"), column("partition"), column("headers")
        timestamp = time.time_ns() // 1_000_000
        for topic, rows in self._by_topic(batch, column("topic")):

            def pick(array: pa.Array | None, rows: pa.Array | None = rows) -> pa.Array | None:
                return array if array is None or rows is None else array.take(rows)

            encoded = self._encoder.encode(
                topic,
                self._partition_count(topic),
                values=pick(values),
                keys=pick(keys),
                partitions=pick(partitions),
                headers=pick(headers),
                timestamp=timestamp,
                max_batch_bytes=self._limits.batch_bytes(topic),
            )
            for producer_batch in encoded:
                self._producer.send_batch(
                    producer_batch.topic,
                    producer_batch.partition,
                    producer_batch.records,
                    on_delivery=self._on_delivery,
                )
            if self.first_topic is None:
                self.first_topic = topic
        self.count += batch.num_rows

    def _by_topic(
        self, batch: pa.RecordBatch, topics: pa.Array | None
    ) -> Iterator[tuple[str, pa.Array | None]]:
        """(topic, its rows' indices, None for all rows), in the order topics first appear."""
        if self._topic is not None:
            yield self._topic, None
            return
        if topics is None or topics.null_count:
            raise ConfigError("a row has a null topic (and the option topic is not set)")
        encoded = topics.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        names = encoded.dictionary.to_pylist()
        if len(names) == 1:
            yield names[0], None
            return
        for code, name in enumerate(names):
            yield name, pa.array(np.flatnonzero(codes == code))


SINK_BATCH_SIZE = 512 * 1024
"""The sink's ``batch.size`` unless ``kafka.batch.size`` is set: per batch (and per Produce
request) costs dominate at the producer's 16 KiB; see bench/RESULTS.md."""


def _producer_config(options: SinkOptions) -> dict[str, Any]:
    return {"batch.size": SINK_BATCH_SIZE, **options.producer_props()}


def _producer(options: SinkOptions, *, transactional_id: str | None = None) -> Producer:
    """A write task's producer, the ``topic`` option's partitions already known to it.

    A record sent before the producer has its topic's metadata waits for the sender's
    next idle round (up to a second) even once the metadata is in; asking for the
    partitions first takes one Metadata round trip instead, before anything is sent.
    """
    config = _producer_config(options)
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    if options.topic is not None:
        try:
            producer.partitions_for(options.topic)
        except BaseException:
            producer.close()
            raise
    return producer


def _partition_id() -> int:
    context = TaskContext.get()
    return 0 if context is None else context.partitionId()


class SamsaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("samsa")``: each task sends its rows and waits for every ack."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        settle_imports()
        with _producer(self.options) as producer:
            rows = _Rows(self.options, producer, _partition_id())
            rows.send_all(iterator)
            producer.flush()
        if rows.error is not None:
            raise rows.error
        return SamsaCommitMessage(_partition_id(), rows.count)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: each task's records were acknowledged before it finished."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("a batch write to samsa failed; rows of finished tasks stay written")


class SinkStateError(SamsaError):
    """Raised when a streaming write task runs outside a streaming query (no batch id)."""


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("samsa")``: exactly-once micro-batches for read_committed
    readers (see the module's docstring for how, and what it needs)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        settle_imports()
        context = TaskContext.get()
        batch_id = None if context is None else context.getLocalProperty("streaming.sql.batchId")
        query_id = None if context is None else context.getLocalProperty("sql.streaming.queryId")
        if context is None or batch_id is None or query_id is None:
            raise SinkStateError("the samsa stream writer runs only in a streaming query's task")
        partition_id = context.partitionId()
        batch = int(batch_id)
        name = f"{self.options.transactional_id_prefix}-{query_id}-{partition_id}"
        with _producer(self.options, transactional_id=name) as producer:
            # Fences an earlier attempt of this task and ends its open transaction, so
            # the group's offset read next is final.
            producer.init_transactions()
            done = _last_committed_batch(self.options, name)
            if done >= batch:
                for _ in iterator:
                    pass
                log.info("%s: batch %d already committed (up to %d); skipped", name, batch, done)
                return SamsaCommitMessage(partition_id, 0, skipped=True)
            rows = _Rows(self.options, producer, partition_id)
            producer.begin_transaction()
            try:
                rows.send_all(iterator)
                if rows.first_topic is not None:
                    producer.send_offsets_to_transaction(
                        {TopicPartition(rows.first_topic, 0): batch + 1},
                        ConsumerGroupMetadata(name),
                    )
                producer.flush()
                if rows.error is not None:
                    raise rows.error
                prepared = prepared_transaction(producer) if rows.first_topic else None
            except BaseException:
                _abort(producer, name)
                raise
            # Closing the producer leaves the transaction open for the driver's commit().
        return SamsaCommitMessage(partition_id, rows.count, transaction=prepared)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the transactions every task of the micro-batch left open."""
        end_transactions(self.options.admin_props(), _transactions(messages), commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Abort the transactions of the tasks that succeeded, so read_committed readers
        are not held up until they time out (a replay would fence them anyway)."""
        log.warning("micro-batch %d failed; aborting its write tasks' transactions", batchId)
        try:
            end_transactions(self.options.admin_props(), _transactions(messages), commit=False)
        except SamsaError as e:
            # Safe: a replayed task's init_transactions aborts what is still open.
            log.warning("micro-batch %d: aborting its transactions failed: %s", batchId, e)


def _transactions(messages: list[WriterCommitMessage | None]) -> list[PreparedTransaction]:
    return [
        m.transaction
        for m in messages
        if isinstance(m, SamsaCommitMessage) and m.transaction is not None
    ]


def _last_committed_batch(options: SinkOptions, group: str) -> int:
    """The highest batch id the task's group recorded (-1 for none)."""
    with Admin(options.admin_props()) as admin:
        offsets = admin.list_group_offsets(group, require_stable=True)
    return max((o.offset for o in offsets.values()), default=0) - 1


def _abort(producer: Producer, name: str) -> None:
    try:
        producer.abort_transaction()
    except SamsaError as e:
        # The task fails anyway; the next attempt's init_transactions aborts it instead.
        log.warning("%s: abort after a failed write also failed: %s", name, e)
