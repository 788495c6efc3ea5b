"""A broker's view of the cluster, kept current from ZooKeeper watches (Kafka's metadata cache).

Every broker in a cluster keeps the live brokers, each topic's assignment and
config, and each partition's leader and ISR, read from ZooKeeper and watched:
this is how brokers learn what the controller decided (see
:mod:`samsa.cluster.controller`: no controller-to-broker requests). A change
reaches the :class:`MetadataListener` (the replica manager: become leader,
become follower, delete a topic's logs, apply a topic's config) on the broker's
loop, in the order the events were processed, by one task that alone changes
the view. Handlers read the same view through the broker's ``MetadataCache``
calls (:meth:`ZkMetadataCache.get`, :meth:`ZkMetadataCache.leadership`, …).

Watches are one-shot: each is set by the read that takes the new value, so no
change between two reads is lost. A partition whose state znode does not exist
yet (the controller has not written it) is watched for its creation.
After a ZooKeeper session is lost, every watch is gone: :meth:`resync` reads
everything again on the new session.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from samsa.cluster import zk_data
from samsa.cluster.events import EventQueue
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.local import TopicInfo
from samsa.cluster.views import BrokerNode, PartitionLeadership
from samsa.cluster.zk_client import NoNodeError
from samsa.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment, ZkDataError
from samsa.types import TopicPartition

log = logging.getLogger(__name__)


class MetadataListener(Protocol):
    """What the broker does when the cluster's metadata changes (called on its loop)."""

    def on_brokers_changed(self, brokers: Mapping[int, BrokerRegistration]) -> None: ...

    def on_partition_changed(
        self,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        state: LeaderAndIsr,
        topic_id: uuid.UUID,
    ) -> None: ...

    def on_topic_deleted(self, topic: str) -> None: ...

    def on_config_changed(self, topic: str) -> None: ...


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


_BROKERS = ("brokers", "")
_TOPICS = ("topics", "")


class _Barred:
    """Membership test for :meth:`ZkMetadataCache.barred_from_isr`."""

    __slots__ = ("_registered", "_stopping")

    def __init__(self, registered: Mapping[int, object], stopping: frozenset[int]) -> None:
        self._registered = registered
        self._stopping = stopping

    def __contains__(self, broker: object) -> bool:
        return broker not in self._registered or broker in self._stopping


class ZkMetadataCache:
    """Live brokers, topics, configs and partition states, as ZooKeeper has them now."""

    def __init__(
        self, zk: KafkaZk, listener: MetadataListener, listener_name: str = "PLAINTEXT"
    ) -> None:
        self.zk = zk
        self.listener = listener
        self.listener_name = listener_name
        """The listener whose endpoints clients are told (this broker's advertised one)."""
        self.current_listener: Callable[[], str] = lambda: ""
        """The listener of the request being served (the broker sets it): clients are told
        the endpoints of the listener they came in on, where brokers have it."""
        self.cluster_id = ""
        self.brokers: dict[int, BrokerRegistration] = {}
        self.shutting_down: frozenset[int] = frozenset()
        """Brokers in a controlled shutdown: still serving and in clients' metadata, but
        leaders add none of them to an ISR."""
        self.assignments: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.controller = -1
        self._infos: dict[str, TopicInfo] = {}
        self._infos_by_id: dict[uuid.UUID, TopicInfo] = {}
        """The same topics by id: Fetch and Produce v13+ name topics by id on every request."""
        self.leadership_changes = 0
        """Moves with every change to brokers, assignments or partition states (what
        :meth:`leadership` answers); Metadata answers cache partitions until it moves."""
        self._changed = asyncio.Event()
        """Set (and replaced) after every change applied: what :meth:`wait_until` waits on."""
        self._events: EventQueue[tuple[str, str]] = EventQueue("zk-metadata", self._handle)

    async def start(self) -> None:
        """Read everything once (watching it), then follow changes in the background."""
        await self.resync()
        self._events.start()

    async def stop(self) -> None:
        await self._events.stop()

    async def resync(self) -> None:
        """Read brokers, topics, configs and states again and set every watch (a new
        session: the old one's watches are gone, and what they would have said too)."""
        await self._read_controller()
        await self._read_brokers()
        await self._read_topics(everything=True)
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``done()`` holds, checked after each change; False after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not done():
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return done()
        return True

    async def wait_idle(self) -> None:
        """Return once every change seen so far has been applied (tests)."""
        await self._events.wait_idle()

    def leader(self, tp: TopicPartition) -> int | None:
        state = self.states.get(tp)
        return None if state is None or state.leader == zk_data.NO_LEADER else state.leader

    # -- what handlers read (the broker's MetadataCache) --------------------------------
    def topics(self) -> Mapping[str, TopicInfo]:
        return dict(self._infos)

    def get(self, name: str) -> TopicInfo | None:
        return self._infos.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._infos_by_id.get(topic_id)

    def leadership(self, tp: TopicPartition) -> PartitionLeadership | None:
        assignment = self.assignments.get(tp.topic)
        state = self.states.get(tp)
        if assignment is None or state is None:
            return None
        replicas = assignment.partitions.get(tp.partition, ())
        offline = tuple(r for r in replicas if r not in self.brokers)
        leader = state.leader if state.leader in self.brokers else zk_data.NO_LEADER
        return PartitionLeadership(leader, state.leader_epoch, replicas, state.isr, offline)

    def replicas_of(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp.topic)
        return () if assignment is None else assignment.partitions.get(tp.partition, ())

    def alive_brokers(self) -> list[BrokerNode]:
        """The registered brokers that have the listener the request came on, at that
        listener's advertised address; one without it is left out, as Kafka leaves it out
        (a client there could not reach it: another port, or another security protocol)."""
        listener = self.current_listener() or self.listener_name
        nodes = []
        for broker_id, registration in sorted(self.brokers.items()):
            endpoint = registration.endpoint(listener)
            if endpoint is not None:
                nodes.append(BrokerNode(broker_id, endpoint.host, endpoint.port, registration.rack))
        return nodes

    def controller_id(self) -> int:
        """The active controller, or to a client on a listener the controller lacks the
        lowest-id broker that has it (-1: none). Clients send some admin requests to the
        controller (librdkafka waits for it before a DescribeCluster); any broker serves
        most of them, and those only the controller serves answer NOT_CONTROLLER there,
        where a controller the client cannot reach would leave it waiting."""
        listener = self.current_listener() or self.listener_name
        registration = self.brokers.get(self.controller)
        if registration is None or registration.endpoint(listener) is not None:
            return self.controller
        reachable = (b for b, r in sorted(self.brokers.items()) if r.endpoint(listener))
        return next(reachable, -1)

    def barred_from_isr(self) -> _Barred:
        """Brokers a leader may not take into an ISR: those not registered (a stopped
        follower's last fetch said it was caught up) and those in a controlled shutdown
        (Kafka's ``isReplicaIsrEligible``)."""
        return _Barred(self.brokers, self.shutting_down)

    # -- events -------------------------------------------------------------------------

    def _enqueue(self, event: tuple[str, str]) -> None:
        self._events.put(event)

    async def _handle(self, event: tuple[str, str]) -> None:
        try:
            await self._apply(event)
        finally:
            self._notify()

    async def _apply(self, event: tuple[str, str]) -> None:
        kind, name = event
        if kind == "controller":
            await self._read_controller()
        elif kind == "config":
            await self._read_config(name)
        elif kind == "brokers":
            await self._read_brokers()
        elif kind == "topics":
            await self._read_topics()
        elif kind == "topic":
            await self._read_topic(name)
        elif kind == "state":
            topic, _, partition = name.rpartition("-")
            await self._read_state(TopicPartition(topic, int(partition)))

    # -- reads --------------------------------------------------------------------------

    async def _read_controller(self) -> None:
        found = await self.zk.get_controller_id(watch=lambda: self._enqueue(("controller", "")))
        self.controller = -1 if found is None else found

    async def _read_config(self, topic: str) -> None:
        if topic not in self.assignments:
            return  # deleted meanwhile: its last watch
        config = await self.zk.get_topic_config(
            topic, watch=lambda: self._enqueue(("config", topic))
        )
        if config != self.configs.get(topic):
            self.configs[topic] = config
            self._update_info(topic)
            self.listener.on_config_changed(topic)

    def _update_info(self, topic: str) -> None:
        assignment = self.assignments[topic]
        old = self._infos.get(topic)
        if old is not None:
            self._infos_by_id.pop(old.topic_id, None)
        info = TopicInfo(
            topic,
            assignment.topic_id,
            len(assignment.partitions),
            dict(self.configs.get(topic, {})),
            topic in INTERNAL_TOPICS,
        )
        self._infos[topic] = info
        self._infos_by_id[info.topic_id] = info
        self.leadership_changes += 1

    async def _read_brokers(self) -> None:
        await self.zk.get_broker_ids(watch=lambda: self._enqueue(_BROKERS))
        self.shutting_down = await self.zk.get_shutting_down(watch=lambda: self._enqueue(_BROKERS))
        brokers = await self.zk.get_brokers()
        if brokers != self.brokers:
            self.brokers = brokers
            self.leadership_changes += 1
            self.listener.on_brokers_changed(dict(brokers))

    async def _read_topics(self, *, everything: bool = False) -> None:
        names = set(await self.zk.get_topics(watch=lambda: self._enqueue(_TOPICS)))
        for topic in sorted(set(self.assignments) - names):
            self._forget(topic)
        for topic in sorted(names if everything else names - set(self.assignments)):
            await self._read_topic(topic, everything=everything)

    async def _read_topic(self, topic: str, *, everything: bool = False) -> None:
        assignment = await self.zk.get_topic(topic, watch=lambda: self._enqueue(("topic", topic)))
        if assignment is None:
            if topic in self.assignments:
                self._forget(topic)
            return
        old = self.assignments.get(topic)
        if old is not None and old.topic_id != assignment.topic_id:
            self._forget(topic)  # deleted and created again between two reads
            old = None
        self.assignments[topic] = assignment
        self.leadership_changes += 1
        if old is None:
            self.configs[topic] = await self.zk.get_topic_config(
                topic, watch=lambda: self._enqueue(("config", topic))
            )
        elif everything:
            await self._read_config(topic)
        self._update_info(topic)
        for partition in sorted(assignment.partitions):
            tp = TopicPartition(topic, partition)
            if (
                everything
                or old is None
                or partition not in old.partitions
                or tp not in self.states
            ):
                await self._read_state(tp)
            elif old.partitions[partition] != assignment.partitions[partition]:
                # Reassigned: the replicas changed under the same state.
                self.listener.on_partition_changed(
                    tp, assignment.partitions[partition], self.states[tp], assignment.topic_id
                )

    async def _read_state(self, tp: TopicPartition) -> None:
        assignment = self.assignments.get(tp.topic)
        if assignment is None or tp.partition not in assignment.partitions:
            return  # deleted meanwhile: its last watch
        path = zk_data.partition_state_path(tp)
        watch = lambda: self._enqueue(("state", str(tp)))  # noqa: E731
        try:
            data, version = await self.zk.client.get(path, watch=watch)
        except NoNodeError:
            # Not written yet: watch for its creation (re-read if it raced in).
            if await self.zk.client.exists(path, watch=watch):
                self._enqueue(("state", str(tp)))
            return
        try:
            state = zk_data.decode_leader_and_isr(tp, data, version)
        except ZkDataError as exc:
            log.error("ignoring the state of %s: %s", tp, exc)
            return
        old = self.states.get(tp)
        if old is not None and (old.leader_epoch, old.zk_version) > (
            state.leader_epoch,
            state.zk_version,
        ):
            return  # an older state read late: epochs and znode versions only move forward
        self.states[tp] = state
        self.leadership_changes += 1
        if old != state:
            self.listener.on_partition_changed(
                tp, assignment.partitions[tp.partition], state, assignment.topic_id
            )

    def _forget(self, topic: str) -> None:
        # The listener still sees the topic (its partition count…) while it runs.
        self.listener.on_topic_deleted(topic)
        self.assignments.pop(topic, None)
        self.configs.pop(topic, None)
        info = self._infos.pop(topic, None)
        if info is not None:
            self._infos_by_id.pop(info.topic_id, None)
        for tp in [tp for tp in self.states if tp.topic == topic]:
            del self.states[tp]
            self.leadership_changes += 1
