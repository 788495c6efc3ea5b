"""FindCoordinator (key 10, 0–6), OffsetCommit (key 8, 2–10), OffsetFetch (key 9, 1–10).

This broker coordinates every group. ``__consumer_offsets`` is created on the
first FindCoordinator for a group, as Kafka creates it. Commits are accepted
from simple consumers (generation -1, no member id); a commit naming a
generation or member gets ILLEGAL_GENERATION/UNKNOWN_MEMBER_ID until group
membership is served. Transactional coordinators (key type 1) are answered
COORDINATOR_NOT_AVAILABLE for now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.handlers import respond
from samsa.coordinator.group.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from samsa.coordinator.group.records import OffsetValue
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.broker.server import Broker

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
GROUP_KEY_TYPE = 0
COORDINATOR_NOT_AVAILABLE = 15
INVALID_GROUP_ID = 24
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
MAX_METADATA_BYTES = 4096  # offset.metadata.max.bytes


def ensure_offsets_topic(broker: Broker) -> None:
    if broker.metadata.get(OFFSETS_TOPIC) is None:
        info = broker.metadata.create_topic(
            OFFSETS_TOPIC, broker.group_coordinator.partitions, OFFSETS_TOPIC_CONFIGS,
            is_internal=True,
        )  # fmt: skip
        broker.replica_manager.ensure_partitions(info)


def register(broker: Broker) -> None:
    def listener_fields() -> dict[str, Any]:
        listener = broker.advertised  # read per request: port 0 is bound after start
        return {"node_id": broker.node_id, "host": listener.host, "port": listener.port}

    def coordinator_for(key: str, key_type: int) -> dict[str, Any]:
        if key_type != GROUP_KEY_TYPE:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": COORDINATOR_NOT_AVAILABLE,
                    "error_message": "transaction coordination is not served yet"}  # fmt: skip
        if not key:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": INVALID_GROUP_ID, "error_message": "empty group id"}  # fmt: skip
        ensure_offsets_topic(broker)
        return {"key": key, **listener_fields(), "error_code": 0, "error_message": None}

    async def find_coordinator(header: RequestHeader, body: Any) -> Any:
        key_type = getattr(body, "key_type", GROUP_KEY_TYPE)
        if header.api_version >= 4:
            return respond(header, {"throttle_time": 0, "coordinators": [
                coordinator_for(key, key_type) for key in body.coordinator_keys]})  # fmt: skip
        answer = coordinator_for(body.key, key_type)
        answer.pop("key")
        return respond(header, {"throttle_time": 0, **answer})

    async def offset_commit(header: RequestHeader, body: Any) -> Any:
        group = body.group_id
        generation = getattr(body, "generation_id_or_member_epoch", -1)
        member = getattr(body, "member_id", "")
        if not group:
            group_error = INVALID_GROUP_ID
        elif generation >= 0:
            group_error = ILLEGAL_GENERATION
        elif member:
            group_error = UNKNOWN_MEMBER_ID
        else:
            group_error = 0
        now = broker.log_manager.clock()
        accepted: dict[TopicPartition, OffsetValue] = {}
        topics = []
        for topic in body.topics:
            name = getattr(topic, "name", None)
            if name is None and getattr(topic, "topic_id", None) is not None:
                found = broker.metadata.by_id(topic.topic_id)
                name = found.name if found is not None else None
            partitions = []
            for p in topic.partitions:
                code = group_error
                metadata = p.committed_metadata or ""
                tp = TopicPartition(name or "", p.partition_index)
                if not code and (name is None or broker.replica_manager.get(tp) is None):
                    code = UNKNOWN_TOPIC_OR_PARTITION
                if not code and len(metadata.encode()) > MAX_METADATA_BYTES:
                    code = OFFSET_METADATA_TOO_LARGE
                if not code:
                    epoch = getattr(p, "committed_leader_epoch", -1)
                    accepted[tp] = OffsetValue(p.committed_offset, epoch, metadata, now)
                partitions.append({"partition_index": p.partition_index, "error_code": code})
            topics.append({"name": name or "", "topic_id": getattr(topic, "topic_id", None),
                           "partitions": partitions})  # fmt: skip
        if accepted:
            ensure_offsets_topic(broker)
            await broker.group_coordinator.commit(group, accepted)
        return respond(header, {"throttle_time": 0, "topics": topics})

    def fetch_group(group: str, topics: Any) -> dict[str, Any]:
        coordinator = broker.group_coordinator
        if topics is None:
            found = coordinator.committed(group)
        else:
            wanted = [TopicPartition(t.name, i) for t in topics for i in t.partition_indexes]
            found = coordinator.committed(group, wanted)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, value in found.items():
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition,
                "committed_offset": -1 if value is None else value.offset,
                "committed_leader_epoch": -1 if value is None else value.leader_epoch,
                "metadata": "" if value is None else value.metadata,
                "error_code": 0,
            })  # fmt: skip
        return {
            "group_id": group,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
            "error_code": 0,
        }

    async def offset_fetch(header: RequestHeader, body: Any) -> Any:
        if header.api_version >= 8:
            groups = [fetch_group(g.group_id, g.topics) for g in body.groups]
            return respond(header, {"throttle_time": 0, "groups": groups})
        answer = fetch_group(body.group_id, body.topics)
        answer.pop("group_id")
        return respond(header, {"throttle_time": 0, **answer})

    broker.registry.add(FIND_COORDINATOR, 0, 6, find_coordinator)
    broker.registry.add(OFFSET_COMMIT, 2, 10, offset_commit)
    broker.registry.add(OFFSET_FETCH, 1, 10, offset_fetch)
