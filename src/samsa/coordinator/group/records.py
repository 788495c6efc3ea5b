"""Kafka's ``__consumer_offsets`` record formats, so tools that read the topic understand it.

Every key and value starts with an int16 version. Non-flexible versions use classic
types (strings with an int16 length, bytes and arrays with an int32 length, -1 for
null); flexible versions use compact ones (unsigned-varint length + 1, 0 for null)
and end each struct with tagged fields.

Key version 1 (OffsetCommitKey): ``group:string topic:string partition:int32``.
Value version 3 (OffsetCommitValue): ``offset:int64 leader_epoch:int32
metadata:string commit_timestamp:int64``; versions 0–4 are read (1 adds
``expire_timestamp:int64`` at the end, 3 the leader epoch, 4 is flexible).
Every decoder raises ``CorruptRecordError`` — and nothing else — on bytes that
are not a whole record of a known version, so a loader can skip them.

Key version 2 (GroupMetadataKey): ``group:string``. GroupMetadataValue, versions 0–4
(4 is the only flexible one)::

    protocol_type:string generation:int32 protocol:nullable_string
    leader:nullable_string current_state_timestamp:int64 (v2+)
    members:[member_id:string group_instance_id:nullable_string (v3+)
             client_id:string client_host:string rebalance_timeout:int32 (v1+)
             session_timeout:int32 subscription:bytes assignment:bytes]

A null value is a tombstone (the offset or the group was deleted); callers see it
as a record without a value and never pass it here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from samsa.errors import CorruptRecordError
from samsa.protocol.wire import (
    WireReader,
    encode_nullable_bytes,
    encode_nullable_string,
    encode_string,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_MAX_VERSION = 4
_FIRST_FLEXIBLE_OFFSET_COMMIT_VERSION = 4
GROUP_METADATA_VALUE_VERSION = 3
GROUP_METADATA_VALUE_MAX_VERSION = 4
_FIRST_FLEXIBLE_GROUP_METADATA_VERSION = 4
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
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


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One classic group member as GroupMetadataValue stores it.

    ``subscription`` is the metadata of the group's chosen protocol from the member's
    JoinGroup, ``assignment`` what SyncGroup gave it; both are opaque here.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1 when absent (versions < 2)
    members: tuple[MemberMetadata, ...]


def open_versioned(
    data: bytes, what: str, max_version: int, first_flexible: int
) -> tuple[WireReader, int]:
    """A reader past the int16 version of a coordinator value, flexible from ``first_flexible``.

    A version outside 0..``max_version`` is corrupt.
    """
    reader = WireReader(data, what)
    version = reader.read_int16()
    if not 0 <= version <= max_version:
        raise CorruptRecordError(f"{what} version {version} is unknown")
    reader.flexible = version >= first_flexible
    return reader, version


def encode_offset_key(key: OffsetKey) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + encode_string(key.group)
        + encode_string(key.topic)
        + _I32.pack(key.partition)
    )


def encode_offset_value(value: OffsetValue) -> bytes:
    return (
        _VALUE_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
        + encode_string(value.metadata)
        + _I64.pack(value.commit_timestamp)
    )


def key_version(data: bytes) -> int:
    """The int16 version every key starts with: 0 or 1 an offset commit, 2 a group."""
    return WireReader(data, "offsets record key").read_int16()


def decode_offset_key(data: bytes) -> OffsetKey:
    """Decode key versions 0 and 1 (the same layout); anything else is corrupt."""
    reader = WireReader(data, "offset commit key")
    version = reader.read_int16()
    if version not in (0, OFFSET_COMMIT_KEY_VERSION):
        raise CorruptRecordError(f"key version {version} is not an offset commit key")
    group = reader.read_string()
    topic = reader.read_string()
    partition = reader.read_int32()
    reader.expect_end()
    return OffsetKey(group, topic, partition)


def decode_offset_value(data: bytes) -> OffsetValue:
    """Decode value versions 0–4; an unknown version or bytes after the value are corrupt.

    Version 1 adds an expire timestamp after the commit timestamp (ignored: retention
    is the broker's), 3 a leader epoch, 4 makes the value flexible. A null metadata
    string, which Kafka never writes, reads as empty.
    """
    reader, version = open_versioned(
        data, "offset commit value", OFFSET_COMMIT_VALUE_MAX_VERSION,
        _FIRST_FLEXIBLE_OFFSET_COMMIT_VERSION,
    )  # fmt: skip
    offset = reader.read_int64()
    leader_epoch = reader.read_int32() if version >= 3 else -1
    metadata = reader.read_nullable_string() or ""
    timestamp = reader.read_int64()
    if version == 1:
        reader.read_int64()  # expire timestamp
    if reader.flexible:
        reader.skip_tagged_fields()
    reader.expect_end()
    return OffsetValue(offset, leader_epoch, metadata, timestamp)


def encode_group_metadata_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + encode_string(group)


def decode_group_metadata_key(data: bytes) -> str:
    """Return the group id of a version 2 key."""
    reader = WireReader(data, "group metadata key")
    version = reader.read_int16()
    if version != GROUP_METADATA_KEY_VERSION:
        raise CorruptRecordError(f"key version {version} is not a group metadata key")
    group = reader.read_string()
    reader.expect_end()
    return group


def _encode_member(member: MemberMetadata) -> bytes:
    return b"".join(
        (
            encode_string(member.member_id),
            encode_nullable_string(member.group_instance_id),
            encode_string(member.client_id),
            encode_string(member.client_host),
            _I32.pack(member.rebalance_timeout),
            _I32.pack(member.session_timeout),
            encode_nullable_bytes(member.subscription),
            encode_nullable_bytes(member.assignment),
        )
    )


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Encode as version 3, the version Kafka's classic group coordinator writes.

    Kafka 3.x and 4.x both write version 3 (a constant in 4.x; in 3.x what every
    metadata version from 2.3 on picks, "the highest supported non-flexible version")
    and read 0–4. Version 4 only adds tagged-field sections that no field uses yet
    (KIP-915 made it flexible for future additions), so writing it would gain
    nothing and would make the records unreadable to older brokers and tools.
    """
    return b"".join(
        (
            _I16.pack(GROUP_METADATA_VALUE_VERSION),
            encode_string(value.protocol_type),
            _I32.pack(value.generation),
            encode_nullable_string(value.protocol),
            encode_nullable_string(value.leader),
            _I64.pack(value.current_state_timestamp),
            _I32.pack(len(value.members)),
            *(_encode_member(member) for member in value.members),
        )
    )


def _read_member(reader: WireReader, version: int) -> MemberMetadata:
    member_id = reader.read_string()
    group_instance_id = reader.read_nullable_string() if version >= 3 else None
    client_id = reader.read_string()
    client_host = reader.read_string()
    rebalance_timeout = reader.read_int32() if version >= 1 else None
    session_timeout = reader.read_int32()
    subscription = reader.read_bytes()
    assignment = reader.read_bytes()
    if reader.flexible:
        reader.skip_tagged_fields()
    return MemberMetadata(
        member_id,
        group_instance_id,
        client_id,
        client_host,
        # Version 0 had one timeout for both; Kafka loads it as the rebalance timeout too.
        session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
    )


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """Decode value versions 0–4; bytes after the value are corrupt, as is an unknown version."""
    reader, version = open_versioned(
        data, "group metadata value", GROUP_METADATA_VALUE_MAX_VERSION,
        _FIRST_FLEXIBLE_GROUP_METADATA_VERSION,
    )  # fmt: skip
    protocol_type = reader.read_string()
    generation = reader.read_int32()
    protocol = reader.read_nullable_string()
    leader = reader.read_nullable_string()
    current_state_timestamp = reader.read_int64() if version >= 2 else -1
    members = tuple(_read_member(reader, version) for _ in range(reader.read_array_count()))
    if reader.flexible:
        reader.skip_tagged_fields()
    reader.expect_end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, members
    )


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
