"""Metadata (key 3), versions 0–13: brokers, cluster id, controller, topics, partitions.

Topics named in a request that do not exist are created when both the request
(``allow_auto_topic_creation``, implied before v4) and the broker
(``auto.create.topics.enable``) allow it; creation is synchronous, so the
answer already lists the new partitions (Kafka answers LEADER_NOT_AVAILABLE
first and makes the client retry). ``__consumer_offsets`` and
``__transaction_state`` are created as their coordinators create them.

There is no authorizer: asked for authorized operations (v8+), a topic answers
every operation Kafka defines on a topic and the cluster (v8–v10) every one it
defines on the cluster, as a Kafka broker without an authorizer does.
"""

from __future__ import annotations

from typing import Any, Protocol

from samsa.broker.api import respond
from samsa.broker.authorized_operations import cluster_operations, topic_operations
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata_cache import MetadataCache
from samsa.broker.registry import ApiRegistry
from samsa.broker.topic_manager import TopicManager
from samsa.cluster.local import TopicInfo
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition


class MetadataServices(Protocol):
    """The part of the broker Metadata uses."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def topics(self) -> TopicManager: ...


API_KEY = 3


def partition_entries(metadata: MetadataCache, info: TopicInfo) -> list[dict[str, Any]]:
    """Each partition's leader, epoch, replicas, ISR and offline replicas, as Metadata and
    DescribeTopicPartitions answer them (LEADER_NOT_AVAILABLE while it has no leader)."""
    entries = []
    for index in range(info.partitions):
        state = metadata.leadership(TopicPartition(info.name, index))
        if state is None:
            entries.append(
                {
                    "error_code": ErrorCode.LEADER_NOT_AVAILABLE,
                    "partition_index": index,
                    "leader_id": -1,
                    "leader_epoch": -1,
                    "replica_nodes": [],
                    "isr_nodes": [],
                    "offline_replicas": [],
                }
            )
            continue
        entries.append(
            {
                "error_code": (
                    ErrorCode.NONE if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                ),
                "partition_index": index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": list(state.replicas),
                "isr_nodes": list(state.isr),
                "offline_replicas": list(state.offline_replicas),
            }
        )
    return entries


def topic_entry(metadata: MetadataCache, info: TopicInfo, operations: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.is_internal,
        "partitions": partition_entries(metadata, info),
        "topic_authorized_operations": operations,
    }


def register(registry: ApiRegistry, broker: MetadataServices) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        store = broker.metadata
        requested = body.topics
        if header.api_version == 0 and not requested:
            requested = None  # v0: an empty list means every topic
        allow_create = (
            getattr(body, "allow_auto_topic_creation", True)
            and broker.config["auto.create.topics.enable"]
        )
        # v8+ may ask for the authorized operations; v11 dropped the cluster flag.
        topic_ops = topic_operations(getattr(body, "include_topic_authorized_operations", False))
        topics: list[dict[str, Any]] = []
        if requested is None:
            topics = [
                topic_entry(store, info, topic_ops)
                for info in store.topics().values()
                if not info.is_internal
            ]
        else:
            for item in requested:
                name = item.name
                if name is None and getattr(item, "topic_id", None) is not None:
                    info = store.by_id(item.topic_id)
                    if info is None:
                        topics.append(
                            {
                                "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                                "name": None,
                                "topic_id": item.topic_id,
                            }
                        )
                        continue
                    name = info.name
                info = store.get(name) if name is not None else None
                if info is None and name is not None and allow_create:
                    try:
                        info = await broker.topics.auto_create(name)
                    except KafkaError as exc:
                        topics.append({"error_code": exc.code, "name": name})
                        continue
                    if info is None:  # being created: the client asks again
                        topics.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name})
                        continue
                if info is None:
                    topics.append(
                        {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name}
                    )
                else:
                    topics.append(topic_entry(store, info, topic_ops))
        return respond(
            header,
            {
                "throttle_time": 0,
                "brokers": [
                    {
                        "node_id": node.node_id,
                        "host": node.host,
                        "port": node.port,
                        "rack": node.rack,
                    }
                    for node in store.alive_brokers()
                ],
                "cluster_id": store.cluster_id,
                "controller_id": store.controller_id(),
                "topics": topics,
                "cluster_authorized_operations": cluster_operations(
                    getattr(body, "include_cluster_authorized_operations", False)
                ),
            },
        )

    registry.add(API_KEY, 0, 13, handle)
