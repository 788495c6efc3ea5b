"""CreateTopics (key 19, versions 0–7) and DeleteTopics (key 20, versions 0–6).

The topic manager (:mod:`samsa.broker.metadata.topic_manager`) makes the change; this
module translates requests and responses; a created topic's answer (v5+) lists
every topic config with its value and source, as Kafka's does (KIP-525). Topic
configs are checked against Kafka's topic-level names here (INVALID_CONFIG
otherwise). Internal topics cannot be deleted (INVALID_TOPIC_EXCEPTION, a deviation: see
:mod:`samsa.broker.metadata.internal_topics`). With the authorizer on, creating a topic
needs CREATE on the cluster or on the topic, deleting one DELETE on it
(TOPIC_AUTHORIZATION_FAILED per topic), as Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import error_fields, respond
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.internal_topics import refuse_client_change
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import NewTopic, TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.errors import (
    ConfigError,
    ErrorCode,
    InvalidConfigError,
    KafkaError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader
from samsa.storage.log_config import TOPIC_CONFIG

MAX_PARTITIONS_PER_REQUEST = 10_000
TOPIC = ResourceType.TOPIC


def _requested_partitions(config: BrokerConfig, topic: Any) -> int:
    if topic.assignments:
        return len(topic.assignments)
    count = topic.num_partitions
    return int(config["num.partitions"]) if count == -1 else int(count)


def _new_topic(topic: Any) -> NewTopic:
    configs: dict[str, str] = {}
    for config in topic.configs or ():
        if config.value is None:
            continue
        try:
            TOPIC_CONFIG.parse_value(config.name, config.value)
        except ConfigError as exc:
            raise InvalidConfigError(str(exc)) from exc
        configs[config.name] = config.value
    assignments = None
    if topic.assignments:
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    return NewTopic(
        topic.name, topic.num_partitions, topic.replication_factor, assignments, configs
    )


def register(
    registry: ApiRegistry,
    *,
    config: Any,
    metadata: MetadataCache,
    topics: TopicManager,
    created_configs: Callable[[Mapping[str, str]], list[dict[str, Any]]],
) -> None:
    async def create_one(
        topic: Any, validate_only: bool, over_limit: bool, timeout_ms: int, cluster_create: bool
    ) -> dict[str, Any]:
        name = topic.name
        try:
            if over_limit:
                # Kafka's cap (KAFKA-17870): one request may not create this many partitions.
                raise PolicyViolationError(
                    "Excessively large number of partitions per request: more than "
                    f"{MAX_PARTITIONS_PER_REQUEST}"
                )
            if not cluster_create and not authorize(AclOperation.CREATE, TOPIC, name):
                raise TopicAuthorizationFailedError(f"not authorized to create {name}")
            new_topic = _new_topic(topic)
            created = await topics.create_topic(
                new_topic, validate_only=validate_only, timeout_ms=timeout_ms
            )
            return {
                "name": name,
                "topic_id": created.info.topic_id,
                "error_code": ErrorCode.NONE,
                "num_partitions": created.info.partitions,
                "replication_factor": created.replication_factor,
                "configs": created_configs(new_topic.configs),
            }
        except KafkaError as exc:
            return {"name": name, **error_fields(exc), "num_partitions": -1,
                    "replication_factor": -1, "configs": []}  # fmt: skip

    async def create_topics(header: RequestHeader, body: Any) -> Any:
        validate_only = getattr(body, "validate_only", False)
        total = sum(max(_requested_partitions(config(), t), 0) for t in body.topics)
        over = total > MAX_PARTITIONS_PER_REQUEST
        timeout_ms = duration_ms(body.timeout)
        cluster_create = authorize_cluster(AclOperation.CREATE)
        results = [
            await create_one(topic, validate_only, over, timeout_ms, cluster_create)
            for topic in body.topics
        ]
        return respond(header, {"throttle_time": 0, "topics": results})

    async def delete_topics(header: RequestHeader, body: Any) -> Any:
        if hasattr(body, "topics"):
            wanted = [(t.name, t.topic_id) for t in body.topics]
        else:
            wanted = [(name, None) for name in body.topic_names]
        results = []
        for name, topic_id in wanted:
            try:
                if not config()["delete.topic.enable"]:
                    raise TopicDeletionDisabledError("delete.topic.enable is false")
                if name is None and topic_id is not None:
                    found = metadata.by_id(topic_id)
                    if found is None:
                        raise UnknownTopicIdError(f"no topic has id {topic_id}")
                    name = found.name
                if not authorize(AclOperation.DELETE, TOPIC, name or ""):
                    raise TopicAuthorizationFailedError(f"not authorized to delete {name}")
                refuse_client_change(metadata, name or "", "delete")
                info = await topics.delete_topic(name or "", timeout_ms=duration_ms(body.timeout))
                results.append(
                    {"name": info.name, "topic_id": info.topic_id, "error_code": ErrorCode.NONE}
                )
            except KafkaError as exc:
                results.append({"name": name, "topic_id": topic_id, **error_fields(exc)})
        return respond(header, {"throttle_time": 0, "responses": results})

    registry.add(ApiKey.CREATE_TOPICS, 0, 7, create_topics)
    registry.add(ApiKey.DELETE_TOPICS, 0, 6, delete_topics)
