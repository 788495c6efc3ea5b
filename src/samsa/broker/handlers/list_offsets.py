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

A typed handler (:func:`samsa.broker.typed_api.serve`) of ListOffsets v11; v0 (which kio
lacks) is read as v1 (:mod:`samsa.protocol.legacy`) and answered in its layout.
"""

from __future__ import annotations

from kio.schema.list_offsets.v11.request import ListOffsetsRequest
from kio.schema.list_offsets.v11.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.static.primitive import i32, i64

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

LIST_OFFSETS = TypedApi(ApiKey.LIST_OFFSETS, (0, 11), ListOffsetsRequest, ListOffsetsResponse)
READ_COMMITTED = 1


async def list_offsets(
    replicas: ReplicaManager, header: RequestHeader, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    committed = request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        described = authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            error, offset, timestamp, leader_epoch = ErrorCode.NONE, -1, -1, -1
            try:
                if not described:
                    raise TopicAuthorizationFailedError(topic.name)
                found = replicas.fetch_offset_for_timestamp(
                    TopicPartition(topic.name, p.partition_index), p.timestamp,
                    read_committed=committed, current_leader_epoch=p.current_leader_epoch,
                )  # fmt: skip
                if found is not None:
                    offset, timestamp, leader_epoch = found
            except KafkaError as exc:
                error = exc.code
            partitions.append(ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=kio_error(error),
                timestamp=i64(timestamp), offset=i64(offset), leader_epoch=i32(leader_epoch),
            ))  # fmt: skip
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=tuple(partitions)))
    return ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


def register(registry: ApiRegistry, *, replicas: ReplicaManager) -> None:
    LIST_OFFSETS.serve(registry, list_offsets, replicas)
