"""DeleteRecords (key 21), versions 0–2: move partitions' log start offsets forward.

A typed handler (:func:`samsa.broker.typed_api.serve`) of DeleteRecords v2. It completes at
once — there are no followers whose low watermark to wait for — so ``timeout`` is not
used; offset -1 means the high watermark. Internal topics are refused
(INVALID_TOPIC_EXCEPTION, see :mod:`samsa.broker.metadata.internal_topics`). With the
authorizer on, each topic needs DELETE (TOPIC_AUTHORIZATION_FAILED), as Kafka's.
"""

from __future__ import annotations

from typing import Protocol

from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.delete_records.v2.response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kio.static.primitive import i64

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.metadata.internal_topics import refuse_client_change
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

DELETE_RECORDS = TypedApi(
    ApiKey.DELETE_RECORDS, (0, 2), DeleteRecordsRequest, DeleteRecordsResponse
)


class DeleteRecordsServices(Protocol):
    """The part of the broker DeleteRecords uses."""

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


def delete_before(broker: DeleteRecordsServices, tp: TopicPartition, offset: int) -> int:
    """Move ``tp``'s log start offset to ``offset`` (-1: the high watermark)."""
    if not authorize(AclOperation.DELETE, ResourceType.TOPIC, tp.topic):
        raise TopicAuthorizationFailedError(f"not authorized to delete records of {tp.topic}")
    refuse_client_change(broker.metadata, tp.topic, "delete records of")
    return broker.replica_manager.delete_records(tp, offset)


async def delete_records(
    broker: DeleteRecordsServices, header: RequestHeader, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            try:
                tp = TopicPartition(topic.name, p.partition_index)
                low_watermark, error = delete_before(broker, tp, p.offset), ErrorCode.NONE
            except KafkaError as exc:
                low_watermark, error = -1, exc.code
            partitions.append(DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=i64(low_watermark),
                error_code=kio_error(error),
            ))  # fmt: skip
        topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=tuple(partitions)))
    return DeleteRecordsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


def register(registry: ApiRegistry, broker: DeleteRecordsServices) -> None:
    DELETE_RECORDS.serve(registry, delete_records, broker)
