"""CreatePartitions (key 37, versions 0–3); DeleteRecords is
:mod:`~samsa.broker.handlers.delete_records`.

The topic manager (:mod:`samsa.broker.metadata.topic_manager`) checks and makes the
new partitions (a single node: a manual assignment may name only this broker,
one replica per partition). One request may add at most 10 000 partitions
(POLICY_VIOLATION otherwise, as Kafka caps CreateTopics, KAFKA-17870).
Internal topics are refused (INVALID_TOPIC_EXCEPTION, see
:mod:`samsa.broker.metadata.internal_topics`). With the authorizer on, CreatePartitions
needs ALTER on each topic (TOPIC_AUTHORIZATION_FAILED), as Kafka's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import error_fields, respond
from samsa.broker.metadata.internal_topics import refuse_client_change
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader

MAX_PARTITIONS_PER_REQUEST = 10_000


def _added_partitions(metadata: MetadataCache, topic: Any) -> int:
    info = metadata.get(topic.name)
    return max(topic.count - info.partitions, 0) if info is not None else 0


def register(
    registry: ApiRegistry,
    *,
    metadata: MetadataCache,
    topics: TopicManager,
) -> None:
    async def grow_one(
        topic: Any, validate_only: bool, over_limit: bool, timeout_ms: int
    ) -> dict[str, Any]:
        name = topic.name
        try:
            if over_limit:
                raise PolicyViolationError("Excessively large number of partitions per request.")
            if not authorize(AclOperation.ALTER, ResourceType.TOPIC, name):
                raise TopicAuthorizationFailedError("The topic authorization is failed.")
            if metadata.get(name) is None:
                raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
            refuse_client_change(metadata, name, "add partitions to")
            assignments = (
                None
                if topic.assignments is None
                else [list(a.broker_ids) for a in topic.assignments]
            )
            await topics.create_partitions(
                name, topic.count, assignments, validate_only=validate_only, timeout_ms=timeout_ms
            )
            return {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        except KafkaError as exc:
            return {"name": name, **error_fields(exc)}

    async def create_partitions(header: RequestHeader, body: Any) -> Any:
        names = Counter(topic.name for topic in body.topics)
        unique = [topic for topic in body.topics if names[topic.name] == 1]
        over = sum(_added_partitions(metadata, t) for t in unique) > MAX_PARTITIONS_PER_REQUEST
        timeout_ms = duration_ms(body.timeout)
        results = [await grow_one(topic, body.validate_only, over, timeout_ms) for topic in unique]
        duplicate = error_fields(InvalidRequestError("Duplicate topic name."))
        results += [{"name": name, **duplicate} for name, count in names.items() if count > 1]
        return respond(header, {"throttle_time": 0, "results": results})

    registry.add(ApiKey.CREATE_PARTITIONS, 0, 3, create_partitions)
