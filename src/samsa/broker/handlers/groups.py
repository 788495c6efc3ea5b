"""Group APIs: FindCoordinator, LeaveGroup, OffsetCommit, OffsetFetch. The others are
typed handlers of their own modules: JoinGroup and SyncGroup
(:mod:`~samsa.broker.handlers.join_group`), Heartbeat
(:mod:`~samsa.broker.handlers.heartbeat`), DescribeGroups and ListGroups
(:mod:`~samsa.broker.handlers.describe_groups`), DeleteGroups and OffsetDelete
(:mod:`~samsa.broker.handlers.delete_groups`). These four keep versions whose fields
the newest lacks (FindCoordinator v0–3's one key, LeaveGroup v0–2's one member,
OffsetFetch v0–7's one group, OffsetCommit's topic names before v10).

A group's coordinator is the leader of its ``__consumer_offsets`` partition (on a
single node, this broker for every group); ``__consumer_offsets`` is created on the
first FindCoordinator for a group, as Kafka creates it. The decisions live in
:class:`~samsa.coordinator.group.coordinator.GroupCoordinator`; this module
translates requests and responses of every served version. FindCoordinator for
a transactional id (key type 1) answers the leader of its ``__transaction_state``
partition, after creating that topic (see :mod:`samsa.broker.handlers.transactions`).
The coordinator's address is its endpoint on the listener the request came on; a
coordinator without that listener is COORDINATOR_NOT_AVAILABLE, as Kafka answers.
The coordinator checks an OffsetCommit and answers each partition's error code,
that of the failed append too (Kafka 4's mapping, :mod:`samsa.coordinator.errors`);
this module resolves topic ids and says which topics exist.

OffsetCommit 0–1 and OffsetFetch 0 (served as versions 2 and 1,
:mod:`samsa.protocol.legacy`): a v0 commit carries no generation or member,
and is a generation-less ("simple consumer") commit, as a v1+ commit with
generation -1 is: accepted while the group has no members, kept in
``__consumer_offsets`` in Kafka's offset-commit record format, and read back
by every OffsetFetch version. Deviation: Kafka up to 3.x kept v0 commits in
ZooKeeper (``/consumers/<group>/offsets``), apart from the v1+ ones; samsa has
one store for both. A v1 commit's ``commit_timestamp`` is ignored (the broker
stamps its own time, as Kafka 2.1+ did for later versions).

With the authorizer on, each API checks what Kafka checks: FindCoordinator
DESCRIBE on the group or transactional id; JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and OffsetCommit READ on the group, OffsetCommit also READ on each
topic; OffsetFetch and DescribeGroups DESCRIBE on the group (OffsetFetch leaves
out, or refuses when named, the topics the caller may not DESCRIBE); OffsetDelete
and DeleteGroups DELETE on the group (OffsetDelete also READ on each topic);
ListGroups lists every group to a caller that may DESCRIBE the cluster, else the
groups it may DESCRIBE. Refusals answer GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import error_fields, respond
from samsa.broker.config import BrokerConfig
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.coordinator.group.coordinator import (
    GroupCoordinator,
    OffsetCommitMember,
    PartitionOffset,
)
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
READ, DELETE, DESCRIBE = AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def register(
    registry: ApiRegistry,
    *,
    config: Callable[[], BrokerConfig],
    txn_partition_of: Callable[[str], TopicPartition],
    metadata_store: MetadataCache,
    topic_manager: TopicManager,
    group_coordinator: GroupCoordinator,
) -> None:
    coordinator = group_coordinator
    metadata_max_bytes = config()["offset.metadata.max.bytes"]

    def leader_of(tp: TopicPartition) -> dict[str, Any]:
        """The coordinator of a key: the leader of its internal partition (this broker on a
        single node); COORDINATOR_NOT_AVAILABLE while it has none."""
        state = metadata_store.leadership(tp)
        node = None
        if state is not None and state.leader >= 0:
            node = next((n for n in metadata_store.alive_brokers() if n.node_id == state.leader),
                        None)  # fmt: skip
        if node is None:
            return {"node_id": -1, "host": "", "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "error_message": f"{tp} has no leader yet"}  # fmt: skip
        return {"node_id": node.node_id, "host": node.host, "port": node.port,
                "error_code": ErrorCode.NONE, "error_message": None}  # fmt: skip

    async def coordinator_for(key: str, key_type: int) -> dict[str, Any]:
        unavailable = {"key": key, "node_id": -1, "host": "", "port": -1}
        if key_type == GROUP_KEY_TYPE and not authorize(DESCRIBE, GROUP, key):
            return {**unavailable, "error_code": GROUP_DENIED, "error_message": None}
        if key_type == TRANSACTION_KEY_TYPE and not authorize(
            DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return {**unavailable, "error_message": None,
                    "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}  # fmt: skip
        if key_type == TRANSACTION_KEY_TYPE:
            if not key:
                return {**unavailable, "error_code": ErrorCode.INVALID_REQUEST,
                        "error_message": "empty transactional id"}  # fmt: skip
            try:
                await topic_manager.ensure_transaction_topic()
            except KafkaError as exc:
                return {**unavailable, **error_fields(exc)}
            return {"key": key, **leader_of(txn_partition_of(key))}
        if key_type != GROUP_KEY_TYPE:
            return {**unavailable, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "error_message": f"coordinator key type {key_type} is not served"}  # fmt: skip
        if not key:
            return {**unavailable, "error_code": ErrorCode.INVALID_GROUP_ID,
                    "error_message": "empty group id"}  # fmt: skip
        try:
            await topic_manager.ensure_offsets_topic()
        except KafkaError as exc:
            return {**unavailable, **error_fields(exc)}
        return {"key": key, **leader_of(coordinator.partition_of(key))}

    async def find_coordinator(header: RequestHeader, body: Any) -> Any:
        key_type = getattr(body, "key_type", GROUP_KEY_TYPE)
        if header.api_version >= 4:
            coordinators = [await coordinator_for(key, key_type) for key in body.coordinator_keys]
            return respond(header, {"throttle_time": 0, "coordinators": coordinators})
        answer = await coordinator_for(body.key, key_type)
        answer.pop("key")
        return respond(header, {"throttle_time": 0, **answer})

    # -- membership (JoinGroup and SyncGroup: handlers/join_group.py) ------------------
    async def leave_group(header: RequestHeader, body: Any) -> Any:
        if not authorize(READ, GROUP, body.group_id):
            return respond(header, {"throttle_time": 0, "error_code": GROUP_DENIED, "members": []})
        if header.api_version >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in body.members]
        else:
            leaving = [(body.member_id, None)]
        top, errors = coordinator.leave(body.group_id, leaving)
        if header.api_version < 3:
            return respond(header, {"throttle_time": 0, "error_code": top or errors[0]})
        return respond(header, {
            "throttle_time": 0,
            "error_code": top,
            "members": [{"member_id": member_id, "group_instance_id": instance, "error_code": code}
                        for (member_id, instance), code in zip(leaving, errors, strict=True)],
        })  # fmt: skip

    # -- offsets ---------------------------------------------------------------------
    async def offset_commit(header: RequestHeader, body: Any) -> Any:
        member = OffsetCommitMember(
            body.group_id,
            getattr(body, "generation_id_or_member_epoch", -1),
            getattr(body, "member_id", ""),
            getattr(body, "group_instance_id", None),
        )
        group_allowed = authorize(READ, GROUP, body.group_id)
        requested: list[PartitionOffset] = []
        entries: list[dict[str, Any]] = []  # the response entries of ``requested``
        topics = []
        for topic in body.topics:
            name = getattr(topic, "name", None)
            if name is None and getattr(topic, "topic_id", None) is not None:
                found = metadata_store.by_id(topic.topic_id)
                name = found.name if found is not None else None
            partitions = []
            refused = not group_allowed or (name is not None and not authorize(READ, TOPIC, name))
            for p in topic.partitions:
                if refused:
                    code = (
                        GROUP_DENIED if not group_allowed else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                    partitions.append({"partition_index": p.partition_index, "error_code": code})
                    continue
                tp = TopicPartition(name or "", p.partition_index)
                exists = name is not None and metadata_store.leadership(tp) is not None
                requested.append(PartitionOffset(
                    tp, p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata or "", topic_exists=exists,
                ))  # fmt: skip
                entries.append({"partition_index": p.partition_index})
                partitions.append(entries[-1])
            topics.append({"name": name or "", "topic_id": getattr(topic, "topic_id", None),
                           "partitions": partitions})  # fmt: skip
        codes = []
        if requested:
            codes = await coordinator.commit_offsets(
                member,
                requested,
                metadata_max_bytes=metadata_max_bytes,
                before_write=topic_manager.ensure_offsets_topic,
                api_version=header.api_version,
            )
        for entry, code in zip(entries, codes, strict=True):
            entry["error_code"] = code
        return respond(header, {"throttle_time": 0, "topics": topics})

    def fetch_group(
        group: str, topics: Any, require_stable: bool, member: tuple[str | None, int] = (None, -1)
    ) -> dict[str, Any]:
        if not authorize(DESCRIBE, GROUP, group):
            return {"group_id": group, "topics": [], "error_code": GROUP_DENIED}
        if error := coordinator.coordinator_error(group):
            return {"group_id": group, "topics": [], "error_code": error}
        if error := coordinator.validate_offset_fetch(group, *member):
            return {"group_id": group, "topics": [], "error_code": error}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        if topics is None:
            found = coordinator.committed(group)
            found = {tp: v for tp, v in found.items() if authorize(DESCRIBE, TOPIC, tp.topic)}
        else:
            wanted: list[TopicPartition] = []
            for t in topics:
                name = getattr(t, "name", None)
                if name is None:  # v10 names topics by id
                    found_topic = metadata_store.by_id(t.topic_id)
                    if found_topic is None:
                        by_topic[f"\0{t.topic_id}"] = [
                            {"partition_index": i, "committed_offset": -1,
                             "committed_leader_epoch": -1, "metadata": "",
                             "error_code": ErrorCode.UNKNOWN_TOPIC_ID}
                            for i in t.partition_indexes
                        ]  # fmt: skip
                        continue
                    name = found_topic.name
                wanted.extend(TopicPartition(name, i) for i in t.partition_indexes)
            refused = [tp for tp in wanted if not authorize(DESCRIBE, TOPIC, tp.topic)]
            found = coordinator.committed(group, [tp for tp in wanted if tp not in refused])
            for tp in refused:
                by_topic.setdefault(tp.topic, []).append({
                    "partition_index": tp.partition, "committed_offset": -1,
                    "committed_leader_epoch": -1, "metadata": "",
                    "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                })  # fmt: skip
        for tp, value in found.items():
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition,
                "committed_offset": -1 if value is None else value.offset,
                "committed_leader_epoch": -1 if value is None else value.leader_epoch,
                "metadata": "" if value is None else value.metadata,
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT
                if require_stable and coordinator.has_pending_transactional(group, tp)
                else ErrorCode.NONE,
            })  # fmt: skip
        return {
            "group_id": group,
            "topics": [
                {"name": name, "topic_id": topic_id_of(name), "partitions": parts}
                for name, parts in by_topic.items()
            ],
            "error_code": ErrorCode.NONE,
        }

    def topic_id_of(name: str) -> uuid.UUID | None:
        """OffsetFetch v10's topic id of ``name`` (an unknown id is kept as ``\\0<id>``)."""
        if name.startswith("\0"):
            return uuid.UUID(name[1:])
        found = metadata_store.get(name)
        return None if found is None else found.topic_id

    async def offset_fetch(header: RequestHeader, body: Any) -> Any:
        stable = getattr(body, "require_stable", False)
        if header.api_version >= 8:
            groups = [
                fetch_group(g.group_id, g.topics, stable,
                            (getattr(g, "member_id", None), getattr(g, "member_epoch", -1)))
                for g in body.groups
            ]  # fmt: skip
            return respond(header, {"throttle_time": 0, "groups": groups})
        answer = fetch_group(body.group_id, body.topics, stable)
        answer.pop("group_id")
        for topic in answer["topics"]:
            del topic["topic_id"]  # only v10 (a version of the grouped form) names ids
        return respond(header, {"throttle_time": 0, **answer})

    registry.add(ApiKey.FIND_COORDINATOR, 0, 6, find_coordinator)
    registry.add(ApiKey.LEAVE_GROUP, 0, 5, leave_group)
    registry.add(ApiKey.OFFSET_COMMIT, 0, 10, offset_commit)
    registry.add(ApiKey.OFFSET_FETCH, 0, 10, offset_fetch)
