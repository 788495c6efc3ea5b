"""Consumer partition assignors: Kafka's documented assignments, stickiness, revoke-first.

A rebalance is simulated as a group does it: members send subscriptions (with the
partitions they own and their generation), the leader's assignor answers, and
in a follow-up rebalance every member owns what it was given, one generation on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData

from samsa.client.consumer import RebalanceProtocol, assignor_for
from samsa.client.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    group_partitions,
    ungroup_partitions,
)
from samsa.errors import ConfigError
from samsa.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    parse_assignment,
    parse_sticky_user_data,
)
from samsa.types import TopicPartition

Layout = dict[str, list[str]]  # member -> ["t0p1", ...]


def tp_name(tp: TopicPartition) -> str:
    return f"{tp.topic}p{tp.partition}"


def parse_tp(name: str) -> TopicPartition:
    topic, _, partition = name.rpartition("p")
    return TopicPartition(topic, int(partition))


def owned(names: Sequence[str]) -> TopicPartitions:
    return group_partitions(parse_tp(name) for name in names)


def subscribe(
    topics: Sequence[str], owns: Sequence[str] = (), generation: int = -1, version: int = 3
) -> Subscription:
    return Subscription(version, tuple(topics), None, owned(owns), generation, None)


def layout(assignments: Mapping[str, Assignment]) -> Layout:
    return {
        member: [tp_name(tp) for tp in ungroup_partitions(a.partitions)]
        for member, a in sorted(assignments.items())
    }


def follow_up(
    subscriptions: Mapping[str, Subscription], assignments: Mapping[str, Assignment]
) -> dict[str, Subscription]:
    """The next rebalance: every member owns what it was given, one generation on."""
    generation = max(sub.generation_id for sub in subscriptions.values()) + 1
    return {
        member: Subscription(
            sub.version, sub.topics, None, assignments[member].partitions, generation, None
        )
        for member, sub in subscriptions.items()
    }


TWO_TOPICS = {"t0": 3, "t1": 3}


# -- range -----------------------------------------------------------------------------------


def test_range_gives_each_member_consecutive_partitions_of_every_topic() -> None:
    subs = {"C0": subscribe(["t0", "t1"]), "C1": subscribe(["t0", "t1"])}
    assert layout(RangeAssignor().assign(TWO_TOPICS, subs)) == {
        "C0": ["t0p0", "t0p1", "t1p0", "t1p1"],
        "C1": ["t0p2", "t1p2"],
    }


def test_range_gives_the_extra_partitions_to_the_first_members_by_member_id() -> None:
    subs = {member: subscribe(["t"]) for member in ("m2", "m0", "m1")}
    assert layout(RangeAssignor().assign({"t": 7}, subs)) == {
        "m0": ["tp0", "tp1", "tp2"],
        "m1": ["tp3", "tp4"],
        "m2": ["tp5", "tp6"],
    }


def test_range_shares_a_topic_only_among_its_subscribers() -> None:
    subs = {"C0": subscribe(["t0"]), "C1": subscribe(["t0", "t1"])}
    assert layout(RangeAssignor().assign(TWO_TOPICS, subs)) == {
        "C0": ["t0p0", "t0p1"],
        "C1": ["t0p2", "t1p0", "t1p1", "t1p2"],
    }


def test_range_gives_an_empty_assignment_to_members_of_missing_topics_or_spare_members() -> None:
    subs = {"a": subscribe(["t"]), "b": subscribe(["t"]), "c": subscribe(["gone"])}
    assert layout(RangeAssignor().assign({"t": 1}, subs)) == {"a": ["tp0"], "b": [], "c": []}


# -- round robin -------------------------------------------------------------------------------


def test_roundrobin_deals_all_partitions_in_turn_when_subscriptions_are_equal() -> None:
    subs = {"C0": subscribe(["t0", "t1"]), "C1": subscribe(["t0", "t1"])}
    assert layout(RoundRobinAssignor().assign(TWO_TOPICS, subs)) == {
        "C0": ["t0p0", "t0p2", "t1p1"],
        "C1": ["t0p1", "t1p0", "t1p2"],
    }


def test_roundrobin_skips_members_not_subscribed_to_the_partitions_topic() -> None:
    # Kafka's RoundRobinAssignor documentation: t0 has 1 partition, t1 2 and t2 3.
    subs = {
        "C0": subscribe(["t0"]),
        "C1": subscribe(["t0", "t1"]),
        "C2": subscribe(["t0", "t1", "t2"]),
    }
    assert layout(RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)) == {
        "C0": ["t0p0"],
        "C1": ["t1p0"],
        "C2": ["t1p1", "t2p0", "t2p1", "t2p2"],
    }


# -- payloads and lookup -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_assignments_are_consumer_protocol_v3_payloads_for_every_member(name: str) -> None:
    subs = {"C0": subscribe(["t0"]), "C1": subscribe(["t1"]), "idle": subscribe(["none"])}
    assignments = assignor_for(name).assign(TWO_TOPICS, subs)
    assert set(assignments) == {"C0", "C1", "idle"}
    for assignment in assignments.values():
        assert parse_assignment(encode_assignment(assignment)) == assignment
        assert assignment.version == 3
    assert assignments["idle"].partitions == ()
    assert assignments["C1"].partitions == (("t1", (0, 1, 2)),)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("range", RangeAssignor),
        ("roundrobin", RoundRobinAssignor),
        ("sticky", StickyAssignor),
        ("cooperative-sticky", CooperativeStickyAssignor),
        ("org.apache.kafka.clients.consumer.RangeAssignor", RangeAssignor),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", CooperativeStickyAssignor),
    ],
)
def test_assignors_are_found_by_kafka_name_or_java_class_name(name: str, cls: type) -> None:
    assignor = assignor_for(name)
    assert isinstance(assignor, cls)
    assert assignor.name in name or cls.__name__ in name


def test_an_unknown_assignor_name_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="'fair'"):
        assignor_for("fair")


def test_only_cooperative_sticky_speaks_the_cooperative_protocol() -> None:
    protocols = {
        name: assignor_for(name).supported_protocols
        for name in ("range", "roundrobin", "sticky", "cooperative-sticky")
    }
    assert protocols == {
        "range": (RebalanceProtocol.EAGER,),
        "roundrobin": (RebalanceProtocol.EAGER,),
        "sticky": (RebalanceProtocol.EAGER,),
        "cooperative-sticky": (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER),
    }


def test_sticky_user_data_carries_the_previous_assignment_and_generation() -> None:
    data = StickyAssignor().subscription_user_data(owned(["t0p2", "t1p0"]), 7)
    assert data is not None
    assert parse_sticky_user_data(data) == (owned(["t0p2", "t1p0"]), 7)


def test_sticky_user_data_matches_kafka_python_byte_for_byte() -> None:
    ours = StickyAssignor().subscription_user_data(owned(["t0p2", "t0p0", "t1p1"]), 7)
    theirs = StickyAssignorUserData([("t0", [0, 2]), ("t1", [1])], 7).encode(header=False)
    assert ours == theirs


def test_sticky_user_data_without_a_generation_reads_as_generation_minus_one() -> None:
    v0 = StickyAssignorUserData([("t0", [1])], version=0).encode(header=False)
    assert parse_sticky_user_data(v0) == ((("t0", (1,)),), -1)


def test_cooperative_sticky_user_data_is_the_generation() -> None:
    assert CooperativeStickyAssignor().subscription_user_data(owned(["t0p0"]), 5) == (
        b"\x00\x00\x00\x05"
    )


# -- cooperative-sticky ------------------------------------------------------------------------


def coop(partitions: Mapping[str, int], subs: Mapping[str, Subscription]) -> Layout:
    return layout(CooperativeStickyAssignor().assign(partitions, subs))


@pytest.mark.parametrize(("members", "partitions"), [(2, 6), (3, 10), (4, 3), (5, 17)])
def test_cooperative_sticky_balances_equal_subscriptions(members: int, partitions: int) -> None:
    subs = {f"m{i}": subscribe(["t"]) for i in range(members)}
    counts = [len(p) for p in coop({"t": partitions}, subs).values()]
    assert sum(counts) == partitions
    assert max(counts) - min(counts) <= 1


def test_cooperative_sticky_keeps_every_member_s_partitions_when_nothing_changed() -> None:
    subs = {
        "a": subscribe(["t"], ["tp5", "tp0"], generation=3),
        "b": subscribe(["t"], ["tp1", "tp3"], generation=3),
        "c": subscribe(["t"], ["tp2", "tp4"], generation=3),
    }
    assert coop({"t": 6}, subs) == {"a": ["tp0", "tp5"], "b": ["tp1", "tp3"], "c": ["tp2", "tp4"]}


def test_cooperative_sticky_hands_a_leaving_member_s_partitions_to_the_others() -> None:
    subs = {
        "a": subscribe(["t"], ["tp0", "tp3"], generation=3),
        "b": subscribe(["t"], ["tp1", "tp4"], generation=3),
    }
    result = coop({"t": 6}, subs)  # c, which owned tp2 and tp5, left
    assert {"tp0", "tp3"} <= set(result["a"])
    assert {"tp1", "tp4"} <= set(result["b"])
    assert sorted(result["a"] + result["b"]) == [f"tp{i}" for i in range(6)]


def test_cooperative_sticky_revokes_a_moving_partition_before_assigning_it() -> None:
    everything = [f"t{t}p{p}" for t in range(2) for p in range(3)]
    subs = {"C0": subscribe(["t0", "t1"], everything, generation=1), "C1": subscribe(["t0", "t1"])}
    first = CooperativeStickyAssignor().assign(TWO_TOPICS, subs)
    # C0 keeps half; the other half leaves C0 but is not yet given to C1.
    assert layout(first) == {"C0": ["t0p0", "t0p1", "t0p2"], "C1": []}
    second = CooperativeStickyAssignor().assign(TWO_TOPICS, follow_up(subs, first))
    assert layout(second) == {"C0": ["t0p0", "t0p1", "t0p2"], "C1": ["t1p0", "t1p1", "t1p2"]}


def test_cooperative_sticky_lets_the_newer_generation_keep_a_partition_claimed_twice() -> None:
    subs = {
        "new": subscribe(["t"], ["tp0", "tp1"], generation=5),
        "stale": subscribe(["t"], ["tp0"], generation=4),
    }
    result = coop({"t": 2}, subs)
    assert "tp0" in result["new"]
    assert "tp0" not in result["stale"]


def test_cooperative_sticky_withholds_a_partition_two_members_claim_in_one_generation() -> None:
    subs = {
        "a": subscribe(["t"], ["tp0", "tp1"], generation=2),
        "b": subscribe(["t"], ["tp1", "tp2"], generation=2),
    }
    first = CooperativeStickyAssignor().assign({"t": 4}, subs)
    assert all("tp1" not in partitions for partitions in layout(first).values())
    second = layout(CooperativeStickyAssignor().assign({"t": 4}, follow_up(subs, first)))
    assert sorted(second["a"] + second["b"]) == ["tp0", "tp1", "tp2", "tp3"]


def test_cooperative_sticky_reads_the_generation_from_user_data_of_v1_subscriptions() -> None:
    user_data = CooperativeStickyAssignor().subscription_user_data
    subs = {
        member: Subscription(1, ("t",), user_data((), generation), owned(["tp0"]), -1, None)
        for member, generation in (("old", 1), ("current", 2))
    }
    assert coop({"t": 1}, subs) == {"current": ["tp0"], "old": []}


def test_cooperative_sticky_waits_for_a_member_that_unsubscribed_to_revoke() -> None:
    subs = {
        "a": subscribe(["t0"], ["t0p0", "t1p0"], generation=1),
        "b": subscribe(["t0", "t1"], ["t0p1"], generation=1),
    }
    first = CooperativeStickyAssignor().assign({"t0": 2, "t1": 1}, subs)
    assert layout(first) == {"a": ["t0p0"], "b": ["t0p1"]}
    second = CooperativeStickyAssignor().assign({"t0": 2, "t1": 1}, follow_up(subs, first))
    assert layout(second) == {"a": ["t0p0"], "b": ["t0p1", "t1p0"]}


def test_cooperative_sticky_gives_unshared_topics_to_their_only_subscriber() -> None:
    subs = {"C0": subscribe(["t0"]), "C1": subscribe(["t0", "t1"])}
    result = coop(TWO_TOPICS, subs)
    assert result == {"C0": ["t0p0", "t0p1", "t0p2"], "C1": ["t1p0", "t1p1", "t1p2"]}


# -- sticky, different subscriptions -----------------------------------------------------------

# Kafka's StickyAssignor documentation: t0 has 1 partition, t1 2 and t2 3.
THREE_TOPICS = {"t0": 1, "t1": 2, "t2": 3}


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_sticky_balances_different_subscriptions_as_kafka_documents(name: str) -> None:
    subs = {
        "C0": subscribe(["t0"]),
        "C1": subscribe(["t0", "t1"]),
        "C2": subscribe(["t0", "t1", "t2"]),
    }
    assert layout(assignor_for(name).assign(THREE_TOPICS, subs)) == {
        "C0": ["t0p0"],
        "C1": ["t1p0", "t1p1"],
        "C2": ["t2p0", "t2p1", "t2p2"],
    }


def test_cooperative_sticky_keeps_assignments_when_a_member_of_other_topics_leaves() -> None:
    subs = {
        "C1": subscribe(["t0", "t1"], ["t1p0", "t1p1"], generation=2),
        "C2": subscribe(["t0", "t1", "t2"], ["t2p0", "t2p1", "t2p2"], generation=2),
    }
    assert coop(THREE_TOPICS, subs) == {
        "C1": ["t0p0", "t1p0", "t1p1"],
        "C2": ["t2p0", "t2p1", "t2p2"],
    }


def test_sticky_moves_owned_partitions_to_a_member_only_they_can_balance() -> None:
    def previous(names: Sequence[str]) -> bytes | None:
        return StickyAssignor().subscription_user_data(owned(names), 4)

    everything = ["t0p0", "t0p1", "t0p2", "t0p3", "t1p0", "t1p1"]
    subs = {
        "narrow": Subscription(0, ("t0",), previous([]), (), -1, None),
        "wide": Subscription(0, ("t0", "t1"), previous(everything), (), -1, None),
    }
    result = layout(StickyAssignor().assign({"t0": 4, "t1": 2}, subs))
    assert len(result["narrow"]) == 3
    assert len(result["wide"]) == 3
    assert {"t1p0", "t1p1"} <= set(result["wide"])


# -- eager sticky ------------------------------------------------------------------------------


def test_sticky_keeps_previous_assignments_and_moves_partitions_in_one_rebalance() -> None:
    def previous(names: Sequence[str]) -> bytes | None:
        return StickyAssignor().subscription_user_data(owned(names), 4)

    subs = {
        "a": Subscription(0, ("t",), previous(["tp0", "tp1", "tp2", "tp3"]), (), -1, None),
        "b": Subscription(0, ("t",), previous([]), (), -1, None),
    }
    result = layout(StickyAssignor().assign({"t": 4}, subs))
    assert result == {"a": ["tp0", "tp1"], "b": ["tp2", "tp3"]}


def test_sticky_treats_unreadable_user_data_as_no_previous_assignment() -> None:
    subs = {"a": Subscription(0, ("t",), b"\x00\x00\x00\x09", (), -1, None)}
    assert layout(StickyAssignor().assign({"t": 2}, subs)) == {"a": ["tp0", "tp1"]}


# -- properties --------------------------------------------------------------------------------


@st.composite
def groups(draw: st.DrawFn, equal: bool) -> tuple[dict[str, int], dict[str, Subscription]]:
    """Topics and members whose owned partitions may be stale, overlapping or unsubscribed."""
    topics = {f"t{i}": draw(st.integers(0, 8)) for i in range(draw(st.integers(1, 3)))}
    everything = [TopicPartition(t, p) for t, n in topics.items() for p in range(n + 1)]
    members = draw(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=6, unique=True))
    shared = sorted(topics)
    subs = {}
    for member in members:
        subscribed = shared
        if not equal:
            subscribed = draw(st.lists(st.sampled_from(shared), min_size=1, unique=True))
        owns = draw(st.lists(st.sampled_from(everything), max_size=8)) if everything else []
        generation = draw(st.integers(-1, 3))
        subs[member] = Subscription(
            3, tuple(subscribed), None, group_partitions(owns), generation, None
        )
    return topics, subs


def assigned_partitions(assignments: Mapping[str, Assignment]) -> Counter[TopicPartition]:
    return Counter(tp for a in assignments.values() for tp in ungroup_partitions(a.partitions))


def subscribable(
    topics: Mapping[str, int], subs: Mapping[str, Subscription]
) -> set[TopicPartition]:
    return {
        TopicPartition(topic, p)
        for sub in subs.values()
        for topic in sub.topics
        for p in range(topics[topic])
    }


@settings(max_examples=300, deadline=None)
@given(groups(equal=False), st.sampled_from(["range", "roundrobin", "sticky"]))
def test_eager_assignors_assign_every_subscribed_partition_once(
    group: tuple[dict[str, int], dict[str, Subscription]], name: str
) -> None:
    topics, subs = group
    assignments = assignor_for(name).assign(topics, subs)
    assert assigned_partitions(assignments) == Counter(subscribable(topics, subs))
    for member, assignment in assignments.items():
        assert {topic for topic, _ in assignment.partitions} <= set(subs[member].topics)


@settings(max_examples=300, deadline=None)
@given(groups(equal=False))
def test_cooperative_sticky_never_gives_a_partition_another_member_may_still_own(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    topics, subs = group
    assignments = CooperativeStickyAssignor().assign(topics, subs)
    assert max(assigned_partitions(assignments).values(), default=1) == 1
    claims = {m: set(ungroup_partitions(sub.owned_partitions)) for m, sub in subs.items()}
    for member, assignment in assignments.items():
        assert {topic for topic, _ in assignment.partitions} <= set(subs[member].topics)
        for tp in ungroup_partitions(assignment.partitions):
            if any(tp in claims[m] for m in subs if m != member):
                assert tp in claims[member]  # kept, never handed over while still owned


@settings(max_examples=300, deadline=None)
@given(groups(equal=True))
def test_cooperative_sticky_assigns_everything_balanced_after_the_follow_up_rebalance(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    topics, subs = group
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(topics, subs)
    second_round = follow_up(subs, first)
    second = assignor.assign(topics, second_round)
    assert assigned_partitions(second) == Counter(subscribable(topics, subs))
    counts = [len(ungroup_partitions(a.partitions)) for a in second.values()]
    assert max(counts) - min(counts) <= 1
    # Stable from then on: nothing moves while nothing changes.
    assert assignor.assign(topics, follow_up(second_round, second)) == second


@settings(max_examples=300, deadline=None)
@given(groups(equal=False))
def test_cooperative_sticky_settles_on_everything_assigned_when_subscriptions_differ(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    # Balancing may move a partition again in the follow-up round; a search over
    # 20 000 groups found none needing more than two follow-ups.
    topics, subs = group
    assignor = CooperativeStickyAssignor()
    assignments = assignor.assign(topics, subs)
    for _ in range(2):
        subs = follow_up(subs, assignments)
        assignments = assignor.assign(topics, subs)
    assert assigned_partitions(assignments) == Counter(subscribable(topics, subs))
    assert assignor.assign(topics, follow_up(subs, assignments)) == assignments


class _Cluster:
    """The one method of kafka-python's ClusterMetadata its assignors call."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self.topics = topics

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.topics[topic])) if topic in self.topics else None


@settings(max_examples=200, deadline=None)
@given(groups(equal=False))
def test_range_agrees_with_kafka_python(
    group: tuple[dict[str, int], dict[str, Subscription]],
) -> None:
    # Not round robin: kafka-python 3.0.12's skips a member by taking the next
    # (instance id, member id) pair as a member id, and raises KeyError.
    topics, subs = group
    members = [
        SimpleNamespace(
            member_id=m, group_instance_id=None, metadata=SimpleNamespace(topics=s.topics)
        )
        for m, s in subs.items()
    ]
    theirs = RangePartitionAssignor.assign(_Cluster(topics), members)
    expected = {
        member: sorted(
            TopicPartition(topic, p)
            for topic, partitions in a.assigned_partitions
            for p in partitions
        )
        for member, a in theirs.items()
    }
    ours = RangeAssignor().assign(topics, subs)
    assert {m: ungroup_partitions(a.partitions) for m, a in ours.items()} == expected
