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

Brokers are answered at the advertised address of the listener the request came on;
a broker without that listener is left out, and a partition it leads answers
LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before v6) with no leader, as Kafka's. A
controller without that listener is answered as a broker that has it (see
:meth:`~samsa.cluster.zk_metadata.ZkMetadataCache.controller_id`).

A topic's entry is encoded once per response version and reused while the
topic, the cluster's leadership (:attr:`MetadataCache.leadership_changes`) and
the operations answered stay the same; the response is encoded around the
entries. A client's Metadata of a topic of 10,000 partitions otherwise costs the
broker an encoding of each partition. With request quotas on (whose throttle may
rewrite the response) and for versions kio lacks, responses are encoded whole.
A topic answered with an error alone (missing, not authorized) is its name spliced
into an entry encoded once per error code and version.

Kafka bounds a request's topics only by its frame (``socket.request.max.bytes``):
a Metadata request of 10 MB names a million topics. Its topics are answered
:data:`TOPICS_PER_TURN` at a time, the event loop running between turns, so other
clients' requests are served while it is; the request's decoding (before the
handler) and, on the paths that encode responses whole, the response's encoding
(after it) are each one block.
"""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any, Protocol

from kio.serial import entity_writer

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import RawResponse, request_listener, respond, response_class
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.quota.manager import ClientQuotas
from samsa.broker.security.authorized_operations import cluster_operations, topic_operations
from samsa.broker.security.authorizer import authorize, authorize_cluster, authorized_names
from samsa.cluster.local import TopicInfo, validate_topic_name
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
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


FLEXIBLE_FROM = 9
TOPIC = ResourceType.TOPIC
TOPICS_PER_TURN = 500
"""Topics a Metadata or DescribeTopicPartitions request answers between two turns of the
event loop (milliseconds of work: a request naming a million topics lets others in
2,000 times)."""


def may_create(topic: str) -> bool:
    """Whether the request being served may create ``topic`` (CREATE on the cluster or it)."""
    return authorize_cluster(AclOperation.CREATE) or authorize(AclOperation.CREATE, TOPIC, topic)


def partition_entries(
    metadata: MetadataCache, info: TopicInfo, *, listener_not_found: bool = True
) -> list[dict[str, Any]]:
    """Each partition's leader, epoch, replicas, ISR and offline replicas, as Metadata and
    DescribeTopicPartitions answer them (LEADER_NOT_AVAILABLE while it has no leader).

    A leader without the listener the request came on is no leader to this client (it
    is not among the brokers answered): LISTENER_NOT_FOUND, or LEADER_NOT_AVAILABLE
    where ``listener_not_found`` is False (Metadata before v6), with no leader id."""
    reachable = {node.node_id for node in metadata.alive_brokers()}
    unreachable = (
        ErrorCode.LISTENER_NOT_FOUND if listener_not_found else ErrorCode.LEADER_NOT_AVAILABLE
    )
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
        leader, error_code = state.leader, ErrorCode.NONE
        if leader < 0:
            error_code = ErrorCode.LEADER_NOT_AVAILABLE
        elif leader not in reachable:
            leader, error_code = -1, unreachable
        entries.append(
            {
                "error_code": error_code,
                "partition_index": index,
                "leader_id": leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": list(state.replicas),
                "isr_nodes": list(state.isr),
                "offline_replicas": list(state.offline_replicas),
            }
        )
    return entries


def topic_entry(
    metadata: MetadataCache, info: TopicInfo, operations: int, version: int
) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.is_internal,
        "partitions": partition_entries(metadata, info, listener_not_found=version >= 6),
        "topic_authorized_operations": operations,
    }


def encode_entity(cls: type, values: dict[str, Any]) -> bytes:
    """``values`` built as a ``cls`` and written as it goes on the wire."""
    out = io.BytesIO()
    entity_writer(cls)(out, build(cls, values))
    return out.getvalue()


class EncodedTopics:
    """Each topic's entry as last answered, encoded for a response version's topic class
    and a listener (whose clients may not reach every leader), and kept while the
    topic's :class:`TopicInfo`, the cluster's leadership and the operations answered are
    the same."""

    def __init__(self, metadata: MetadataCache) -> None:
        self._metadata = metadata
        self._encoded: dict[tuple[type, str, str], tuple[TopicInfo, int, int, bytes]] = {}

    def of(
        self, topic_class: type, version: int, listener: str, info: TopicInfo, operations: int
    ) -> bytes:
        changes = self._metadata.leadership_changes
        key = (topic_class, listener, info.name)
        cached = self._encoded.get(key)
        if (
            cached is not None
            and cached[0] is info
            and cached[1] == changes
            and cached[2] == operations
        ):
            return cached[3]
        encoded = encode_entity(topic_class, topic_entry(self._metadata, info, operations, version))
        if len(self._encoded) > 4 * len(self._metadata.topics()) + 16:
            self._encoded.clear()  # deleted topics' entries go (a few versions per topic kept)
        self._encoded[key] = (info, changes, operations, encoded)
        return encoded


class ErrorEntries:
    """A topic's entry that is only an error code and a name (every other field its
    default), encoded for a response version's topic class: the name spliced between the
    bytes before and after it in an entry encoded once per class and error code."""

    def __init__(self) -> None:
        self._templates: dict[tuple[type, int], tuple[bytes, bool, bytes]] = {}

    def of(self, topic_class: type, error_code: int, name: str) -> bytes:
        key = (topic_class, error_code)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = _name_template(topic_class, error_code)
        before, compact, after = template
        encoded = name.encode()
        size = encode_uvarint(len(encoded) + 1) if compact else struct.pack(">h", len(encoded))
        return b"".join((before, size, encoded, after))


def _name_template(topic_class: type, error_code: int) -> tuple[bytes, bool, bytes]:
    """The bytes of a ``topic_class`` error entry before and after its name, and whether the
    name is a compact string (flexible versions), read from two entries kio encodes."""
    empty = encode_entity(topic_class, {"error_code": error_code, "name": ""})
    one = encode_entity(topic_class, {"error_code": error_code, "name": "a"})
    if empty[2:3] == b"\x01" and one[2:4] == b"\x02a" and empty[3:] == one[4:]:
        return empty[:2], True, empty[3:]
    if empty[2:4] == b"\0\0" and one[2:5] == b"\0\x01a" and empty[4:] == one[5:]:
        return empty[:2], False, empty[4:]
    raise AssertionError(f"{topic_class.__name__} does not start with an error code and a name")


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


def _valid_topic_name(name: str) -> bool:
    """Whether a topic could have this name (Kafka answers INVALID_TOPIC_EXCEPTION if not)."""
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def register(registry: ApiRegistry, broker: MetadataServices) -> None:
    encoded_topics = EncodedTopics(broker.metadata)
    error_entries = ErrorEntries()

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
                return topic_entry(store, info, operations, header.api_version)
            return encoded_topics.of(
                topic_class, header.api_version, request_listener.get(), info, operations
            )

        def error(code: int, name: str) -> dict[str, Any] | bytes:
            if not splice:
                return {"error_code": code, "name": name}
            return error_entries.of(topic_class, code, name)

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
            # A copy: topics may be created or deleted while the loop runs between turns.
            for count, known in enumerate(list(store.topics().values()), 1):
                if count % TOPICS_PER_TURN == 0:
                    await asyncio.sleep(0)
                if not known.is_internal and authorize(AclOperation.DESCRIBE, TOPIC, known.name):
                    topics.append(entry(known, topic_ops))
        else:
            for count, item in enumerate(requested, 1):
                if count % TOPICS_PER_TURN == 0:
                    await asyncio.sleep(0)  # let other clients in: see the module's docstring
                name = item.name
                topic_id = getattr(item, "topic_id", None)
                if not name and topic_id is not None and topic_id.int != 0:
                    # By id, as Kafka looks it up: the Java client names such a topic "".
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
                    topics.append(error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
                info = store.get(name) if name is not None else None
                if info is None and name is not None and allow_create and not may_create(name):
                    topics.append(error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
                if info is None and name is not None and not _valid_topic_name(name):
                    topics.append(error(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                    continue
                if info is None and name is not None and allow_create:
                    try:
                        info = await broker.topics.auto_create(name)
                    except KafkaError as exc:
                        topics.append(error(exc.code, name))
                        continue
                    if info is None:  # being created: the client asks again
                        topics.append(error(ErrorCode.LEADER_NOT_AVAILABLE, name))
                        continue
                if info is None:
                    if name is None:
                        topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       "name": None})  # fmt: skip
                    else:
                        topics.append(error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
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
        for count, name in enumerate(names, 1):
            if count % TOPICS_PER_TURN == 0:
                await asyncio.sleep(0)  # let other clients in: see the module's docstring
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
                following = names[count:]
                if next_cursor is None and following:
                    next_cursor = {"topic_name": following[0], "partition_index": 0}
                break
        return respond(header, {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})

    registry.add(ApiKey.METADATA, 0, 13, handle)
    registry.add(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, describe_topic_partitions)
