"""WriteTxnMarkers (key 27), versions 0–2: the transaction coordinator's markers.

Each marker is written to each partition it names (an acks=all append from the
coordinator, see :meth:`ReplicaManager.write_txn_marker`); every partition
gets its own error code. Version 0 (removed in Kafka 4) is served as version 1.
Version 2 carries the transaction version: with 2 (KIP-890) a marker must
come with an epoch above the producer's, which the coordinator bumped.
With the authorizer on, it needs ALTER or CLUSTER_ACTION on the cluster (every
partition answers CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka's.
"""

from __future__ import annotations

from typing import Any

from samsa.acl import AclOperation
from samsa.broker.api import respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.manager import request_throttle
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize_cluster
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition


def register(registry: ApiRegistry, *, replicas: ReplicaManager) -> None:

    async def handle(header: RequestHeader, body: Any) -> Any:
        request_throttle().exempt = True  # sent by brokers: no request quota
        allowed = authorize_cluster(AclOperation.ALTER) or authorize_cluster(
            AclOperation.CLUSTER_ACTION
        )
        markers = []
        for marker in body.markers:
            transaction_version = getattr(marker, "transaction_version", 0)
            topics = []
            for topic in marker.topics:
                partitions = []
                for index in topic.partition_indexes:
                    if not allowed:
                        partitions.append(
                            {
                                "partition_index": index,
                                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            }
                        )
                        continue
                    code = await replicas.write_txn_marker(
                        TopicPartition(topic.name, index),
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.transaction_result,
                        marker.coordinator_epoch,
                        transaction_version=transaction_version,
                    )
                    partitions.append({"partition_index": index, "error_code": code})
                topics.append({"name": topic.name, "partitions": partitions})
            markers.append({"producer_id": marker.producer_id, "topics": topics})
        return respond(header, {"markers": markers})

    registry.add(ApiKey.WRITE_TXN_MARKERS, 0, 2, handle)
