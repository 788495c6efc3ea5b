"""The topic lifecycle of a cluster: every change is a write to ZooKeeper.

Kafka's ZooKeeper-mode ``AdminManager``/``AdminZkClient``: a new topic is its
replica assignment and config under ``/brokers/topics`` and
``/config/topics``; the controller elects its partitions' first leaders; a
deletion is a node under ``/admin/delete_topics`` that the controller carries
out; added partitions are a rewritten assignment; a config change is a
rewritten ``/config/topics/<topic>``, which every broker watches. Brokers make
and remove their logs as they see the changes (:mod:`samsa.broker.metadata.zk_cluster`).

A request that changes topics waits — up to its timeout — until this broker's
metadata cache shows the result (leaders elected, the topic gone), as Kafka's
delayed CreateTopics/DeleteTopics operations do, so a client's next Metadata
request here sees it; a change not visible in time is answered
REQUEST_TIMED_OUT (it still happens). Metadata's auto-creation does not wait: it
answers LEADER_NOT_AVAILABLE and the client asks again, as with Kafka.

Internal topics get their coordinator's partition count, configs and
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor``
replicas; with fewer live brokers than that they are not created and the
coordinator lookup answers COORDINATOR_NOT_AVAILABLE, as Kafka does (so a
three-broker cluster's offsets are never created with one replica by a broker
that started first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence

from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.topic_manager import (
    CreatedTopic,
    NewTopic,
    check_added_assignments,
    check_partition_growth,
    check_replicas_exist,
    partitions_and_replication,
    transaction_state_configs,
)
from samsa.cluster.assignment import assign_replicas
from samsa.cluster.kafka_zk import KafkaZk
from samsa.cluster.local import TopicInfo, validate_topic_name
from samsa.cluster.zk_client import NodeExistsError
from samsa.cluster.zk_data import TopicAssignment
from samsa.cluster.zk_metadata import ZkMetadataCache
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from samsa.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from samsa.errors import (
    CoordinatorNotAvailableError,
    InvalidReplicationFactorError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from samsa.types import TopicPartition

log = logging.getLogger(__name__)


class ZkTopicManager:
    """Topics of a ZooKeeper cluster, changed through ZooKeeper."""

    def __init__(
        self,
        zk: KafkaZk,
        cache: ZkMetadataCache,
        config: Callable[[], BrokerConfig],
        *,
        offsets_partitions: int,
        transaction_partitions: int,
    ) -> None:
        self._zk = zk
        self._cache = cache
        self._config = config
        self._offsets_partitions = offsets_partitions
        self._transaction_partitions = transaction_partitions
        self._creating: dict[str, asyncio.Future[None]] = {}

    # -- creation -------------------------------------------------------------------------
    async def create_topic(
        self, topic: NewTopic, *, validate_only: bool = False, timeout_ms: int = 30_000
    ) -> CreatedTopic:
        name = topic.name
        validate_topic_name(name)
        partitions, replication = partitions_and_replication(topic, self._config())
        if self._cache.get(name) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        racks = self._live_racks()
        if topic.assignments:
            check_replicas_exist(topic.assignments, set(racks))
            assignment = {p: tuple(r) for p, r in topic.assignments.items()}
        else:
            if replication > len(racks):
                raise InvalidReplicationFactorError(
                    f"Replication factor: {replication} larger than available brokers: "
                    f"{len(racks)}."
                )
            assignment = assign_replicas(racks, partitions, replication)
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(topic.configs))
        if validate_only:
            return CreatedTopic(info, replication)
        await self._write_topic(info, assignment)
        await self._wait(
            lambda: self._led(name, partitions),
            timeout_ms,
            f"the partitions of {name} have no leader yet",
        )
        return CreatedTopic(self._cache.get(name) or info, replication)

    async def _write_topic(self, info: TopicInfo, assignment: dict[int, tuple[int, ...]]) -> None:
        try:
            await self._zk.create_topic(
                TopicAssignment(info.name, info.topic_id, assignment), info.configs
            )
        except NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{info.name}' already exists.") from None
        log.info("topic %s created: %s", info.name,
                 {p: list(r) for p, r in sorted(assignment.items())})  # fmt: skip

    def _live_racks(self) -> dict[int, str | None]:
        return {broker: reg.rack for broker, reg in self._cache.brokers.items()}

    def _led(self, name: str, partitions: int) -> bool:
        for index in range(partitions):
            state = self._cache.leadership(TopicPartition(name, index))
            if state is None or state.leader < 0:
                return False
        return True

    async def auto_create(self, name: str) -> TopicInfo | None:
        validate_topic_name(name)
        if name == OFFSETS_TOPIC:
            await self.ensure_offsets_topic()
        elif name == TRANSACTION_STATE_TOPIC:
            await self.ensure_transaction_topic()
        elif self._cache.get(name) is None:
            config = self._config()
            replication = min(config["default.replication.factor"], len(self._live_racks()))
            if replication < 1:
                return None
            with contextlib.suppress(TopicAlreadyExistsError):  # another broker was first
                await self.create_topic(
                    NewTopic(name, config["num.partitions"], replication), timeout_ms=0
                )
        info = self._cache.get(name)
        if info is None or not self._led(name, info.partitions):
            return None  # answered LEADER_NOT_AVAILABLE: the client asks again
        return info

    async def ensure_offsets_topic(self) -> None:
        config = self._config()
        await self._ensure_internal(
            OFFSETS_TOPIC,
            self._offsets_partitions,
            config["offsets.topic.replication.factor"],
            OFFSETS_TOPIC_CONFIGS,
        )

    async def ensure_transaction_topic(self) -> None:
        config = self._config()
        await self._ensure_internal(
            TRANSACTION_STATE_TOPIC,
            self._transaction_partitions,
            config["transaction.state.log.replication.factor"],
            {
                **transaction_state_configs(config),
                "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
            },
        )

    async def _ensure_internal(
        self, name: str, partitions: int, replication: int, configs: Mapping[str, str]
    ) -> None:
        if self._cache.get(name) is not None:
            return
        creating = self._creating.get(name)
        if creating is not None:
            await asyncio.shield(creating)
            return
        live = len(self._live_racks())
        if live < replication:
            raise CoordinatorNotAvailableError(
                f"{name} needs {replication} live brokers (its replication factor) and "
                f"{live} are alive; it is created once enough brokers are"
            )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._creating[name] = future
        try:
            assignment = assign_replicas(self._live_racks(), partitions, replication)
            info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs), True)
            with contextlib.suppress(TopicAlreadyExistsError):  # another broker was first
                await self._write_topic(info, assignment)
            await self._wait(lambda: self._cache.get(name) is not None, 30_000, f"{name} unseen")
        finally:
            del self._creating[name]
            future.set_result(None)

    # -- partitions, configs, deletion ----------------------------------------------------
    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> None:
        current = self._cache.assignments.get(name)
        info = self._cache.get(name)
        if current is None or info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        check_partition_growth(info, count)
        replication = len(next(iter(current.partitions.values())))
        racks = self._live_racks()
        if assignments is not None:
            check_added_assignments(info, count, assignments, replication, set(racks))
            added = {info.partitions + i: tuple(r) for i, r in enumerate(assignments)}
        else:
            if replication > len(racks):
                raise InvalidReplicationFactorError(
                    f"Replication factor: {replication} larger than available brokers: "
                    f"{len(racks)}."
                )
            added = assign_replicas(
                racks, count - info.partitions, replication, first_partition=info.partitions
            )
        if validate_only:
            return
        grown = TopicAssignment(
            name,
            current.topic_id,
            {**current.partitions, **added},
            current.adding_replicas,
            current.removing_replicas,
        )
        await self._zk.set_topic_assignment(grown)
        await self._wait(
            lambda: self._led(name, count), timeout_ms, f"new partitions of {name} have no leader"
        )

    async def alter_configs(self, name: str, configs: Mapping[str, str]) -> None:
        if self._cache.get(name) is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        await self._zk.set_topic_config(name, configs)
        await self._wait(
            lambda: self._cache.configs.get(name) == dict(configs),
            30_000,
            f"the config of {name} is not applied yet",
        )

    async def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> TopicInfo:
        info = self._cache.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        await self._zk.mark_topic_for_deletion(name)
        await self._wait(
            lambda: self._cache.get(name) is None, timeout_ms, f"{name} is not deleted yet"
        )
        return info

    async def _wait(self, done: Callable[[], bool], timeout_ms: int, what: str) -> None:
        """Wait for this broker's cache to show a change (Kafka's delayed admin operations)."""
        if timeout_ms > 0 and not await self._cache.wait_until(done, timeout_ms / 1000):
            raise RequestTimedOutError(f"{what} after {timeout_ms} ms")
