"""Checks a batch must pass before the log assigns it offsets (Kafka's LogValidator, trimmed).

Per-batch O(1) work only: the header, the CRC and the timestamps it declares.
Deviation from Kafka: timestamps are checked on the batch's base and max
timestamps rather than on every record, and the records of uncompressed
batches are not re-parsed (their bytes are covered by the CRC).

The one exception is a compacted topic (``cleanup.policy`` with ``compact``):
as Kafka, every record written there by a client or a coordinator must have a
key, so its batches are decoded (decompressed if need be) to read the keys;
a batch with keyless records is refused whole with INVALID_RECORD and one
:class:`RecordError` per keyless record (Produce v8+ ``record_errors``).
Batches of other topics stay opaque.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from samsa.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    UnsupportedCompressionTypeError,
)
from samsa.records.batch import (
    COMPRESSION_MASK,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    CompressionType,
    RecordBatchView,
)
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED
from samsa.records.reader import records_section
from samsa.records.record import decode_records
from samsa.storage.log_config import LogConfig

_MAX_CODEC = max(CompressionType)


class RecordError(NamedTuple):
    """One record that made a batch unacceptable: its index in the batch and why."""

    batch_index: int
    message: str


class RecordValidationError(InvalidRecordError):
    """Raised when records of a batch are unacceptable; the whole batch is refused.

    ``record_errors`` names each bad record, for Produce v8+ ``record_errors``.
    """

    def __init__(self, record_errors: list[RecordError]) -> None:
        shown = "; ".join(f"record {e.batch_index}: {e.message}" for e in record_errors[:3])
        super().__init__(
            f"{len(record_errors)} record(s) rejected, batch refused (first three at most: {shown})"
        )
        self.record_errors = tuple(record_errors)


NO_KEY_IN_COMPACTED_TOPIC = "Compacted topic cannot accept message without key"


class AppendOrigin(Enum):
    """Who wrote the bytes: checks differ for clients, coordinators and replication."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def validate_batch(
    batch: RecordBatchView, config: LogConfig, origin: AppendOrigin, now_ms: int
) -> None:
    """Raise the Kafka error the batch deserves, or return if it may be appended.

    The caller has already checked framing, size and CRC (``read_batch`` and
    ``RecordBatchView.validate``).
    """
    codec = batch.attributes & COMPRESSION_MASK
    if codec > _MAX_CODEC:
        raise UnsupportedCompressionTypeError(f"compression id {codec} is not defined")
    if origin is AppendOrigin.CLIENT:
        count = batch.record_count
        if count <= 0:
            raise InvalidRecordError(f"record batch declares {count} records")
        if batch.last_offset_delta + 1 != count:
            raise InvalidRecordError(
                f"record batch offset range {batch.last_offset_delta + 1} "
                f"disagrees with its record count {count}"
            )
        if batch.is_control:
            raise InvalidRecordError("clients may not write control batches")
        if batch.producer_id != NO_PRODUCER_ID and batch.base_sequence < 0:
            raise InvalidRecordError(
                f"batch of producer {batch.producer_id} has invalid sequence {batch.base_sequence}"
            )
    if origin is not AppendOrigin.REPLICATION and not config.log_append_time:
        max_ts, base_ts = batch.max_timestamp, batch.base_timestamp
        if max_ts != NO_TIMESTAMP and max_ts - now_ms > config.message_timestamp_after_max_ms:
            raise InvalidTimestampError(
                f"batch timestamp {max_ts} is more than "
                f"{config.message_timestamp_after_max_ms} ms after now ({now_ms})"
            )
        if base_ts != NO_TIMESTAMP and now_ms - base_ts > config.message_timestamp_before_max_ms:
            raise InvalidTimestampError(
                f"batch timestamp {base_ts} is more than "
                f"{config.message_timestamp_before_max_ms} ms before now ({now_ms})"
            )
    if config.compact and origin is not AppendOrigin.REPLICATION and not batch.is_control:
        _validate_keys(batch)


def _validate_keys(batch: RecordBatchView) -> None:
    """Refuse a batch of a compacted topic that has records without a key."""
    records = decode_records(
        records_section(batch, DEFAULT_MAX_DECOMPRESSED),
        batch.record_count,
        batch.base_offset,
        batch.base_timestamp,
        None,
    )
    errors = [
        RecordError(index, NO_KEY_IN_COMPACTED_TOPIC)
        for index, record in enumerate(records)
        if record[2] is None
    ]
    if errors:
        raise RecordValidationError(errors)
