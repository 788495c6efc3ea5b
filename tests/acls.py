"""ACL requests for tests: create, list and delete ACLs on a broker with raw requests.

Every helper takes the principal the ACL names; until clients can authenticate,
every connection is ``User:ANONYMOUS``, the default.
"""

from __future__ import annotations

from typing import Any

from tests.rawclient import exchange

from samsa.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"


def acl_values(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    principal: str = ANONYMOUS,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
    pattern_type: PatternType = PatternType.LITERAL,
) -> dict[str, Any]:
    """One ACL as CreateAcls v3 carries it (the CLUSTER resource is always kafka-cluster)."""
    return {
        "resource_type": resource_type,
        "resource_name": CLUSTER_NAME if resource_type == ResourceType.CLUSTER else name,
        "resource_pattern_type": pattern_type,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": permission,
    }


def create_acl(bootstrap: str, *args: Any, **kwargs: Any) -> int:
    """Create one ACL (arguments as :func:`acl_values`); its error code."""
    response = exchange(bootstrap, CREATE_ACLS, 3, {"creations": [acl_values(*args, **kwargs)]})
    return int(response.results[0].error_code)


def delete_acl(bootstrap: str, *args: Any, **kwargs: Any) -> int:
    """Delete exactly the ACL :func:`acl_values` describes; how many ACLs were deleted."""
    values = acl_values(*args, **kwargs)
    response = exchange(bootstrap, DELETE_ACLS, 3, {"filters": [{
        "resource_type_filter": values["resource_type"],
        "resource_name_filter": values["resource_name"],
        "pattern_type_filter": values["resource_pattern_type"],
        "principal_filter": values["principal"], "host_filter": values["host"],
        "operation": values["operation"], "permission_type": values["permission_type"],
    }]})  # fmt: skip
    result = response.filter_results[0]
    assert result.error_code == 0, result.error_message
    return len(result.matching_acls)


def describe_acls(bootstrap: str, principal: str | None = None) -> Any:
    """DescribeAcls v3 for every ACL (of ``principal``): the raw response."""
    return exchange(bootstrap, DESCRIBE_ACLS, 3, {
        "resource_type_filter": ResourceType.ANY, "resource_name_filter": None,
        "pattern_type_filter": PatternType.ANY, "principal_filter": principal,
        "host_filter": None, "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    })  # fmt: skip
