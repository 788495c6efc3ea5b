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
from samsa.records.varint import MAX_VARINT_BYTES, decode_varint, encode_varint

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
