"""Group administration through kafka-python's ``KafkaAdminClient`` and confluent-kafka's
``AdminClient`` against a real broker process: ListGroups, DescribeGroups, OffsetFetch,
OffsetDelete, DeleteGroups, admin OffsetCommit and batched LeaveGroup, and all of it
again after a broker restart.

confluent-kafka 2.16 has no call for OffsetDelete, so deleting offsets goes through
kafka-python only. Groups with members are held by kafka-python consumers, whose
heartbeats run in the client's own I/O thread: once joined they need no polling.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, MemberToRemove
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
    UnknownMemberIdError,
)
from kafka.structs import OffsetAndMetadata

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
PARTITIONS = 4
TIMEOUT_S = 10
DEADLINE_S = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("group-admin") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def names(broker: BrokerProcess) -> tuple[str, str]:
    """A fresh topic of four partitions and a fresh group name."""
    suffix = uuid.uuid4().hex[:8]
    topic = f"admin-groups-{suffix}"
    _create_topic(broker.bootstrap, topic)
    return topic, f"group-{suffix}"


@pytest.fixture
def kafka_python_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        yield admin
    finally:
        admin.close()


@pytest.fixture
def confluent_admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


@pytest.fixture
def members(broker: BrokerProcess) -> Iterator[Callable[..., list[KafkaConsumer]]]:
    """Start members of a group and wait until they share the topic; closed at teardown."""
    started: list[KafkaConsumer] = []

    def start(group: str, topic: str, count: int = 1, instance: str | None = None) -> list[Any]:
        for i in range(count):
            started.append(_member(broker.bootstrap, group, topic, f"member-{i}", instance))
        consumers = started[-count:]
        _poll_until_split(consumers)
        return consumers

    try:
        yield start
    finally:
        for consumer in started:
            consumer.close()


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT_S)


def _member(
    bootstrap: str, group: str, topic: str, client_id: str, instance: str | None
) -> KafkaConsumer:
    """A kafka-python consumer subscribed to ``topic``, with the topic's metadata in hand.

    kafka-python 3.0.12 needs two workarounds for steady groups (see
    ``test_groups_python_clients._kafka_python_member``): ``topics()`` after
    ``subscribe()``, so a leader does not rejoin when its metadata arrives late, and
    polls long enough for a leader's JoinGroup + SyncGroup round trip.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        group_instance_id=instance,
        enable_auto_commit=False,
        partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    consumer.subscribe([topic])
    assert topic in consumer.topics()
    assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
    return consumer


def _poll_until_split(consumers: list[KafkaConsumer]) -> None:
    """Poll every consumer until each owns an equal share and together they own all."""
    share = PARTITIONS // len(consumers)

    def split() -> bool:
        owned = [c.assignment() for c in consumers]
        return all(len(a) == share for a in owned) and len(set().union(*owned)) == PARTITIONS

    wait_until(
        split,
        lambda: f"members to split the partitions: {[c.assignment() for c in consumers]}",
        timeout=DEADLINE_S,
        step=lambda: [consumer.poll(timeout_ms=200) for consumer in consumers],
    )


def _commit_without_members(
    bootstrap: str, group: str, offsets: dict[tuple[str, int], int]
) -> None:
    """Commit from a consumer that never joins: the group exists, Empty, with no protocol."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({
            KafkaTopicPartition(topic, partition): OffsetAndMetadata(offset, f"m{offset}", -1)
            for (topic, partition), offset in offsets.items()
        })  # fmt: skip
    finally:
        consumer.close()


def _listed(admin: KafkaAdminClient, *groups: str, **filters: Any) -> dict[str, tuple[str, str]]:
    """``{group: (protocol_type, state)}`` of the named groups that ListGroups answers."""
    return {
        g["group_id"]: (g["protocol_type"], g["group_state"])
        for g in admin.list_groups(**filters)
        if g["group_id"] in groups
    }


def _offsets(admin: KafkaAdminClient, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    found = admin.list_group_offsets({group: None})[group]
    return {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in found.items()}


def _wait_for_state(admin: KafkaAdminClient, group: str, state: str) -> dict[str, Any]:
    def in_state() -> dict[str, Any] | None:
        described: dict[str, Any] = admin.describe_groups([group])[group]
        return described if described["group_state"] == state else None

    return wait_until(in_state, f"{group} to be {state}", timeout=DEADLINE_S, interval=0.02)


def _confluent_error(future: Any) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    return int(error.code())


# -- ListGroups ---------------------------------------------------------------------------------


def test_listed_groups_show_state_and_protocol_type(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    broker: BrokerProcess,
) -> None:
    topic, active = names
    committed_only = f"{active}-offsets-only"
    members(active, topic)
    _commit_without_members(broker.bootstrap, committed_only, {(topic, 0): 5})

    assert _listed(kafka_python_admin, active, committed_only) == {
        active: ("consumer", "Stable"),
        committed_only: ("", "Empty"),
    }
    listing = confluent_admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert listing.errors == []
    found = {
        g.group_id: (g.state, g.is_simple_consumer_group)
        for g in listing.valid
        if g.group_id in (active, committed_only)
    }
    assert found == {
        active: (ConsumerGroupState.STABLE, False),
        committed_only: (ConsumerGroupState.EMPTY, True),
    }


def test_states_filter_lists_only_groups_in_those_states(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    broker: BrokerProcess,
) -> None:
    topic, active = names
    idle = f"{active}-idle"
    members(active, topic)
    _commit_without_members(broker.bootstrap, idle, {(topic, 0): 1})

    stable = confluent_admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(
        TIMEOUT_S
    )
    stable_ids = {g.group_id for g in stable.valid}
    assert active in stable_ids
    assert idle not in stable_ids
    assert {g.state for g in stable.valid} == {ConsumerGroupState.STABLE}

    empty = _listed(kafka_python_admin, active, idle, states_filter=["Empty"])
    assert empty == {idle: ("", "Empty")}


# -- DescribeGroups -----------------------------------------------------------------------------


def test_describe_shows_each_members_client_host_and_assignment(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
) -> None:
    topic, group = names
    consumers = members(group, topic, count=2)
    owned = {
        c.config["client_id"]: sorted(tp.partition for tp in c.assignment()) for c in consumers
    }

    described = kafka_python_admin.describe_groups([group])[group]
    assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == (
        "Stable",
        "consumer",
        "range",
    )
    assert described["error"] is None
    by_client = {}
    for member in described["members"]:
        assert member["client_host"] == "/127.0.0.1"
        assert member["member_metadata"]["topics"] == [topic]
        [assigned] = member["member_assignment"]["assigned_partitions"]
        assert assigned["topic"] == topic
        by_client[member["client_id"]] = sorted(assigned["partitions"])
    assert by_client == owned

    description = confluent_admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
    assert (description.state, description.partition_assignor) == (
        ConsumerGroupState.STABLE,
        "range",
    )
    assert not description.is_simple_consumer_group
    assert {m.member_id for m in description.members} == {
        m["member_id"] for m in described["members"]
    }
    assert {m.host for m in description.members} == {"/127.0.0.1"}
    assert {
        m.client_id: sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for m in description.members
    } == {client: [(topic, p) for p in partitions] for client, partitions in owned.items()}


def test_describing_an_unknown_group_answers_dead(
    kafka_python_admin: KafkaAdminClient, confluent_admin: AdminClient
) -> None:
    described = kafka_python_admin.describe_groups(["no-such-group"])["no-such-group"]
    assert (described["group_state"], described["members"], described["error"]) == (
        "Dead",
        [],
        None,
    )
    future = confluent_admin.describe_consumer_groups(["no-such-group"])["no-such-group"]
    description = future.result(TIMEOUT_S)
    assert (description.state, description.members) == (ConsumerGroupState.DEAD, [])


# -- OffsetFetch --------------------------------------------------------------------------------


def test_committed_offsets_are_listed_with_their_metadata(
    names: tuple[str, str],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    broker: BrokerProcess,
) -> None:
    topic, group = names
    _commit_without_members(broker.bootstrap, group, {(topic, 0): 7, (topic, 2): 11})

    assert _offsets(kafka_python_admin, group) == {(topic, 0): (7, "m7"), (topic, 2): (11, "m11")}
    request = [ConsumerGroupTopicPartitions(group)]
    listed = confluent_admin.list_consumer_group_offsets(request)[group].result(TIMEOUT_S)
    # Not ``tp.metadata``: confluent-kafka 2.16 reads it as a NUL-terminated C string, but
    # librdkafka's copy of a fetched metadata string has no NUL, so bytes past it leak in.
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions) == [
        (topic, 0, 7),
        (topic, 2, 11),
    ]


# -- OffsetDelete -------------------------------------------------------------------------------


def test_deleting_offsets_of_an_empty_group_removes_them(
    names: tuple[str, str], kafka_python_admin: KafkaAdminClient, broker: BrokerProcess
) -> None:
    topic, group = names
    _commit_without_members(broker.bootstrap, group, {(topic, 0): 3, (topic, 1): 4})

    tp0 = KafkaTopicPartition(topic, 0)
    assert kafka_python_admin.delete_group_offsets(group, [tp0]) == {tp0: NoError}
    assert _offsets(kafka_python_admin, group) == {(topic, 1): (4, "m4")}


def test_deleting_offsets_of_a_subscribed_topic_is_refused_for_those_partitions(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
    broker: BrokerProcess,
) -> None:
    topic, group = names
    other = f"{topic}-other"
    _create_topic(broker.bootstrap, other)
    _commit_without_members(broker.bootstrap, group, {(topic, 0): 3, (other, 0): 9})
    members(group, topic)  # subscribed to ``topic`` only

    subscribed, unsubscribed = KafkaTopicPartition(topic, 0), KafkaTopicPartition(other, 0)
    results = kafka_python_admin.delete_group_offsets(group, [subscribed, unsubscribed])
    assert results == {subscribed: GroupSubscribedToTopicError, unsubscribed: NoError}
    assert _offsets(kafka_python_admin, group) == {(topic, 0): (3, "m3")}


def test_deleting_offsets_of_an_unknown_group_is_group_id_not_found(
    kafka_python_admin: KafkaAdminClient, names: tuple[str, str]
) -> None:
    topic, _ = names
    with pytest.raises(GroupIdNotFoundError):
        kafka_python_admin.delete_group_offsets("no-such-group", [KafkaTopicPartition(topic, 0)])


# -- DeleteGroups -------------------------------------------------------------------------------


def test_deleting_an_empty_group_removes_it_and_its_offsets(
    names: tuple[str, str],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    broker: BrokerProcess,
) -> None:
    topic, group = names
    _commit_without_members(broker.bootstrap, group, {(topic, 0): 3, (topic, 3): 8})

    assert confluent_admin.delete_consumer_groups([group])[group].result(TIMEOUT_S) is None
    assert _listed(kafka_python_admin, group) == {}
    assert _offsets(kafka_python_admin, group) == {}
    assert kafka_python_admin.describe_groups([group])[group]["group_state"] == "Dead"


def test_deleting_a_group_with_members_is_non_empty_group(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
) -> None:
    topic, group = names
    members(group, topic)

    future = confluent_admin.delete_consumer_groups([group])[group]
    assert _confluent_error(future) == KafkaError.NON_EMPTY_GROUP
    assert kafka_python_admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
    assert _listed(kafka_python_admin, group) == {group: ("consumer", "Stable")}


def test_deleting_an_unknown_group_is_group_id_not_found(
    kafka_python_admin: KafkaAdminClient, confluent_admin: AdminClient
) -> None:
    future = confluent_admin.delete_consumer_groups(["no-such-group"])["no-such-group"]
    assert _confluent_error(future) == KafkaError.GROUP_ID_NOT_FOUND
    assert kafka_python_admin.delete_groups(["no-such-group"]) == {
        "no-such-group": "GroupIdNotFoundError"
    }


# -- admin OffsetCommit (generation -1) ---------------------------------------------------------


def test_altering_offsets_of_an_empty_group_commits_them(
    names: tuple[str, str],
    kafka_python_admin: KafkaAdminClient,
    confluent_admin: AdminClient,
    broker: BrokerProcess,
) -> None:
    topic, group = names
    _commit_without_members(broker.bootstrap, group, {(topic, 0): 3})

    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 42),
                                                    TopicPartition(topic, 1, 17)])]  # fmt: skip
    altered = confluent_admin.alter_consumer_group_offsets(request)[group].result(TIMEOUT_S)
    assert sorted((tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions) == [
        (0, 42, None),
        (1, 17, None),
    ]
    assert {tp: offset for tp, (offset, _) in _offsets(kafka_python_admin, group).items()} == {
        (topic, 0): 42,
        (topic, 1): 17,
    }


def test_altering_offsets_of_a_group_with_members_is_unknown_member_id(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
) -> None:
    topic, group = names
    members(group, topic)

    tp = KafkaTopicPartition(topic, 0)
    results = kafka_python_admin.alter_group_offsets(group, {tp: OffsetAndMetadata(5, "", -1)})
    assert results == {tp: UnknownMemberIdError}
    assert _offsets(kafka_python_admin, group) == {}


# -- LeaveGroup v3+ from an admin ----------------------------------------------------------------


def test_removing_a_static_member_by_instance_id_empties_the_group(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    kafka_python_admin: KafkaAdminClient,
) -> None:
    topic, group = names
    [static] = members(group, topic, instance="instance-a")
    static.close()  # a static member does not leave on close: it keeps its place

    described = kafka_python_admin.describe_groups([group])[group]
    assert described["group_state"] == "Stable"
    assert [m["group_instance_id"] for m in described["members"]] == ["instance-a"]

    removed = kafka_python_admin.remove_group_members(
        group, [MemberToRemove(group_instance_id="instance-a")]
    )
    assert removed == {"instance-a": NoError}
    assert _wait_for_state(kafka_python_admin, group, "Empty")["members"] == []

    again = kafka_python_admin.remove_group_members(
        group, [MemberToRemove(group_instance_id="instance-a")]
    )
    assert again == {"instance-a": UnknownMemberIdError}


# -- a broker restart ---------------------------------------------------------------------------


def test_groups_members_and_offsets_survive_a_broker_restart(
    names: tuple[str, str],
    members: Callable[..., list[KafkaConsumer]],
    broker: BrokerProcess,
) -> None:
    topic, active = names
    idle = f"{active}-idle"
    [member] = members(active, topic)
    member.commit({
        KafkaTopicPartition(topic, p): OffsetAndMetadata(10 + p, "", -1) for p in range(PARTITIONS)
    })  # fmt: skip
    _commit_without_members(broker.bootstrap, idle, {(topic, 1): 6})

    def snapshot() -> tuple[Any, ...]:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            return (
                _listed(admin, active, idle),
                admin.describe_groups([active, idle]),
                _offsets(admin, active),
                _offsets(admin, idle),
            )
        finally:
            admin.close()

    before = snapshot()
    assert before[0] == {active: ("consumer", "Stable"), idle: ("", "Empty")}
    broker.restart()
    assert snapshot() == before

    # The member's generation survived too: its next commit is accepted as it is.
    tp = KafkaTopicPartition(topic, 0)
    member.commit({tp: OffsetAndMetadata(99, "", -1)})
    after = snapshot()
    assert after[1] == before[1]
    assert after[2][(topic, 0)] == (99, "")
