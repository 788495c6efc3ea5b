"""A zero-copy view over one RecordBatch v2 (magic 2), as Kafka lays it out.

Header, 61 bytes, big-endian::

     0 baseOffset            int64     27 baseTimestamp   int64
     8 batchLength           int32     35 maxTimestamp    int64
    12 partitionLeaderEpoch  int32     43 producerId      int64
    16 magic                 int8      51 producerEpoch   int16
    17 crc                   uint32    53 baseSequence    int32
    21 attributes            int16     57 recordCount     int32
    23 lastOffsetDelta       int32     61 records…

``batchLength`` counts the bytes after itself, so a batch occupies
``batchLength + 12`` bytes. The CRC-32C covers ``attributes`` to the end: base
offset and leader epoch can be rewritten in place without recomputing it,
which is how the log assigns offsets to a producer's bytes.

A :class:`RecordBatchView` never copies the batch; the broker's hot path reads
the header, checks the CRC, rewrites the base offset and appends the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import Final

import crc32c

from samsa.errors import CorruptRecordError, MessageTooLargeError, TruncatedBatchError

HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12
"""Bytes before ``batchLength`` counts: baseOffset (8) + batchLength (4)."""
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD
MAGIC: Final = 2

BASE_OFFSET_POS: Final = 0
BATCH_LENGTH_POS: Final = 8
PARTITION_LEADER_EPOCH_POS: Final = 12
MAGIC_POS: Final = 16
CRC_POS: Final = 17
ATTRIBUTES_POS: Final = 21
LAST_OFFSET_DELTA_POS: Final = 23
BASE_TIMESTAMP_POS: Final = 27
MAX_TIMESTAMP_POS: Final = 35
PRODUCER_ID_POS: Final = 43
PRODUCER_EPOCH_POS: Final = 51
BASE_SEQUENCE_POS: Final = 53
RECORD_COUNT_POS: Final = 57

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
TRANSACTIONAL_BIT: Final = 0x10
CONTROL_BIT: Final = 0x20
DELETE_HORIZON_BIT: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class CompressionType(IntEnum):
    """Codec ids of the low three attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """What a batch's timestamps mean; ``NO_TIMESTAMP_TYPE`` appears only in client APIs."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def compute_crc(buf: bytes | bytearray | memoryview) -> int:
    """CRC-32C of a whole batch's checksummed part (``attributes`` to the end)."""
    return int(crc32c.crc32c(memoryview(buf)[ATTRIBUTES_POS:]))


def batch_size_at(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Total size of the batch starting at ``pos``, or None if its length field is not there yet.

    Raises :class:`CorruptRecordError` if the length field is smaller than a header.
    Nothing is allocated from the length: callers compare it with what they hold.
    """
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    (batch_length,) = _I32.unpack_from(buf, pos + BATCH_LENGTH_POS)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at byte {pos} declares length {batch_length}, "
            f"less than the {MIN_BATCH_LENGTH}-byte header"
        )
    return int(batch_length) + LOG_OVERHEAD


class RecordBatchView:
    """Read-only (or, over a writable buffer, offset-rewritable) view of one batch.

    The view covers exactly one batch: ``len(view.buffer) == view.size``. Build one
    with :func:`read_batch` or :func:`iter_batches`, which check the framing;
    :meth:`validate` checks magic and CRC. Not thread-safe; holds no copy.
    """

    __slots__ = ("buffer",)

    def __init__(self, buffer: memoryview) -> None:
        self.buffer = buffer

    # -- header fields -------------------------------------------------------
    @property
    def base_offset(self) -> int:
        return int(_I64.unpack_from(self.buffer, BASE_OFFSET_POS)[0])

    @property
    def batch_length(self) -> int:
        return int(_I32.unpack_from(self.buffer, BATCH_LENGTH_POS)[0])

    @property
    def partition_leader_epoch(self) -> int:
        return int(_I32.unpack_from(self.buffer, PARTITION_LEADER_EPOCH_POS)[0])

    @property
    def magic(self) -> int:
        return int(self.buffer[MAGIC_POS])

    @property
    def crc(self) -> int:
        return int(_U32.unpack_from(self.buffer, CRC_POS)[0])

    @property
    def attributes(self) -> int:
        return int(_I16.unpack_from(self.buffer, ATTRIBUTES_POS)[0])

    @property
    def last_offset_delta(self) -> int:
        return int(_I32.unpack_from(self.buffer, LAST_OFFSET_DELTA_POS)[0])

    @property
    def base_timestamp(self) -> int:
        return int(_I64.unpack_from(self.buffer, BASE_TIMESTAMP_POS)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_I64.unpack_from(self.buffer, MAX_TIMESTAMP_POS)[0])

    @property
    def producer_id(self) -> int:
        return int(_I64.unpack_from(self.buffer, PRODUCER_ID_POS)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_I16.unpack_from(self.buffer, PRODUCER_EPOCH_POS)[0])

    @property
    def base_sequence(self) -> int:
        return int(_I32.unpack_from(self.buffer, BASE_SEQUENCE_POS)[0])

    @property
    def record_count(self) -> int:
        return int(_I32.unpack_from(self.buffer, RECORD_COUNT_POS)[0])

    # -- derived ------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes the batch occupies on the wire and on disk."""
        return len(self.buffer)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> CompressionType:
        """The codec; raises ValueError for ids 5–7, which Kafka does not define."""
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wrapping at 2**31 as Kafka's does), or -1."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def records_data(self) -> memoryview:
        """The (possibly compressed) records section."""
        return self.buffer[HEADER_SIZE:]

    # -- checks --------------------------------------------------------------
    def compute_crc(self) -> int:
        return compute_crc(self.buffer)

    def is_valid(self) -> bool:
        return self.magic == MAGIC and self.crc == self.compute_crc()

    def validate(self) -> None:
        """Raise :class:`CorruptRecordError` unless magic is 2 and the CRC matches."""
        if self.magic != MAGIC:
            raise CorruptRecordError(f"record batch magic is {self.magic}, only magic 2 is served")
        stored, actual = self.crc, self.compute_crc()
        if stored != actual:
            raise CorruptRecordError(
                f"record batch CRC-32C is {stored:#010x} but its bytes give {actual:#010x}"
            )
        if self.record_count < 0 or self.last_offset_delta < 0:
            raise CorruptRecordError(
                f"record batch declares {self.record_count} records "
                f"and last offset delta {self.last_offset_delta}"
            )

    # -- in-place rewrites (need a writable buffer) ---------------------------
    def set_base_offset(self, base_offset: int) -> None:
        """Rewrite the base offset in place; the CRC does not cover it."""
        _I64.pack_into(self.buffer, BASE_OFFSET_POS, base_offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Rewrite the leader epoch in place; the CRC does not cover it."""
        _I32.pack_into(self.buffer, PARTITION_LEADER_EPOCH_POS, epoch)

    def set_log_append_time(self, timestamp_ms: int) -> None:
        """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp.

        Kafka keeps the record deltas and has readers use the batch's max
        timestamp for every record; attributes and timestamp are under the CRC,
        so it is recomputed — an O(batch) cost only topics with
        ``message.timestamp.type=LogAppendTime`` pay.
        """
        _I16.pack_into(self.buffer, ATTRIBUTES_POS, self.attributes | TIMESTAMP_TYPE_BIT)
        _I64.pack_into(self.buffer, MAX_TIMESTAMP_POS, timestamp_ms)
        _U32.pack_into(self.buffer, CRC_POS, self.compute_crc())

    def __repr__(self) -> str:
        codec_id = self.attributes & COMPRESSION_MASK
        codec = CompressionType(codec_id).name if codec_id <= CompressionType.ZSTD else codec_id
        return (
            f"RecordBatchView(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records={self.record_count}, size={self.size}, "
            f"compression={codec})"
        )


def read_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_size: int | None = None,
) -> RecordBatchView:
    """The batch starting at ``buf[pos]``, its framing checked (not yet its CRC).

    Raises :class:`TruncatedBatchError` if ``buf`` ends before the batch does,
    :class:`CorruptRecordError` for a length below the header size or a magic
    other than 2, and :class:`MessageTooLargeError` if the batch is larger than
    ``max_size``.
    """
    view = memoryview(buf)
    size = batch_size_at(view, pos)
    if size is None:
        raise TruncatedBatchError(
            f"{len(view) - pos} bytes at byte {pos} cannot hold a batch's length field"
        )
    if max_size is not None and size > max_size:
        raise MessageTooLargeError(f"record batch of {size} bytes exceeds the limit of {max_size}")
    if len(view) - pos < size:
        raise TruncatedBatchError(
            f"batch at byte {pos} declares {size} bytes but only {len(view) - pos} follow"
        )
    if view[pos + MAGIC_POS] != MAGIC:
        raise CorruptRecordError(
            f"record batch at byte {pos} has magic {view[pos + MAGIC_POS]}, only magic 2 is served"
        )
    return RecordBatchView(view[pos : pos + size])


def iter_batches(
    buf: bytes | bytearray | memoryview, *, max_size: int | None = None
) -> Iterator[RecordBatchView]:
    """Every batch of a buffer of concatenated batches, framing checked; CRCs are not."""
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        batch = read_batch(view, pos, max_size=max_size)
        yield batch
        pos += batch.size
