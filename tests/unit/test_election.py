"""Leader election and ISR shrinking: who leads a partition after a broker dies or returns."""

from __future__ import annotations

from samsa.cluster.election import (
    elect_offline_leader,
    elect_unclean_leader,
    initial_state,
    move_leadership_away,
    remove_replica_from_isr,
)
from samsa.cluster.zk_data import NO_LEADER, LeaderAndIsr

REPLICAS = (1, 2, 3)
EPOCH = 7  # controller epoch


def state(leader: int, isr: tuple[int, ...], leader_epoch: int = 4) -> LeaderAndIsr:
    return LeaderAndIsr(leader, leader_epoch, isr, controller_epoch=6, zk_version=11)


def test_a_new_partition_is_led_by_its_first_live_replica_with_the_live_ones_in_sync() -> None:
    assert initial_state(REPLICAS, {2, 3}, EPOCH) == LeaderAndIsr(2, 0, (2, 3), EPOCH)
    assert initial_state(REPLICAS, set(), EPOCH).leader == NO_LEADER


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_assignment_order() -> None:
    after = elect_offline_leader(REPLICAS, state(1, (3, 1, 2)), {2, 3}, EPOCH)
    assert after == LeaderAndIsr(2, 5, (3, 2), EPOCH, zk_version=11)


def test_a_live_replica_outside_the_isr_never_leads_without_unclean_election() -> None:
    after = elect_offline_leader(REPLICAS, state(1, (1,)), {2, 3}, EPOCH)
    assert after == LeaderAndIsr(NO_LEADER, 5, (1,), EPOCH, zk_version=11)


def test_unclean_election_takes_the_first_live_replica_with_an_isr_of_itself() -> None:
    after = elect_offline_leader(REPLICAS, state(1, (1,)), {3, 2}, EPOCH, unclean=True)
    assert after == LeaderAndIsr(2, 5, (2,), EPOCH, zk_version=11)


def test_an_offline_partition_keeps_its_isr_until_a_member_returns() -> None:
    offline = state(NO_LEADER, (1, 2))
    assert elect_offline_leader(REPLICAS, offline, {3}, EPOCH) is None
    assert elect_offline_leader(REPLICAS, offline, {2, 3}, EPOCH) == LeaderAndIsr(
        2, 5, (2,), EPOCH, zk_version=11
    )


def test_a_partition_whose_leader_lives_is_left_alone() -> None:
    assert elect_offline_leader(REPLICAS, state(3, (1, 2, 3)), {1, 2, 3}, EPOCH) is None


def test_a_dead_follower_leaves_the_isr_and_the_epoch_moves() -> None:
    after = remove_replica_from_isr(REPLICAS, state(1, (1, 2, 3)), 3, {1, 2}, EPOCH)
    assert after == LeaderAndIsr(1, 5, (1, 2), EPOCH, zk_version=11)


def test_a_dead_leader_leaving_the_isr_hands_leadership_on() -> None:
    after = remove_replica_from_isr(REPLICAS, state(1, (1, 3)), 1, {2, 3}, EPOCH)
    assert after == LeaderAndIsr(3, 5, (3,), EPOCH, zk_version=11)


def test_the_last_isr_member_dying_takes_the_partition_offline_and_stays_in_the_isr() -> None:
    after = remove_replica_from_isr(REPLICAS, state(1, (1,)), 1, {2, 3}, EPOCH)
    assert after == LeaderAndIsr(NO_LEADER, 5, (1,), EPOCH, zk_version=11)


def test_a_broker_outside_the_isr_going_offline_changes_nothing() -> None:
    assert remove_replica_from_isr(REPLICAS, state(1, (1, 2)), 3, {1, 2}, EPOCH) is None


def test_a_stopping_leader_hands_over_to_the_first_live_isr_member_and_leaves_the_isr() -> None:
    after = remove_replica_from_isr(
        REPLICAS, state(1, (3, 1, 2)), 1, {2, 3}, EPOCH, controlled=True
    )
    assert after == LeaderAndIsr(2, 5, (3, 2), EPOCH, zk_version=11)
    assert move_leadership_away(REPLICAS, state(1, (1, 3)), {2, 3}, EPOCH) == LeaderAndIsr(
        3, 5, (3,), EPOCH, zk_version=11
    )


def test_a_stopping_leader_with_no_other_live_isr_member_leads_on_until_it_stops() -> None:
    # Never offline early, never outside the ISR (unclean or not): it leads until its
    # session ends, and then the partition goes offline as for any last ISR member.
    for unclean in (False, True):
        alone = remove_replica_from_isr(
            REPLICAS, state(1, (1,)), 1, {2, 3}, EPOCH, unclean=unclean, controlled=True
        )
        assert alone is None
    assert move_leadership_away(REPLICAS, state(1, (1, 2)), {3}, EPOCH) is None


def test_a_stopping_follower_leaves_the_isr() -> None:
    after = remove_replica_from_isr(REPLICAS, state(1, (1, 2, 3)), 3, {1, 2}, EPOCH,
                                    controlled=True)  # fmt: skip
    assert after == LeaderAndIsr(1, 5, (1, 2), EPOCH, zk_version=11)


def test_a_last_isr_member_back_without_its_log_does_not_lead_and_the_partition_stays_offline() -> (
    None
):
    offline = state(NO_LEADER, (1,))
    assert elect_offline_leader(REPLICAS, offline, {1, 2, 3}, EPOCH, lost={1}) is None
    # Named leader by a state from before it lost its log: deposed, ISR kept.
    stale = state(1, (1,))
    after = elect_offline_leader(REPLICAS, stale, {1, 2, 3}, EPOCH, lost={1})
    assert after == LeaderAndIsr(NO_LEADER, 5, (1,), EPOCH, zk_version=11)


def test_an_isr_member_back_without_its_log_leaves_the_isr_and_another_member_leads() -> None:
    after = elect_offline_leader(REPLICAS, state(1, (1, 2)), {1, 2, 3}, EPOCH, lost={1})
    assert after == LeaderAndIsr(2, 5, (2,), EPOCH, zk_version=11)


def test_an_unclean_election_prefers_a_replica_that_kept_its_log() -> None:
    offline = state(NO_LEADER, (1,))
    after = elect_offline_leader(REPLICAS, offline, {1, 2, 3}, EPOCH, unclean=True, lost={1})
    assert after == LeaderAndIsr(2, 5, (2,), EPOCH, zk_version=11)
    by_request = elect_unclean_leader(REPLICAS, offline, {1, 2, 3}, EPOCH, lost={1})
    assert by_request == LeaderAndIsr(2, 5, (2,), EPOCH, zk_version=11)
    # Every live replica lost it: the operator's choice takes one of them.
    alone = elect_offline_leader(REPLICAS, offline, {1, 3}, EPOCH, unclean=True, lost={1, 3})
    assert alone == LeaderAndIsr(1, 5, (1,), EPOCH, zk_version=11)
