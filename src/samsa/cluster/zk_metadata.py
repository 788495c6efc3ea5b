"""A broker's view of the cluster, kept current from ZooKeeper watches (Kafka's metadata cache).

Every broker in a cluster keeps the live brokers, each topic's assignment and
config, and each partition's leader and ISR, read from ZooKeeper and watched:
this is how brokers learn what the controller decided (see
:mod:`samsa.cluster.controller`: no controller-to-broker requests). A change
reaches the :class:`MetadataListener` (the replica manager: become leader,
become follower, delete a topic's logs) on the broker's loop, in the order the
events were processed, by one task that alone changes the view.

Watches are one-shot: each is set by the read that takes the new value, so no
change between two reads is lost. A partition whose state znode does not exist
yet (the controller has not written it) is watched for its creation.
After a ZooKeeper session is lost, every watch is gone: :meth:`resync` reads
everything again on the new session.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Protocol

from samsa.cluster import zk_data
from samsa.cluster.events import EventQueue
from samsa.cluster.kafka_zk import KafkaZk
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


_BROKERS = ("brokers", "")
_TOPICS = ("topics", "")


class ZkMetadataCache:
    """Live brokers, topics, configs and partition states, as ZooKeeper has them now."""

    def __init__(self, zk: KafkaZk, listener: MetadataListener) -> None:
        self.zk = zk
        self.listener = listener
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self._events: EventQueue[tuple[str, str]] = EventQueue("zk-metadata", self._handle)

    async def start(self) -> None:
        """Read everything once (watching it), then follow changes in the background."""
        await self.resync()
        self._events.start()

    async def stop(self) -> None:
        await self._events.stop()

    async def resync(self) -> None:
        """Read brokers, topics and states again and set every watch (a new session)."""
        await self._read_brokers()
        await self._read_topics()

    async def wait_idle(self) -> None:
        """Return once every change seen so far has been applied (tests)."""
        await self._events.wait_idle()

    def leader(self, tp: TopicPartition) -> int | None:
        state = self.states.get(tp)
        return None if state is None or state.leader == zk_data.NO_LEADER else state.leader

    # -- events -------------------------------------------------------------------------

    def _enqueue(self, event: tuple[str, str]) -> None:
        self._events.put(event)

    async def _handle(self, event: tuple[str, str]) -> None:
        kind, name = event
        if kind == "brokers":
            await self._read_brokers()
        elif kind == "topics":
            await self._read_topics()
        elif kind == "topic":
            await self._read_topic(name)
        elif kind == "state":
            topic, _, partition = name.rpartition("-")
            await self._read_state(TopicPartition(topic, int(partition)))

    # -- reads --------------------------------------------------------------------------

    async def _read_brokers(self) -> None:
        await self.zk.get_broker_ids(watch=lambda: self._enqueue(_BROKERS))
        brokers = await self.zk.get_brokers()
        if brokers != self.brokers:
            self.brokers = brokers
            self.listener.on_brokers_changed(dict(brokers))

    async def _read_topics(self) -> None:
        names = set(await self.zk.get_topics(watch=lambda: self._enqueue(_TOPICS)))
        for topic in sorted(set(self.topics) - names):
            self._forget(topic)
        for topic in sorted(names - set(self.topics)):
            await self._read_topic(topic)

    async def _read_topic(self, topic: str) -> None:
        assignment = await self.zk.get_topic(topic, watch=lambda: self._enqueue(("topic", topic)))
        if assignment is None:
            if topic in self.topics:
                self._forget(topic)
            return
        old = self.topics.get(topic)
        if old is not None and old.topic_id != assignment.topic_id:
            self._forget(topic)  # deleted and created again between two reads
        self.topics[topic] = assignment
        self.configs[topic] = await self.zk.get_topic_config(topic)
        for partition in sorted(assignment.partitions):
            tp = TopicPartition(topic, partition)
            if old is None or partition not in old.partitions or tp not in self.states:
                await self._read_state(tp)

    async def _read_state(self, tp: TopicPartition) -> None:
        assignment = self.topics.get(tp.topic)
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
        if old != state:
            self.listener.on_partition_changed(
                tp, assignment.partitions[tp.partition], state, assignment.topic_id
            )

    def _forget(self, topic: str) -> None:
        self.topics.pop(topic, None)
        self.configs.pop(topic, None)
        for tp in [tp for tp in self.states if tp.topic == topic]:
            del self.states[tp]
        self.listener.on_topic_deleted(topic)
