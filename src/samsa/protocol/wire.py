"""Kafka's primitive wire types for small embedded formats (internal-topic records,
consumer-protocol payloads): a bounds-checked reader and the classic encoders.

Non-flexible versions use classic types (strings with an int16 length, bytes and
arrays with an int32 length, -1 for null); flexible versions use compact ones
(unsigned-varint length + 1, 0 for null) and end each struct with tagged fields.
Shared by the broker's coordinators and the clients, so it depends on neither.
"""

from __future__ import annotations

import struct

from samsa.errors import CorruptRecordError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_VARINT_BYTES = 5

__all__ = [
    "WireReader",
    "encode_nullable_bytes",
    "encode_nullable_string",
    "encode_string",
    "encode_uvarint",
]


class WireReader:
    """Reads Kafka's primitive types from ``data``, checking every length before it slices.

    Anything malformed — a length or count past the end, a negative length other
    than the null marker, a varint longer than five bytes, invalid UTF-8 — raises
    ``CorruptRecordError`` naming ``what``. Set ``flexible`` to read compact strings,
    bytes and arrays instead of classic ones. Not thread-safe; one reader per record.
    """

    __slots__ = ("_data", "_position", "flexible", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._position = 0
        self.flexible = False
        self.what = what

    @property
    def remaining(self) -> int:
        return len(self._data) - self._position

    def _corrupt(self, reason: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {reason} at byte {self._position}")

    def _take(self, size: int) -> bytes:
        if size > self.remaining:
            raise self._corrupt(f"{size} bytes needed, {self.remaining} remain")
        start = self._position
        self._position += size
        return self._data[start : self._position]

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes (refused when fewer remain)."""
        return self._take(size)

    def take_null_array(self) -> bool:
        """Consume a classic null array marker (-1) if one comes next; True when it did."""
        if self._data[self._position : self._position + 4] == b"\xff\xff\xff\xff":
            self._position += 4
            return True
        return False

    def read_int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def read_int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def read_int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def read_uvarint(self) -> int:
        value = 0
        for index in range(_MAX_VARINT_BYTES):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    raise self._corrupt("unsigned varint exceeds 32 bits")
                return value
        raise self._corrupt("unsigned varint is longer than five bytes")

    def _length(self, classic: struct.Struct) -> int | None:
        """A string, bytes or array length; None for the null marker."""
        if self.flexible:
            encoded = self.read_uvarint()
            return None if encoded == 0 else encoded - 1
        (length,) = classic.unpack(self._take(classic.size))
        if length < -1:
            raise self._corrupt(f"negative length {length}")
        return None if length == -1 else int(length)

    def read_nullable_string(self) -> str | None:
        length = self._length(_I16)
        if length is None:
            return None
        raw = self._take(length)
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise self._corrupt("string is not valid UTF-8") from exc

    def read_string(self) -> str:
        value = self.read_nullable_string()
        if value is None:
            raise self._corrupt("non-nullable string is null")
        return value

    def read_nullable_bytes(self) -> bytes | None:
        length = self._length(_I32)
        return None if length is None else self._take(length)

    def read_bytes(self) -> bytes:
        value = self.read_nullable_bytes()
        if value is None:
            raise self._corrupt("non-nullable bytes are null")
        return value

    def read_array_count(self, min_item_size: int = 1) -> int:
        """A non-nullable array's element count, refused when the remaining bytes cannot hold it."""
        count = self._length(_I32)
        if count is None:
            raise self._corrupt("non-nullable array is null")
        if count * min_item_size > self.remaining:
            raise self._corrupt(f"array of {count} elements exceeds the remaining bytes")
        return count

    def read_int32_array(self) -> tuple[int, ...]:
        count = self.read_array_count(min_item_size=4)
        return tuple(struct.unpack(f">{count}i", self._take(4 * count)))

    def skip_tagged_fields(self) -> None:
        """Skip a flexible struct's tagged fields; none of the formats here defines one."""
        for _ in range(self.read_uvarint()):
            self.read_uvarint()  # tag
            self._take(self.read_uvarint())

    def expect_end(self) -> None:
        if self.remaining:
            raise self._corrupt(f"{self.remaining} bytes follow the end")


def encode_string(value: str) -> bytes:
    """A classic (int16-length) string."""
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_nullable_string(value: str | None) -> bytes:
    return _I16.pack(-1) if value is None else encode_string(value)


def encode_nullable_bytes(value: bytes | None) -> bytes:
    """Classic (int32-length) bytes."""
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def encode_uvarint(value: int) -> bytes:
    """An unsigned varint (compact lengths, tag counts and sizes of flexible versions)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
