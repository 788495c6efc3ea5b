"""Consumer groups of the classic protocol, driven by confluent-kafka (librdkafka) consumers
against real broker processes.

Each consumer polls in a thread of its own (one killed with SIGKILL runs in a process of
its own: ``group_member.py``) and records what a user of the client sees: rebalance
callbacks, the records it was handed and the offsets it committed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, NewTopic

from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until

QUIET = {"log_level": 3}
PARTITIONS = 6
ALL_PARTITIONS = frozenset(range(PARTITIONS))
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that forms groups at once and accepts session timeouts down to 1 s."""
    broker = start_broker(
        tmp_path_factory.mktemp("groups") / "data",
        overrides=["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield broker
    finally:
        broker.stop()


# -- helpers -------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce_keyed(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode(), f"key-{i}".encode())
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def high_watermarks(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", **QUIET})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def describe(bootstrap: str, group: str) -> ConsumerGroupDescription:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    description: ConsumerGroupDescription = admin.describe_consumer_groups([group])[group].result(
        10
    )
    return description


def described_assignment(description: ConsumerGroupDescription) -> dict[str, frozenset[int]]:
    """Member id → the partitions the coordinator says it was assigned."""
    return {
        m.member_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
        for m in description.members
    }


def stable_with(bootstrap: str, group: str, members: list[GroupMember]) -> bool:
    """The group is Stable and the coordinator's view matches what each member was handed."""
    description = describe(bootstrap, group)
    return description.state == ConsumerGroupState.STABLE and described_assignment(description) == {
        m.member_id: m.owned for m in members
    }


def split_evenly(owned: list[frozenset[int]]) -> bool:
    """Every partition is owned by exactly one of them, and each owns as many."""
    return (
        all(len(p) == PARTITIONS // len(owned) for p in owned)
        and sum(len(p) for p in owned) == PARTITIONS
        and frozenset().union(*owned) == ALL_PARTITIONS
    )


def owned_by(members: list[GroupMember]) -> list[frozenset[int]]:
    return [m.owned for m in members]


@dataclass(frozen=True, slots=True)
class Rebalance:
    kind: str  # "assign" or "revoke"
    partitions: frozenset[int]
    at: float  # time.monotonic() when the callback ran


class GroupMember:
    """One subscribed consumer polling in its own thread.

    Records every on_assign/on_revoke callback and every record it is handed. With
    ``commit_every`` it commits synchronously after that many records, in on_revoke and
    before closing — so whatever it processed is committed before its partitions move.
    ``stop_after`` closes it once it has processed that many records.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        commit_every: int = 0,
        process_delay: float = 0.0,
        stop_after: int | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "max.poll.interval.ms": 30_000,
            **QUIET,
            **(config or {}),
        }
        self.commit_every = commit_every
        self.process_delay = process_delay
        self.stop_after = stop_after
        self.events: list[Rebalance] = []
        self.processed: list[tuple[int, int, bytes]] = []  # (partition, offset, key)
        self.member_id = ""
        self.subscribed_at = 0.0
        self.failure: BaseException | None = None
        self._owned: set[int] = set()
        self._uncommitted: dict[int, int] = {}  # partition → next offset to commit
        self._since_commit = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def owned(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._owned)

    def assignments(self) -> list[frozenset[int]]:
        return [e.partitions for e in self.events if e.kind == "assign"]

    def revocations(self) -> list[frozenset[int]]:
        return [e.partitions for e in self.events if e.kind == "revoke"]

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    @property
    def closed(self) -> bool:
        return not self._thread.is_alive()

    def close(self, timeout: float = 30.0) -> None:
        """Stop polling, commit what was processed, close the consumer (LeaveGroup)."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "consumer did not close"
        if self.failure is not None:
            raise AssertionError(f"consumer failed: {self.failure!r}") from self.failure

    # -- the member's own thread -----------------------------------------------------------
    def _run(self) -> None:
        try:
            consumer = Consumer(self.config)
        except BaseException as exc:
            self.failure = exc
            return
        try:
            self.subscribed_at = time.monotonic()
            consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self._stop.is_set():
                message = consumer.poll(0.05)
                if message is not None:
                    self._process(consumer, message)
            self._commit(consumer, self._uncommitted)
        except BaseException as exc:
            self.failure = exc
        finally:
            try:
                consumer.close()
            except BaseException as exc:
                self.failure = self.failure or exc

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.member_id = consumer.memberid()
        assigned = frozenset(tp.partition for tp in partitions)
        with self._lock:
            self._owned |= assigned
        self.events.append(Rebalance("assign", assigned, time.monotonic()))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = frozenset(tp.partition for tp in partitions)
        self._commit(consumer, {p: o for p, o in self._uncommitted.items() if p in revoked})
        with self._lock:
            self._owned -= revoked
        self.events.append(Rebalance("revoke", revoked, time.monotonic()))

    def _process(self, consumer: Consumer, message: Message) -> None:
        error = message.error()
        if error is not None:
            raise KafkaException(error)
        if self.stop_after is not None and len(self.processed) >= self.stop_after:
            self._stop.set()
            return  # not processed, so not committed: the next owner reads it
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        if self.process_delay:
            time.sleep(self.process_delay)
        self.processed.append((partition, offset, message.key() or b""))
        if self.commit_every:
            self._uncommitted[partition] = offset + 1
            self._since_commit += 1
            if self._since_commit >= self.commit_every:
                self._commit(consumer, self._uncommitted)

    def _commit(self, consumer: Consumer, offsets: dict[int, int]) -> None:
        if not self.commit_every or not offsets:
            return
        consumer.commit(
            offsets=[TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())],
            asynchronous=False,
        )
        for partition in list(offsets):
            self._uncommitted.pop(partition, None)
        self._since_commit = 0


def close_all(members: list[GroupMember]) -> None:
    failures = []
    for member in members:
        try:
            member.close()
        except AssertionError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


# -- tests ---------------------------------------------------------------------------------


def test_three_consumers_share_six_partitions_and_two_take_over_when_one_closes(
    broker: BrokerProcess,
) -> None:
    topic, group = "share", "share-group"
    create_topic(broker.bootstrap, topic)
    members = [GroupMember(broker.bootstrap, group, topic).start() for _ in range(3)]
    try:
        wait_until(
            lambda: split_evenly(owned_by(members)),
            "three consumers own two partitions each",
            timeout=30,
        )
        wait_until(
            lambda: stable_with(broker.bootstrap, group, members), "Stable, 3 members", timeout=30
        )
        description = describe(broker.bootstrap, group)
        assert len(description.members) == 3
        assert sorted(map(len, described_assignment(description).values())) == [2, 2, 2]

        members[0].close()
        survivors = members[1:]
        wait_until(
            lambda: split_evenly(owned_by(survivors)),
            "the two remaining consumers own three partitions each",
            timeout=30,
        )
        wait_until(lambda: stable_with(broker.bootstrap, group, survivors), "Stable, 2", timeout=30)
    finally:
        close_all(members)


def test_a_killed_member_is_replaced_after_its_session_timeout(broker: BrokerProcess) -> None:
    topic, group = "killed", "killed-group"
    session_ms = 3000
    create_topic(broker.bootstrap, topic)
    survivors = [GroupMember(broker.bootstrap, group, topic).start() for _ in range(2)]
    process = subprocess.Popen(
        [sys.executable, str(MEMBER_SCRIPT), broker.bootstrap, group, topic,
         str(session_ms), str(HEARTBEAT_INTERVAL_MS)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    reported: list[dict[str, Any]] = []

    def read_reports() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            reported.append(json.loads(line))

    reader = threading.Thread(target=read_reports, daemon=True)
    reader.start()

    def owned_by_process() -> frozenset[int]:
        owned: set[int] = set()
        for report in list(reported):
            if report["event"] == "assign":
                owned |= set(report["partitions"])
            else:
                owned -= set(report["partitions"])
        return frozenset(owned)

    try:
        wait_until(
            lambda: split_evenly([owned_by_process(), *owned_by(survivors)]),
            "the process and the two threads own two partitions each",
            timeout=30,
        )
        wait_until(
            lambda: (
                (description := describe(broker.bootstrap, group)).state
                == ConsumerGroupState.STABLE
                and len(description.members) == 3
            ),
            "Stable with 3 members",
            timeout=30,
        )
        killed_at = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)

        wait_until(
            lambda: split_evenly(owned_by(survivors)),
            "the survivors own all six partitions",
            timeout=30,
        )
        first_revoke = min(
            e.at for m in survivors for e in m.events if e.kind == "revoke" and e.at > killed_at
        )
        taken_over = max(m.events[-1].at for m in survivors)
        # The broker can only notice a silent member through its session timer: its last
        # heartbeat was at most one heartbeat interval before the kill.
        slack = (HEARTBEAT_INTERVAL_MS + 500) / 1000
        assert first_revoke - killed_at >= session_ms / 1000 - slack
        assert taken_over - killed_at < 20
        description = describe(broker.bootstrap, group)
        assert len(description.members) == 2
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        close_all(survivors)


def test_cooperative_sticky_moves_only_the_partitions_a_new_member_takes(
    broker: BrokerProcess,
) -> None:
    topic, group = "cooperative", "cooperative-group"
    create_topic(broker.bootstrap, topic)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    first = [GroupMember(broker.bootstrap, group, topic, config=strategy).start() for _ in range(2)]
    members = list(first)
    try:
        wait_until(
            lambda: split_evenly(owned_by(first)),
            "two consumers own three partitions each",
            timeout=30,
        )
        wait_until(
            lambda: stable_with(broker.bootstrap, group, first), "Stable, 2 members", timeout=30
        )
        # confluent-kafka's Consumer has no rebalance_protocol() (librdkafka's is not bound):
        # the protocol the group chose and the incremental callbacks below show it instead.
        assert describe(broker.bootstrap, group).partition_assignor == "cooperative-sticky"
        before = [m.owned for m in first]
        seen = [len(m.events) for m in first]

        third = GroupMember(broker.bootstrap, group, topic, config=strategy).start()
        members.append(third)
        wait_until(
            lambda: split_evenly(owned_by(members)),
            "three consumers own two partitions each",
            timeout=30,
        )
        wait_until(lambda: stable_with(broker.bootstrap, group, members), "Stable, 3", timeout=30)

        moved: set[int] = set()
        for member, owned_before, count in zip(first, before, seen, strict=True):
            later = member.events[count:]
            revoked = frozenset().union(*(e.partitions for e in later if e.kind == "revoke"))
            assigned = frozenset().union(*(e.partitions for e in later if e.kind == "assign"))
            kept = owned_before & member.owned
            assert len(kept) == 2  # sticky: it keeps two of its three
            assert revoked == owned_before - member.owned  # only what moved was revoked
            assert not assigned  # incremental: nothing it kept was handed to it again
            moved |= revoked
        assert moved == third.owned
        assert third.revocations() == []
    finally:
        close_all(members)


def test_every_record_is_processed_exactly_once_across_rebalances(
    broker: BrokerProcess,
) -> None:
    topic, group = "exactly-once", "exactly-once-group"
    count = 3000
    create_topic(broker.bootstrap, topic)
    produce_keyed(broker.bootstrap, topic, count)
    ends = high_watermarks(broker.bootstrap, topic)
    assert sum(ends.values()) == count

    def member() -> GroupMember:
        return GroupMember(
            broker.bootstrap, group, topic, commit_every=10, process_delay=0.002
        ).start()

    def processed() -> int:
        return sum(len(m.processed) for m in members)

    members = [member(), member()]
    try:
        # Each change lands while records remain, so partitions move mid-stream.
        wait_until(lambda: processed() >= 500, "500 records processed", timeout=30)
        members.append(member())  # rebalance: 2 → 3
        wait_until(lambda: bool(members[2].processed), "the third consumer processes", timeout=30)
        members[0].close()  # rebalance: 3 → 2
        wait_until(lambda: processed() >= 2000, "2000 records processed", timeout=30)
        members.append(member())  # rebalance: 2 → 3
        wait_until(lambda: processed() >= count, "every record processed", timeout=60)
        assert processed() < 2 * count
        # No record still in flight could be handed out twice once every member has closed.
        close_all(members)

        seen = Counter((p, o) for m in members for p, o, _ in m.processed)
        duplicates = {position: n for position, n in seen.items() if n > 1}
        assert duplicates == {}
        assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}
        keys = sorted(key for m in members for _, _, key in m.processed)
        assert keys == sorted(f"key-{i}".encode() for i in range(count))
        assert all(len(m.assignments()) >= 1 for m in members)

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
        committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=10)
        consumer.close()
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        close_all(members)


def test_a_static_member_that_returns_within_its_session_causes_no_rebalance(
    broker: BrokerProcess,
) -> None:
    topic, group = "static", "static-group"
    session_ms = 4000
    create_topic(broker.bootstrap, topic)
    static = {"group.instance.id": "static-a", "session.timeout.ms": session_ms}
    # The leader stays (a returning leader is the next test).
    leader = GroupMember(broker.bootstrap, group, topic).start()
    members = [leader]
    try:
        wait_until(
            lambda: leader.owned == ALL_PARTITIONS, "the leader owns every partition", timeout=30
        )
        first = GroupMember(broker.bootstrap, group, topic, config=static).start()
        members.append(first)
        wait_until(
            lambda: split_evenly(owned_by(members)),
            "two consumers own three partitions each",
            timeout=30,
        )
        wait_until(lambda: stable_with(broker.bootstrap, group, members), "Stable, 2", timeout=30)
        [described] = [m for m in describe(broker.bootstrap, group).members if m.group_instance_id]
        assert (described.member_id, described.group_instance_id) == (first.member_id, "static-a")
        partitions, leader_events = first.owned, len(leader.events)

        first.close()  # a static member sends no LeaveGroup: it keeps its place
        closed_at = time.monotonic()
        description = describe(broker.bootstrap, group)
        assert description.state == ConsumerGroupState.STABLE
        assert first.member_id in described_assignment(description)

        again = GroupMember(broker.bootstrap, group, topic, config=static).start()
        members.append(again)
        wait_until(lambda: bool(again.owned), "the returning member gets partitions", timeout=30)
        assert again.assignments() == [partitions]
        # Only time passing can show that nothing else happens: wait out the closed
        # member's session, which would have expired by now had it not been replaced.
        time.sleep(max(0.0, closed_at + session_ms / 1000 + 1.0 - time.monotonic()))
        assert len(leader.events) == leader_events  # no revoke, no assign: no rebalance
        assert again.assignments() == [partitions] and again.revocations() == []
        assert stable_with(broker.bootstrap, group, [leader, again])
        [described] = [m for m in describe(broker.bootstrap, group).members if m.group_instance_id]
        assert described.group_instance_id == "static-a"
    finally:
        close_all(members)


def test_a_static_leader_that_returns_within_its_session_causes_no_rebalance(
    broker: BrokerProcess,
) -> None:
    # librdkafka joins with JoinGroup v5: Kafka answers the returning leader with its old
    # member id as leader, so it syncs as a follower and gets its partitions back.
    topic, group = "static-leader", "static-leader-group"
    session_ms = 4000
    create_topic(broker.bootstrap, topic)
    static = {"group.instance.id": "static-leader", "session.timeout.ms": session_ms}
    leader = GroupMember(broker.bootstrap, group, topic, config=static).start()
    members = [leader]
    try:
        wait_until(
            lambda: leader.owned == ALL_PARTITIONS, "the leader owns every partition", timeout=30
        )
        follower = GroupMember(broker.bootstrap, group, topic).start()
        members.append(follower)
        wait_until(
            lambda: split_evenly(owned_by(members)),
            "two consumers own three partitions each",
            timeout=30,
        )
        wait_until(lambda: stable_with(broker.bootstrap, group, members), "Stable, 2", timeout=30)
        partitions, follower_events = leader.owned, len(follower.events)

        leader.close()  # a static member sends no LeaveGroup: it keeps its place
        closed_at = time.monotonic()
        again = GroupMember(broker.bootstrap, group, topic, config=static).start()
        members.append(again)
        wait_until(lambda: bool(again.owned), "the returning leader gets partitions", timeout=30)
        assert again.assignments() == [partitions]
        # Only time passing can show that nothing else happens: wait out the closed
        # leader's session, which would have expired by now had it not been replaced.
        time.sleep(max(0.0, closed_at + session_ms / 1000 + 1.0 - time.monotonic()))
        assert len(follower.events) == follower_events  # no revoke, no assign: no rebalance
        assert again.assignments() == [partitions] and again.revocations() == []
        assert stable_with(broker.bootstrap, group, [follower, again])
    finally:
        close_all(members)


@pytest.fixture
def delayed_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker that waits 1.5 s for more members before a new group's first rebalance."""
    broker = start_broker(
        tmp_path / "data",
        overrides=["group.initial.rebalance.delay.ms=1500", "group.min.session.timeout.ms=1000"],
    )
    try:
        yield broker
    finally:
        broker.stop()


def test_the_initial_rebalance_delay_holds_back_the_first_assignment(
    delayed_broker: BrokerProcess,
) -> None:
    topic, group = "delayed", "delayed-group"
    create_topic(delayed_broker.bootstrap, topic)
    member = GroupMember(delayed_broker.bootstrap, group, topic).start()
    try:
        wait_until(
            lambda: member.owned == ALL_PARTITIONS, "the consumer owns everything", timeout=30
        )
        assert member.events[0].at - member.subscribed_at >= 1.5
    finally:
        member.close()


def test_consumers_starting_within_the_initial_delay_share_the_first_generation(
    delayed_broker: BrokerProcess,
) -> None:
    topic, group = "delayed-together", "delayed-together-group"
    create_topic(delayed_broker.bootstrap, topic)
    members = [GroupMember(delayed_broker.bootstrap, group, topic) for _ in range(3)]
    for member in members:
        member.start()
    try:
        wait_until(
            lambda: split_evenly(owned_by(members)),
            "three consumers own two partitions each",
            timeout=30,
        )
        wait_until(
            lambda: stable_with(delayed_broker.bootstrap, group, members), "Stable", timeout=30
        )
        for member in members:
            # One assignment and no revocation: the first generation was the only one.
            assert member.assignments() == [member.owned]
            assert member.revocations() == []
    finally:
        close_all(members)


def test_committed_offsets_and_the_group_survive_a_broker_restart(
    broker: BrokerProcess,
) -> None:
    topic, group = "restart", "restart-group"
    partitions, per_partition, consumed = 3, 100, 100
    create_topic(broker.bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(partitions * per_partition):
        producer.produce(topic, f"value-{i}".encode(), partition=i % partitions)
    assert producer.flush(10) == 0

    members = [
        GroupMember(
            broker.bootstrap, group, topic, commit_every=1, process_delay=0.002, stop_after=50
        ).start()
        for _ in range(2)
    ]
    wait_until(lambda: all(m.closed for m in members), "both consumers stop after 50", timeout=60)
    close_all(members)
    positions: dict[int, int] = dict.fromkeys(range(partitions), 0)
    for partition, offset, _ in sorted(p for m in members for p in m.processed):
        assert offset == positions[partition]  # each partition read once, in order
        positions[partition] = offset + 1
    assert sum(positions.values()) == consumed

    broker.restart()

    description = describe(broker.bootstrap, group)
    assert description.state == ConsumerGroupState.EMPTY
    assert description.members == []
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    committed = consumer.committed(tps, timeout=10)
    consumer.close()
    expected = {p: offset or OFFSET_INVALID for p, offset in positions.items()}
    assert {tp.partition: tp.offset for tp in committed} == expected

    resumed = GroupMember(broker.bootstrap, group, topic).start()
    try:
        remaining = partitions * per_partition - consumed
        wait_until(lambda: len(resumed.processed) >= remaining, "the rest is consumed", timeout=30)
        first_offsets: dict[int, int] = {}
        for partition, offset, _ in resumed.processed:
            first_offsets.setdefault(partition, offset)
        assert first_offsets == {
            p: positions[p] for p in range(partitions) if positions[p] < per_partition
        }
        assert len(resumed.processed) == remaining
    finally:
        resumed.close()
