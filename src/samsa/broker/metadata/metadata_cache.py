"""What a broker knows of its cluster when it answers a request (Kafka's ``MetadataCache``).

Handlers read topics, partition leadership and live brokers through
:class:`MetadataCache` alone, whatever keeps them:

* a single node (:class:`LocalMetadataCache`): the topic table of
  :class:`~samsa.cluster.local.LocalMetadataStore`; this broker is every
  partition's leader, its only replica and its ISR, and the controller;
* a cluster (:class:`~samsa.cluster.zk_metadata.ZkMetadataCache`): what
  ZooKeeper says, kept current from watches.

Reads only: the topic lifecycle is :mod:`samsa.broker.metadata.topic_manager`'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from samsa.broker.config import Listener
from samsa.cluster.local import LocalMetadataStore, TopicInfo
from samsa.cluster.views import BrokerNode, PartitionLeadership
from samsa.types import TopicPartition

NO_LEADER = -1

__all__ = ["BrokerNode", "LocalMetadataCache", "MetadataCache", "PartitionLeadership"]


class MetadataCache(Protocol):
    """The cluster as this broker sees it now (read on the broker's loop)."""

    @property
    def cluster_id(self) -> str: ...

    def topics(self) -> Mapping[str, TopicInfo]: ...

    def get(self, name: str) -> TopicInfo | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def leadership(self, tp: TopicPartition) -> PartitionLeadership | None:
        """None when the partition does not exist or has no state yet."""
        ...

    def alive_brokers(self) -> list[BrokerNode]:
        """The live brokers that have the listener the request being served came on, each
        at its advertised address on that listener."""
        ...

    def controller_id(self) -> int:
        """The active controller's id (-1 when none is known)."""
        ...

    @property
    def leadership_changes(self) -> int:
        """Moves whenever a partition's leadership, replicas or ISR, or the live brokers,
        change: what :meth:`leadership` answers for a topic's :class:`TopicInfo` (the same
        object) stays the same while this does not move."""
        ...


class LocalMetadataCache:
    """A single node's view: its topic table, and itself as leader of every partition."""

    def __init__(
        self, store: LocalMetadataStore, node_id: int, advertised: Callable[[], Listener]
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._advertised = advertised

    @property
    def cluster_id(self) -> str:
        return self._store.cluster_id

    def topics(self) -> Mapping[str, TopicInfo]:
        return self._store.topics()

    def get(self, name: str) -> TopicInfo | None:
        return self._store.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._store.by_id(topic_id)

    def leadership(self, tp: TopicPartition) -> PartitionLeadership | None:
        info = self._store.get(tp.topic)
        if info is None or not 0 <= tp.partition < info.partitions:
            return None
        me = (self._node_id,)
        return PartitionLeadership(self._node_id, 0, me, me)

    @property
    def leadership_changes(self) -> int:
        return 0  # this broker leads every partition of a topic, as its TopicInfo says

    def alive_brokers(self) -> list[BrokerNode]:
        listener = self._advertised()
        return [BrokerNode(self._node_id, listener.host, listener.port)]

    def controller_id(self) -> int:
        return self._node_id
