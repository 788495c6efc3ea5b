"""The topic lifecycle in one place: create, auto-create, internal topics, add partitions,
change configs, delete.

Handlers ask a :class:`TopicManager`; it decides how a change is made:

* a single node (:class:`LocalTopicManager`): a new topic's logs are made
  first, all or none, then the topic table names it (so the table never
  names a partition without a log); a deleted topic leaves the table, its
  logs are removed and every group forgets its committed offsets;
* a cluster (:mod:`samsa.broker.metadata.zk_topic_manager`): the change is written to
  ZooKeeper, where the controller and every broker take it from.

Checks shared by both (partition counts, replication factors, manual
assignments, topic names) live here too; what a client may not do to an
internal topic is checked by the handlers (:mod:`samsa.broker.metadata.internal_topics`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.internal_topics import TRANSACTION_STATE_CONFIGS_FIXED
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore, TopicInfo, validate_topic_name
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from samsa.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from samsa.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    UnknownTopicOrPartitionError,
)
from samsa.types import TopicPartition

log = logging.getLogger(__name__)

DEFAULT = -1
"""A partition count or replication factor of -1: the broker's default."""


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create, as CreateTopics asks for it."""

    name: str
    num_partitions: int = DEFAULT
    replication_factor: int = DEFAULT
    assignments: Mapping[int, Sequence[int]] | None = None
    """Replicas of each partition, given by hand (then the counts above are -1)."""
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    info: TopicInfo
    replication_factor: int


class TopicManager(Protocol):
    """Every change to the set of topics, their partitions and their configs."""

    async def create_topic(
        self, topic: NewTopic, *, validate_only: bool = False, timeout_ms: int = 30_000
    ) -> CreatedTopic:
        """Create ``topic`` (or only check it); raises the Kafka error a request gets.

        ``timeout_ms`` bounds the wait for the new partitions' leaders (a cluster's)."""
        ...

    async def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` with the defaults (Metadata's auto-creation, internal topics as
        their coordinators make them); the topic if it can be served now, else None."""
        ...

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` unless it exists."""
        ...

    async def ensure_transaction_topic(self) -> None:
        """Create ``__transaction_state`` unless it exists."""
        ...

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> None:
        """Grow ``name`` to ``count`` partitions (``assignments``: replicas of each new one)."""
        ...

    async def alter_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace ``name``'s config overrides."""
        ...

    async def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> TopicInfo:
        """Delete ``name``; the deleted topic."""
        ...


# -- checks shared by every topic manager -----------------------------------------------


def partitions_and_replication(topic: NewTopic, config: BrokerConfig) -> tuple[int, int]:
    """The partition count and replication factor ``topic`` asks for, defaults applied."""
    if topic.assignments:
        replicas = {len(r) for r in topic.assignments.values()}
        if len(replicas) != 1:
            raise InvalidReplicaAssignmentError(
                "All partitions should have the same number of replicas"
            )
        if sorted(topic.assignments) != list(range(len(topic.assignments))):
            raise InvalidReplicaAssignmentError(
                "Partitions should be a consecutive 0-based integer sequence"
            )
        for partition, brokers in topic.assignments.items():
            if len(set(brokers)) != len(brokers):
                raise InvalidReplicaAssignmentError(
                    f"Duplicate brokers not allowed in replica assignment: {list(brokers)} "
                    f"for partition id {partition}."
                )
        return len(topic.assignments), replicas.pop()
    partitions = topic.num_partitions
    if partitions == DEFAULT:
        partitions = int(config["num.partitions"])
    replication = topic.replication_factor
    if replication == DEFAULT:
        replication = int(config["default.replication.factor"])
    if partitions < 1:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication < 1:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    return partitions, replication


def check_replicas_exist(
    assignments: Mapping[int, Sequence[int]] | Sequence[Sequence[int]], brokers: set[int]
) -> None:
    """A manual assignment may name only brokers that are registered."""
    rows = assignments.values() if isinstance(assignments, Mapping) else assignments
    for replicas in rows:
        if not replicas:
            raise InvalidReplicaAssignmentError(
                "The manual partition assignment includes an empty replica list."
            )
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {unknown[0]}, but no such "
                f"broker is registered (live brokers: {sorted(brokers)})."
            )


def check_partition_growth(info: TopicInfo, count: int) -> None:
    if count == info.partitions:
        raise InvalidPartitionsError(f"Topic already has {info.partitions} partition(s).")
    if count < info.partitions:
        raise InvalidPartitionsError(
            f"The topic {info.name} currently has {info.partitions} partition(s); "
            f"{count} would not be an increase."
        )


def check_added_assignments(
    info: TopicInfo,
    count: int,
    assignments: Sequence[Sequence[int]],
    replication: int,
    brokers: set[int],
) -> None:
    """Manual assignments of added partitions: one per partition, known brokers, as many
    replicas as the topic's other partitions."""
    added = count - info.partitions
    if len(assignments) != added:
        raise InvalidReplicaAssignmentError(
            f"Attempted to add {added} additional partition(s), but "
            f"{len(assignments)} assignment(s) were specified."
        )
    check_replicas_exist(assignments, brokers)
    for replicas in assignments:
        if len(replicas) != replication:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{replication} replica(s)."
            )


def transaction_state_configs(config: BrokerConfig) -> dict[str, str]:
    return {
        **TRANSACTION_STATE_CONFIGS_FIXED,
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
    }


# -- a single node ------------------------------------------------------------------------


class LocalTopicManager:
    """Topics of a single node: its topic table and its logs, changed together."""

    def __init__(
        self,
        store: LocalMetadataStore,
        replica_manager: ReplicaManager,
        config: Callable[[], BrokerConfig],
        *,
        node_id: int,
        offsets_partitions: int,
        transaction_partitions: int,
        on_partitions_deleted: Callable[[list[TopicPartition]], Awaitable[object]],
    ) -> None:
        self._store = store
        self._replica_manager = replica_manager
        self._config = config
        self._node_id = node_id
        self._offsets_partitions = offsets_partitions
        self._transaction_partitions = transaction_partitions
        self._on_partitions_deleted = on_partitions_deleted

    async def create_topic(
        self, topic: NewTopic, *, validate_only: bool = False, timeout_ms: int = 30_000
    ) -> CreatedTopic:
        partitions, replication = partitions_and_replication(topic, self._config())
        if topic.assignments:
            check_replicas_exist(topic.assignments, {self._node_id})
        if replication != 1:
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication} larger than available brokers: 1."
            )
        planned = self._store.create_topic(
            topic.name, partitions, topic.configs, validate_only=True
        )
        if validate_only:
            return CreatedTopic(planned, replication)
        logs = await self._replica_manager.make_logs(planned)
        try:
            info = self._store.create_topic(topic.name, partitions, topic.configs)
        except BaseException:
            await logs.discard_async()
            raise
        logs.serve()
        return CreatedTopic(info, replication)

    async def auto_create(self, name: str) -> TopicInfo | None:
        """Created at once: the Metadata answer already lists the new partitions (Kafka
        answers LEADER_NOT_AVAILABLE first and makes the client ask again)."""
        validate_topic_name(name)
        if name == OFFSETS_TOPIC:
            await self.ensure_offsets_topic()
        elif name == TRANSACTION_STATE_TOPIC:
            await self.ensure_transaction_topic()
        else:
            self._create_now(name, self._config()["num.partitions"], {}, is_internal=False)
        return self._store.get(name)

    async def ensure_offsets_topic(self) -> None:
        if self._store.get(OFFSETS_TOPIC) is None:
            self._create_now(
                OFFSETS_TOPIC, self._offsets_partitions, OFFSETS_TOPIC_CONFIGS, is_internal=True
            )

    async def ensure_transaction_topic(self) -> None:
        if self._store.get(TRANSACTION_STATE_TOPIC) is None:
            self._create_now(
                TRANSACTION_STATE_TOPIC,
                self._transaction_partitions,
                transaction_state_configs(self._config()),
                is_internal=True,
            )

    def _create_now(
        self, name: str, partitions: int, configs: Mapping[str, str], *, is_internal: bool
    ) -> None:
        """Create a small topic without leaving the loop: no other request sees it half made."""
        if self._store.get(name) is not None:
            return
        planned = self._store.create_topic(
            name, partitions, configs, is_internal=is_internal, validate_only=True
        )
        logs = self._replica_manager.make_logs_now(planned)
        try:
            self._store.create_topic(name, partitions, configs, is_internal=is_internal)
        except BaseException:
            logs.discard()
            raise
        logs.serve()

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> None:
        info = self._store.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        check_partition_growth(info, count)
        if assignments is not None:
            check_added_assignments(info, count, assignments, 1, {self._node_id})
        grown = self._store.set_partitions(name, count, validate_only=True)
        if validate_only:
            return
        # The new logs first (all or none), then the table: never a count without logs.
        logs = await self._replica_manager.make_logs(grown)
        try:
            self._store.set_partitions(name, count)
        except BaseException:
            await logs.discard_async()
            raise
        logs.serve()

    async def alter_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._store.set_configs(name, configs)
        self._replica_manager.apply_config(name)

    async def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> TopicInfo:
        info = self._store.delete_topic(name)
        self._replica_manager.remove_topic(info.name)
        log.info("topic %s (%s) deleted", info.name, info.topic_id)
        await self._on_partitions_deleted(
            [TopicPartition(info.name, i) for i in range(info.partitions)]
        )
        return info
