"""CreateTopics (key 19, versions 2–7) and DeleteTopics (key 20, versions 1–6).

A topic's partition logs are made before the topic table names it, all or
none, on worker threads (other clients are answered meanwhile); if one cannot
be made (no descriptors, no space) the ones made are removed, the table is
unchanged and the topic's error is KAFKA_STORAGE_ERROR (Kafka's controller
has no such case: its brokers create logs after the metadata exists).

Single node: a replication factor above 1 is INVALID_REPLICATION_FACTOR;
manual replica assignments may name only this broker. Topic configs are
checked against Kafka's topic-level names (INVALID_CONFIG otherwise).
Deleting a topic removes every group's committed offsets of its partitions, as
Kafka's group coordinator does (``onPartitionsDeleted``: offset tombstones).
Internal topics cannot be deleted (INVALID_TOPIC_EXCEPTION, a deviation: see
:mod:`samsa.broker.internal_topics`).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from samsa.broker.api import error_fields, respond
from samsa.broker.config import BrokerConfig
from samsa.broker.internal_topics import refuse_client_change
from samsa.broker.registry import ApiRegistry
from samsa.broker.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore
from samsa.coordinator.group.coordinator import GroupCoordinator
from samsa.errors import (
    ConfigError,
    ErrorCode,
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KafkaError,
    PolicyViolationError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
)
from samsa.protocol.codec import RequestHeader
from samsa.storage.log_config import TOPIC_CONFIG
from samsa.types import TopicPartition


class TopicsServices(Protocol):
    """The part of the broker CreateTopics and DeleteTopics use."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def group_coordinator(self) -> GroupCoordinator: ...

    @property
    def metadata(self) -> LocalMetadataStore: ...

    @property
    def node_id(self) -> int: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


log = logging.getLogger(__name__)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
MAX_PARTITIONS_PER_REQUEST = 10_000


def _requested_partitions(broker: TopicsServices, topic: Any) -> int:
    if topic.assignments:
        return len(topic.assignments)
    count = topic.num_partitions
    return int(broker.config["num.partitions"]) if count == -1 else int(count)


async def _create_one(
    broker: TopicsServices, topic: Any, validate_only: bool, over_limit: bool
) -> dict[str, Any]:
    name = topic.name
    try:
        if over_limit:
            # Kafka's cap (KAFKA-17870): one request may not create this many partitions.
            raise PolicyViolationError(
                "Excessively large number of partitions per request: more than "
                f"{MAX_PARTITIONS_PER_REQUEST}"
            )
        replication = topic.replication_factor
        if replication == -1:
            replication = broker.config["default.replication.factor"]
        partitions = topic.num_partitions
        if topic.assignments:
            for assignment in topic.assignments:
                if list(assignment.broker_ids) != [broker.node_id]:
                    raise InvalidReplicaAssignmentError(
                        f"replica assignment {list(assignment.broker_ids)} names brokers "
                        f"other than this one ({broker.node_id})"
                    )
            partitions, replication = len(topic.assignments), 1
        elif partitions == -1:
            partitions = broker.config["num.partitions"]
        if replication != 1:
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication} larger than available brokers: 1."
            )
        configs: dict[str, str] = {}
        for config in topic.configs or ():
            if config.value is None:
                continue
            try:
                TOPIC_CONFIG.parse_value(config.name, config.value)
            except ConfigError as exc:
                raise InvalidConfigError(str(exc)) from exc
            configs[config.name] = config.value
        if validate_only:
            info = broker.metadata.create_topic(name, partitions, configs, validate_only=True)
        else:
            info = await broker.replica_manager.create_topic_async(name, partitions, configs)
        return {
            "name": name,
            "topic_id": info.topic_id,
            "error_code": ErrorCode.NONE,
            "num_partitions": partitions,
            "replication_factor": replication,
            "configs": None,
        }
    except KafkaError as exc:
        return {"name": name, **error_fields(exc), "num_partitions": -1, "replication_factor": -1}


def register(registry: ApiRegistry, broker: TopicsServices) -> None:
    async def create_topics(header: RequestHeader, body: Any) -> Any:
        validate_only = getattr(body, "validate_only", False)
        total = sum(max(_requested_partitions(broker, t), 0) for t in body.topics)
        over = total > MAX_PARTITIONS_PER_REQUEST
        results = [await _create_one(broker, topic, validate_only, over) for topic in body.topics]
        return respond(header, {"throttle_time": 0, "topics": results})

    async def delete_topics(header: RequestHeader, body: Any) -> Any:
        if hasattr(body, "topics"):
            wanted = [(t.name, t.topic_id) for t in body.topics]
        else:
            wanted = [(name, None) for name in body.topic_names]
        results = []
        deleted: list[TopicPartition] = []
        for name, topic_id in wanted:
            try:
                if not broker.config["delete.topic.enable"]:
                    raise TopicDeletionDisabledError("delete.topic.enable is false")
                if name is None and topic_id is not None:
                    found = broker.metadata.by_id(topic_id)
                    if found is None:
                        raise UnknownTopicIdError(f"no topic has id {topic_id}")
                    name = found.name
                refuse_client_change(broker.metadata, name or "", "delete")
                info = broker.metadata.delete_topic(name or "")
                broker.replica_manager.remove_topic(info.name)
                deleted += [TopicPartition(info.name, i) for i in range(info.partitions)]
                log.info("topic %s (%s) deleted", info.name, info.topic_id)
                results.append(
                    {"name": info.name, "topic_id": info.topic_id, "error_code": ErrorCode.NONE}
                )
            except KafkaError as exc:
                results.append({"name": name, "topic_id": topic_id, **error_fields(exc)})
        if deleted:
            await broker.group_coordinator.on_partitions_deleted(deleted)
        return respond(header, {"throttle_time": 0, "responses": results})

    registry.add(CREATE_TOPICS, 2, 7, create_topics)
    registry.add(DELETE_TOPICS, 1, 6, delete_topics)
