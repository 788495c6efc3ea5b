"""Reading offset ranges: the batch reader, the stream reader and the task that reads.

Spark plans on the driver (``partitions()``, ``latestOffset()``: they may open an
admin client) and pickles the reader with each :class:`RangePartition` to the
executors, where ``read()`` opens a consumer for its one range. So readers hold
no client between calls that Spark could pickle.

Offsets in the checkpoint are the Kafka source's JSON (``{"topic": {"0": 42}}``).
The stream reader keeps per-process state across calls (the latest offsets seen,
the Trigger.AvailableNow target, when the last batch was admitted); Spark runs
its planning calls in one long-lived Python process per query.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

try:
    # Spark 4.2's admission control for Python streaming sources: read limits, the
    # latestOffset(start, limit) planning call and Trigger.AvailableNow.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
except ImportError as exc:  # pragma: no cover - only with a pyspark older than 4.2
    from samsa.spark.requirements import pyspark_too_old

    raise pyspark_too_old() from exc

from samsa.client.admin import Admin
from samsa.errors import ConfigError, OffsetOutOfRangeError, SamsaError
from samsa.spark.columns import ArrowBatchDecoder, DecodedBatch
from samsa.spark.offsets import (
    OffsetRange,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    split_ranges,
)
from samsa.spark.options import SourceOptions
from samsa.spark.planning import DataLossError, OffsetPlanner
from samsa.spark.worker import settle_imports
from samsa.types import TopicPartition

__all__ = [
    "RangePartition",
    "SamsaBatchReader",
    "SamsaStreamReader",
    "read_range",
]

log = logging.getLogger(__name__)

ROWS_PER_ARROW_BATCH = 8192
BYTES_PER_ARROW_BATCH = 1 << 20
"""Fetched batches are handed to Spark in Arrow batches of about ROWS_PER_ARROW_BATCH rows
or BYTES_PER_ARROW_BATCH bytes, whichever comes first: small fetches are gathered (Spark
pays per batch), a fetch already that large goes as it is (gathering is a copy)."""
BATCHES_PER_POLL = 64
# How long a task waits for records before it asks whether its topic still exists.
EXISTS_CHECK_S = 1.0


class ReadTimeoutError(SamsaError):
    """Raised when a task gets no record for ``kafkaConsumer.pollTimeoutMs`` before its
    range is read (the broker is unreachable or the records are not there)."""


class RangePartition(InputPartition):
    """One Spark task's work: an offset range of one partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def read_range(options: SourceOptions, schema: StructType, rng: OffsetRange) -> Iterator[Any]:
    """The records of ``rng`` as Arrow record batches, read with samsa's consumer.

    The consumer decodes each fetched batch straight into Arrow columns
    (:mod:`samsa.spark.columns`), after its transactional filtering; the last batch is
    cut at ``rng.until_offset``.

    Records deleted before the task reads them (retention, a deleted topic) raise
    DataLossError with ``failOnDataLoss``, and are skipped without it. A task that
    waits for records asks every EXISTS_CHECK_S whether its topic still exists, so a
    topic deleted under it ends the task instead of waiting out pollTimeoutMs.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    from samsa.client.consumer import Consumer

    settle_imports()
    if rng.size == 0:
        return
    tp = rng.topic_partition
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    pending: list[pa.RecordBatch] = []
    pending_rows = pending_bytes = 0
    consumer = Consumer(options.consumer_props(), batch_decoder=ArrowBatchDecoder(arrow_schema))
    try:
        # The topic in the consumer's first metadata request: asked for only once
        # assigned, it would come with a second request, a retry.backoff.ms later.
        # Only a head start: the reads below report a broker that cannot be reached.
        with contextlib.suppress(SamsaError):
            consumer.partitions_for(tp.topic, timeout=options.poll_timeout_ms / 1000)
        consumer.assign([tp])
        consumer.seek(tp, rng.from_offset)
        timeout_s = options.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        next_check = time.monotonic() + EXISTS_CHECK_S
        while consumer.position(tp) < rng.until_offset:
            try:
                decoded: list[DecodedBatch] = consumer.poll_decoded(
                    timeout=0.2, max_batches=BATCHES_PER_POLL
                )
            except OffsetOutOfRangeError:
                if not _skip_lost(options, consumer, tp, rng):
                    break
                decoded = []
                if time.monotonic() > deadline:
                    raise
            now = time.monotonic()
            if decoded:
                deadline, next_check = now + timeout_s, now + EXISTS_CHECK_S
                for chunk in decoded:
                    batch = _until(chunk, rng.until_offset)
                    if batch.num_rows:
                        pending.append(batch)
                        pending_rows += batch.num_rows
                        pending_bytes += batch.nbytes
                if pending_rows >= ROWS_PER_ARROW_BATCH or pending_bytes >= BYTES_PER_ARROW_BATCH:
                    yield _combined(pending)
                    pending, pending_rows, pending_bytes = [], 0, 0
                continue
            if now > next_check:
                next_check = now + EXISTS_CHECK_S
                if not _still_exists(options, consumer, tp, rng):
                    break
            if now > deadline:
                raise ReadTimeoutError(
                    f"no record of {tp} at offset {consumer.position(tp)} (reading up to "
                    f"{rng.until_offset}) within kafkaConsumer.pollTimeoutMs="
                    f"{options.poll_timeout_ms}"
                )
        if pending_rows:
            yield _combined(pending)
    finally:
        consumer.close()


def _until(chunk: DecodedBatch, until_offset: int) -> pa.RecordBatch:
    """The rows of ``chunk`` before ``until_offset``."""
    if chunk.offset < until_offset:
        return chunk.batch
    return chunk.batch.filter(pa.array(chunk.offsets < until_offset))


def _combined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _still_exists(
    options: SourceOptions, consumer: Any, tp: TopicPartition, rng: OffsetRange
) -> bool:
    """Whether ``tp`` still exists; if it does not (its topic was deleted while the task
    read it), DataLossError with ``failOnDataLoss``, else False: the rest is skipped."""
    partitions = consumer.partitions_for(tp.topic, timeout=10)
    if partitions is not None and tp.partition in partitions:
        return True
    position = consumer.position(tp)
    what = f"topic {tp.topic!r} was deleted" if partitions is None else f"{tp} no longer exists"
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{what} while offsets {position}..{rng.until_offset - 1} of {tp} were being read; "
            "those records are lost. Set failOnDataLoss=false to skip them."
        )
    log.warning("%s; skipping offsets %d..%d of %s", what, position, rng.until_offset - 1, tp)
    return False


def _skip_lost(options: SourceOptions, consumer: Any, tp: TopicPartition, rng: OffsetRange) -> bool:
    """After OFFSET_OUT_OF_RANGE: raise DataLossError, or move past the lost records.
    False when nothing of the range is left to read."""
    position = consumer.position(tp)
    earliest = consumer.beginning_offsets([tp])[tp]
    latest = consumer.end_offsets([tp])[tp]
    if earliest <= position <= latest:
        return True  # an answer to an earlier position; the current one is readable
    if options.fail_on_data_loss:
        raise DataLossError(
            f"offsets of {tp} from {position} are no longer available (the log now holds "
            f"{earliest}..{latest}): records were deleted by retention or with the topic. "
            "Set failOnDataLoss=false to skip them."
        )
    if position < earliest < rng.until_offset:
        log.warning("%s: offsets %d..%d were deleted; skipping them", tp, position, earliest - 1)
        consumer.seek(tp, earliest)
        return True
    log.warning("%s: offsets %d..%d are gone; skipping them", tp, position, rng.until_offset - 1)
    return False


def _ranges(
    options: SourceOptions,
    start: dict[TopicPartition, int],
    end: dict[TopicPartition, int],
) -> list[OffsetRange]:
    ranges = []
    for tp in sorted(end):
        until = end[tp]
        begin = start.get(tp, until)
        if begin > until:
            # The partition now ends before where the query stopped: recreated topic.
            if options.fail_on_data_loss:
                raise DataLossError(
                    f"{tp} ends at {until}, before offset {begin} the query had reached "
                    "(topic deleted and recreated?). Set failOnDataLoss=false to carry on."
                )
            log.warning("%s ends at %d, before offset %d; carrying on from %d", tp, until,
                        begin, until)  # fmt: skip
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return split_ranges(ranges, options.min_partitions)


class SamsaBatchReader(DataSourceReader):
    """``spark.read.format("samsa")``: one task per partition range (more with minPartitions)."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        with Admin(self.options.admin_props()) as admin:
            planner = OffsetPlanner(self.options, admin)
            current = planner.partitions()
            start = planner.resolve(self.options.starting, current, starting=True)
            end = planner.resolve(self.options.ending, current, starting=False)
        backwards = sorted(str(tp) for tp in end if start.get(tp, 0) > end[tp])
        if backwards and (
            self.options.starting.kind == "offsets" or self.options.ending.kind == "offsets"
        ):
            raise ConfigError(
                f"options {self.options.starting.option} and {self.options.ending.option}: "
                "the start is after the end for " + ", ".join(backwards)
            )
        ranges = _ranges(self.options, start, {tp: max(end[tp], start[tp]) for tp in end})
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, self.schema, partition.offset_range)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("samsa")``: micro-batches of offset ranges.

    Partitions added to a subscribed topic (or a new matching topic) are read from
    their earliest offset. ``maxOffsetsPerTrigger`` caps a batch, shared across
    partitions in proportion to what each has waiting; ``minOffsetsPerTrigger``
    holds a batch back until that many offsets wait or ``maxTriggerDelay`` has passed
    since the last batch (the first batch after the query starts does not wait).
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._admin: Admin | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._target: dict[TopicPartition, int] | None = None
        # None until the first batch: as in Spark, a query's first batch does not wait.
        self._last_admitted: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None  # a client does not travel to executors
        return state

    def _planner(self) -> OffsetPlanner:
        if self._admin is None:
            self._admin = Admin(self.options.admin_props())
        return OffsetPlanner(self.options, self._admin)

    def initialOffset(self) -> dict[str, Any]:
        planner = self._planner()
        current = planner.partitions()
        return offsets_to_json(planner.resolve(self.options.starting, current, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        planner = self._planner()
        self._target = planner.latest(planner.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        planner = self._planner()
        current = planner.partitions()
        begin = planner.check_lost(offsets_from_json(start), current)
        if self._target is not None:
            # Trigger.AvailableNow: what there was at the start, less what is gone since.
            still = set(current)
            latest = {tp: o for tp, o in self._target.items() if tp in still}
            latest.update({tp: o for tp, o in begin.items() if tp not in latest})
        else:
            latest = planner.latest(current)
        new = [tp for tp in latest if tp not in begin]
        begin.update(planner.earliest(new))
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return offsets_to_json(latest)
        waiting = sum(max(0, latest[tp] - begin[tp]) for tp in latest)
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else None
        if min_rows is None:
            min_rows = self.options.min_offsets_per_trigger
        if (
            min_rows is not None
            and self._target is None
            and waiting < min_rows
            and self._last_admitted is not None
            and (time.monotonic() - self._last_admitted) * 1000 < self.options.max_trigger_delay_ms
        ):
            return start
        self._last_admitted = time.monotonic()
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if max_rows is None:
            max_rows = self.options.max_offsets_per_trigger
        if max_rows is None:
            return offsets_to_json(latest)
        ahead = {tp: max(latest[tp], begin[tp]) for tp in latest}
        end = limit_offsets(begin, ahead, max_rows)
        # A partition that went backwards keeps its lower end, for partitions() to judge.
        end.update({tp: latest[tp] for tp in latest if latest[tp] < begin[tp]})
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        new = [tp for tp in finish if tp not in begin]
        if new:
            begin.update(self._planner().earliest(new))
        return [RangePartition(r) for r in _ranges(self.options, begin, finish)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, self.schema, partition.offset_range)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a group."""

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
