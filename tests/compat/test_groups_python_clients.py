"""Consumer groups through kafka-python and aiokafka against a real broker process, and the
membership edge cases no client exercises, sent as raw requests.

Each scenario produces records in rounds with known offsets, so a consumer that resumes
must see exactly the records after the group's committed offsets: a lost commit would
re-deliver from the earliest offset, a wrong one would skip or repeat records.
pytest-asyncio is not a dependency: aiokafka phases run under ``asyncio.run`` with a deadline.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor as KafkaPythonRange
from tests.rawclient import exchange

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.timeout(120)

QUIET = {"log_level": 3}
PARTITIONS = 4
MIN_SESSION_TIMEOUT_MS = 1000
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 200
POLL_MS = 200  # kafka-python polls: long enough for a leader's JoinGroup + SyncGroup
DEADLINE_S = 20

T = TypeVar("T")
Record = tuple[int, int, bytes]  # (partition, offset, value)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("groups-clients") / "data",
        overrides=[
            "group.initial.rebalance.delay.ms=0",
            f"group.min.session.timeout.ms={MIN_SESSION_TIMEOUT_MS}",
        ],
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def names() -> tuple[str, str]:
    """A fresh (topic, group) pair: no test sees another's records or commits."""
    suffix = uuid.uuid4().hex[:8]
    return f"groups-{suffix}", f"group-{suffix}"


# -- records ----------------------------------------------------------------------------------


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)


def _produce(bootstrap: str, topic: str, counts: Mapping[int, int], tag: str) -> list[Record]:
    """``counts[p]`` records into partition ``p``; returns what was written, in log order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, **QUIET})
    delivered: list[Record] = []
    errors: list[object] = []

    def on_delivery(error: object, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append((message.partition(), message.offset(), message.value()))

    for partition, count in counts.items():
        for i in range(count):
            value = f"{tag}-{partition}-{i}".encode()
            producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
    assert producer.flush(10) == 0
    assert errors == []
    return sorted(delivered)


def _log_ends(records: list[Record]) -> dict[int, int]:
    """The offset after the last of ``records`` in each partition: what a consumer commits."""
    ends: dict[int, int] = {}
    for partition, offset, _ in records:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


# Round sizes differ per partition so that committed offsets differ per partition too.
ROUND_1 = {0: 3, 1: 4, 2: 5, 3: 6}
ROUND_2 = {0: 2, 1: 3, 2: 1, 3: 2}
ROUND_3 = {0: 1, 1: 2, 2: 3, 3: 1}


# -- kafka-python -----------------------------------------------------------------------------


def _kafka_python_member(bootstrap: str, group: str, topic: str, client_id: str) -> KafkaConsumer:
    """A kafka-python consumer subscribed to ``topic``, with the topic's metadata in hand.

    Two kafka-python 3.0.12 habits make group tests flaky unless worked around:

    * A leader that assigned partitions before its metadata listener saw the topic
      rejoins as soon as it does. ``topics()`` after ``subscribe()`` fetches the
      metadata first, so the first join is the only one.
    * When ``poll()`` times out while a JoinGroup/SyncGroup round trip is in flight and
      the round trip finishes before the next ``poll()``, the client throws the result
      away and joins again (a leader's rejoin starts a new rebalance; a rejoin the
      client no longer thinks it needs is never completed, and heartbeats stay off).
      Polls of ``POLL_MS`` cover a leader's round trip, which never waits for others.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[KafkaPythonRange],
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    consumer.subscribe([topic])
    assert topic in consumer.topics()
    assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
    return consumer


def _split_evenly(assignments: list[set[Any]]) -> bool:
    """Every member owns the same number of partitions and together they own all of them."""
    share = PARTITIONS // len(assignments)
    union = set().union(*assignments)
    return all(len(a) == share for a in assignments) and len(union) == PARTITIONS


def _kafka_python_poll_until(consumers: list[KafkaConsumer], count: int) -> list[list[Record]]:
    """Poll every consumer in turn until they received ``count`` records together."""
    received: list[list[Record]] = [[] for _ in consumers]

    def step() -> None:
        for consumer, got in zip(consumers, received, strict=True):
            for records in consumer.poll(timeout_ms=POLL_MS).values():
                got += [(r.partition, r.offset, r.value) for r in records]

    wait_until(
        lambda: sum(map(len, received)) >= count, f"{count} records", timeout=DEADLINE_S, step=step
    )
    return received


def _kafka_python_resume(bootstrap: str, topic: str, group: str, expected: list[Record]) -> None:
    """A new member of ``group`` reads exactly ``expected``, commits and leaves."""
    consumer = _kafka_python_member(bootstrap, group, topic, "resumer")
    try:
        [received] = _kafka_python_poll_until([consumer], len(expected))
        for records in consumer.poll(timeout_ms=POLL_MS).values():  # nothing beyond the log end
            received += [(r.partition, r.offset, r.value) for r in records]
        assert sorted(received) == expected
        consumer.commit()
    finally:
        consumer.close()


def test_kafka_python_members_split_partitions_and_resume_from_commits(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    _create_topic(broker.bootstrap, topic)
    members: list[KafkaConsumer] = []
    try:
        for i in range(2):
            members.append(_kafka_python_member(broker.bootstrap, group, topic, f"kp-{i}"))
        wait_until(
            lambda: _split_evenly([m.assignment() for m in members]),
            "two members to own two partitions each",
            timeout=DEADLINE_S,
            step=lambda: [m.poll(timeout_ms=POLL_MS) for m in members],
        )
        first = _produce(broker.bootstrap, topic, ROUND_1, "r1")
        received = _kafka_python_poll_until(members, len(first))
        for member, got in zip(members, received, strict=True):
            owned = {tp.partition for tp in member.assignment()}
            assert sorted(got) == [r for r in first if r[0] in owned]
            member.commit()
        committed = {
            tp.partition: members[0].committed(tp)
            for tp in (KafkaTopicPartition(topic, p) for p in range(PARTITIONS))
        }
        assert committed == _log_ends(first)
    finally:
        for member in members:
            member.close()

    second = _produce(broker.bootstrap, topic, ROUND_2, "r2")
    _kafka_python_resume(broker.bootstrap, topic, group, second)

    third = _produce(broker.bootstrap, topic, ROUND_3, "r3")
    broker.restart()
    _kafka_python_resume(broker.bootstrap, topic, group, third)


# -- aiokafka ---------------------------------------------------------------------------------


def _run(coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coroutine

    return asyncio.run(bounded())


def _aiokafka_consumer(bootstrap: str, group: str, client_id: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=(AioRange,),
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )


async def _aiokafka_poll_until(consumers: list[AIOKafkaConsumer], count: int) -> list[list[Record]]:
    received: list[list[Record]] = [[] for _ in consumers]
    deadline = time.monotonic() + DEADLINE_S
    while sum(map(len, received)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {count} records, got {received}")
        for consumer, got in zip(consumers, received, strict=True):
            for records in (await consumer.getmany(timeout_ms=50)).values():
                got += [(r.partition, r.offset, r.value) for r in records]
    return received


async def _aiokafka_resume(bootstrap: str, topic: str, group: str, expected: list[Record]) -> None:
    consumer = _aiokafka_consumer(bootstrap, group, "resumer")
    await consumer.start()
    try:
        consumer.subscribe([topic])
        [received] = await _aiokafka_poll_until([consumer], len(expected))
        for records in (await consumer.getmany(timeout_ms=200)).values():
            received += [(r.partition, r.offset, r.value) for r in records]
        assert sorted(received) == expected
        await consumer.commit()
    finally:
        await consumer.stop()


def test_aiokafka_members_split_partitions_and_resume_from_commits(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    _create_topic(broker.bootstrap, topic)

    async def split_consume_commit() -> None:
        members = [_aiokafka_consumer(broker.bootstrap, group, f"aio-{i}") for i in range(2)]
        try:
            for member in members:
                await member.start()
                member.subscribe([topic])
            await wait_until_async(
                lambda: _split_evenly([m.assignment() for m in members]),
                "two members to own two partitions each",
                timeout=DEADLINE_S,
                interval=0.02,
            )
            first = await asyncio.to_thread(_produce, broker.bootstrap, topic, ROUND_1, "r1")
            received = await _aiokafka_poll_until(members, len(first))
            for member, got in zip(members, received, strict=True):
                owned = {tp.partition for tp in member.assignment()}
                assert sorted(got) == [r for r in first if r[0] in owned]
                await member.commit()
            committed = {
                p: await members[0].committed(AioTopicPartition(topic, p))
                for p in range(PARTITIONS)
            }
            assert committed == _log_ends(first)
        finally:
            for member in members:
                await member.stop()

    _run(split_consume_commit())
    second = _produce(broker.bootstrap, topic, ROUND_2, "r2")
    _run(_aiokafka_resume(broker.bootstrap, topic, group, second))

    third = _produce(broker.bootstrap, topic, ROUND_3, "r3")
    broker.restart()
    _run(_aiokafka_resume(broker.bootstrap, topic, group, third))


class _CommittingListener(ConsumerRebalanceListener):
    """Records every callback and commits what was consumed before partitions go away."""

    def __init__(self) -> None:
        self.consumer: AIOKafkaConsumer | None = None
        self.events: list[tuple[str, set[int]]] = []

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoked", {tp.partition for tp in revoked}))
        if self.consumer is not None and revoked:
            await self.consumer.commit()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assigned", {tp.partition for tp in assigned}))


def test_aiokafka_member_joining_mid_consumption_rebalances_the_first(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    _create_topic(broker.bootstrap, topic)
    first = _produce(broker.bootstrap, topic, ROUND_1, "r1")

    async def scenario() -> None:
        listener = _CommittingListener()
        early = _aiokafka_consumer(broker.bootstrap, group, "early")
        late = _aiokafka_consumer(broker.bootstrap, group, "late")
        listener.consumer = early
        try:
            await early.start()
            early.subscribe([topic], listener=listener)
            [consumed] = await _aiokafka_poll_until([early], len(first))
            assert sorted(consumed) == first
            assert listener.events[-1] == ("assigned", set(range(PARTITIONS)))

            # The early member keeps polling while the late one joins.
            await late.start()
            late.subscribe([topic])
            received: list[list[Record]] = [[], []]
            deadline = time.monotonic() + DEADLINE_S
            while not _split_evenly([early.assignment(), late.assignment()]):
                assert time.monotonic() < deadline, "timed out waiting for the rebalance"
                for consumer, got in zip((early, late), received, strict=True):
                    for records in (await consumer.getmany(timeout_ms=50)).values():
                        got += [(r.partition, r.offset, r.value) for r in records]
            early_owns = {tp.partition for tp in early.assignment()}
            assert listener.events[-2:] == [
                ("revoked", set(range(PARTITIONS))),
                ("assigned", early_owns),
            ]

            # The revoke callback committed: the late member starts after round 1.
            second = await asyncio.to_thread(_produce, broker.bootstrap, topic, ROUND_2, "r2")
            more = await _aiokafka_poll_until([early, late], len(second))
            for got, extra in zip(received, more, strict=True):
                got += extra
            assert sorted(received[0]) == [r for r in second if r[0] in early_owns]
            assert sorted(received[1]) == [r for r in second if r[0] not in early_owns]
        finally:
            await late.stop()
            await early.stop()

    _run(scenario())


# -- kafka-python and aiokafka in one group ---------------------------------------------------


def test_kafka_python_and_aiokafka_members_share_a_group(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    _create_topic(broker.bootstrap, topic)
    # kafka-python polls in its own thread; the thread reports what it owns and receives.
    stop = threading.Event()
    lock = threading.Lock()
    kafka_python_owns: set[int] = set()
    kafka_python_got: list[Record] = []
    failures: list[BaseException] = []

    def kafka_python_member() -> None:
        try:
            consumer = _kafka_python_member(broker.bootstrap, group, topic, "kafka-python")
        except BaseException as exc:
            failures.append(exc)
            return
        try:
            while not stop.is_set():
                batches = consumer.poll(timeout_ms=POLL_MS)
                with lock:
                    kafka_python_owns.clear()
                    kafka_python_owns.update(tp.partition for tp in consumer.assignment())
                    for records in batches.values():
                        kafka_python_got.extend((r.partition, r.offset, r.value) for r in records)
        except BaseException as exc:
            failures.append(exc)
        finally:
            consumer.close()

    def owned() -> set[int]:
        if failures:
            raise failures[0]
        with lock:
            return set(kafka_python_owns)

    def got() -> list[Record]:
        with lock:
            return list(kafka_python_got)

    async def scenario() -> None:
        await wait_until_async(
            lambda: len(owned()) == PARTITIONS,
            "kafka-python to own all",
            timeout=DEADLINE_S,
            interval=0.02,
        )
        aio = _aiokafka_consumer(broker.bootstrap, group, "aiokafka")
        await aio.start()
        try:
            aio.subscribe([topic])
            await wait_until_async(
                lambda: _split_evenly([owned(), {tp.partition for tp in aio.assignment()}]),
                "kafka-python and aiokafka to own two partitions each",
                timeout=DEADLINE_S,
                interval=0.02,
            )
            records = await asyncio.to_thread(_produce, broker.bootstrap, topic, ROUND_1, "r1")
            aio_owns = {tp.partition for tp in aio.assignment()}
            expected_aio = [r for r in records if r[0] in aio_owns]
            [aio_got] = await _aiokafka_poll_until([aio], len(expected_aio))
            await wait_until_async(
                lambda: len(got()) >= len(records) - len(expected_aio),
                "kafka-python's records",
                timeout=DEADLINE_S,
                interval=0.02,
            )
            assert sorted(aio_got) == expected_aio
            assert sorted(got()) == [r for r in records if r[0] not in aio_owns]
        finally:
            await aio.stop()

    thread = threading.Thread(target=kafka_python_member, daemon=True)
    thread.start()
    try:
        _run(scenario())
    finally:
        stop.set()
        thread.join(10)
    assert failures == []


# -- raw requests: what clients do not exercise -----------------------------------------------

JOIN_GROUP, HEARTBEAT, SYNC_GROUP, DESCRIBE_GROUPS = 11, 12, 14, 15
NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82


def _subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topic names, no user data."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)


def _join(
    bootstrap: str,
    group: str,
    member_id: str = "",
    *,
    version: int = 5,
    instance: str | None = None,
    session_ms: int = SESSION_TIMEOUT_MS,
    protocol_type: str = "consumer",
) -> Any:
    return exchange(bootstrap, JOIN_GROUP, version, {
        "group_id": group, "session_timeout": session_ms, "rebalance_timeout": 10_000,
        "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
        "protocols": [{"name": "range", "metadata": _subscription("raw-topic")}],
    })  # fmt: skip


def _join_new_member(bootstrap: str, group: str, session_ms: int = SESSION_TIMEOUT_MS) -> Any:
    """KIP-394: the first JoinGroup (v4+) only hands out a member id; the second joins."""
    first = _join(bootstrap, group, session_ms=session_ms)
    assert first.error_code.value == MEMBER_ID_REQUIRED
    return _join(bootstrap, group, first.member_id, session_ms=session_ms)


def _sync(
    bootstrap: str,
    group: str,
    generation: int,
    member_id: str,
    assignments: Mapping[str, bytes] | None = None,
    *,
    version: int = 5,
) -> Any:
    return exchange(bootstrap, SYNC_GROUP, version, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    })  # fmt: skip


def _heartbeat(
    bootstrap: str,
    group: str,
    generation: int,
    member_id: str,
    instance: str | None = None,
    *,
    version: int = 4,
) -> int:
    response = exchange(bootstrap, HEARTBEAT, version, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "group_instance_id": instance,
    })  # fmt: skip
    return int(response.error_code.value)


def _described(bootstrap: str, group: str) -> tuple[str, list[str]]:
    """The group's state and member ids, as DescribeGroups answers them."""
    response = exchange(bootstrap, DESCRIBE_GROUPS, 5, {"groups": [group]})
    described = response.groups[0]
    return str(described.group_state), [m.member_id for m in described.members]


def _group_state(bootstrap: str, group: str) -> str:
    return _described(bootstrap, group)[0]


def _stable_member(bootstrap: str, group: str, session_ms: int = SESSION_TIMEOUT_MS) -> Any:
    """A sole member, joined and synced: the group is Stable."""
    joined = _join_new_member(bootstrap, group, session_ms)
    assert joined.error_code.value == NONE
    synced = _sync(bootstrap, group, joined.generation_id, joined.member_id,
                   {joined.member_id: b"all"})  # fmt: skip
    assert (synced.error_code.value, synced.assignment) == (NONE, b"all")
    return joined


def test_join_without_member_id_is_answered_member_id_required_then_joins_as_leader(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    first = _join(broker.bootstrap, group)
    assert first.error_code.value == MEMBER_ID_REQUIRED
    assert first.member_id
    second = _join(broker.bootstrap, group, first.member_id)
    assert second.error_code.value == NONE
    assert (second.member_id, second.leader, second.generation_id) == (
        first.member_id,
        first.member_id,
        1,
    )
    assert [(m.member_id, m.metadata) for m in second.members] == [
        (first.member_id, _subscription("raw-topic"))
    ]


def test_join_with_session_timeout_below_the_minimum_is_invalid_session_timeout(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    response = _join(broker.bootstrap, group, session_ms=MIN_SESSION_TIMEOUT_MS - 1)
    assert response.error_code.value == INVALID_SESSION_TIMEOUT


def test_join_with_another_protocol_type_is_inconsistent_group_protocol(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    _stable_member(broker.bootstrap, group)
    response = _join(broker.bootstrap, group, protocol_type="connect")
    assert response.error_code.value == INCONSISTENT_GROUP_PROTOCOL


def test_heartbeat_checks_generation_and_member(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    member = _stable_member(broker.bootstrap, group)
    generation, member_id = member.generation_id, member.member_id
    assert _heartbeat(broker.bootstrap, group, generation, member_id) == NONE
    assert _heartbeat(broker.bootstrap, group, generation + 1, member_id) == ILLEGAL_GENERATION
    assert _heartbeat(broker.bootstrap, group, generation, "stranger") == UNKNOWN_MEMBER_ID


def test_static_member_rejoining_without_member_id_fences_its_old_id(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    # A static member gets its id at once (no MEMBER_ID_REQUIRED round trip).
    old = _join(broker.bootstrap, group, instance="instance-1")
    assert old.error_code.value == NONE
    synced = _sync(broker.bootstrap, group, old.generation_id, old.member_id, {old.member_id: b"a"})
    assert synced.error_code.value == NONE

    new = _join(broker.bootstrap, group, instance="instance-1")
    assert new.error_code.value == NONE
    assert new.member_id != old.member_id
    fenced = _heartbeat(broker.bootstrap, group, old.generation_id, old.member_id, "instance-1")
    assert fenced == FENCED_INSTANCE_ID
    current = _heartbeat(broker.bootstrap, group, new.generation_id, new.member_id, "instance-1")
    assert current == NONE


def test_join_group_v0_without_rebalance_timeout_forms_a_group(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    joined = _join(broker.bootstrap, group, version=0)
    assert joined.error_code.value == NONE
    assert joined.leader == joined.member_id
    synced = _sync(broker.bootstrap, group, joined.generation_id, joined.member_id,
                   {joined.member_id: b"v0"}, version=0)  # fmt: skip
    assert (synced.error_code.value, synced.assignment) == (NONE, b"v0")
    heartbeat = _heartbeat(broker.bootstrap, group, joined.generation_id, joined.member_id,
                           version=0)  # fmt: skip
    assert heartbeat == NONE
    assert _group_state(broker.bootstrap, group) == "Stable"


def test_follower_sync_waits_for_the_leaders_assignment(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    bootstrap = broker.bootstrap
    leader = _stable_member(bootstrap, group)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # The follower's JoinGroup waits until the leader rejoins for the next generation.
        needs_id = _join(bootstrap, group)
        assert needs_id.error_code.value == MEMBER_ID_REQUIRED
        follower_id = needs_id.member_id
        follower_join = pool.submit(_join, bootstrap, group, follower_id)
        wait_until(
            lambda: _group_state(bootstrap, group) == "PreparingRebalance",
            "the follower's join to start a rebalance",
            timeout=DEADLINE_S,
            interval=0.02,
        )
        rejoined = _join(bootstrap, group, leader.member_id)
        follower = follower_join.result(DEADLINE_S)
        assert rejoined.error_code.value == follower.error_code.value == NONE
        assert rejoined.leader == follower.leader == leader.member_id
        generation = rejoined.generation_id

        follower_sync = pool.submit(_sync, bootstrap, group, generation, follower_id)
        with pytest.raises(FutureTimeout):
            follower_sync.result(0.3)  # no assignment yet: the follower waits
        assignments = {leader.member_id: b"for-leader", follower_id: b"for-follower"}
        leader_sync = _sync(bootstrap, group, generation, leader.member_id, assignments)
        answer = follower_sync.result(DEADLINE_S)
    assert (leader_sync.error_code.value, leader_sync.assignment) == (NONE, b"for-leader")
    assert (answer.error_code.value, answer.assignment) == (NONE, b"for-follower")


def test_a_restored_member_that_never_returns_is_expired_after_its_session_timeout(
    broker: BrokerProcess, names: tuple[str, str]
) -> None:
    _, group = names
    session_ms = 2 * MIN_SESSION_TIMEOUT_MS
    member = _stable_member(broker.bootstrap, group, session_ms)
    broker.restart()
    # The broker reloads the member from __consumer_offsets and starts its session anew;
    # with no heartbeat it leaves, and the group empties.
    assert _described(broker.bootstrap, group) == ("Stable", [member.member_id])
    wait_until(
        lambda: _described(broker.bootstrap, group) == ("Empty", []),
        "the restored member's session to expire",
        timeout=DEADLINE_S,
        interval=0.05,
    )
