"""ConsumerGroupHeartbeat's state machine, driven request by request on a manual timer."""

from __future__ import annotations

import uuid

import pytest
from tests.conftest import ManualTimer

from samsa.coordinator.group.consumer_group_manager import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    HeartbeatRequest,
    HeartbeatResult,
)
from samsa.errors import ErrorCode

T = uuid.UUID(int=11)
TOPICS = {"t": (T, 4)}


def _lookup(name: str) -> tuple[uuid.UUID, int] | None:
    return TOPICS.get(name)


@pytest.fixture
def timer() -> ManualTimer:
    return ManualTimer()


@pytest.fixture
def manager(timer: ManualTimer) -> ConsumerGroupManager:
    return ConsumerGroupManager(timer, ConsumerGroupConfig(session_timeout_ms=45_000))


def _join(manager: ConsumerGroupManager, member_id: str, **fields: object) -> HeartbeatResult:
    req = HeartbeatRequest(
        "g", member_id, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={}
    )
    for name, value in fields.items():
        setattr(req, name, value)
    return manager.heartbeat(req, _lookup)


def _beat(
    manager: ConsumerGroupManager, member_id: str, epoch: int, owned: set[int] | None
) -> HeartbeatResult:
    req = HeartbeatRequest(
        "g", member_id, epoch, owned=None if owned is None else {T: frozenset(owned)}
    )
    return manager.heartbeat(req, _lookup)


def test_a_first_member_gets_every_partition_at_epoch_one(manager: ConsumerGroupManager) -> None:
    result = _join(manager, "a")
    assert (result.error, result.member_id, result.member_epoch) == (ErrorCode.NONE, "a", 1)
    assert result.heartbeat_interval_ms == 5_000
    assert result.assignment == {T: frozenset({0, 1, 2, 3})}


def test_a_v0_member_without_an_id_gets_one_from_the_coordinator(
    manager: ConsumerGroupManager,
) -> None:
    result = _join(manager, "", api_version=0)
    assert result.error == ErrorCode.NONE
    assert result.member_id


def test_a_v1_member_must_send_its_id(manager: ConsumerGroupManager) -> None:
    assert _join(manager, "").error == ErrorCode.INVALID_REQUEST


def test_a_join_without_a_subscription_is_invalid(manager: ConsumerGroupManager) -> None:
    assert _join(manager, "a", subscribed_topic_names=None).error == ErrorCode.INVALID_REQUEST


def test_an_unknown_server_assignor_is_refused(manager: ConsumerGroupManager) -> None:
    assert _join(manager, "a", server_assignor="sticky").error == ErrorCode.UNSUPPORTED_ASSIGNOR


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them(
    manager: ConsumerGroupManager,
) -> None:
    _join(manager, "a")
    joined = _join(manager, "b")
    assert (joined.member_epoch, joined.assignment) == (2, {})  # a still holds them all
    revoke = _beat(manager, "a", 1, {0, 1, 2, 3})
    assert revoke.member_epoch == 1
    assert revoke.assignment is not None and len(revoke.assignment[T]) == 2
    kept = set(revoke.assignment[T])
    done = _beat(manager, "a", 1, kept)
    assert done.member_epoch == 2
    got = _beat(manager, "b", 2, set())
    assert got.assignment == {T: frozenset({0, 1, 2, 3} - kept)}
    group = manager.get("g")
    assert group is not None and group.state == "Stable"


def test_a_known_member_sending_epoch_zero_again_keeps_its_epoch_and_partitions(
    manager: ConsumerGroupManager,
) -> None:
    first = _join(manager, "a")
    again = _join(manager, "a")
    assert (again.error, again.member_epoch) == (ErrorCode.NONE, first.member_epoch)
    assert again.assignment == first.assignment


def test_a_heartbeat_to_a_group_that_does_not_exist_is_group_id_not_found(
    manager: ConsumerGroupManager,
) -> None:
    assert _beat(manager, "a", 3, set()).error == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_member_ahead_of_the_coordinator_is_fenced(manager: ConsumerGroupManager) -> None:
    _join(manager, "a")
    assert _beat(manager, "a", 5, set()).error == ErrorCode.FENCED_MEMBER_EPOCH


def test_an_unknown_member_is_told_so(manager: ConsumerGroupManager) -> None:
    _join(manager, "a")
    assert _beat(manager, "x", 1, set()).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_leaving_gives_its_partitions_to_the_others(
    manager: ConsumerGroupManager,
) -> None:
    _join(manager, "a")
    _join(manager, "b")
    left = manager.heartbeat(HeartbeatRequest("g", "a", -1), _lookup)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    result = _beat(manager, "b", 2, set())
    assert result.assignment == {T: frozenset({0, 1, 2, 3})}
    assert result.member_epoch == 3


def test_a_member_without_heartbeats_is_removed_after_the_session_timeout(
    manager: ConsumerGroupManager, timer: ManualTimer
) -> None:
    _join(manager, "a")
    timer.advance(44_999)
    group = manager.get("g")
    assert group is not None and "a" in group.members
    timer.advance(1)
    assert group.members == {}
    assert group.state == "Empty"


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(
    manager: ConsumerGroupManager, timer: ManualTimer
) -> None:
    _join(manager, "a")
    _join(manager, "b")
    _beat(manager, "a", 1, {0, 1, 2, 3})  # asked to revoke two
    timer.advance(30_000)
    group = manager.get("g")
    assert group is not None and "a" not in group.members


def test_a_static_member_rejoining_takes_over_its_partitions(
    manager: ConsumerGroupManager,
) -> None:
    first = _join(manager, "a", instance_id="i1")
    left = manager.heartbeat(HeartbeatRequest("g", "a", -2, instance_id="i1"), _lookup)
    assert left.member_epoch == -2
    back = _join(manager, "a2", instance_id="i1")
    assert back.error == ErrorCode.NONE
    assert back.member_epoch == first.member_epoch
    assert back.assignment == first.assignment


def test_a_second_live_member_with_the_same_instance_id_is_refused(
    manager: ConsumerGroupManager,
) -> None:
    _join(manager, "a", instance_id="i1")
    assert _join(manager, "b", instance_id="i1").error == ErrorCode.UNRELEASED_INSTANCE_ID


def test_offset_commits_need_the_current_member_epoch(manager: ConsumerGroupManager) -> None:
    _join(manager, "a")
    group = manager.get("g")
    assert group is not None
    assert manager.validate_offset_commit(group, "a", 1, 9) == ErrorCode.NONE
    assert manager.validate_offset_commit(group, "a", 0, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert manager.validate_offset_commit(group, "x", 1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert manager.validate_offset_commit(group, "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_new_partition_of_a_subscribed_topic_bumps_the_group_epoch(
    manager: ConsumerGroupManager,
) -> None:
    _join(manager, "a")
    TOPICS["t"] = (T, 5)
    try:
        result = _beat(manager, "a", 1, {0, 1, 2, 3})
    finally:
        TOPICS["t"] = (T, 4)
    assert result.member_epoch == 2
    assert result.assignment == {T: frozenset({0, 1, 2, 3, 4})}


def test_a_regex_subscription_gets_the_partitions_of_every_matching_topic(
    manager: ConsumerGroupManager,
) -> None:
    other = uuid.UUID(int=12)
    found = {"t": (T, 4), "t-2": (other, 1), "x": (uuid.UUID(int=13), 1)}
    result = manager.heartbeat(
        HeartbeatRequest(
            "g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="t.*", owned={}
        ),
        found.get,
        lambda: list(found),
    )
    assert result.assignment == {T: frozenset({0, 1, 2, 3}), other: frozenset({0})}


def test_a_regex_re2_cannot_compile_is_invalid_regular_expression(
    manager: ConsumerGroupManager,
) -> None:
    result = _join(manager, "a", subscribed_topic_regex="(?<=a)b")
    assert result.error == ErrorCode.INVALID_REGULAR_EXPRESSION
