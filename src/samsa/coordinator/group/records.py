"""Kafka's ``__consumer_offsets`` record formats, so tools that read the topic understand it.

Key version 1 (OffsetCommitKey): ``version:int16 group:string topic:string
partition:int32``. Value version 3 (OffsetCommitValue): ``version:int16
offset:int64 leader_epoch:int32 metadata:string commit_timestamp:int64``; a null
value is a tombstone (the offset was deleted). Strings are int16-length UTF-8.
Key version 2 is group metadata, which this module recognises but does not decode.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from samsa.errors import CorruptRecordError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqi")  # version, offset, leader epoch


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def _read_string(data: bytes, position: int) -> tuple[str, int]:
    if position + 2 > len(data):
        raise CorruptRecordError("offsets record string length is truncated")
    (length,) = _I16.unpack_from(data, position)
    position += 2
    if length < 0:
        return "", position
    if position + length > len(data):
        raise CorruptRecordError("offsets record string is truncated")
    return data[position : position + length].decode(), position + length


def encode_offset_key(key: OffsetKey) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(key.group)
        + _string(key.topic)
        + _I32.pack(key.partition)
    )


def encode_offset_value(value: OffsetValue) -> bytes:
    return (
        _VALUE_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
        + _string(value.metadata)
        + struct.pack(">q", value.commit_timestamp)
    )


def key_version(data: bytes) -> int:
    if len(data) < 2:
        raise CorruptRecordError("offsets record key is shorter than its version")
    return int(_I16.unpack_from(data)[0])


def decode_offset_key(data: bytes) -> OffsetKey:
    version = key_version(data)
    if version not in (0, OFFSET_COMMIT_KEY_VERSION):
        raise CorruptRecordError(f"key version {version} is not an offset commit key")
    group, position = _read_string(data, 2)
    topic, position = _read_string(data, position)
    if position + 4 > len(data):
        raise CorruptRecordError("offset commit key partition is truncated")
    return OffsetKey(group, topic, int(_I32.unpack_from(data, position)[0]))


def decode_offset_value(data: bytes) -> OffsetValue:
    """Decode value versions 0–3 (v1 carries an expire timestamp, v3 a leader epoch)."""
    if len(data) < 10:
        raise CorruptRecordError("offset commit value is truncated")
    version = int(_I16.unpack_from(data)[0])
    offset = int(struct.unpack_from(">q", data, 2)[0])
    position = 10
    leader_epoch = -1
    if version >= 3:
        leader_epoch = int(_I32.unpack_from(data, position)[0])
        position += 4
    metadata, position = _read_string(data, position)
    if position + 8 > len(data):
        raise CorruptRecordError("offset commit value timestamp is truncated")
    timestamp = int(struct.unpack_from(">q", data, position)[0])
    return OffsetValue(offset, leader_epoch, metadata, timestamp)


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    encoded = value.encode("utf-16-be")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``."""
    h = java_string_hash(group)
    return (0 if h == -(2**31) else abs(h)) % partitions
