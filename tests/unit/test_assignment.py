"""Replica assignment for new topics: Kafka's round robin with shifted followers, and racks."""

from __future__ import annotations

from collections import Counter

import pytest

from samsa.cluster.assignment import assign_replicas, rack_alternated
from samsa.errors import InvalidReplicationFactorError, InvalidRequestError

FIVE = {broker: None for broker in range(5)}


def test_first_replicas_go_round_robin_and_followers_shift_each_round() -> None:
    # Kafka's documented example: 5 brokers, 10 partitions, 3 replicas, start 0.
    assignment = assign_replicas(FIVE, 10, 3, start=0, shift=0)
    assert [replicas[0] for replicas in assignment.values()] == [0, 1, 2, 3, 4] * 2
    assert assignment[0] == (0, 1, 2)
    assert assignment[4] == (4, 0, 1)
    assert assignment[5] == (0, 2, 3)  # the second round shifts the followers by one more
    assert assignment[9] == (4, 1, 2)


def test_every_partition_gets_distinct_replicas_and_brokers_share_the_load() -> None:
    assignment = assign_replicas({1: None, 2: None, 3: None}, 30, 3)
    assert all(len(set(replicas)) == 3 for replicas in assignment.values())
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert sorted(leaders.values()) == [10, 10, 10]


def test_added_partitions_continue_the_round_robin() -> None:
    whole = assign_replicas(FIVE, 8, 2, start=1, shift=3)
    tail = assign_replicas(FIVE, 3, 2, first_partition=5, start=1, shift=3)
    assert {p: whole[p] for p in (5, 6, 7)} == tail


def test_brokers_are_alternated_by_rack() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_assignment_puts_each_replica_on_another_rack() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assignment = assign_replicas(racks, 7, 3, start=0, shift=0)
    assert assignment[0] == (0, 3, 1)
    assert assignment[5] == (2, 0, 3)
    assert assignment[6] == (0, 4, 2)  # Kafka's example: no repeat of partition 0's set
    for replicas in assignment.values():
        assert len({racks[broker] for broker in replicas}) == 3


def test_more_replicas_than_racks_still_uses_every_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_replicas(racks, 8, 3).values():
        assert {racks[broker] for broker in replicas} == {"a", "b"}
        assert len(set(replicas)) == 3


def test_a_replication_factor_above_the_broker_count_is_refused() -> None:
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas({1: None, 2: None}, 1, 3)


def test_racks_on_only_some_brokers_are_refused() -> None:
    with pytest.raises(InvalidRequestError):
        assign_replicas({1: "a", 2: None}, 1, 1)
