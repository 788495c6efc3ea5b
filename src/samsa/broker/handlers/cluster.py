"""DescribeCluster (key 60, versions 0–2): the live brokers, the cluster id, the controller.

The brokers are those registered now (a single node: itself, also the
controller) that have the listener the request came on, at that listener's
advertised address; none is ever fenced (a ZooKeeper cluster has no fencing).
The controller is named as Metadata names it (one the client can reach).
``include_cluster_authorized_operations`` answers the operations the caller may
do on the cluster (every one Kafka defines without an authorizer), computed, as
Kafka does, only for a caller that may DESCRIBE the cluster; otherwise the field
keeps its "not computed" value.
A request for the controller endpoints (``endpoint_type`` 2) is refused as a
Kafka broker refuses it: this is a broker endpoint.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from samsa.acl import AclOperation
from samsa.broker.api import respond
from samsa.broker.metadata.metadata_cache import MetadataCache
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorized_operations import cluster_operations
from samsa.broker.security.authorizer import authorize_cluster
from samsa.errors import ErrorCode
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader


class EndpointType(IntEnum):
    BROKER = 1
    CONTROLLER = 2


def _endpoint_error(version: int, requested: int) -> dict[str, Any] | None:
    if requested == EndpointType.BROKER:
        return None
    if requested == EndpointType.CONTROLLER:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = (
            "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER"
        )
    else:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {requested}"
    return {"error_code": code, "error_message": message, "controller_id": -1}


def register(registry: ApiRegistry, *, metadata: MetadataCache) -> None:
    async def handle(header: RequestHeader, body: Any) -> Any:
        requested = getattr(body, "endpoint_type", EndpointType.BROKER)
        error = _endpoint_error(header.api_version, requested)
        if error is not None:
            return respond(header, {"throttle_time": 0, "endpoint_type": requested, **error})
        operations = cluster_operations(
            body.include_cluster_authorized_operations and authorize_cluster(AclOperation.DESCRIBE)
        )
        return respond(
            header,
            {
                "throttle_time": 0,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "endpoint_type": EndpointType.BROKER,
                "cluster_id": metadata.cluster_id,
                "controller_id": metadata.controller_id(),
                "brokers": [
                    {
                        "broker_id": node.node_id,
                        "host": node.host,
                        "port": node.port,
                        "rack": node.rack,
                        "is_fenced": False,
                    }
                    for node in metadata.alive_brokers()
                ],
                "cluster_authorized_operations": operations,
            },
        )

    registry.add(ApiKey.DESCRIBE_CLUSTER, 0, 2, handle)
