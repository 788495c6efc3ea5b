"""One record inside a batch: its decoded form, its encoding and its decoding.

Record layout (all lengths and deltas are zig-zag varints)::

    length  attributes:int8  timestampDelta  offsetDelta
    keyLength key  valueLength value  headerCount
    [headerKeyLength headerKey headerValueLength headerValue]…

A length of -1 means null. Decoding checks every length against the bytes
that remain before slicing, so a hostile length never drives an allocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from samsa.errors import CorruptRecordError
from samsa.records.varint import (
    MAX_VARINT_BYTES,
    SMALL_LIMIT,
    SMALL_VARINTS,
    decode_varint,
    encode_varint,
)

Header = tuple[str, bytes | None]
"""A record header: a UTF-8 key and a nullable value."""

_NULL = encode_varint(-1)


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> bytes:
    """The bytes of one record, length prefix included."""
    if not headers:  # the common case, with every varint from the table
        small, limit = SMALL_VARINTS, SMALL_LIMIT
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if (
            -limit <= timestamp_delta < limit
            and -limit <= offset_delta < limit
            and key_size < limit
            and value_size < limit
        ):
            body = b"".join(
                (
                    b"\x00",
                    small[timestamp_delta + limit],
                    small[offset_delta + limit],
                    small[key_size + limit],
                    key or b"",
                    small[value_size + limit],
                    value or b"",
                    b"\x00",
                )
            )
            size = len(body)
            return (small[size + limit] if size < limit else encode_varint(size)) + body
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    for field in (key, value):
        if field is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(field)))
            parts.append(field)
    parts.append(encode_varint(len(headers)))
    for header_key, header_value in headers:
        encoded_key = header_key.encode()
        parts.append(encode_varint(len(encoded_key)))
        parts.append(encoded_key)
        if header_value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(header_value)))
            parts.append(header_value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _bytes_field(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
    if length == -1:
        return None, pos
    if length < -1 or length > end - pos:
        raise CorruptRecordError(f"record {what} length {length} does not fit in the record")
    return buf[pos : pos + length], pos + length


def decode_record(
    buf: bytes, pos: int, base_offset: int, base_timestamp: int, timestamp_override: int | None
) -> tuple[Record, int]:
    """Decode the record at ``buf[pos]``; return it and the position after it.

    ``timestamp_override`` is the batch's max timestamp for LogAppendTime batches,
    whose records all carry it.
    """
    length, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
    end = pos + length
    if length < 6 or end > len(buf):
        raise CorruptRecordError(
            f"record length {length} does not fit in the {len(buf) - pos} bytes that follow"
        )
    pos += 1  # attributes: unused by magic 2
    timestamp_delta, pos = decode_varint(buf, pos)
    offset_delta, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
    key, pos = _bytes_field(buf, pos, end, "key")
    value, pos = _bytes_field(buf, pos, end, "value")
    count, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
    # A header takes at least two bytes: a bound on the count before looping on it.
    if count < 0 or count * 2 > end - pos:
        raise CorruptRecordError(f"record header count {count} does not fit in the record")
    headers: list[Header] = []
    for _ in range(count):
        raw_key, pos = _bytes_field(buf, pos, end, "header key")
        if raw_key is None:
            raise CorruptRecordError("record header key is null")
        try:
            header_key = raw_key.decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from exc
        header_value, pos = _bytes_field(buf, pos, end, "header value")
        headers.append((header_key, header_value))
    if pos > end:
        raise CorruptRecordError("record fields run past the record's length")
    if pos != end:
        raise CorruptRecordError(f"record has {end - pos} bytes after its last header")
    timestamp = (
        timestamp_override if timestamp_override is not None else base_timestamp + timestamp_delta
    )
    return Record(base_offset + offset_delta, timestamp, key, value, tuple(headers)), end


def decode_records(
    buf: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_override: int | None,
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
    """``count`` records from the start of ``buf`` as (offset, timestamp, key, value,
    headers) tuples, with the checks of :func:`decode_record` (which this falls back to
    for anything unusual) but without its per-record objects and calls: the consumer's
    hot loop. Raises :class:`CorruptRecordError` when ``buf`` does not hold exactly
    ``count`` records."""
    out: list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]] = []
    append = out.append
    n = len(buf)
    pos = 0
    for _ in range(count):
        if pos >= n:
            raise CorruptRecordError(
                f"batch declares {count} records but its records section ends early"
            )
        start = pos
        try:
            # Each varint: one byte inline (the common case), longer ones by decode_varint.
            b = buf[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
            end = pos + length
            if length < 6 or end > n:
                raise IndexError  # decode_record reports it
            pos += 1  # attributes
            b = buf[pos]
            if b < 0x80:
                timestamp_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                timestamp_delta, pos = decode_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                offset_delta, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
            b = buf[pos]
            if b < 0x80:
                size, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                size, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
            if size == -1:
                key = None
            elif 0 <= size <= end - pos:
                key, pos = buf[pos : pos + size], pos + size
            else:
                raise IndexError
            b = buf[pos]
            if b < 0x80:
                size, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                size, pos = decode_varint(buf, pos, MAX_VARINT_BYTES)
            if size == -1:
                value = None
            elif 0 <= size <= end - pos:
                value, pos = buf[pos : pos + size], pos + size
            else:
                raise IndexError
            if pos + 1 != end or buf[pos] != 0:  # headers, or bytes left: the full decoder
                raise IndexError
            pos = end
            append(
                (
                    base_offset + offset_delta,
                    base_timestamp + timestamp_delta
                    if timestamp_override is None
                    else timestamp_override,
                    key,
                    value,
                    (),
                )
            )
        except (IndexError, CorruptRecordError):
            record, pos = decode_record(buf, start, base_offset, base_timestamp, timestamp_override)
            append((record.offset, record.timestamp, record.key, record.value, record.headers))
    if pos != n:
        raise CorruptRecordError(
            f"batch declares {count} records but {n - pos} bytes follow the last"
        )
    return out
