"""Zig-zag varints as Kafka's record format uses them (protobuf's sint32/sint64)."""

from __future__ import annotations

from typing import Final

from samsa.errors import CorruptRecordError

MAX_VARINT_BYTES: Final = 5
MAX_VARLONG_BYTES: Final = 10

SMALL_LIMIT: Final = 8192
"""Values in [-SMALL_LIMIT, SMALL_LIMIT) — every one- and two-byte varint — have their
encodings precomputed in :data:`SMALL_VARINTS` (index ``value + SMALL_LIMIT``)."""


def _encode_slow(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# Small values dominate (lengths, deltas): ~16k short bytes objects, ~0.6 MB.
SMALL_VARINTS: Final = tuple(_encode_slow(v) for v in range(-SMALL_LIMIT, SMALL_LIMIT))


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value``."""
    v = (value << 1) ^ (value >> 63)
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit integer."""
    if -SMALL_LIMIT <= value < SMALL_LIMIT:
        return SMALL_VARINTS[value + SMALL_LIMIT]
    return _encode_slow(value)


def decode_varint(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = MAX_VARLONG_BYTES
) -> tuple[int, int]:
    """Decode a zig-zag varint at ``buf[pos]``; return ``(value, position after it)``.

    Raises :class:`CorruptRecordError` if the buffer ends inside the varint or it
    is longer than ``max_bytes`` (5 for a varint, 10 for a varlong).
    """
    end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # one byte: most lengths, deltas and counts in a batch
            return (b >> 1) ^ -(b & 1), pos + 1
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise CorruptRecordError(f"varint at byte {pos} runs past the end of the buffer")
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint at byte {pos} is longer than {max_bytes} bytes")
