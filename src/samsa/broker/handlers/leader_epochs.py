"""OffsetForLeaderEpoch (key 23), versions 0–4: where a leader epoch ended on the leader.

A follower asks before it fetches (KIP-101/279: it truncates its log to the
answer, so two replicas never hold different records at one offset); a
consumer asks to check its position after the leader changed (KIP-320). The
answer is the requested epoch, or the largest epoch below it the leader's log
has, and the offset where that epoch ended (the log end for the current epoch);
-1 and -1 when the log knows no such epoch
(:meth:`~samsa.storage.leader_epoch.LeaderEpochCache.end_offset_for`). Only the
leader answers (NOT_LEADER_OR_FOLLOWER elsewhere); a ``current_leader_epoch``
older or newer than the leader's is FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH.
With the authorizer on, a caller with CLUSTER_ACTION on the cluster (a follower)
may ask of every topic, others of the topics they may DESCRIBE
(TOPIC_AUTHORIZATION_FAILED), as Kafka's (KIP-320).
"""

from __future__ import annotations

from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition


def register(registry: ApiRegistry, *, replicas: ReplicaManager) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        topics = []
        follower = authorize_cluster(AclOperation.CLUSTER_ACTION)
        for topic in body.topics:
            partitions = []
            allowed = follower or authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
            for p in topic.partitions:
                entry: dict[str, Any] = {"partition": p.partition}
                try:
                    if not allowed:
                        raise TopicAuthorizationFailedError(topic.topic)
                    epoch, end_offset = replicas.end_offset_for_epoch(
                        TopicPartition(topic.topic, p.partition),
                        p.leader_epoch,
                        p.current_leader_epoch,
                    )
                    entry.update(error_code=ErrorCode.NONE, leader_epoch=epoch,
                                 end_offset=end_offset)  # fmt: skip
                except KafkaError as exc:
                    entry.update(error_code=exc.code, leader_epoch=-1, end_offset=-1)
                partitions.append(entry)
            topics.append({"topic": topic.topic, "partitions": partitions})
        return respond(header, {"throttle_time": 0, "topics": topics})

    registry.add(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4, handle)
