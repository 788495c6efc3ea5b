"""DeleteGroups (key 42), versions 0–2, and OffsetDelete (key 47), version 0: removing a
group, or some of its committed offsets, from ``__consumer_offsets``.

Typed handlers (:func:`samsa.broker.typed_api.serve`) of DeleteGroups v2 and OffsetDelete v0.
The decisions are :class:`~samsa.coordinator.group.coordinator.GroupCoordinator`'s.

With the authorizer on, both need DELETE on the group (GROUP_AUTHORIZATION_FAILED);
OffsetDelete also READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.handlers.group_services import GroupServices
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader
from samsa.types import TopicPartition

DELETE_GROUPS = TypedApi(ApiKey.DELETE_GROUPS, (0, 2), DeleteGroupsRequest, DeleteGroupsResponse)
OFFSET_DELETE = TypedApi(ApiKey.OFFSET_DELETE, (0, 0), OffsetDeleteRequest, OffsetDeleteResponse)
DELETE, READ = AclOperation.DELETE, AclOperation.READ
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC


async def delete_groups(
    broker: GroupServices, header: RequestHeader, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    names = list(request.groups_names)
    refused = {g for g in names if not authorize(DELETE, GROUP, g)}
    results = await broker.group_coordinator.delete_groups([g for g in names if g not in refused])
    results.update(dict.fromkeys(refused, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            DeletableGroupResult(group_id=GroupId(g), error_code=kio_error(code))
            for g, code in results.items()
        ),
    )


async def offset_delete(
    broker: GroupServices, header: RequestHeader, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not authorize(DELETE, GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=kio_error(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                                    throttle_time=NO_THROTTLE, topics=())  # fmt: skip
    wanted = [TopicPartition(t.name, p.partition_index) for t in request.topics
              for p in t.partitions]  # fmt: skip
    refused = {tp for tp in wanted if not authorize(READ, TOPIC, tp.topic)}
    top, codes = await broker.group_coordinator.delete_offsets(
        request.group_id, [tp for tp in wanted if tp not in refused]
    )
    codes = {**codes, **dict.fromkeys(refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
    topics: dict[str, list[OffsetDeleteResponsePartition]] = {}
    if top == ErrorCode.NONE:
        for tp in wanted:
            topics.setdefault(tp.topic, []).append(OffsetDeleteResponsePartition(
                partition_index=i32(tp.partition),
                error_code=kio_error(codes.get(tp, ErrorCode.NONE)),
            ))  # fmt: skip
    return OffsetDeleteResponse(
        error_code=kio_error(top),
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetDeleteResponseTopic(name=TopicName(name), partitions=tuple(parts))
            for name, parts in topics.items()
        ),
    )


def register(registry: ApiRegistry, broker: GroupServices) -> None:
    DELETE_GROUPS.serve(registry, delete_groups, broker)
    OFFSET_DELETE.serve(registry, offset_delete, broker)
