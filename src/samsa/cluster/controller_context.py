"""The active controller's view of the cluster and the events its one queue processes.

:class:`ControllerContext` is Kafka's ``ControllerContext``: the cluster as the
active :class:`~samsa.cluster.controller.Controller` sees it, rebuilt from
ZooKeeper on failover and changed only by the controller's event task.
:class:`Event` names what that task processes (Kafka's ``ControllerEvent``s).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from samsa.cluster import zk_data
from samsa.cluster.kafka_zk import ControllerEpoch
from samsa.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from samsa.types import TopicPartition


class Event(enum.Enum):
    """What the controller's one task processes, in order."""

    ELECT = "elect"  # /controller changed (or start-up): try to become the controller
    BROKERS_CHANGED = "brokers"  # /brokers/ids children changed
    TOPICS_CHANGED = "topics"  # /brokers/topics children changed
    PARTITIONS_CHANGED = "partitions"  # a topic's assignment changed (partitions added)
    DELETIONS_QUEUED = "deletions"  # /admin/delete_topics children changed
    SESSION_LOST = "session"  # the ZooKeeper session expired: resign, elect again
    ELECT_LEADERS = "elect-leaders"  # an ElectLeaders request (preferred or unclean)
    REBALANCE = "rebalance"  # the periodic leader imbalance check
    REASSIGN = "reassign"  # an AlterPartitionReassignments request
    REASSIGNMENT_PROGRESS = "reassignment-progress"  # a reassigned partition's state changed


@dataclass
class ControllerContext:
    """The active controller's view of the cluster, rebuilt from ZooKeeper on failover."""

    epoch: ControllerEpoch
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    """Registered and not in a controlled shutdown: the brokers leaders are chosen from."""
    shutting_down: frozenset[int] = frozenset()
    """Registered, in a controlled shutdown: led by no one, in no ISR."""
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    unclean: dict[str, bool] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.topics[tp.topic].partitions.get(tp.partition, ())

    def lost(self, tp: TopicPartition) -> frozenset[int]:
        """Live brokers that came back without ``tp``'s log, but its leader: a broker
        leading it with its log lost was elected knowing it (an unclean election)."""
        state = self.states.get(tp)
        leader = zk_data.NO_LEADER if state is None else state.leader
        return frozenset(
            broker
            for broker, registration in self.live_brokers.items()
            if tp in registration.lost_replicas and broker != leader
        )

    def partitions(self, topics: Iterable[str] | None = None) -> list[TopicPartition]:
        names = self.topics if topics is None else [t for t in topics if t in self.topics]
        return [
            TopicPartition(topic, partition)
            for topic in names
            for partition in sorted(self.topics[topic].partitions)
        ]
