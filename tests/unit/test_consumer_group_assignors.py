"""The server-side assignors of consumer groups: ``uniform`` (balanced, sticky) and ``range``."""

from __future__ import annotations

import uuid

from samsa.coordinator.group.assignors import MemberSubscription, RangeAssignor, UniformAssignor

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def _all(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[tuple[uuid.UUID, int]]:
    return sorted(((t, p) for a in result.values() for t, ps in a.items() for p in ps), key=str)


def test_uniform_assigns_every_partition_once_and_balances_members() -> None:
    members = {m: MemberSubscription(frozenset({T1, T2})) for m in ("a", "b", "c")}
    result = UniformAssignor().assign(members, {T1: 4, T2: 3})
    assert sorted(_counts(result).values()) == [2, 2, 3]
    assert len(_all(result)) == 7
    assert len(set(_all(result))) == 7


def test_uniform_keeps_current_partitions_when_a_member_joins() -> None:
    before = UniformAssignor().assign({"a": MemberSubscription(frozenset({T1}))}, {T1: 6})
    members = {
        "a": MemberSubscription(frozenset({T1}), before["a"]),
        "b": MemberSubscription(frozenset({T1})),
    }
    after = UniformAssignor().assign(members, {T1: 6})
    assert _counts(after) == {"a": 3, "b": 3}
    assert after["a"][T1] <= before["a"][T1]  # a only gave partitions up


def test_uniform_gives_a_topic_only_to_its_subscribers() -> None:
    members = {
        "a": MemberSubscription(frozenset({T1})),
        "b": MemberSubscription(frozenset({T1, T2})),
    }
    result = UniformAssignor().assign(members, {T1: 2, T2: 2})
    assert T2 not in result["a"]
    assert result["b"][T2] == frozenset({0, 1})
    assert result["a"][T1] == frozenset({0, 1})


def test_uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() -> None:
    members = {
        "a": MemberSubscription(frozenset({T1}), {T1: frozenset({0, 5}), T2: frozenset({0})})
    }
    assert UniformAssignor().assign(members, {T1: 2, T2: 1}) == {"a": {T1: frozenset({0, 1})}}


def test_range_gives_contiguous_ranges_in_member_id_order() -> None:
    members = {m: MemberSubscription(frozenset({T1, T2})) for m in ("b", "a")}
    result = RangeAssignor().assign(members, {T1: 3, T2: 3})
    assert result["a"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["b"] == {T1: frozenset({2}), T2: frozenset({2})}


def test_range_leaves_a_member_beyond_the_partition_count_empty() -> None:
    members = {m: MemberSubscription(frozenset({T1})) for m in ("a", "b", "c")}
    assert RangeAssignor().assign(members, {T1: 2}) == {
        "a": {T1: frozenset({0})},
        "b": {T1: frozenset({1})},
        "c": {},
    }
