"""Heartbeat (key 12), versions 0–4: a member of a classic group says it is alive, and
learns whether the group is rebalancing (REBALANCE_IN_PROGRESS).

A typed handler (:func:`samsa.broker.typed_api.serve`) of Heartbeat v4; no version changes its
meaning (v3 added static members' ``group_instance_id``). With the authorizer on it
needs READ on the group (GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.handlers.group_services import GroupServices
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import authorize
from samsa.broker.typed_api import TypedApi
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader

HEARTBEAT = TypedApi(ApiKey.HEARTBEAT, (0, 4), HeartbeatRequest, HeartbeatResponse)


async def heartbeat(
    broker: GroupServices, header: RequestHeader, request: HeartbeatRequest
) -> HeartbeatResponse:
    if not authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        error = broker.group_coordinator.heartbeat(
            request.group_id, request.generation_id, request.member_id, request.group_instance_id
        )
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=kio_error(error))


def register(registry: ApiRegistry, broker: GroupServices) -> None:
    HEARTBEAT.serve(registry, heartbeat, broker)
