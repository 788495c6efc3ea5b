"""The consumer protocol's JoinGroup metadata and SyncGroup assignment payloads.

Groups of protocol type ``consumer`` carry these as opaque bytes in JoinGroup
(``ConsumerProtocolSubscription``) and SyncGroup (``ConsumerProtocolAssignment``).
Both sides read them: the group coordinator (subscribed topics, for describe and
offset deletion) and a consumer group leader's assignors (``samsa.client.consumer``).
The payloads start with an int16 version and are non-flexible in every version (classic
strings, bytes and arrays)::

    Subscription v0–3: topics:[string] user_data:nullable_bytes
                       owned_partitions:[topic:string partitions:[int32]] (v1+)
                       generation_id:int32 (v2+) rack_id:nullable_string (v3+)
    Assignment v0–3:   assigned_partitions:[topic:string partitions:[int32]]
                       user_data:nullable_bytes

Like Kafka, a version above 3 is read as version 3 (later versions may only append
fields), and bytes after the known fields are ignored: clients send both. An empty
assignment is legal and means the member was given nothing. Everything else that
is malformed raises ``CorruptRecordError``.

The sticky assignors put their state in ``user_data``. The eager ``sticky`` one
sends StickyAssignorUserData, which has no version field: v0 is
``previous_assignment:[topic:string partitions:[int32]]``, v1 appends
``generation:int32``. ``cooperative-sticky`` sends ``generation:int32`` alone (for
groups whose members speak subscription v0 or v1, which lack ``generation_id``).
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

__all__ = [
    "PROTOCOL_TYPE",
    "Assignment",
    "Subscription",
    "encode_assignment",
    "encode_sticky_user_data",
    "encode_subscription",
    "parse_assignment",
    "parse_sticky_user_data",
    "parse_subscription",
]

PROTOCOL_TYPE = "consumer"
MAX_KNOWN_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# A topic's smallest encoding: an empty name (int16) and an empty partition array (int32).
_MIN_TOPIC_PARTITIONS_SIZE = 6

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int  # as sent; fields are read as of min(version, 3)
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: TopicPartitions
    generation_id: int  # -1 when absent
    rack_id: str | None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int  # as sent; fields are read as of min(version, 3)
    partitions: TopicPartitions
    user_data: bytes | None


def _read_version(reader: WireReader) -> int:
    version = reader.read_int16()
    if version < 0:
        raise CorruptRecordError(f"{reader.what}: negative version {version}")
    return version


def _read_topic_partitions(reader: WireReader) -> TopicPartitions:
    count = reader.read_array_count(min_item_size=_MIN_TOPIC_PARTITIONS_SIZE)
    return tuple((reader.read_string(), reader.read_int32_array()) for _ in range(count))


def parse_subscription(data: bytes) -> Subscription:
    reader = WireReader(data, "consumer protocol subscription")
    version = _read_version(reader)
    topics = tuple(reader.read_string() for _ in range(reader.read_array_count(min_item_size=2)))
    user_data = reader.read_nullable_bytes()
    owned_partitions = _read_topic_partitions(reader) if version >= 1 else ()
    generation_id = reader.read_int32() if version >= 2 else -1
    rack_id = reader.read_nullable_string() if version >= 3 else None
    return Subscription(version, topics, user_data, owned_partitions, generation_id, rack_id)


def parse_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment(0, (), None)
    reader = WireReader(data, "consumer protocol assignment")
    version = _read_version(reader)
    partitions = _read_topic_partitions(reader)
    return Assignment(version, partitions, reader.read_nullable_bytes())


def _check_version(version: int) -> None:
    if not 0 <= version <= MAX_KNOWN_VERSION:
        raise ValueError(f"consumer protocol version {version} cannot be written (0–3)")


def _encode_topic_partitions(topic_partitions: TopicPartitions) -> bytes:
    parts = [_I32.pack(len(topic_partitions))]
    for topic, partitions in topic_partitions:
        parts.append(encode_string(topic))
        parts.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    return b"".join(parts)


def encode_subscription(sub: Subscription) -> bytes:
    """Encode at ``sub.version``; fields that version lacks are left out, as Kafka does."""
    _check_version(sub.version)
    parts = [_I16.pack(sub.version), _I32.pack(len(sub.topics))]
    parts.extend(encode_string(topic) for topic in sub.topics)
    parts.append(encode_nullable_bytes(sub.user_data))
    if sub.version >= 1:
        parts.append(_encode_topic_partitions(sub.owned_partitions))
    if sub.version >= 2:
        parts.append(_I32.pack(sub.generation_id))
    if sub.version >= 3:
        parts.append(encode_nullable_string(sub.rack_id))
    return b"".join(parts)


def encode_assignment(a: Assignment) -> bytes:
    _check_version(a.version)
    return (
        _I16.pack(a.version)
        + _encode_topic_partitions(a.partitions)
        + encode_nullable_bytes(a.user_data)
    )


def encode_sticky_user_data(previous_assignment: TopicPartitions, generation: int) -> bytes:
    """StickyAssignorUserData v1: the member's previous assignment and its generation."""
    return _encode_topic_partitions(previous_assignment) + _I32.pack(generation)


def parse_sticky_user_data(data: bytes) -> tuple[TopicPartitions, int]:
    """The previous assignment and generation of StickyAssignorUserData (-1 for v0)."""
    reader = WireReader(data, "sticky assignor user data")
    previous_assignment = _read_topic_partitions(reader)
    generation = reader.read_int32() if reader.remaining >= _I32.size else -1
    return previous_assignment, generation
