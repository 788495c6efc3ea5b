"""Build RecordBatch v2 bytes from records (what producers and tests write).

:class:`RecordBatchBuilder` encodes records one by one. :class:`EncodedRecords` is a
records section someone else encoded (and compressed) already — the Spark sink
builds them from Arrow columns — and :class:`EncodedBatchBuilder` puts the batch
header in front of it once the producer fields are known, with the CRC over both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from samsa.records.batch import (
    ATTRIBUTES_POS,
    CONTROL_BIT,
    CRC_POS,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    CompressionType,
    TimestampType,
    compute_crc,
)
from samsa.records.compression import compress
from samsa.records.record import Header, encode_record


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class RecordBatchBuilder:
    """Accumulates records and encodes them as one batch.

    Offsets are consecutive from 0 unless ``offset_delta`` is given (a compacted
    batch keeps gaps). The first record's timestamp is the base timestamp, as
    Kafka's builder does; with ``delete_horizon_ms`` (KIP-534) the horizon is.
    """

    def __init__(
        self,
        *,
        compression: CompressionType = CompressionType.NONE,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        delete_horizon_ms: int | None = None,
        last_offset_delta: int | None = None,
    ) -> None:
        self.compression = compression
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self.delete_horizon_ms = delete_horizon_ms
        # Compaction keeps a rewritten batch's last offset (Kafka's overrideLastOffset).
        self.last_offset_delta = last_offset_delta
        self._records: list[tuple[int, int, bytes | None, bytes | None, Sequence[Header]]] = []
        self._next_delta = 0
        self._uncompressed_size = HEADER_SIZE

    def append(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
        offset_delta: int | None = None,
    ) -> int:
        """Add a record; return its offset delta."""
        if offset_delta is None:
            offset_delta = self._next_delta
        elif offset_delta < self._next_delta:
            raise ValueError(f"offset delta {offset_delta} is not after {self._next_delta - 1}")
        ts = now_ms() if timestamp is None else timestamp
        self._records.append((offset_delta, ts, key, value, headers))
        self._next_delta = offset_delta + 1
        self._uncompressed_size += (
            10 + len(key or b"") + len(value or b"")
            + sum(len(k) + len(v or b"") + 4 for k, v in headers)
        )  # fmt: skip
        return offset_delta

    def __len__(self) -> int:
        return len(self._records)

    def appended(self) -> list[tuple[int, bytes | None, bytes | None, Sequence[Header]]]:
        """The records so far as ``(timestamp, key, value, headers)``, in order."""
        return [(ts, key, value, headers) for _, ts, key, value, headers in self._records]

    @property
    def estimated_size(self) -> int:
        """An upper-bound estimate of the uncompressed batch size so far."""
        return self._uncompressed_size

    def build(self) -> bytes:
        """Encode the batch; base offset and CRC included."""
        records = self._records
        if self.delete_horizon_ms is not None:
            base_ts = self.delete_horizon_ms
        elif records:
            base_ts = records[0][1]
        else:
            base_ts = NO_TIMESTAMP
        max_ts = max((r[1] for r in records), default=NO_TIMESTAMP)
        body = b"".join(
            encode_record(delta, ts - base_ts, key, value, headers)
            for delta, ts, key, value, headers in records
        )
        if self.compression is not CompressionType.NONE:
            body = compress(self.compression, body)
        attributes = int(self.compression)
        if self.timestamp_type is TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self.is_transactional:
            attributes |= TRANSACTIONAL_BIT
        if self.is_control:
            attributes |= CONTROL_BIT
        if self.delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON_BIT
        last_offset_delta = records[-1][0] if records else 0
        if self.last_offset_delta is not None:
            if self.last_offset_delta < last_offset_delta:
                raise ValueError(
                    f"last offset delta {self.last_offset_delta} is below the last record's "
                    f"{last_offset_delta}"
                )
            last_offset_delta = self.last_offset_delta
        buf = bytearray(HEADER_SIZE + len(body))
        HEADER_STRUCT.pack_into(
            buf,
            0,
            self.base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(body),
            self.partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            len(records),
        )
        buf[HEADER_SIZE:] = body
        crc = compute_crc(buf)
        buf[CRC_POS:ATTRIBUTES_POS] = crc.to_bytes(4, "big")
        return bytes(buf)


@dataclass(frozen=True, slots=True)
class EncodedRecords:
    """The records section of one batch, encoded and compressed, with what its header needs.

    ``records`` holds ``record_count`` records with offset deltas 0…count-1 and
    timestamp deltas from ``base_timestamp`` (the first record's, as Kafka's builder
    picks it), compressed with ``compression``.
    """

    records: bytes | memoryview
    record_count: int
    base_timestamp: int
    max_timestamp: int
    compression: CompressionType = CompressionType.NONE

    @property
    def batch_size(self) -> int:
        """The bytes of the whole batch, header included."""
        return HEADER_SIZE + len(self.records)


class EncodedBatchBuilder:
    """A batch of :class:`EncodedRecords`: the header is written, and the CRC computed,
    when :meth:`build` is called, so the producer fields set before are covered."""

    def __init__(self, encoded: EncodedRecords) -> None:
        if encoded.record_count < 1:
            raise ValueError("a batch of encoded records needs at least one record")
        self.encoded = encoded
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.is_transactional = False

    def __len__(self) -> int:
        return self.encoded.record_count

    @property
    def estimated_size(self) -> int:
        """The batch's exact size (the name is :class:`RecordBatchBuilder`'s)."""
        return self.encoded.batch_size

    def build(self) -> bytes:
        """The batch's bytes: header with the current producer fields, records, CRC."""
        encoded = self.encoded
        attributes = int(encoded.compression)
        if self.is_transactional:
            attributes |= TRANSACTIONAL_BIT
        body = encoded.records
        header = bytearray(HEADER_SIZE)
        HEADER_STRUCT.pack_into(
            header,
            0,
            0,
            HEADER_SIZE - LOG_OVERHEAD + len(body),
            NO_PARTITION_LEADER_EPOCH,
            MAGIC,
            0,
            attributes,
            encoded.record_count - 1,
            encoded.base_timestamp,
            encoded.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            encoded.record_count,
        )
        # The CRC runs on over the records where the header's leaves off: the records are
        # copied once, into the joined batch.
        crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(header)[ATTRIBUTES_POS:]))
        header[CRC_POS:ATTRIBUTES_POS] = crc.to_bytes(4, "big")
        return b"".join((header, body))


def build_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamp: int | None = None,
    compression: CompressionType = CompressionType.NONE,
    base_offset: int = 0,
) -> bytes:
    """A batch of ``values`` (with optional ``keys``), all stamped ``timestamp``."""
    builder = RecordBatchBuilder(compression=compression, base_offset=base_offset)
    ts = now_ms() if timestamp is None else timestamp
    for i, value in enumerate(values):
        builder.append(value, key=None if keys is None else keys[i], timestamp=ts)
    return builder.build()
