"""samsa's consumer in consumer groups, against a real broker process.

Members are real ``Consumer`` objects (each with its own loop thread) polled in
turn from the test thread; what is checked is what an application sees:
assignments, the rebalance listener's calls (and a commit made from inside
one), records returned exactly once across rebalances, committed offsets.
Timing-driven behaviour (heartbeats while the application does not poll,
``max.poll.interval.ms``) is checked by its outcome — who owns which partitions
afterwards — never by measuring time. One group also mixes a samsa consumer
with librdkafka's, and one copies records exactly once with samsa's
transactional producer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer

from samsa import Admin, AsyncConsumer, Consumer, Producer
from samsa.client.admin import NewTopic
from samsa.errors import KafkaError
from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until
from samsa.types import TopicPartition

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(
        tmp_path_factory.mktemp("consumer-groups") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield process
    finally:
        process.stop()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(broker: BrokerProcess, partitions: int, records: int = 0, prefix: str = "t") -> str:
    topic = _name(prefix)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    if records:
        with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
            for i in range(records):
                producer.send(topic, b"%d" % i, partition=i % partitions)
    return topic


class Recorder:
    """A rebalance listener that logs its calls (and can act on revocation)."""

    def __init__(self, on_revoke: Callable[[Collection[TopicPartition]], None] | None = None):
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.on_revoke = on_revoke

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        self.events.append(("revoked", frozenset(partitions)))
        if self.on_revoke is not None:
            self.on_revoke(partitions)

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(partitions)))

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        self.events.append(("lost", frozenset(partitions)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


def _consumer(broker: BrokerProcess, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def _poll_until(
    consumers: list[Consumer],
    done: Callable[[], bool],
    sink: dict[int, list[Any]] | None = None,
    timeout: float = 30.0,
) -> None:
    def poll() -> None:
        for index, consumer in enumerate(consumers):
            records = consumer.poll(0.05)
            if sink is not None:
                sink.setdefault(index, []).extend(records)

    wait_until(done, "the members to get there while polling", timeout=timeout, step=poll)


def _split(consumers: list[Consumer], partitions: int) -> Callable[[], bool]:
    """True once the members own disjoint shares covering every partition."""

    def check() -> bool:
        owned = [c.assignment() for c in consumers]
        union = set().union(*owned)
        return all(owned) and len(union) == partitions and sum(len(o) for o in owned) == partitions

    return check


def test_members_share_partitions_and_hand_them_over_exactly_once(
    broker: BrokerProcess,
) -> None:
    topic = _topic(broker, 4, records=400)
    group = _name("g")
    first = _consumer(broker, group)
    first_listener = Recorder(on_revoke=lambda _parts: first.commit())
    first.subscribe([topic], listener=first_listener)
    received: dict[int, list[Any]] = {}
    _poll_until([first], lambda: len(first.assignment()) == 4, received)
    # Take part of the records, then let a second member in: the first commits what it
    # returned from inside on_partitions_revoked, so the newcomer resumes exactly there.
    while len(received.get(0, [])) < 150:
        received.setdefault(0, []).extend(first.poll(0.5, max_records=50))
    second = _consumer(broker, group)
    second_listener = Recorder(on_revoke=lambda _parts: second.commit())
    second.subscribe([topic], listener=second_listener)
    members = [first, second]
    _poll_until(members, _split(members, 4), received)
    _poll_until(members, lambda: sum(len(r) for r in received.values()) >= 400, received)
    for member in members:
        assert member.poll(0.5) == []
    values = Counter(r.value for records in received.values() for r in records)
    assert set(values) == {b"%d" % i for i in range(400)}
    assert max(values.values()) == 1, "a record was returned twice across the rebalance"
    assert first_listener.kinds()[:3] == ["assigned", "revoked", "assigned"]
    assert first_listener.events[1][1] == frozenset(TopicPartition(topic, p) for p in range(4))
    assert second_listener.kinds() == ["assigned"]
    second.close()  # leaves the group: the first gets everything back
    _poll_until([first], lambda: len(first.assignment()) == 4)
    first.commit()
    committed = first.committed([TopicPartition(topic, p) for p in range(4)])
    assert {tp: om.offset for tp, om in committed.items() if om} == {
        TopicPartition(topic, p): 100 for p in range(4)
    }
    first.close()


def test_cooperative_members_revoke_only_what_moves(broker: BrokerProcess) -> None:
    topic = _topic(broker, 6)
    group = _name("g")
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first, second = _consumer(broker, group, **config), _consumer(broker, group, **config)
    first_listener, second_listener = Recorder(), Recorder()
    first.subscribe([topic], listener=first_listener)
    _poll_until([first], lambda: len(first.assignment()) == 6)
    second.subscribe([topic], listener=second_listener)
    members = [first, second]
    _poll_until(members, _split(members, 6))
    kept, moved = first.assignment(), second.assignment()
    assert len(kept) == len(moved) == 3
    revocations = [parts for kind, parts in first_listener.events if kind == "revoked"]
    assert revocations == [frozenset(moved)], "only the moved partitions are revoked"
    assert "lost" not in first_listener.kinds() + second_listener.kinds()
    for member in members:
        member.close()


def test_static_member_rejoins_without_a_rebalance(broker: BrokerProcess) -> None:
    topic = _topic(broker, 4)
    group = _name("g")
    first = _consumer(broker, group, **{"group.instance.id": "a"})
    second = _consumer(broker, group, **{"group.instance.id": "b"})
    first_listener = Recorder()
    first.subscribe([topic], listener=first_listener)
    second.subscribe([topic])
    _poll_until([first, second], _split([first, second], 4))
    owned_by_second = second.assignment()
    events_before = list(first_listener.events)
    second.close()  # a static member does not leave: its place waits session.timeout.ms
    replacement = _consumer(broker, group, **{"group.instance.id": "b"})
    replacement.subscribe([topic])
    _poll_until([first, replacement], lambda: replacement.assignment() == owned_by_second)
    for _ in range(5):
        first.poll(0.1)
    assert first_listener.events == events_before, "the other member saw a rebalance"
    first.close()
    replacement.close()


def test_heartbeats_continue_while_the_application_does_not_poll(
    broker: BrokerProcess,
) -> None:
    topic = _topic(broker, 2)
    group = _name("g")
    config = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 300}
    busy, other = _consumer(broker, group, **config), _consumer(broker, group, **config)
    busy_listener, other_listener = Recorder(), Recorder()
    busy.subscribe([topic], listener=busy_listener)
    other.subscribe([topic], listener=other_listener)
    _poll_until([busy, other], _split([busy, other], 2))
    owned = busy.assignment()
    before = (list(busy_listener.events), list(other_listener.events))
    # Three session timeouts without a poll of `busy`: its loop thread keeps heartbeating.
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        other.poll(0.2)
    busy.poll(0.2)
    assert busy.assignment() == owned
    assert (busy_listener.events, other_listener.events) == before, "a rebalance happened"
    busy.close()
    other.close()


def test_a_member_that_stops_polling_leaves_and_finds_its_partitions_lost(
    broker: BrokerProcess,
) -> None:
    topic = _topic(broker, 2)
    group = _name("g")
    slow = _consumer(broker, group, **{"max.poll.interval.ms": 1500})
    other = _consumer(broker, group)
    slow_listener = Recorder()
    slow.subscribe([topic], listener=slow_listener)
    other.subscribe([topic])
    _poll_until([slow, other], _split([slow, other], 2))
    settled = len(slow_listener.events)
    # `slow` does not poll: after max.poll.interval.ms it leaves, and `other` takes over.
    _poll_until([other], lambda: len(other.assignment()) == 2, timeout=20)
    with pytest.raises(KafkaError):
        slow.commit({TopicPartition(topic, 0): 0})
    _poll_until([slow, other], _split([slow, other], 2))
    assert slow_listener.kinds()[settled:] == ["lost", "assigned"]
    slow.close()
    other.close()


def test_pattern_subscription_picks_up_new_topics(broker: BrokerProcess) -> None:
    prefix = _name("pat")
    first = _topic(broker, 1, records=3, prefix=prefix)
    consumer = _consumer(broker, _name("g"), **{"metadata.max.age.ms": 300})
    consumer.subscribe(pattern=rf"{prefix}-.*")
    _poll_until([consumer], lambda: consumer.assignment() == {TopicPartition(first, 0)})
    assert consumer.subscription() == {first}
    second = _topic(broker, 2, records=4, prefix=prefix)
    seen: dict[int, list[Any]] = {}
    _poll_until([consumer], lambda: len(consumer.assignment()) == 3, seen)
    _poll_until([consumer], lambda: len(seen.get(0, [])) == 7, seen)
    assert {r.topic for r in seen[0]} == {first, second}
    consumer.close()


def test_samsa_and_librdkafka_members_share_a_group(broker: BrokerProcess) -> None:
    topic = _topic(broker, 4, records=200)
    group = _name("g")
    ours = _consumer(broker, group)
    ours.subscribe([topic])
    theirs = ConfluentConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "partition.assignment.strategy": "range", "enable.auto.commit": False, "log_level": 3}
    )  # fmt: skip
    theirs.subscribe([topic])
    values: list[bytes] = []
    ours_records: dict[int, list[Any]] = {}
    deadline = time.monotonic() + 40

    # Without commits, a partition that moves is read again by its new owner: the check is
    # that together they read everything and end up owning disjoint shares.
    def settled() -> bool:
        theirs_owned = {TopicPartition(p.topic, p.partition) for p in theirs.assignment()}
        ours_owned = ours.assignment()
        return (
            bool(theirs_owned and ours_owned)
            and not theirs_owned & ours_owned
            and len(theirs_owned | ours_owned) == 4
        )

    while len(set(values) | {r.value for r in ours_records.get(0, [])}) < 200 or not settled():
        assert time.monotonic() < deadline
        message = theirs.poll(0.05)
        if message is not None and message.error() is None:
            values.append(message.value())
        ours_records.setdefault(0, []).extend(ours.poll(0.05))
    values += [r.value for r in ours_records[0]]
    assert set(values) == {b"%d" % i for i in range(200)}
    theirs.close()
    ours.close()


def test_async_consumer_in_a_group_with_an_async_listener(broker: BrokerProcess) -> None:
    topic = _topic(broker, 3, records=90)
    group = _name("g")
    calls: list[str] = []

    class Listener:
        async def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
            calls.append("revoked")

        async def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
            calls.append(f"assigned {len(partitions)}")

        async def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
            calls.append("lost")

    async def main() -> list[Any]:
        records: list[Any] = []
        async with AsyncConsumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group,
             "auto.offset.reset": "earliest"}
        ) as consumer:  # fmt: skip
            consumer.subscribe([topic], listener=Listener())
            async with asyncio.timeout(30):
                while len(records) < 90:
                    records += await consumer.poll(0.5)
        return records  # close() auto-committed the positions

    records = asyncio.run(main())
    assert sorted(int(r.value) for r in records) == list(range(90))
    assert calls == ["assigned 3", "revoked"]
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        offsets = admin.list_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 30, 1: 30, 2: 30}


def test_consume_transform_produce_exactly_once(broker: BrokerProcess) -> None:
    source, sink = _topic(broker, 2, records=300), _topic(broker, 1)
    group = _name("copier")
    consumer = _consumer(broker, group, **{"isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": _name("tx")})
    producer.init_transactions()
    copied = 0
    aborted_once = False
    deadline = time.monotonic() + 40
    while copied < 300:
        assert time.monotonic() < deadline
        records = consumer.poll(0.2, max_records=40)
        if not records:
            continue
        producer.begin_transaction()
        for record in records:
            producer.send(sink, record.value.upper(), partition=0)
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        producer.send_offsets_to_transaction(positions, consumer.group_metadata())
        if not aborted_once:  # the first transaction is aborted: its records are read again
            producer.abort_transaction()
            aborted_once = True
            committed = consumer.committed(consumer.assignment())
            for tp, offset in committed.items():
                consumer.seek(tp, offset.offset if offset else 0)
            continue
        producer.commit_transaction()
        copied += len(records)
    producer.close()
    consumer.close()
    reader = _consumer(broker, _name("check"), **{"isolation.level": "read_committed"})
    reader.assign([TopicPartition(sink, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < 300 and time.monotonic() < deadline:
        values += [r.value for r in reader.poll(0.2)]
    assert sorted(values) == sorted(b"%d" % i for i in range(300))
    reader.close()
