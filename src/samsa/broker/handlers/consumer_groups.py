"""Consumer groups of the KIP-848 protocol: ConsumerGroupHeartbeat (key 68) and
ConsumerGroupDescribe (key 69), versions 0–1 as Kafka 4.x serves them.

The decisions live in :class:`~samsa.coordinator.group.consumer_group_manager.ConsumerGroupManager`
(through the group coordinator); this module translates the messages: topic names to
ids and back from the metadata cache, and the authorizer's checks — READ on the group
for a heartbeat (and DESCRIBE on each subscribed topic, else TOPIC_AUTHORIZATION_FAILED),
DESCRIBE on the group for a describe (GROUP_AUTHORIZATION_FAILED when refused).

``SubscribedTopicRegex`` is matched with RE2 (:mod:`~samsa.coordinator.group.topic_regex`)
against every non-internal topic at each heartbeat of the group.

Deviations: assignors ignore rack ids; the target assignment is computed within the
heartbeat that changed the group (Kafka 4.3 may answer a few heartbeats later); a
regex's topics are not filtered by the member's DESCRIBE rights nor kept in
ConsumerGroupRegularExpression records; a classic group is not converted to a consumer
group while it has members (GROUP_ID_NOT_FOUND, as Kafka answers under
``group.consumer.migration.policy=disabled``), and a classic JoinGroup to a consumer
group with members is INCONSISTENT_GROUP_PROTOCOL (Kafka 4.3 lets classic members
join it).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kio.schema.consumer_group_describe.v0.request import (
    ConsumerGroupDescribeRequest as DescribeRequestV0,
)
from kio.schema.consumer_group_describe.v1.request import (
    ConsumerGroupDescribeRequest as DescribeRequestV1,
)
from kio.schema.consumer_group_heartbeat.v0.request import (
    ConsumerGroupHeartbeatRequest as HeartbeatRequestV0,
)
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest as HeartbeatRequestV1,
)

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import client_host, respond
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.metadata.topic_manager import TopicManager
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorized_operations import group_operations
from samsa.broker.security.authorizer import authorize
from samsa.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from samsa.coordinator.group.consumer_group_manager import HeartbeatRequest, topic_partitions
from samsa.coordinator.group.coordinator import GroupCoordinator
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader

CONSUMER_MEMBER_TYPE = 1
"""ConsumerGroupDescribe v1's ``MemberType``: 0 classic, 1 consumer (KIP-1099)."""


def register(
    registry: ApiRegistry,
    *,
    metadata: MetadataCache,
    topic_manager: TopicManager,
    group_coordinator: GroupCoordinator,
) -> None:
    coordinator = group_coordinator

    def topic_lookup(name: str) -> tuple[uuid.UUID, int] | None:
        found = metadata.get(name)
        return None if found is None else (found.topic_id, found.partitions)

    def owned_partitions(
        body: HeartbeatRequestV0 | HeartbeatRequestV1,
    ) -> dict[uuid.UUID, frozenset[int]] | None:
        if body.topic_partitions is None:
            return None
        owned: dict[uuid.UUID, frozenset[int]] = {}
        for t in body.topic_partitions:
            if t.topic_id is not None:
                owned[t.topic_id] = owned.get(t.topic_id, frozenset()) | frozenset(t.partitions)
        return owned

    async def consumer_group_heartbeat(
        header: RequestHeader, body: HeartbeatRequestV0 | HeartbeatRequestV1
    ) -> Any:
        def refused(code: ErrorCode) -> Any:
            return respond(header, {"throttle_time": 0, "error_code": code, "member_epoch": 0,
                                    "heartbeat_interval": 0})  # fmt: skip

        if not authorize(AclOperation.READ, ResourceType.GROUP, body.group_id):
            return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = body.subscribed_topic_names
        if names is not None and not all(
            authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, n) for n in names
        ):
            return refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        await topic_manager.ensure_offsets_topic()
        rebalance_timeout = duration_ms(body.rebalance_timeout)
        result = await coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                member_epoch=body.member_epoch,
                api_version=header.api_version,
                instance_id=body.instance_id,
                rack_id=body.rack_id,
                rebalance_timeout_ms=rebalance_timeout,
                subscribed_topic_names=None if names is None else tuple(names),
                subscribed_topic_regex=body.subscribed_topic_regex
                if isinstance(body, HeartbeatRequestV1)
                else None,
                server_assignor=body.server_assignor,
                owned=owned_partitions(body),
                client_id=header.client_id or "",
                client_host=client_host.get(),
            ),
            topic_lookup,
            lambda: [name for name, info in metadata.topics().items() if not info.is_internal],
        )
        assignment = None
        if result.assignment is not None:
            assignment = {"topic_partitions": [
                {"topic_id": topic, "partitions": parts}
                for topic, parts in topic_partitions(result.assignment)
            ]}  # fmt: skip
        return respond(header, {
            "throttle_time": 0,
            "error_code": result.error,
            "error_message": result.message,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms,
            "assignment": assignment,
        })  # fmt: skip

    def described_partitions(parts: Mapping[uuid.UUID, frozenset[int]]) -> dict[str, Any]:
        listed = []
        for topic, ps in topic_partitions(parts):
            found = metadata.by_id(topic)
            if found is not None:
                listed.append({"topic_id": topic, "topic_name": found.name, "partitions": ps})
        return {"topic_partitions": listed}

    def described_member(group: ConsumerGroup, m: ConsumerGroupMember) -> dict[str, Any]:
        return {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": described_partitions(m.assigned),
            "target_assignment": described_partitions(group.target.get(m.member_id, {})),
            "member_type": CONSUMER_MEMBER_TYPE,
        }

    async def consumer_group_describe(
        header: RequestHeader, body: DescribeRequestV0 | DescribeRequestV1
    ) -> Any:
        described = []
        default_assignor = coordinator.consumer_groups.config.assignors[0]
        for group_id in body.group_ids:
            empty = {"group_id": group_id, "group_state": "", "group_epoch": 0,
                     "assignment_epoch": 0, "assignor_name": "", "members": [],
                     "authorized_operations": -(2**31)}  # fmt: skip
            if not authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                described.append({**empty, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED})
                continue
            error, message, group = coordinator.consumer_group(group_id)
            if group is None:
                described.append({**empty, "error_code": error, "error_message": message})
                continue
            described.append({
                "error_code": ErrorCode.NONE,
                "group_id": group_id,
                "group_state": group.state,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": group.preferred_assignor(default_assignor),
                "members": [described_member(group, m) for m in group.members.values()],
                "authorized_operations": group_operations(
                    body.include_authorized_operations, group_id
                ),
            })  # fmt: skip
        return respond(header, {"throttle_time": 0, "groups": described})

    registry.add(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, consumer_group_heartbeat)
    registry.add(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe)
