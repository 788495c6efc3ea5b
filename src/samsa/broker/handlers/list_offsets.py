"""ListOffsets (key 2), versions 0–11: earliest (-2), latest (-1), max timestamp (-3),
earliest local (-4), and the first offset at or after a timestamp (time index).
Tiered-storage specs (-5 latest tiered, -6 earliest pending upload) answer no
offset (-1), as Kafka does without remote storage.

Latest is the high watermark, or with ``isolation_level`` 1 (read_committed,
v2+) the last stable offset; as Kafka, a timestamp lookup (max timestamp
included) answers only offsets below that bound. A timestamp past every record
answers offset -1, timestamp -1, as Kafka does. Each answer carries the epoch
of the leader that wrote the offset (the current epoch for latest); only the
leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH for a ``current_leader_epoch`` other than its own).
With the authorizer on, each topic needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize
from samsa.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

READ_COMMITTED = 1


def register(registry: ApiRegistry, *, replicas: ReplicaManager) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
        topics = []
        for topic in body.topics:
            partitions = []
            described = authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
            for p in topic.partitions:
                entry: dict[str, Any] = {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.NONE,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                try:
                    if not described:
                        raise TopicAuthorizationFailedError(topic.name)
                    tp = TopicPartition(topic.name, p.partition_index)
                    found = replicas.fetch_offset_for_timestamp(
                        tp, p.timestamp, read_committed=committed,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                    )  # fmt: skip
                    if found is not None:
                        entry["offset"], entry["timestamp"], entry["leader_epoch"] = found
                except KafkaError as exc:
                    entry.update(error_code=exc.code, leader_epoch=-1)
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        return respond(header, {"throttle_time": 0, "topics": topics})

    registry.add(ApiKey.LIST_OFFSETS, 0, 11, handle)
