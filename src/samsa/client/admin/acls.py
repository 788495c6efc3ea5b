"""Admin operations on ACLs: create, describe and delete them (kafka-acls' requests).

Any broker answers (in a cluster each stores the change in ZooKeeper, and the
others apply it from there). A broker without an authorizer answers
SECURITY_DISABLED, raised as :class:`~samsa.errors.SecurityDisabledError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
from samsa.client.admin.base import AdminBase, finish, item_error
from samsa.client.errors import error_for
from samsa.errors import KafkaError
from samsa.protocol.api_keys import ApiKey

__all__ = ["AclAdmin"]


def _filter_fields(acl_filter: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": acl_filter.resource_type,
        "resource_name_filter": acl_filter.name,
        "pattern_type_filter": acl_filter.pattern_type,
        "principal_filter": acl_filter.principal,
        "host_filter": acl_filter.host,
        "operation": acl_filter.operation,
        "permission_type": acl_filter.permission_type,
    }


def _binding(resource: Any, acl: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(resource.resource_type),
            resource.resource_name,
            PatternType(resource.pattern_type),
        ),
        AccessControlEntry(
            acl.principal,
            acl.host,
            AclOperation(acl.operation),
            AclPermissionType(acl.permission_type),
        ),
    )


class AclAdmin(AdminBase):
    """CreateAcls, DescribeAcls and DeleteAcls, sent to any broker."""

    async def _acl_request(
        self, api_key: int, body: dict[str, Any], what: str, timeout_ms: int | None
    ) -> Any:
        async def attempt() -> Any:
            return await self._cluster.send(None, api_key, body)

        return await self._retrying(attempt, what, timeout_ms)

    async def create_acls(
        self,
        bindings: Iterable[AclBinding],
        *,
        raise_on_error: bool = True,
        timeout_ms: int | None = None,
    ) -> dict[AclBinding, KafkaError | None]:
        """Create each binding; each one's error (None: created or already there)."""
        wanted = list(bindings)
        body = {"creations": [{
            "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
            "resource_pattern_type": b.pattern.pattern_type, "principal": b.entry.principal,
            "host": b.entry.host, "operation": b.entry.operation,
            "permission_type": b.entry.permission_type,
        } for b in wanted]}  # fmt: skip
        response = await self._acl_request(ApiKey.CREATE_ACLS, body, "create ACLs", timeout_ms)
        results = {
            binding: item_error(int(r.error_code), f"ACL {binding}", r.error_message)
            for binding, r in zip(wanted, response.results, strict=True)
        }
        return finish(results, raise_on_error)

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: int | None = None
    ) -> list[AclBinding]:
        """The bindings ``acl_filter`` selects (every one by default), sorted."""
        body = _filter_fields(acl_filter or AclBindingFilter())
        response = await self._acl_request(ApiKey.DESCRIBE_ACLS, body, "describe ACLs", timeout_ms)
        if response.error_code:
            raise error_for(int(response.error_code), f"describe ACLs: {response.error_message}")
        return sorted(_binding(r, a) for r in response.resources for a in r.acls)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout_ms: int | None = None
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the bindings each filter selects; those deleted, per filter."""
        wanted = list(filters)
        body = {"filters": [_filter_fields(f) for f in wanted]}
        response = await self._acl_request(ApiKey.DELETE_ACLS, body, "delete ACLs", timeout_ms)
        deleted: dict[AclBindingFilter, list[AclBinding]] = {}
        for acl_filter, result in zip(wanted, response.filter_results, strict=True):
            if result.error_code:
                raise error_for(int(result.error_code), f"delete ACLs: {result.error_message}")
            deleted[acl_filter] = sorted(_binding(m, m) for m in result.matching_acls)
        return deleted
