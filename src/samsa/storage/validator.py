"""Checks a batch must pass before the log assigns it offsets (Kafka's LogValidator, trimmed).

Per-batch O(1) work only: the header, the CRC and the timestamps it declares.
Deviation from Kafka: timestamps are checked on the batch's base and max
timestamps rather than on every record, and the records of uncompressed
batches are not re-parsed (their bytes are covered by the CRC).
"""

from __future__ import annotations

from enum import Enum

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
from samsa.storage.log_config import LogConfig

_MAX_CODEC = max(CompressionType)


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
