"""Metadata (key 3), versions 0–13, and DescribeTopicPartitions (key 75), version 0: live
brokers, cluster id, controller, topics, each partition's leader, epoch, replicas, ISR
and offline replicas.

Topics named in a request that do not exist are created when both the request
(``allow_auto_topic_creation``, implied before v4) and the broker
(``auto.create.topics.enable``) allow it. On a single node creation is
synchronous, so the answer already lists the new partitions (Kafka answers
LEADER_NOT_AVAILABLE first and makes the client retry); in a cluster the topic
is written to ZooKeeper and the answer is LEADER_NOT_AVAILABLE until its
leaders are elected, as Kafka's. ``__consumer_offsets`` and
``__transaction_state`` are created as their coordinators create them.

With the authorizer on, a topic the caller may not DESCRIBE is left out of an
all-topics answer and answers TOPIC_AUTHORIZATION_FAILED when named (its
existence is not disclosed); creating a missing topic needs CREATE on the
cluster or on the topic (TOPIC_AUTHORIZATION_FAILED otherwise), as Kafka's.
Asked for authorized operations (v8+), a topic answers those the caller may do
on it, the cluster (v8–v10) those on the cluster (computed only for a caller
that may DESCRIBE it); without an authorizer, every operation Kafka defines.

A topic's entry is encoded once per response version and reused while the
topic, the cluster's leadership (:attr:`MetadataCache.leadership_changes`) and
the operations answered stay the same; the response is encoded around the
entries. A client's Metadata of a topic of 10,000 partitions otherwise costs the
broker an encoding of each partition. With request quotas on (whose throttle may
rewrite the response) and for versions kio lacks, responses are encoded whole.
"""

from __future__ import annotations

import io
import struct
from typing import Any, Protocol

from kio.serial import entity_writer

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import RawResponse, respond, response_class
from samsa.broker.authorized_operations import cluster_operations, topic_operations
from samsa.broker.authorizer import authorize, authorize_cluster, authorized_names
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata_cache import MetadataCache
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.registry import ApiRegistry
from samsa.broker.topic_manager import TopicManager
from samsa.cluster.local import TopicInfo
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.build import build, nested_class
from samsa.protocol.codec import RequestHeader, encode_response
from samsa.protocol.legacy import legacy_version
from samsa.protocol.wire import encode_uvarint
from samsa.types import TopicPartition


class MetadataServices(Protocol):
    """The part of the broker Metadata uses."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata(self) -> MetadataCache: ...

    @property
    def topics(self) -> TopicManager: ...

    @property
    def client_quotas(self) -> ClientQuotas: ...


API_KEY = 3
DESCRIBE_TOPIC_PARTITIONS = 75
FLEXIBLE_FROM = 9
TOPIC = ResourceType.TOPIC


def may_create(topic: str) -> bool:
    """Whether the request being served may create ``topic`` (CREATE on the cluster or it)."""
    return authorize_cluster(AclOperation.CREATE) or authorize(AclOperation.CREATE, TOPIC, topic)


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


def encode_entity(cls: type, values: dict[str, Any]) -> bytes:
    """``values`` built as a ``cls`` and written as it goes on the wire."""
    out = io.BytesIO()
    entity_writer(cls)(out, build(cls, values))
    return out.getvalue()


class EncodedTopics:
    """Each topic's entry as last answered, encoded for a response version's topic class,
    and kept while the topic's :class:`TopicInfo`, the cluster's leadership and the
    operations answered are the same."""

    def __init__(self, metadata: MetadataCache) -> None:
        self._metadata = metadata
        self._encoded: dict[tuple[type, str], tuple[TopicInfo, int, int, bytes]] = {}

    def of(self, topic_class: type, info: TopicInfo, operations: int) -> bytes:
        changes = self._metadata.leadership_changes
        key = (topic_class, info.name)
        cached = self._encoded.get(key)
        if (
            cached is not None
            and cached[0] is info
            and cached[1] == changes
            and cached[2] == operations
        ):
            return cached[3]
        encoded = encode_entity(topic_class, topic_entry(self._metadata, info, operations))
        if len(self._encoded) > 4 * len(self._metadata.topics()) + 16:
            self._encoded.clear()  # deleted topics' entries go (a few versions per topic kept)
        self._encoded[key] = (info, changes, operations, encoded)
        return encoded


def _after_topics(version: int) -> int:
    """The bytes a Metadata response of ``version`` writes after its topics array (with
    nothing tagged): cluster_authorized_operations (v8–10), error_code (v13), tags (v9+)."""
    return (4 if 8 <= version <= 10 else 0) + (2 if version >= 13 else 0) + (version >= 9)


def splice_topics(header: RequestHeader, response: Any, topics: list[bytes]) -> RawResponse | None:
    """``response`` (built with no topics) encoded with ``topics``' encoded entries as its
    topics array; None when its layout is not the one expected (a legacy version)."""
    version = header.api_version
    if legacy_version(header.api_key, version) is not None:
        return None
    frame = encode_response(header.correlation_id, response)
    flexible = version >= FLEXIBLE_FROM
    empty = b"\x01" if flexible else b"\0\0\0\0"
    end = len(frame) - _after_topics(version)
    if frame[end - len(empty) : end] != empty:
        return None
    count = encode_uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
    body = b"".join([frame[4 : end - len(empty)], count, *topics, frame[end:]])
    return RawResponse([struct.pack(">i", len(body)) + body], len(body) + 4)


def register(registry: ApiRegistry, broker: MetadataServices) -> None:
    encoded_topics = EncodedTopics(broker.metadata)

    async def handle(header: RequestHeader, body: Any) -> Any:
        store = broker.metadata
        # Topics are answered as encoded entries spliced into the response, unless request
        # quotas may need to rewrite the response's throttle time.
        splice = not broker.client_quotas.request.enabled and legacy_version(
            header.api_key, header.api_version) is None  # fmt: skip
        topic_class = nested_class(response_class(header.api_key, header.api_version), "topics")

        def entry(info: TopicInfo, asked: bool) -> dict[str, Any] | bytes:
            operations = topic_operations(asked, info.name)
            if not splice:
                return topic_entry(store, info, operations)
            return encoded_topics.of(topic_class, info, operations)

        requested = body.topics
        if header.api_version == 0 and not requested:
            requested = None  # v0: an empty list means every topic
        allow_create = (
            getattr(body, "allow_auto_topic_creation", True)
            and broker.config["auto.create.topics.enable"]
        )
        # v8+ may ask for the authorized operations; v11 dropped the cluster flag.
        topic_ops = getattr(body, "include_topic_authorized_operations", False)
        topics: list[dict[str, Any] | bytes] = []
        if requested is None:
            topics = [
                entry(info, topic_ops)
                for info in store.topics().values()
                if not info.is_internal and authorize(AclOperation.DESCRIBE, TOPIC, info.name)
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
                    if not authorize(AclOperation.DESCRIBE, TOPIC, name):
                        topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       "name": None, "topic_id": item.topic_id})  # fmt: skip
                        continue
                if name is not None and not authorize(AclOperation.DESCRIBE, TOPIC, name):
                    topics.append(
                        {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name}
                    )
                    continue
                info = store.get(name) if name is not None else None
                if info is None and name is not None and allow_create and not may_create(name):
                    topics.append(
                        {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name}
                    )
                    continue
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
                    topics.append(entry(info, topic_ops))
        response = respond(
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
                "topics": [] if splice else topics,
                "cluster_authorized_operations": cluster_operations(
                    getattr(body, "include_cluster_authorized_operations", False)
                    and authorize_cluster(AclOperation.DESCRIBE)
                ),
            },
        )
        if not splice:
            return response
        raw = splice_topics(header, response, [
            t if isinstance(t, bytes) else encode_entity(topic_class, t) for t in topics
        ])  # fmt: skip
        assert raw is not None, f"Metadata v{header.api_version} is not laid out as expected"
        return raw

    async def describe_topic_partitions(header: RequestHeader, body: Any) -> Any:
        """DescribeTopicPartitions (key 75, v0, KIP-966): Metadata's partitions, in pages of
        ``response_partition_limit`` partitions, resumed from ``cursor``. No eligible
        leader replicas (ELR): a ZooKeeper cluster has none, so those lists are empty."""
        store = broker.metadata
        if body.topics:
            names = sorted({t.name for t in body.topics})
        else:
            names = sorted(authorized_names(AclOperation.DESCRIBE, TOPIC, store.topics()))
        cursor = body.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        budget = max(body.response_partition_limit, 1)
        topics: list[dict[str, Any]] = []
        next_cursor = None
        for name in names:
            info = store.get(name)
            if not authorize(AclOperation.DESCRIBE, TOPIC, name):
                topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                               "topic_id": None, "is_internal": False, "partitions": [],
                               "topic_authorized_operations": -(2**31)})  # fmt: skip
                continue
            if info is None:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "topic_id": None, "is_internal": False, "partitions": [],
                               "topic_authorized_operations": -(2**31)})  # fmt: skip
                continue
            first = (
                cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
            )
            entries = partition_entries(store, info)[first:]
            if len(entries) > budget:
                next_cursor = {"topic_name": name, "partition_index": first + budget}
                entries = entries[:budget]
            budget -= len(entries)
            for entry in entries:
                entry["eligible_leader_replicas"] = []
                entry["last_known_elr"] = []
            topics.append({"error_code": ErrorCode.NONE, "name": name,
                           "topic_id": info.topic_id, "is_internal": info.is_internal,
                           "partitions": entries, "topic_authorized_operations":
                           topic_operations(True, name)})  # fmt: skip
            if next_cursor is not None or budget <= 0:
                following = names[names.index(name) + 1 :]
                if next_cursor is None and following:
                    next_cursor = {"topic_name": following[0], "partition_index": 0}
                break
        return respond(header, {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})

    registry.add(API_KEY, 0, 13, handle)
    registry.add(DESCRIBE_TOPIC_PARTITIONS, 0, 0, describe_topic_partitions)
