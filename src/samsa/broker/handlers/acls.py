"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31), versions 1–3.

Creating and deleting ACLs needs ALTER on the cluster, describing them
DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka's
``AclApis``). Without an authorizer (``authorizer.class.name`` empty) all three
answer SECURITY_DISABLED. Each creation is checked as Kafka checks it
(INVALID_REQUEST naming what is wrong: an UNKNOWN or ANY element, a pattern
type other than LITERAL or PREFIXED, an empty name, a CLUSTER resource not
named ``kafka-cluster``, a principal that is not ``Type:name``); ACLs on
DELEGATION_TOKEN and USER resources are refused (INVALID_REQUEST): samsa has no
delegation tokens. Each delete filter answers the bindings it removed. Changes
are stored before the response (:mod:`samsa.cluster.acl_store`) and apply to
the requests that follow at once; in a cluster, other brokers apply them when
ZooKeeper's change notification reaches them.
"""

from __future__ import annotations

from typing import Any, TypeVar

from samsa.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from samsa.broker.api import error_fields, respond
from samsa.broker.network.registry import ApiRegistry
from samsa.broker.security.authorizer import (
    Authorizer,
    authorize_cluster,
    check_filter,
    current_authorizer,
)
from samsa.errors import ErrorCode, KafkaError
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import RequestHeader

_DISABLED = "No Authorizer is configured on the broker"
_CLUSTER_DENIED = "Cluster authorization failed."


E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _code(kind: type[E], value: int) -> E:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN: refused by the checks


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        _code(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _code(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        _code(AclOperation, f.operation),
        _code(AclPermissionType, f.permission_type),
    )


def _binding(c: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _code(ResourceType, c.resource_type),
            c.resource_name,
            _code(PatternType, c.resource_pattern_type),
        ),
        AccessControlEntry(
            c.principal,
            c.host,
            _code(AclOperation, c.operation),
            _code(AclPermissionType, c.permission_type),
        ),
    )


def _described(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    by_pattern: dict[ResourcePattern, list[dict[str, Any]]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append({
            "principal": b.entry.principal, "host": b.entry.host,
            "operation": b.entry.operation, "permission_type": b.entry.permission_type,
        })  # fmt: skip
    return [
        {"resource_type": p.resource_type, "resource_name": p.name, "pattern_type": p.pattern_type,
         "acls": acls}
        for p, acls in by_pattern.items()
    ]  # fmt: skip


def _changer() -> tuple[Authorizer | None, dict[str, Any]]:
    """The authorizer, if there is one and the request may ALTER the cluster (what
    changing ACLs needs); otherwise None and the error every item answers."""
    authorizer = current_authorizer.get()
    if authorizer is None:
        return None, {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": _DISABLED}
    if not authorize_cluster(AclOperation.ALTER):
        return None, {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      "error_message": _CLUSTER_DENIED}  # fmt: skip
    return authorizer, {}


def register(registry: ApiRegistry) -> None:
    async def describe_acls(header: RequestHeader, body: Any) -> Any:
        authorizer = current_authorizer.get()
        if authorizer is None:
            return respond(header, {"throttle_time": 0, "error_code": ErrorCode.SECURITY_DISABLED,
                                    "error_message": _DISABLED, "resources": []})  # fmt: skip
        if not authorize_cluster(AclOperation.DESCRIBE):
            return respond(header, {"throttle_time": 0, "resources": [],
                                    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    "error_message": _CLUSTER_DENIED})  # fmt: skip
        acl_filter = _filter(body)
        try:
            check_filter(acl_filter)
        except KafkaError as exc:
            return respond(header, {"throttle_time": 0, "resources": [], **error_fields(exc)})
        resources = _described(authorizer.bindings(acl_filter))
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.NONE,
                                "error_message": None, "resources": resources})  # fmt: skip

    async def create_acls(header: RequestHeader, body: Any) -> Any:
        authorizer, error = _changer()
        if authorizer is None:
            return respond(header, {"throttle_time": 0, "results": [error] * len(body.creations)})
        outcomes = await authorizer.create_acls([_binding(c) for c in body.creations])
        results = [
            {"error_code": ErrorCode.NONE, "error_message": None} if exc is None
            else error_fields(exc)
            for exc in outcomes
        ]  # fmt: skip
        return respond(header, {"throttle_time": 0, "results": results})

    async def delete_acls(header: RequestHeader, body: Any) -> Any:
        authorizer, error = _changer()
        if authorizer is None:
            refused = {**error, "matching_acls": []}
            return respond(header, {"throttle_time": 0,
                                    "filter_results": [refused] * len(body.filters)})  # fmt: skip
        outcomes = await authorizer.delete_acls([_filter(f) for f in body.filters])
        results = []
        for outcome in outcomes:
            if not isinstance(outcome, list):
                results.append({**error_fields(outcome), "matching_acls": []})
                continue
            results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
                {"error_code": ErrorCode.NONE, "error_message": None,
                 "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
                 "pattern_type": b.pattern.pattern_type, "principal": b.entry.principal,
                 "host": b.entry.host, "operation": b.entry.operation,
                 "permission_type": b.entry.permission_type}
                for b in outcome
            ]})  # fmt: skip
        return respond(header, {"throttle_time": 0, "filter_results": results})

    registry.add(ApiKey.DESCRIBE_ACLS, 1, 3, describe_acls)
    registry.add(ApiKey.CREATE_ACLS, 1, 3, create_acls)
    registry.add(ApiKey.DELETE_ACLS, 1, 3, delete_acls)
