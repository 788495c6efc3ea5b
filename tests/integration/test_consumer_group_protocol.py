"""confluent-kafka with ``group.protocol=consumer`` (KIP-848) against a real samsa broker.

librdkafka speaks ConsumerGroupHeartbeat from 2.12 (GA). The broker shares a module:
each test uses its own group and topic. Heartbeats every 500 ms and a 6 s session
keep the waits short; every wait is on a condition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker

pytestmark = pytest.mark.skipif(
    confluent_kafka.libversion()[1] < 0x020C0000, reason="librdkafka < 2.12"
)

QUIET = {"log_level": 3}
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, LIST_GROUPS, OFFSET_FETCH = 68, 69, 16, 9
OVERRIDES = [
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.session.timeout.ms=6000",
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("kip848") / "data", OVERRIDES)
    yield process
    process.stop()


def _wait(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


def _topic(bootstrap: str, name: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(records):
        producer.produce(name, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(10) == 0


def _consumer(bootstrap: str, group: str, topic: str, **extra: str) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET, **extra,
    })  # fmt: skip
    consumer.subscribe([topic])
    return consumer


def _partitions(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _describe(bootstrap: str, group: str) -> object:
    response = exchange(bootstrap, CONSUMER_GROUP_DESCRIBE, 1,
                        {"group_ids": [group], "include_authorized_operations": False})  # fmt: skip
    return response.groups[0]


def test_a_consumer_gets_every_partition_and_its_commits_are_read_back(
    broker: BrokerProcess,
) -> None:
    _topic(broker.bootstrap, "kip848-one", 3, 30)
    consumer = _consumer(broker.bootstrap, "g-one", "kip848-one")
    values: list[bytes] = []

    def read() -> bool:
        values.extend(m.value() for m in consumer.consume(30, 0.2) if m.error() is None)
        return len(values) == 30

    _wait(read, "30 records")
    assert _partitions(consumer) == {0, 1, 2}
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition("kip848-one", p) for p in range(3)], 10)
    assert [tp.offset for tp in committed] == [10, 10, 10]
    described = _describe(broker.bootstrap, "g-one")
    assert (described.error_code, described.group_state) == (0, "Stable")
    assert described.assignor_name == "uniform"
    [member] = described.members
    assert member.member_epoch == described.group_epoch == described.assignment_epoch
    assert sorted(member.assignment.topic_partitions[0].partitions) == [0, 1, 2]
    listed = exchange(
        broker.bootstrap, LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]}
    )
    assert [(g.group_id, g.group_type) for g in listed.groups if g.group_id == "g-one"] == [
        ("g-one", "consumer")
    ]
    consumer.close()


def test_two_consumers_share_partitions_and_the_one_left_takes_them_all_back(
    broker: BrokerProcess,
) -> None:
    _topic(broker.bootstrap, "kip848-two", 4, 0)
    first = _consumer(broker.bootstrap, "g-two", "kip848-two")
    _wait(lambda: first.poll(0.1) is None and _partitions(first) == {0, 1, 2, 3}, "first member")
    second = _consumer(broker.bootstrap, "g-two", "kip848-two")

    def shared() -> bool:
        first.poll(0.05)
        second.poll(0.05)
        mine, theirs = _partitions(first), _partitions(second)
        return len(mine) == len(theirs) == 2 and mine | theirs == {0, 1, 2, 3}

    _wait(shared, "two members sharing four partitions")
    second.close()  # leaves with member epoch -1
    _wait(lambda: first.poll(0.1) is None and _partitions(first) == {0, 1, 2, 3}, "takeover")
    first.close()


def test_a_member_that_stops_heartbeating_loses_its_partitions_when_its_session_expires(
    broker: BrokerProcess,
) -> None:
    _topic(broker.bootstrap, "kip848-kill", 2, 0)
    survivor = _consumer(broker.bootstrap, "g-kill", "kip848-kill")
    _wait(lambda: survivor.poll(0.1) is None and _partitions(survivor) == {0, 1}, "survivor")
    # A member that joins and is never heard of again, as a killed consumer.
    joined = exchange(broker.bootstrap, CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "g-kill", "member_id": "killed-member", "member_epoch": 0,
        "rebalance_timeout": 30_000, "subscribed_topic_names": ["kip848-kill"],
        "topic_partitions": [],
    })  # fmt: skip
    assert joined.error_code == 0
    _wait(lambda: survivor.poll(0.1) is None and len(_partitions(survivor)) == 1, "split")
    _wait(lambda: survivor.poll(0.1) is None and _partitions(survivor) == {0, 1}, "session expiry")
    assert [m.member_id for m in _describe(broker.bootstrap, "g-kill").members] != ["killed-member"]
    assert len(_describe(broker.bootstrap, "g-kill").members) == 1
    survivor.close()


def test_a_regex_subscription_gets_the_matching_topics_and_a_topic_created_later(
    broker: BrokerProcess,
) -> None:
    _topic(broker.bootstrap, "kip848-re-a", 1, 0)
    _topic(broker.bootstrap, "kip848-other", 1, 0)
    consumer = _consumer(broker.bootstrap, "g-regex", "^kip848-re-.*")

    def topics() -> set[str]:
        consumer.poll(0.1)
        return {tp.topic for tp in consumer.assignment()}

    _wait(lambda: topics() == {"kip848-re-a"}, "the matching topic")
    [member] = _describe(broker.bootstrap, "g-regex").members
    assert member.subscribed_topic_regex == "(^kip848-re-.*)"  # as librdkafka sends it
    _topic(broker.bootstrap, "kip848-re-b", 1, 0)
    _wait(lambda: topics() == {"kip848-re-a", "kip848-re-b"}, "the topic created later")
    consumer.close()


def test_an_offset_fetch_with_a_stale_member_epoch_is_refused(broker: BrokerProcess) -> None:
    _topic(broker.bootstrap, "kip848-stale", 1, 0)
    consumer = _consumer(broker.bootstrap, "g-stale", "kip848-stale")
    _wait(lambda: consumer.poll(0.1) is None and _partitions(consumer) == {0}, "assignment")
    [member] = _describe(broker.bootstrap, "g-stale").members

    def fetch(member_id: str, epoch: int) -> int:
        response = exchange(broker.bootstrap, OFFSET_FETCH, 9, {"groups": [{
            "group_id": "g-stale", "member_id": member_id, "member_epoch": epoch,
            "topics": None}], "require_stable": False})  # fmt: skip
        return int(response.groups[0].error_code)

    assert fetch(member.member_id, member.member_epoch) == 0
    assert fetch(member.member_id, member.member_epoch + 1) == 113  # STALE_MEMBER_EPOCH
    assert fetch("someone-else", member.member_epoch) == 25  # UNKNOWN_MEMBER_ID
    consumer.close()


@pytest.mark.slow
def test_a_broker_restart_keeps_the_group_and_its_member_epoch(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", OVERRIDES)
    try:
        _topic(broker.bootstrap, "kip848-restart", 2, 0)
        consumer = _consumer(broker.bootstrap, "g-restart", "kip848-restart")
        _wait(lambda: consumer.poll(0.1) is None and _partitions(consumer) == {0, 1}, "join")
        before = _describe(broker.bootstrap, "g-restart")
        consumer.close()  # the member leaves: the group stays, Empty, at its epoch
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        broker.stop()
        broker = start_broker(tmp_path / "data", OVERRIDES, port=port)
        after = _describe(broker.bootstrap, "g-restart")
        assert (after.error_code, after.group_state) == (0, "Empty")
        assert after.group_epoch == before.group_epoch + 1  # the leave
        assert after.assignment_epoch == before.assignment_epoch
    finally:
        broker.stop()


def test_a_member_heartbeats_on_after_a_broker_restart_without_rejoining(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", OVERRIDES)
    try:
        _topic(broker.bootstrap, "kip848-live", 2, 0)
        joined = exchange(broker.bootstrap, CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": "g-live", "member_id": "live-member", "member_epoch": 0,
            "rebalance_timeout": 30_000, "subscribed_topic_names": ["kip848-live"],
            "topic_partitions": [],
        })  # fmt: skip
        assert (joined.error_code, joined.member_epoch) == (0, 1)
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        broker.stop()
        broker = start_broker(tmp_path / "data", OVERRIDES, port=port)
        beat = exchange(broker.bootstrap, CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": "g-live", "member_id": "live-member", "member_epoch": 1,
            "topic_partitions": None,
        })  # fmt: skip
        assert beat.error_code == 0
        [member] = _describe(broker.bootstrap, "g-live").members
        assert member.member_id == "live-member"
        assert sorted(member.assignment.topic_partitions[0].partitions) == [0, 1]
    finally:
        broker.stop()
