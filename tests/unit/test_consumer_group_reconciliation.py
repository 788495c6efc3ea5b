"""A consumer-group member moving to its target assignment: revoke before assign."""

from __future__ import annotations

import uuid

from samsa.coordinator.group.reconciliation import MemberAssignmentState, MemberState, reconcile

T = uuid.UUID(int=7)


def _free(topic: uuid.UUID, partition: int) -> int:
    return -1


def _state(
    epoch: int, assigned: set[int], state: MemberState = MemberState.STABLE
) -> MemberAssignmentState:
    return MemberAssignmentState(
        epoch, epoch - 1, state, {T: frozenset(assigned)} if assigned else {}
    )


def test_a_stable_member_at_the_target_epoch_stays_as_it_is() -> None:
    current = _state(3, {0, 1})
    assert reconcile(current, 3, {T: frozenset({0})}, _free, None) is current


def test_free_new_partitions_are_assigned_at_the_target_epoch() -> None:
    new = reconcile(_state(1, {0}), 2, {T: frozenset({0, 1})}, _free, {T: frozenset({0})})
    assert (new.member_epoch, new.previous_member_epoch, new.state) == (2, 1, MemberState.STABLE)
    assert new.assigned == {T: frozenset({0, 1})}


def test_partitions_to_give_up_are_revoked_first_at_the_same_epoch() -> None:
    new = reconcile(_state(1, {0, 1}), 2, {T: frozenset({0, 2})}, _free, {T: frozenset({0, 1})})
    assert new.state == MemberState.UNREVOKED_PARTITIONS
    assert new.member_epoch == 1
    assert new.assigned == {T: frozenset({0})}  # 2 is not given before 1 is revoked
    assert new.pending_revocation == {T: frozenset({1})}


def test_a_member_still_owning_revoked_partitions_waits() -> None:
    revoking = MemberAssignmentState(
        1, 0, MemberState.UNREVOKED_PARTITIONS, {T: frozenset({0})}, {T: frozenset({1})}
    )
    assert reconcile(revoking, 2, {T: frozenset({0, 2})}, _free, {T: frozenset({0, 1})}) is revoking


def test_once_revoked_the_member_moves_to_the_target_epoch_with_its_new_partitions() -> None:
    revoking = MemberAssignmentState(
        1, 0, MemberState.UNREVOKED_PARTITIONS, {T: frozenset({0})}, {T: frozenset({1})}
    )
    new = reconcile(revoking, 2, {T: frozenset({0, 2})}, _free, {T: frozenset({0})})
    assert (new.member_epoch, new.state) == (2, MemberState.STABLE)
    assert new.assigned == {T: frozenset({0, 2})}
    assert new.pending_revocation == {}


def test_a_partition_another_member_still_holds_is_not_given_yet() -> None:
    def held(topic: uuid.UUID, partition: int) -> int:
        return 4 if partition == 1 else -1

    new = reconcile(_state(4, {0}), 5, {T: frozenset({0, 1})}, held, {T: frozenset({0})})
    assert (new.member_epoch, new.state) == (5, MemberState.UNRELEASED_PARTITIONS)
    assert new.assigned == {T: frozenset({0})}
    released = reconcile(new, 5, {T: frozenset({0, 1})}, _free, {T: frozenset({0})})
    assert (released.state, released.assigned) == (MemberState.STABLE, {T: frozenset({0, 1})})
