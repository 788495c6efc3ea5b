"""JoinGroup (key 11), versions 0–9, and SyncGroup (key 14), versions 0–5: the two phases
of a classic group's rebalance.

Typed handlers (:func:`samsa.broker.typed_api.serve`): each sees the newest request kio has
(JoinGroup v9, SyncGroup v5) and answers the newest response, written down to the
version asked. Version-dependent answers as Kafka's: a JoinGroup v0 request's rebalance
timeout is its session timeout; v4+ members must rejoin with the member id they are
given (MEMBER_ID_REQUIRED); before v7 a missing protocol name is "" (the field is not
nullable there); v9 leaders may skip the assignment (KIP-814).

With the authorizer on, both need READ on the group (GROUP_AUTHORIZATION_FAILED).
The decisions are :class:`~samsa.coordinator.group.coordinator.GroupCoordinator`'s.
"""

from __future__ import annotations

from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.static.primitive import i32

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, client_host, kio_error
from samsa.broker.handlers.group_services import GroupServices
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.coordinator.group.coordinator import JoinRequest
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import duration_ms
from samsa.protocol.codec import RequestHeader

JOIN_GROUP = TypedApi(ApiKey.JOIN_GROUP, (0, 9), JoinGroupRequest, JoinGroupResponse)
SYNC_GROUP = TypedApi(ApiKey.SYNC_GROUP, (0, 5), SyncGroupRequest, SyncGroupResponse)


async def join_group(
    broker: GroupServices, header: RequestHeader, request: JoinGroupRequest
) -> JoinGroupResponse:
    version = header.api_version
    no_name = None if version >= 7 else ""
    if not authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return JoinGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=kio_error(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            generation_id=i32(-1),
            protocol_name=no_name,
            leader="",
            member_id="",
            members=(),
        )
    await broker.topics.ensure_offsets_topic()
    session_ms = duration_ms(request.session_timeout)
    result = await broker.group_coordinator.join(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            client_id=header.client_id or "",
            client_host=client_host.get(),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=(
                session_ms if version == 0 else duration_ms(request.rebalance_timeout)
            ),
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        )
    )
    return JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=kio_error(result.error),
        generation_id=i32(result.generation),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if result.protocol_name is not None else no_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            JoinGroupResponseMember(member_id=member_id, group_instance_id=instance, metadata=meta)
            for member_id, instance, meta in result.members
        ),
    )


async def sync_group(
    broker: GroupServices, header: RequestHeader, request: SyncGroupRequest
) -> SyncGroupResponse:
    if not authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return SyncGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=kio_error(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            assignment=b"",
        )
    result = await broker.group_coordinator.sync(
        request.group_id,
        request.generation_id,
        request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return SyncGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=kio_error(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def register(registry: ApiRegistry, broker: GroupServices) -> None:
    JOIN_GROUP.serve(registry, join_group, broker)
    SYNC_GROUP.serve(registry, sync_group, broker)
