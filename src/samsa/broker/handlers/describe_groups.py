"""DescribeGroups (key 15), versions 0–5, and ListGroups (key 16), versions 0–5: what a
classic group is (state, protocol, members and their assignments) and which groups exist.

Typed handlers (:func:`samsa.broker.typed_api.serve`) of the v5 classes. DescribeGroups v3+
may ask for the caller's authorized operations on each group; ListGroups v4 filters by
state and v5 by type (``classic``, or ``consumer`` for a KIP-848 group).

With the authorizer on, DescribeGroups needs DESCRIBE on each group
(GROUP_AUTHORIZATION_FAILED for that group); ListGroups lists every group to a caller
that may DESCRIBE the cluster, else the groups it may DESCRIBE, as Kafka's.
"""

from __future__ import annotations

from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.types import GroupId
from kio.static.primitive import i32

from samsa.acl import AclOperation, ResourceType
from samsa.broker.api import NO_THROTTLE, kio_error
from samsa.broker.handlers.group_services import GroupServices
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorized_operations import group_operations
from samsa.broker.security.authorizer import authorize, authorize_cluster
from samsa.broker.typed_api import TypedApi
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader

DESCRIBE_GROUPS = TypedApi(
    ApiKey.DESCRIBE_GROUPS, (0, 5), DescribeGroupsRequest, DescribeGroupsResponse
)
LIST_GROUPS = TypedApi(ApiKey.LIST_GROUPS, (0, 5), ListGroupsRequest, ListGroupsResponse)
NO_OPERATIONS = i32(-(2**31))


def describe_group(broker: GroupServices, group_id: GroupId, include_ops: bool) -> DescribedGroup:
    if not authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return DescribedGroup(
            error_code=kio_error(ErrorCode.GROUP_AUTHORIZATION_FAILED), group_id=group_id,
            group_state="", protocol_type="", protocol_data="", members=(),
            authorized_operations=NO_OPERATIONS,
        )  # fmt: skip
    coordinator = broker.group_coordinator
    described = coordinator.describe(group_id)
    error = coordinator.coordinator_error(group_id)
    return DescribedGroup(
        error_code=kio_error(ErrorCode.INVALID_GROUP_ID if not group_id else error),
        group_id=group_id,
        group_state=described.state,
        protocol_type=described.protocol_type,
        protocol_data=described.protocol,
        members=tuple(
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in described.members
        ),
        authorized_operations=i32(group_operations(include_ops, group_id)),
    )


async def describe_groups(
    broker: GroupServices, header: RequestHeader, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    include_ops = request.include_authorized_operations
    return DescribeGroupsResponse(
        throttle_time=NO_THROTTLE,
        groups=tuple(describe_group(broker, g, include_ops) for g in request.groups),
    )


async def list_groups(
    broker: GroupServices, header: RequestHeader, request: ListGroupsRequest
) -> ListGroupsResponse:
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    every_group = authorize_cluster(AclOperation.DESCRIBE)
    groups = []
    for group_id, protocol_type, state, group_type in broker.group_coordinator.list_groups():
        if not every_group and not authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            continue
        if (states and state.lower() not in states) or (types and group_type not in types):
            continue
        groups.append(ListedGroup(group_id=GroupId(group_id), protocol_type=protocol_type,
                                  group_state=state, group_type=group_type))  # fmt: skip
    return ListGroupsResponse(
        throttle_time=NO_THROTTLE, error_code=kio_error(ErrorCode.NONE), groups=tuple(groups)
    )


def register(registry: ApiRegistry, broker: GroupServices) -> None:
    DESCRIBE_GROUPS.serve(registry, describe_groups, broker)
    LIST_GROUPS.serve(registry, list_groups, broker)
