"""Admin operations on replicas: leader elections, and the log dirs that hold them."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from samsa.client.admin.base import AdminBase, item_error
from samsa.client.errors import error_for
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.types import TopicPartition

__all__ = [
    "ElectionType",
    "LogDirDescription",
    "PartitionReassignment",
    "ReplicaAdmin",
    "ReplicaInfo",
]


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType``: the preferred replica, or any live one (unclean)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A partition's replica in a log dir: its size and how far it lags its high watermark."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log dir of a broker (DescribeLogDirs)."""

    path: str
    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A partition's move under way: its replicas meanwhile, those being added, removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class ReplicaAdmin(AdminBase):
    """Leader elections and reassignments (sent to the controller), and log dirs."""

    async def _controller_request(
        self, api_key: int, body: dict[str, Any], what: str, timeout_ms: int | None
    ) -> Any:
        async def attempt() -> Any:
            cluster = self._cluster
            target = cluster.controller_id if cluster.controller_id in cluster.nodes else None
            response = await cluster.send(target, api_key, body)
            code = int(getattr(response, "error_code", 0))
            if code == ErrorCode.NOT_CONTROLLER:
                cluster.request_update()
                raise error_for(code, f"{what}: the controller moved")
            if code:
                raise error_for(code, f"{what}: {getattr(response, 'error_message', '') or ''}")
            return response

        return await self._retrying(attempt, what, timeout_ms)

    async def alter_partition_reassignments(
        self,
        targets: dict[TopicPartition, Iterable[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move each partition to its target replicas (None: cancel its move); each
        partition's error, None where the move started (or was cancelled)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition,
                 "replicas": None if replicas is None else list(replicas)}
            )  # fmt: skip
        body = {
            "timeout": self._request_timeout(timeout_ms),
            "allow_replication_factor_change": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        response = await self._controller_request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, "alter partition reassignments", timeout_ms
        )
        return {
            TopicPartition(topic.name, p.partition_index): item_error(
                int(p.error_code), f"{topic.name}-{p.partition_index}", p.error_message
            )
            for topic in response.responses
            for p in topic.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The moves under way (of ``partitions``, or all)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = {"timeout": self._request_timeout(timeout_ms), "topics": topics}
        response = await self._controller_request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, body, "list partition reassignments", timeout_ms
        )
        return {
            TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        topics: Iterable[str] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[int, list[LogDirDescription]]:
        """The log dirs of ``brokers`` (None: every broker) with the replicas of ``topics``
        (None: every topic) each holds."""
        await self.start()
        cluster = self._cluster
        if brokers is None:
            await cluster.refresh()
        wanted = sorted(cluster.nodes) if brokers is None else list(brokers)
        body: dict[str, Any] = {"topics": None}
        if topics is not None:
            names = list(topics)
            metadata = await self._metadata(names)
            body["topics"] = [
                {"topic": t.name, "partitions": [p.partition_index for p in t.partitions]}
                for t in metadata.topics
                if not t.error_code
            ]
        described: dict[int, list[LogDirDescription]] = {}
        for broker in wanted:

            async def attempt(broker: int = broker) -> Any:
                return await cluster.send(broker, ApiKey.DESCRIBE_LOG_DIRS, body)

            response = await self._retrying(attempt, f"describe log dirs of {broker}", timeout_ms)
            described[broker] = [
                LogDirDescription(
                    str(result.log_dir),
                    item_error(int(result.error_code), str(result.log_dir)),
                    {
                        TopicPartition(t.name, p.partition_index): ReplicaInfo(
                            int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
                        )
                        for t in result.topics
                        for p in t.partitions
                    },
                    int(getattr(result, "total_bytes", -1)),
                    int(getattr(result, "usable_bytes", -1)),
                )
                for result in response.results
            ]
        return described

    async def elect_leaders(
        self,
        election_type: ElectionType = ElectionType.PREFERRED,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect leaders of ``partitions`` (None: every partition); each partition's error,
        None where its leader changed. ``ElectionNotNeededError`` says the partition
        already has the leader asked for; nothing is raised here."""
        wanted = None if partitions is None else list(partitions)
        by_topic: dict[str, list[int]] = {}
        for tp in wanted or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "election_type": int(election_type),
            "topic_partitions": None
            if wanted is None
            else [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "timeout": self._request_timeout(timeout_ms),
        }

        response = await self._controller_request(
            ApiKey.ELECT_LEADERS, body, "elect leaders", timeout_ms
        )
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, p.partition_id)
                results[tp] = item_error(int(p.error_code), str(tp), p.error_message)
        return results
