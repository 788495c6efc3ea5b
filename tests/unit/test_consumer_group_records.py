"""Consumer-group records in Kafka's formats: written from a group, replayed into it."""

from __future__ import annotations

import struct
import uuid

from samsa.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from samsa.coordinator.group.consumer_group_records import (
    ConsumerGroupReplay,
    decode_key,
    group_records,
)
from samsa.coordinator.group.reconciliation import MemberState

T = uuid.UUID(int=3)


def _group() -> ConsumerGroup:
    group = ConsumerGroup("g")
    group.group_epoch, group.assignment_epoch = 4, 4
    member = ConsumerGroupMember(
        "m1", instance_id="i1", client_id="c", client_host="/127.0.0.1",
        subscribed_topic_names=("t",), server_assignor="range", rebalance_timeout_ms=30_000,
        member_epoch=3, previous_member_epoch=2, state=MemberState.UNREVOKED_PARTITIONS,
        assigned={T: frozenset({0})}, pending_revocation={T: frozenset({1})},
    )  # fmt: skip
    group.members["m1"] = member
    group.target["m1"] = {T: frozenset({0, 2})}
    return group


def _replay(records: list[tuple[bytes, bytes | None]]) -> list[ConsumerGroup]:
    """Replay ``records`` in order, as the log holds them."""
    replay = ConsumerGroupReplay()
    for key, value in records:
        replay.apply(decode_key(key), value)
    return list(replay.groups())


def test_keys_carry_kafkas_record_types_and_values_version_zero() -> None:
    records = group_records(_group())
    types = sorted(struct.unpack(">h", key[:2])[0] for key in records)
    assert types == [3, 5, 6, 7, 8]
    assert all(value[:2] == b"\x00\x00" for value in records.values())
    metadata_key = next(k for k in records if k[:2] == b"\x00\x03")
    assert metadata_key == b"\x00\x03\x00\x01g"
    assert records[metadata_key] == b"\x00\x00\x00\x00\x00\x04\x00"  # epoch 4, no tags


def test_a_group_replayed_from_its_records_is_the_group_written() -> None:
    [group] = _replay(list(group_records(_group()).items()))
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)
    member = group.members["m1"]
    assert (member.instance_id, member.client_id, member.client_host) == ("i1", "c", "/127.0.0.1")
    assert (member.subscribed_topic_names, member.server_assignor) == (("t",), "range")
    assert (member.member_epoch, member.previous_member_epoch) == (3, 2)
    assert member.state == MemberState.UNREVOKED_PARTITIONS
    assert (member.assigned, member.pending_revocation) == ({T: {0}}, {T: {1}})
    assert group.target == {"m1": {T: frozenset({0, 2})}}
    assert group.partition_epoch(T, 1) == 3  # still held while it is revoked
    assert group_records(group) == group_records(_group())


def test_tombstones_remove_a_member_and_then_the_group() -> None:
    records: list[tuple[bytes, bytes | None]] = list(group_records(_group()).items())
    member_keys = [k for k, _ in records if k[:2] in (b"\x00\x05", b"\x00\x07", b"\x00\x08")]
    [group] = _replay(records + [(key, None) for key in member_keys])
    assert group.members == {}
    assert _replay([*records, (b"\x00\x03\x00\x01g", None)]) == []
