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
from samsa.records.record import Header, Record, decode_record, decode_records


def iter_records(
    batch: RecordBatchView, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[Record]:
    """The records of one batch, with absolute offsets and timestamps.

    Raises :class:`CorruptRecordError` when the records section disagrees with
    the header (count, offsets, trailing bytes) and
    :class:`UnsupportedCompressionTypeError` for codec ids Kafka does not define.
    The CRC is the caller's to check (:meth:`RecordBatchView.validate`).
    """
    buf = records_section(batch, max_decompressed)
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


def records_section(
    batch: RecordBatchView, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """The batch's records section as bytes, decompressed (codec checked)."""
    try:
        codec = batch.compression
    except ValueError as exc:
        raise UnsupportedCompressionTypeError(
            f"batch uses compression id {batch.attributes & 7}, which Kafka does not define"
        ) from exc
    data = batch.records_data
    if codec is CompressionType.NONE:
        return bytes(data)
    return decompress(codec, data, max_decompressed)


def record_tuples(
    batch: RecordBatchView, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
    """The records of one batch as (offset, timestamp, key, value, headers) tuples: what
    :func:`iter_records` yields, with the same checks, built for speed (a consumer's
    decoding loop) rather than as :class:`Record` objects."""
    count = batch.record_count
    if count < 0:
        raise CorruptRecordError(f"batch declares {count} records")
    override = (
        batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    )
    records = decode_records(
        records_section(batch, max_decompressed),
        count,
        batch.base_offset,
        batch.base_timestamp,
        override,
    )
    if records and records[-1][0] - batch.base_offset > batch.last_offset_delta:
        raise CorruptRecordError(
            f"last record has offset delta {records[-1][0] - batch.base_offset}, "
            f"the header says {batch.last_offset_delta}"
        )
    return records


def read_records(buf: bytes | bytearray | memoryview, *, validate: bool = True) -> list[Record]:
    """All records of a buffer of concatenated batches (CRC-checked unless told not to)."""
    out: list[Record] = []
    for batch in iter_batches(buf):
        if validate:
            batch.validate()
        out.extend(iter_records(batch))
    return out
