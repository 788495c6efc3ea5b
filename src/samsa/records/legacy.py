"""Message formats v0 and v1 (magic 0 and 1): read into RecordBatch v2, written from it.

Before RecordBatch v2 (Kafka 0.11) records travelled as *message sets*: each
message is ::

    offset int64 | message_size int32 | crc uint32 | magic int8 | attributes int8
    | timestamp int64 (magic 1 only) | key bytes | value bytes

with ``message_size`` counting from the CRC to the end and the CRC-32 (zlib's,
not CRC-32C) covering magic to the end. A compressed message (attributes bits
0–2: 1 gzip, 2 snappy, 3 lz4; zstd never existed for these formats) wraps, in
its value, a compressed inner message set of uncompressed messages of the same
magic; the wrapper's offset is the last inner offset, and with magic 1 the
inner offsets are relative (0, 1, …). Attribute bit 3 (magic 1) marks
LogAppendTime. Kafka's magic-0 LZ4 writers computed the frame's header checksum
over the wrong bytes (KAFKA-3160), and Kafka ignored it for magic 0: so does
:func:`read_message_set`.

Produce v0–2 bring message sets: :func:`message_set_to_batch` validates them as
strictly as a v2 batch is (CRC of every message, sizes, magic, codec, nested
compression) and builds one RecordBatch v2 of their records — magic 1 keeps
each record's timestamp, magic 0 has none and takes the broker's time, as
Kafka stamped them. Fetch v0–3 want them back: :func:`down_convert` rewrites
stored v2 batches as magic 0 or 1 messages; headers are dropped (the old formats
have none), control batches skipped, and a compressed batch becomes one
compressed wrapper with the same codec, except zstd (and lz4 at magic 0, whose
old frame checksum no reader agrees on) which go out uncompressed.

Both directions bound what compressed data may inflate to before inflating it
(a few kilobytes of gzip can hold gigabytes): a produced set by a byte limit
(the topic's ``max.message.bytes`` in the broker), a down-conversion by the
fetch's byte limits (:class:`InflationBudget` shares one between a response's
partitions); decompression stops one byte past the limit.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final, NamedTuple

from samsa.errors import (
    CompressionError,
    CorruptRecordError,
    DecompressionLimitError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from samsa.records.batch import (
    CompressionType,
    RecordBatchView,
    TimestampType,
    batch_size_at,
    read_batch,
)
from samsa.records.builder import RecordBatchBuilder
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED, compress, decompress
from samsa.records.reader import record_tuples
from samsa.records.record import Header

__all__ = [
    "InflationBudget",
    "LegacyMessage",
    "down_convert",
    "is_message_set",
    "message_set_to_batch",
    "read_message_set",
]

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_I32 = struct.Struct(">i")
_HEAD_SIZE = struct.Struct(">qi")  # offset, message size: all an old reader needs to skip
_MAX_INT32: Final = 2**31 - 1
LOG_OVERHEAD: Final = 12  # offset + message size
_MIN_SIZE = {0: 14, 1: 22}  # crc, magic, attributes, [timestamp], key length, value length
_MIN_MESSAGE: Final = {m: LOG_OVERHEAD + size for m, size in _MIN_SIZE.items()}  # with no key/value
_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_MAGIC_POS: Final = 16  # in a message as in a RecordBatch v2 header
NO_TIMESTAMP: Final = -1
_Records = list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]


class LegacyMessage(NamedTuple):
    """One (inner) message: absolute or relative offset as sent, timestamp -1 for magic 0."""

    offset: int
    magic: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def is_message_set(records: bytes | bytearray | memoryview) -> bool:
    """Whether ``records`` starts with a magic 0 or 1 message (rather than a v2 batch)."""
    return len(records) > _MAGIC_POS and records[_MAGIC_POS] in (0, 1)


def _nullable(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError(f"message {what} length runs past the message")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise CorruptRecordError(f"message {what} of {length} bytes does not fit the message")
    return buf[pos : pos + length], pos + length


def _messages(buf: bytes) -> Iterator[tuple[LegacyMessage, int]]:
    """Each message of a set with its attributes, CRC and sizes checked."""
    pos = 0
    while pos < len(buf):
        if pos + _HEAD.size > len(buf):
            raise CorruptRecordError(f"message set ends with a partial message at byte {pos}")
        offset, size, crc, magic, attributes = _HEAD.unpack_from(buf, pos)
        end = pos + LOG_OVERHEAD + size
        if magic not in (0, 1):
            raise CorruptRecordError(f"message at byte {pos} has magic {magic}, not 0 or 1")
        if size < _MIN_SIZE[magic] or end > len(buf):
            raise CorruptRecordError(f"message at byte {pos} declares {size} bytes")
        if zlib.crc32(memoryview(buf)[pos + _MAGIC_POS : end]) != crc:
            raise CorruptRecordError(f"message at byte {pos} fails its CRC-32")
        field = pos + _HEAD.size
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _TIMESTAMP.unpack_from(buf, field)
            field += 8
        key, field = _nullable(buf, field, end, "key")
        value, field = _nullable(buf, field, end, "value")
        if field != end:
            raise CorruptRecordError(
                f"message at byte {pos} has {end - field} bytes after its value"
            )
        yield LegacyMessage(offset, magic, timestamp, key, value), attributes
        pos = end


def _codec(attributes: int, magic: int) -> CompressionType:
    codec_id = attributes & _CODEC_MASK
    if codec_id == CompressionType.ZSTD:
        raise UnsupportedCompressionTypeError(f"zstd is not defined for message format v{magic}")
    if codec_id > CompressionType.ZSTD:
        raise CorruptRecordError(
            f"message uses compression id {codec_id}, which Kafka does not define"
        )
    return CompressionType(codec_id)


def read_message_set(
    buf: bytes, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> tuple[list[LegacyMessage], CompressionType]:
    """The records of a magic 0/1 message set, wrappers opened, and the (first) codec used.

    Inner messages of a magic-1 wrapper carry the wrapper's timestamp when it is
    LogAppendTime. The set's messages once opened — uncompressed ones as they are,
    wrappers inflated — come to at most ``max_decompressed`` bytes: a wrapper is
    inflated no further than what is left of it, so a small message that inflates
    hugely costs no more than the limit. Raises :class:`MessageTooLargeError`
    (MESSAGE_TOO_LARGE) past the limit, :class:`CorruptRecordError` (CORRUPT_MESSAGE)
    for a bad CRC, size, magic, a nested compressed message or an inner magic other
    than the wrapper's, and :class:`UnsupportedCompressionTypeError` for zstd.
    """
    records: list[LegacyMessage] = []
    codec_used = CompressionType.NONE
    opened = 0  # bytes of messages read so far: ``max_decompressed`` bounds the whole set
    for message, attributes in _messages(buf):
        codec = _codec(attributes, message.magic)
        if codec is CompressionType.NONE:
            opened += _message_size(message)
            if opened > max_decompressed:
                raise _too_large(max_decompressed)
            records.append(message)
            continue
        if codec_used is CompressionType.NONE:
            codec_used = codec
        if message.value is None:
            raise CorruptRecordError("a compressed message has no value")
        data = message.value
        if codec is CompressionType.LZ4 and message.magic == 0:
            data = _fix_lz4_header_checksum(data)
        try:
            inner_set = decompress(codec, data, max_decompressed - opened)
        except DecompressionLimitError:
            raise _too_large(max_decompressed) from None
        except CompressionError as exc:
            raise CorruptRecordError(f"compressed message: {exc}") from exc
        opened += len(inner_set)
        log_append = message.magic == 1 and attributes & _TIMESTAMP_TYPE_BIT
        inner_count = 0
        for inner, inner_attributes in _messages(inner_set):
            if inner_attributes & _CODEC_MASK:
                raise CorruptRecordError("a compressed message wraps another compressed message")
            if inner.magic != message.magic:
                raise CorruptRecordError(
                    f"a magic {message.magic} wrapper holds a magic {inner.magic} message"
                )
            records.append(inner._replace(timestamp=message.timestamp) if log_append else inner)
            inner_count += 1
        if not inner_count:
            raise CorruptRecordError("a compressed message wraps no message")
    return records, codec_used


def _message_size(message: LegacyMessage) -> int:
    """The bytes ``message`` takes in a message set."""
    return _MIN_MESSAGE[message.magic] + len(message.key or b"") + len(message.value or b"")


def _too_large(limit: int) -> MessageTooLargeError:
    return MessageTooLargeError(
        f"message set holds more than {limit} bytes of messages once decompressed"
    )


def message_set_to_batch(
    buf: bytes, *, now_ms: int, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """One RecordBatch v2 (offsets from 0, as a producer writes it) holding the records of a
    magic 0/1 message set, compressed with the codec the set used. Magic 1 keeps each
    record's timestamp; magic 0 records are stamped ``now_ms``. Raises as
    :func:`read_message_set`, and :class:`InvalidRecordError` for an empty set."""
    records, codec = read_message_set(buf, max_decompressed=max_decompressed)
    if not records:
        raise InvalidRecordError("produce request carries an empty message set")
    builder = RecordBatchBuilder(compression=codec)
    for record in records:
        timestamp = record.timestamp if record.magic == 1 else now_ms
        builder.append(record.value, key=record.key, timestamp=timestamp)
    return builder.build()


# -- down-conversion -------------------------------------------------------------------
def _message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    record: tuple[bytes | None, bytes | None],
) -> bytes:
    key, value = record
    body = bytearray((magic, attributes))
    if magic == 1:
        body += _TIMESTAMP.pack(timestamp)
    body += _I32.pack(-1) if key is None else _I32.pack(len(key)) + key
    body += _I32.pack(-1) if value is None else _I32.pack(len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def _whole_batches(data: bytes) -> Iterator[RecordBatchView]:
    pos = 0
    while True:
        size = batch_size_at(data, pos)
        if size is None or pos + size > len(data):
            return
        yield read_batch(data, pos)
        pos += size


class InflationBudget:
    """The bytes down-converting one Fetch response may still decompress, shared by its
    partitions in turn (the first batch of a response may take it below zero)."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def down_convert(
    data: bytes,
    magic: int,
    fetch_offset: int,
    max_bytes: int,
    *,
    min_one_message: bool,
    inflation: InflationBudget | None = None,
    max_first_inflated: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Stored RecordBatch v2 bytes as a magic ``magic`` message set for Fetch v0–3.

    Records below ``fetch_offset`` and control batches are left out. The set stops
    before the message (or compressed wrapper) that would take it past ``max_bytes``;
    with ``min_one_message`` the first one goes in whatever its size, as KIP-74 has
    Fetch v3+ do (and as old clients need to make progress). A partial batch at the
    end of ``data`` is dropped.

    Batches are converted one at a time, and a compressed one is inflated no further
    than the bytes of messages it may still bring: ``max_bytes`` less what earlier
    batches inflated to, and no more than ``inflation`` has left (then takes what it
    used from it). A batch that holds more stops the set before it — unless it comes
    first with ``min_one_message``: then it may inflate to ``max_first_inflated``
    bytes, and past that the set is only a message header announcing a message larger
    than the bytes that follow, which an old client reports as a message too large
    for its fetch size (Kafka sends the unconverted batch for the same purpose).
    """
    out = bytearray()
    left = max_bytes if inflation is None else min(max_bytes, inflation.left)
    for batch in _whole_batches(data):
        if batch.is_control or batch.last_offset < fetch_offset:
            continue
        first = min_one_message and not out
        codec = batch.compression
        if codec is CompressionType.NONE:
            records = record_tuples(batch)
        else:
            limit = max(left, max_first_inflated) if first else left
            try:
                records = _inflated_records(batch, magic, limit)
            except DecompressionLimitError:
                if first:
                    return _too_large_header(max(batch.base_offset, fetch_offset), limit)
                return bytes(out)
            used = len(records) * _MIN_MESSAGE[magic] + sum(map(_record_size, records))
            left -= used
            if inflation is not None:
                inflation.left -= used
        records = [r for r in records if r[0] >= fetch_offset]
        if not records:
            continue
        log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        attributes = _TIMESTAMP_TYPE_BIT if log_append and magic == 1 else 0
        if codec is CompressionType.ZSTD or (codec is CompressionType.LZ4 and magic == 0):
            codec = CompressionType.NONE
        if codec is CompressionType.NONE:
            pieces = [
                _message(offset, magic, attributes, timestamp, (key, value))
                for offset, timestamp, key, value, _headers in records
            ]
        else:
            first_offset = records[0][0]
            inner = b"".join(
                _message(
                    offset - first_offset if magic == 1 else offset, magic, 0, timestamp,
                    (key, value),
                )
                for offset, timestamp, key, value, _headers in records
            )  # fmt: skip
            pieces = [_message(
                records[-1][0], magic, int(codec) | attributes,
                max(r[1] for r in records), (None, compress(codec, inner)),
            )]  # fmt: skip
        for piece in pieces:
            if len(out) + len(piece) > max_bytes and (out or not min_one_message):
                return bytes(out)
            out += piece
    return bytes(out)


def _inflated_records(batch: RecordBatchView, magic: int, limit: int) -> _Records:
    """The records of a compressed batch, if they come to at most ``limit`` bytes of
    ``magic`` messages: its record count is checked before anything is inflated, and
    the records section inflates no further than ``limit``."""
    if batch.record_count * _MIN_MESSAGE[magic] > limit:
        raise DecompressionLimitError(
            f"batch of {batch.record_count} records takes more than {limit} bytes"
        )
    return record_tuples(batch, max_decompressed=limit)


def _record_size(record: tuple[int, int, bytes | None, bytes | None, object]) -> int:
    """What a record's key and value add to its message."""
    _, _, key, value, _ = record
    return len(key or b"") + len(value or b"")


def _too_large_header(offset: int, limit: int) -> bytes:
    """The offset and size of a message larger than ``limit`` bytes, and nothing after."""
    return _HEAD_SIZE.pack(offset, min(limit + 1, _MAX_INT32))


# -- magic 0 LZ4 -----------------------------------------------------------------------
_P1, _P2, _P3, _P4, _P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_M32 = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def _xxh32_short(data: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: all an LZ4 frame descriptor can be."""
    assert len(data) < 16
    h = (_P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        h = (h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        h = (h + byte * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    """The frame with its header checksum set right (magic-0 writers got it wrong)."""
    if len(frame) < 7:
        return frame
    flags = frame[4]
    checksum_pos = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if checksum_pos >= len(frame):
        return frame
    checksum = (_xxh32_short(frame[4:checksum_pos]) >> 8) & 0xFF
    return frame[:checksum_pos] + bytes((checksum,)) + frame[checksum_pos + 1 :]
