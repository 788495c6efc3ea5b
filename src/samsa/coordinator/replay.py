"""Reading a coordinator's internal topic partition back, batch by batch, at start-up.

No bytes in an internal topic may stop the broker from starting: a loader
skips what it cannot decode and reports it through :class:`UnreadableRecords`,
which names the partition and offset of the first few and counts the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from samsa.errors import CompressionError, KafkaError
from samsa.records import Record, iter_records
from samsa.records.batch import RecordBatchView, batch_size_at, iter_batches
from samsa.storage import Log

log = logging.getLogger(__name__)

_FIRST_READ_BYTES = 1 << 20
REPORTED_PER_PARTITION = 5
"""Unreadable records of one partition logged one by one; the rest are counted."""

DecodeErrors = (KafkaError, CompressionError, ValueError)
"""What decoding a stored batch or record raises on bad bytes: ``CorruptRecordError``
and the other Kafka errors of the record layer, a failed codec, a codec id Kafka does
not define."""


def _whole_batches_end(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole batches."""
    end = 0
    while (size := batch_size_at(data, end)) is not None and end + size <= len(data):
        end += size
    return end


def log_batches(partition_log: Log) -> Iterator[RecordBatchView]:
    """Every batch of a log from its start to its end, in offset order.

    Reads 1 MiB at a time, doubling the read when one batch is larger, and stops
    at a gap at the end of the log.
    """
    offset = partition_log.log_start_offset
    max_bytes = _FIRST_READ_BYTES
    while offset < partition_log.log_end_offset:
        data = partition_log.read(offset, max_bytes).region.read()
        end = _whole_batches_end(data)
        if end == 0:
            if len(data) < max_bytes:
                return  # nothing more to read (a gap at the end of the log)
            max_bytes *= 2  # one batch larger than the read: read more at once
            continue
        for batch in iter_batches(memoryview(data)[:end]):
            offset = max(offset, batch.next_offset)
            yield batch


class UnreadableRecords:
    """Reports the records a loader skips in one partition (not thread-safe; one per load)."""

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.count = 0
        self.first_offset = -1
        self.last_offset = -1

    def skip(self, offset: int, reason: object) -> None:
        """Note a record (or batch) at ``offset`` that is skipped because of ``reason``."""
        self.count += 1
        if self.first_offset < 0:
            self.first_offset = offset
        self.last_offset = offset
        if self.count <= REPORTED_PER_PARTITION:
            log.warning(
                "skipping an unreadable record of %s at offset %d: %s",
                self.partition, offset, reason,
            )  # fmt: skip

    def summary(self) -> None:
        """Log how many were skipped in all, once the partition is read."""
        if self.count > REPORTED_PER_PARTITION:
            log.warning(
                "skipped %d unreadable records of %s in all (offsets %d to %d); "
                "only the first %d were logged",
                self.count, self.partition, self.first_offset, self.last_offset,
                REPORTED_PER_PARTITION,
            )  # fmt: skip


def batch_records(batch: RecordBatchView, skipped: UnreadableRecords) -> Iterator[Record]:
    """The records of ``batch``; a batch whose records cannot be decoded ends with a skip."""
    try:
        yield from iter_records(batch)
    except DecodeErrors as exc:
        skipped.skip(batch.base_offset, f"its batch cannot be decoded: {exc}")


def partition_batches(partition_log: Log, skipped: UnreadableRecords) -> Iterator[RecordBatchView]:
    """:func:`log_batches`, ended (and reported) at a batch that cannot be framed.

    Recovery truncates torn and CRC-failing batches before any loader runs, so this
    only stops at bytes recovery accepted; what follows them cannot be located.
    """
    batches = log_batches(partition_log)
    offset = partition_log.log_start_offset
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except DecodeErrors as exc:
            skipped.skip(offset, f"the log cannot be read from here on: {exc}")
            return
        offset = batch.next_offset
        yield batch
