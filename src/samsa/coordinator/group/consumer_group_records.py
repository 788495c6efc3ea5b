"""Kafka's ``__consumer_offsets`` records of consumer groups (KIP-848), and their replay.

A key starts with an int16 record type, then the key fields at version 0, not
flexible (int16-length strings). A value starts with an int16 version (0, the only
one), then the fields in flexible form (compact strings and arrays, tagged fields
after each struct); a null value is a tombstone. Keys name the group, and the
member for types 5, 7 and 8:

* 3 ConsumerGroupMetadata — ``Epoch:int32``
* 5 ConsumerGroupMemberMetadata — ``InstanceId:string? RackId:string? ClientId:string
  ClientHost:string SubscribedTopicNames:[string] SubscribedTopicRegex:string?
  RebalanceTimeoutMs:int32 ServerAssignor:string?``
* 6 ConsumerGroupTargetAssignmentMetadata — ``AssignmentEpoch:int32``
* 7 ConsumerGroupTargetAssignmentMember — ``TopicPartitions:[TopicId:uuid Partitions:[int32]]``
* 8 ConsumerGroupCurrentMemberAssignment — ``MemberEpoch:int32 PreviousMemberEpoch:int32
  State:int8 AssignedPartitions:[TopicId Partitions] PartitionsPendingRevocation:[...]``

Tagged fields Kafka added later (MetadataHash, CreationTimeMs, AssignmentTimestamp,
AssignmentEpochs, ClassicMemberMetadata) are not written and are skipped when read.
:func:`group_records` gives a group's records as key → value bytes; the coordinator
writes only those that changed since its last write (and tombstones for keys gone),
so after compaction the topic holds what Kafka would. :class:`ConsumerGroupReplay`
rebuilds groups from the records in log order.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from samsa.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from samsa.coordinator.group.reconciliation import MemberState
from samsa.errors import CorruptRecordError
from samsa.protocol.wire import WireReader, encode_string, encode_uvarint

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_MEMBER = 3, 5, 6, 7, 8
PARTITION_METADATA = 4
"""ConsumerGroupPartitionMetadata: written by Kafka before 4.1, read and ignored here."""
CONSUMER_GROUP_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8})
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_VALUE_VERSION = _I16.pack(0)
_NO_TAGS = b"\x00"


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return encode_uvarint(len(raw) + 1) + raw


def _compact_array(items: list[bytes]) -> bytes:
    return encode_uvarint(len(items) + 1) + b"".join(items)


def _topic_partitions(parts: Mapping[uuid.UUID, frozenset[int]]) -> bytes:
    items = [
        topic.bytes
        + encode_uvarint(len(ps) + 1)
        + b"".join(_I32.pack(p) for p in sorted(ps))
        + _NO_TAGS
        for topic, ps in sorted(parts.items(), key=lambda kv: kv[0].bytes)
        if ps
    ]
    return _compact_array(items)


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    key = _I16.pack(record_type) + encode_string(group_id)
    return key if member_id is None else key + encode_string(member_id)


def group_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record that describes ``group`` now, as key → value bytes."""
    gid = group.group_id
    records = {
        _key(GROUP_METADATA, gid): _VALUE_VERSION + _I32.pack(group.group_epoch) + _NO_TAGS,
        _key(TARGET_METADATA, gid): (_VALUE_VERSION + _I32.pack(group.assignment_epoch) + _NO_TAGS),
    }
    for m in group.members.values():
        records[_key(MEMBER_METADATA, gid, m.member_id)] = (
            _VALUE_VERSION
            + _compact_string(m.instance_id)
            + _compact_string(m.rack_id)
            + _compact_string(m.client_id)
            + _compact_string(m.client_host)
            + _compact_array([_compact_string(n) for n in m.subscribed_topic_names])
            + _compact_string(m.subscribed_topic_regex or "")
            + _I32.pack(m.rebalance_timeout_ms)
            + _compact_string(m.server_assignor)
            + _NO_TAGS
        )
        records[_key(TARGET_MEMBER, gid, m.member_id)] = (
            _VALUE_VERSION + _topic_partitions(group.target.get(m.member_id, {})) + _NO_TAGS
        )
        records[_key(CURRENT_MEMBER, gid, m.member_id)] = (
            _VALUE_VERSION
            + _I32.pack(m.member_epoch)
            + _I32.pack(m.previous_member_epoch)
            + struct.pack(">b", int(m.state))
            + _topic_partitions(m.assigned)
            + _topic_partitions(m.pending_revocation)
            + _NO_TAGS
        )
    return records


# -- reading ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int
    group_id: str
    member_id: str | None


def decode_key(data: bytes) -> ConsumerGroupKey:
    """The key of a consumer-group record; raises CorruptRecordError on other bytes."""
    reader = WireReader(data, "consumer group record key")
    record_type = reader.read_int16()
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        raise CorruptRecordError(f"record type {record_type} is not a consumer group's")
    group_id = reader.read_string()
    member_id = reader.read_string() if record_type in (5, 7, 8) else None
    reader.expect_end()
    return ConsumerGroupKey(record_type, group_id, member_id)


def _value_reader(data: bytes, what: str) -> WireReader:
    reader = WireReader(data, what)
    version = reader.read_int16()
    if version != 0:
        raise CorruptRecordError(f"{what} version {version} is unknown")
    reader.flexible = True
    return reader


def _read_topic_partitions(reader: WireReader) -> dict[uuid.UUID, frozenset[int]]:
    parts: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(reader.read_array_count(min_item_size=18)):
        topic = uuid.UUID(bytes=reader.take(16))
        parts[topic] = frozenset(reader.read_int32_array())
        reader.skip_tagged_fields()
    return parts


_CurrentAssignment = tuple[
    int, int, int, dict[uuid.UUID, frozenset[int]], dict[uuid.UUID, frozenset[int]]
]


@dataclass(slots=True)
class _GroupState:
    epoch: int = 0
    assignment_epoch: int = 0
    metadata: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    current: dict[str, _CurrentAssignment] = field(default_factory=dict)


class ConsumerGroupReplay:
    """Consumer groups rebuilt from their records, applied in log order."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupState] = {}

    def apply(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        """Apply one record; raises CorruptRecordError on a value it cannot read."""
        gid, mid = key.group_id, key.member_id or ""
        if key.record_type == GROUP_METADATA and value is None:
            self._groups.pop(gid, None)
            return
        if key.record_type == PARTITION_METADATA or (value is None and key.member_id is None):
            return
        state = self._groups.setdefault(gid, _GroupState())
        if value is None:
            {MEMBER_METADATA: state.metadata, TARGET_MEMBER: state.target,
             CURRENT_MEMBER: state.current}[key.record_type].pop(mid, None)  # type: ignore[attr-defined]  # fmt: skip
            return
        what = f"consumer group record {key.record_type} of {gid}"
        reader = _value_reader(value, what)
        if key.record_type == GROUP_METADATA:
            state.epoch = reader.read_int32()
        elif key.record_type == TARGET_METADATA:
            state.assignment_epoch = reader.read_int32()
        elif key.record_type == MEMBER_METADATA:
            member = ConsumerGroupMember(mid)
            member.instance_id = reader.read_nullable_string()
            member.rack_id = reader.read_nullable_string()
            member.client_id = reader.read_string()
            member.client_host = reader.read_string()
            names = [reader.read_string() for _ in range(reader.read_array_count())]
            member.subscribed_topic_names = tuple(names)
            member.subscribed_topic_regex = reader.read_nullable_string() or None
            member.rebalance_timeout_ms = reader.read_int32()
            member.server_assignor = reader.read_nullable_string()
            state.metadata[mid] = member
        elif key.record_type == TARGET_MEMBER:
            state.target[mid] = _read_topic_partitions(reader)
        else:
            epoch, previous = reader.read_int32(), reader.read_int32()
            member_state = struct.unpack(">b", reader.take(1))[0]
            assigned = _read_topic_partitions(reader)
            pending = _read_topic_partitions(reader)
            state.current[mid] = (epoch, previous, member_state, assigned, pending)
        reader.skip_tagged_fields()

    def groups(self) -> Iterable[ConsumerGroup]:
        """The groups as their last records left them."""
        for gid, state in self._groups.items():
            group = ConsumerGroup(gid)
            group.group_epoch = state.epoch
            group.assignment_epoch = state.assignment_epoch
            for mid, member in state.metadata.items():
                current = state.current.get(mid)
                if current is not None:
                    epoch, previous, member_state, assigned, pending = current
                    member.member_epoch, member.previous_member_epoch = epoch, previous
                    try:
                        member.state = MemberState(member_state)
                    except ValueError:
                        member.state = MemberState.UNKNOWN
                    member.assigned, member.pending_revocation = assigned, pending
                group.members[mid] = member
                group.hold(member)
                if mid in state.target:
                    group.target[mid] = state.target[mid]
            yield group
