"""DescribeProducers (key 61), version 0: the producers a partition remembers.

Per partition: each producer's id, epoch, last sequence, last timestamp,
coordinator epoch and the first offset of its ongoing transaction (-1 when
none), from the partition's producer state. A partition not hosted here is
UNKNOWN_TOPIC_OR_PARTITION. Deviation: producers are never expired
(``producer.id.expiration.ms`` is not applied), so every producer the
partition's log remembers is listed. With the authorizer on, each topic needs READ
(TOPIC_AUTHORIZATION_FAILED), as Kafka's.
"""

from __future__ import annotations

from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import error_fields, respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize
from samsa.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition


def register(registry: ApiRegistry, *, replicas: ReplicaManager) -> None:

    async def handle(header: RequestHeader, body: Any) -> Any:
        topics = []
        for topic in body.topics:
            partitions = []
            readable = authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
            for index in topic.partition_indexes:
                entry: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE,
                                         "error_message": None, "active_producers": []}  # fmt: skip
                try:
                    if not readable:
                        raise TopicAuthorizationFailedError(topic.name)
                    entry["active_producers"] = [
                        {
                            "producer_id": producer.producer_id,
                            "producer_epoch": producer.epoch,
                            "last_sequence": producer.last_sequence,
                            "last_timestamp": producer.last_timestamp,
                            "coordinator_epoch": producer.coordinator_epoch,
                            "current_txn_start_offset": producer.current_txn_first_offset,
                        }
                        for producer in replicas.active_producers(TopicPartition(topic.name, index))
                    ]
                except KafkaError as exc:
                    entry.update(error_fields(exc))
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        return respond(header, {"throttle_time": 0, "topics": topics})

    registry.add(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle)
