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
from samsa.broker.config import BrokerConfig, Listener
from samsa.broker.internal_topics import InternalTopics
from samsa.broker.registry import ApiRegistry
from samsa.broker.replica_manager import ReplicaManager
from samsa.cluster.local import LocalMetadataStore, TopicInfo, validate_topic_name
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC
from samsa.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.codec import RequestHeader


class MetadataServices(Protocol):
    """The part of the broker Metadata uses."""

    @property
    def advertised(self) -> Listener: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def internal_topics(self) -> InternalTopics: ...

    @property
    def metadata(self) -> LocalMetadataStore: ...

    @property
    def node_id(self) -> int: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


API_KEY = 3


def topic_entry(broker: MetadataServices, info: TopicInfo, operations: int) -> dict[str, Any]:
    node = broker.node_id
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.is_internal,
        "partitions": [
            {
                "error_code": ErrorCode.NONE,
                "partition_index": index,
                "leader_id": node,
                "leader_epoch": 0,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for index in range(info.partitions)
        ],
        "topic_authorized_operations": operations,
    }


def auto_create(broker: MetadataServices, name: str) -> TopicInfo:
    """Create ``name`` with the broker's defaults (``num.partitions``).

    An internal topic is created as its coordinator creates it — its partition count,
    its configs, marked internal — as Kafka's ``AutoTopicCreationManager`` does: one
    partition of ``__consumer_offsets`` would leave most groups without a coordinator.
    """
    if name == OFFSETS_TOPIC:
        broker.internal_topics.ensure_offsets_topic()
    elif name == TRANSACTION_STATE_TOPIC:
        broker.internal_topics.ensure_transaction_topic()
    created = broker.metadata.get(name)
    if created is not None:
        return created
    return broker.replica_manager.create_topic(name, broker.config["num.partitions"])


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
                topic_entry(broker, info, topic_ops)
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
                        validate_topic_name(name)
                        info = auto_create(broker, name)
                    except KafkaError as exc:
                        topics.append({"error_code": exc.code, "name": name})
                        continue
                if info is None:
                    topics.append(
                        {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name}
                    )
                else:
                    topics.append(topic_entry(broker, info, topic_ops))
        listener = broker.advertised
        return respond(
            header,
            {
                "throttle_time": 0,
                "brokers": [
                    {"node_id": broker.node_id, "host": listener.host, "port": listener.port}
                ],
                "cluster_id": store.cluster_id,
                "controller_id": broker.node_id,
                "topics": topics,
                "cluster_authorized_operations": cluster_operations(
                    getattr(body, "include_cluster_authorized_operations", False)
                ),
            },
        )

    registry.add(API_KEY, 0, 13, handle)
