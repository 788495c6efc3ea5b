"""Rebuilding the group coordinator's state from ``__consumer_offsets`` at start-up.

Each partition is replayed in offset order and the latest record per key wins.
A tombstone (null value) removes the offset or the group — and, as Kafka's
``OffsetMetadataManager.replay`` does, the offsets open transactions hold for
the same key. Records of a transactional batch wait for their producer's marker
in the partition: COMMIT publishes them, ABORT drops them; those still open at
the end stay pending for the transaction coordinator to end.

No bytes stop the load: a record whose key or value cannot be decoded, or a
batch whose records cannot, is skipped and reported with its offset
(:class:`~samsa.coordinator.replay.UnreadableRecords`). Not thread-safe; the
broker runs it once, before serving.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from samsa.coordinator.group.consumer_group_records import (
    CONSUMER_GROUP_RECORD_TYPES,
    ConsumerGroupKey,
    ConsumerGroupReplay,
    decode_key,
)
from samsa.coordinator.group.group import Group, GroupState, Member
from samsa.coordinator.group.records import (
    GROUP_METADATA_KEY_VERSION,
    GroupMetadataValue,
    OffsetValue,
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_key,
    decode_offset_value,
    key_version,
)
from samsa.coordinator.replay import (
    DecodeErrors,
    UnreadableRecords,
    batch_records,
    partition_batches,
)
from samsa.errors import CorruptRecordError
from samsa.records import Record
from samsa.records.control import parse_end_transaction_marker
from samsa.storage import Log
from samsa.types import TopicPartition

OffsetsByGroup = dict[str, dict[TopicPartition, OffsetValue]]


@dataclass(slots=True)
class LoadedGroups:
    """What the offsets topic holds: live group records, committed and pending offsets."""

    metadata: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: OffsetsByGroup = field(default_factory=dict)
    pending: dict[int, OffsetsByGroup] = field(default_factory=dict)
    """Offsets of transactions still open at the end of their partition, by producer id."""
    consumer_groups: ConsumerGroupReplay = field(default_factory=ConsumerGroupReplay)
    """Groups of the consumer protocol (KIP-848), from their own record types."""
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class _OffsetRecord:
    group: str
    tp: TopicPartition
    value: OffsetValue | None


@dataclass(frozen=True, slots=True)
class _GroupRecord:
    group: str
    value: GroupMetadataValue | None


@dataclass(frozen=True, slots=True)
class _ConsumerGroupRecord:
    key: ConsumerGroupKey
    value: bytes | None


def _decode(key: bytes, value: bytes | None) -> _OffsetRecord | _GroupRecord | _ConsumerGroupRecord:
    """One record of the offsets topic; raises ``DecodeErrors`` on bytes it cannot read."""
    version = key_version(key)
    if version in CONSUMER_GROUP_RECORD_TYPES:
        return _ConsumerGroupRecord(decode_key(key), value)
    if version == GROUP_METADATA_KEY_VERSION:
        group = decode_group_metadata_key(key)
        return _GroupRecord(group, None if value is None else decode_group_metadata_value(value))
    offset_key = decode_offset_key(key)
    tp = TopicPartition(offset_key.topic, offset_key.partition)
    return _OffsetRecord(
        offset_key.group, tp, None if value is None else decode_offset_value(value)
    )


class _PartitionReplay:
    """Replays one partition of the offsets topic into a :class:`LoadedGroups`."""

    def __init__(self, state: LoadedGroups, partition_log: Log) -> None:
        self.state = state
        self.skipped = UnreadableRecords(partition_log.directory.name)
        # Producer id → the offset records of its open transaction, in order.
        self.open: dict[int, list[_OffsetRecord]] = {}
        # Group metadata as read so far (None: deleted), applied to the state at the end.
        self.groups: dict[str, GroupMetadataValue | None] = {}

    def replay(self, partition_log: Log) -> None:
        """Read the partition from its start to its end and merge it into the state."""
        for batch in partition_batches(partition_log, self.skipped):
            if batch.is_control:
                self._marker(batch.producer_id, batch_records(batch, self.skipped))
                continue
            producer = batch.producer_id if batch.is_transactional else None
            for record in batch_records(batch, self.skipped):
                if record.key is None:
                    continue  # not a coordinator record; Kafka skips these too
                try:
                    decoded = _decode(record.key, record.value)
                    if isinstance(decoded, _ConsumerGroupRecord):
                        self.state.consumer_groups.apply(decoded.key, decoded.value)
                        continue
                except DecodeErrors as exc:
                    self.skipped.skip(record.offset, exc)
                    continue
                self._apply(decoded, producer)
        self._finish()

    def _marker(self, producer_id: int, records: Iterable[Record]) -> None:
        for record in records:
            try:
                marker = parse_end_transaction_marker(record)
            except CorruptRecordError:
                continue  # another kind of control record
            held = self.open.pop(producer_id, [])
            if marker.committed:
                for entry in held:
                    self._apply_offset(entry)

    def _apply(self, decoded: _OffsetRecord | _GroupRecord, producer: int | None) -> None:
        if isinstance(decoded, _GroupRecord):
            self.groups[decoded.group] = decoded.value  # group records are never transactional
        elif producer is not None:
            self.open.setdefault(producer, []).append(decoded)
        else:
            self._apply_offset(decoded)
            if decoded.value is None:
                # A tombstone also removes what open transactions hold for the key.
                for producer_id, held in self.open.items():
                    self.open[producer_id] = [
                        e for e in held if (e.group, e.tp) != (decoded.group, decoded.tp)
                    ]

    def _apply_offset(self, entry: _OffsetRecord) -> None:
        offsets = self.state.offsets
        if entry.value is None:
            offsets.get(entry.group, {}).pop(entry.tp, None)
        else:
            offsets.setdefault(entry.group, {})[entry.tp] = entry.value

    def _finish(self) -> None:
        for group, value in self.groups.items():
            if value is None:
                self.state.metadata.pop(group, None)
            else:
                self.state.metadata[group] = value
        for producer_id, held in self.open.items():
            for entry in held:
                if entry.value is not None:
                    pending = self.state.pending.setdefault(producer_id, {})
                    pending.setdefault(entry.group, {})[entry.tp] = entry.value
        self.skipped.summary()
        self.state.skipped += self.skipped.count


def restore_group(group_id: str, value: GroupMetadataValue) -> Group:
    """A group as its latest GroupMetadataValue left it: Stable with members, else Empty.

    Members get their session timers when the coordinator starts; until they
    heartbeat again, their subscription (the chosen protocol's metadata) and
    assignment are what the record holds.
    """
    group = Group(
        group_id,
        state=GroupState.STABLE if value.members else GroupState.EMPTY,
        generation=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
        state_timestamp=value.current_state_timestamp,
    )
    for m in value.members:
        member = Member(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout, m.session_timeout, value.protocol_type,
            [(value.protocol or "", m.subscription)], assignment=m.assignment,
        )  # fmt: skip
        group.restore(member)
    return group


def load_groups(logs: Iterable[Log]) -> LoadedGroups:
    """Replay every partition of the offsets topic; never raises on the bytes they hold."""
    state = LoadedGroups()
    for partition_log in logs:
        _PartitionReplay(state, partition_log).replay(partition_log)
    for group in [g for g, offsets in state.offsets.items() if not offsets]:
        del state.offsets[group]
    return state
