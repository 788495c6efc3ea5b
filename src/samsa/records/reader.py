"""Iterate the records of a batch, decompressing when the batch is compressed."""

from __future__ import annotations

from collections.abc import Iterator

from samsa.errors import CorruptRecordError, UnsupportedCompressionTypeError
from samsa.records.batch import (
    CompressionType,
    RecordBatchView,
    TimestampType,
    iter_batches,
)
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from samsa.records.record import Record, decode_record


def iter_records(
    batch: RecordBatchView, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[Record]:
    """The records of one batch, with absolute offsets and timestamps.

    Raises :class:`CorruptRecordError` when the records section disagrees with
    the header (count, offsets, trailing bytes) and
    :class:`UnsupportedCompressionTypeError` for codec ids Kafka does not define.
    The CRC is the caller's to check (:meth:`RecordBatchView.validate`).
    """
    try:
        codec = batch.compression
    except ValueError as exc:
        raise UnsupportedCompressionTypeError(
            f"batch uses compression id {batch.attributes & 7}, which Kafka does not define"
        ) from exc
    data = batch.records_data
    buf = (
        bytes(data) if codec is CompressionType.NONE else decompress(codec, data, max_decompressed)
    )
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    override = (
        batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    )
    count = batch.record_count
    if count < 0:
        raise CorruptRecordError(f"batch declares {count} records")
    pos = 0
    last_delta = -1
    for _ in range(count):
        if pos >= len(buf):
            raise CorruptRecordError(
                f"batch declares {count} records but its records section ends early"
            )
        record, pos = decode_record(buf, pos, base_offset, base_timestamp, override)
        last_delta = record.offset - base_offset
        yield record
    if pos != len(buf):
        raise CorruptRecordError(
            f"batch declares {count} records but {len(buf) - pos} bytes follow the last"
        )
    # Compaction may remove a batch's last records but keeps its last offset delta
    # (the producer's sequence state depends on it), so only "beyond" is corrupt.
    if count and last_delta > batch.last_offset_delta:
        raise CorruptRecordError(
            f"last record has offset delta {last_delta}, the header says {batch.last_offset_delta}"
        )


def read_records(buf: bytes | bytearray | memoryview, *, validate: bool = True) -> list[Record]:
    """All records of a buffer of concatenated batches (CRC-checked unless told not to)."""
    out: list[Record] = []
    for batch in iter_batches(buf):
        if validate:
            batch.validate()
        out.extend(iter_records(batch))
    return out
