"""Reading a consumer group member's assignment, for describe_groups (no I/O).

Groups of protocol type ``consumer`` carry a ``ConsumerProtocolAssignment`` as
each member's SyncGroup assignment: an int16 version, then the body of that
version (kio's schemas, v0–3, never flexible). As Kafka does, a version above
3 is read as 3 and bytes after the known fields are ignored.

``samsa.protocol.consumer_protocol`` reads the same payloads but imports
``samsa.coordinator.group.records``, which a client must not depend on; this
module reads them with kio's schemas instead (bounds-checked by the guard).
"""

from __future__ import annotations

import struct
from typing import Any

from kio.index import load_entity_schema
from kio.serial import entity_reader
from kio.static.constants import EntityType

from samsa.errors import CorruptRecordError
from samsa.protocol.guard import check_entity
from samsa.types import TopicPartition

__all__ = ["PROTOCOL_TYPE", "decode_assignment"]

PROTOCOL_TYPE = "consumer"
_LATEST = 3
_I16 = struct.Struct(">h")


def _decode(name: str, data: bytes) -> Any:
    if len(data) < 2:
        raise CorruptRecordError(f"{name} of {len(data)} bytes has no version")
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        raise CorruptRecordError(f"{name} has version {version}")
    cls: type = load_entity_schema(name, min(version, _LATEST), EntityType.data)
    try:
        check_entity(cls, data, 2)
        return entity_reader(cls)(data, 2)[0]
    except Exception as exc:  # the guard and kio raise several types on bad bytes
        raise CorruptRecordError(f"{name} v{version} is malformed: {exc!r}") from exc


def decode_assignment(data: bytes) -> tuple[tuple[TopicPartition, ...], bytes | None]:
    """The partitions and user data of an assignment; empty bytes mean no partitions."""
    if not data:
        return (), None
    body = _decode("consumer_protocol_assignment", data)
    partitions = tuple(
        TopicPartition(str(item.topic), int(p))
        for item in body.assigned_partitions
        for p in item.partitions
    )
    return partitions, body.user_data
