"""The ACLs page: every ACL binding of the cluster (resource pattern, principal, host,
operation, permission), a form creating one and a button deleting one. A cluster
without an authorizer says so instead of a list."""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

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
from samsa.console.state import audit, clients_of, redirect, render
from samsa.errors import ErrorCode, KafkaError

__all__ = ["acls_page", "alter_acl"]

E = TypeVar("E", bound=IntEnum)

RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                  ResourceType.TRANSACTIONAL_ID, ResourceType.USER)  # fmt: skip
PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
OPERATIONS = tuple(op for op in AclOperation if op > AclOperation.ANY)
PERMISSIONS = (AclPermissionType.ALLOW, AclPermissionType.DENY)


async def acls_page(request: Request) -> Response:
    try:
        bindings = await clients_of(request).admin.describe_acls()
    except KafkaError as exc:
        if exc.code != ErrorCode.SECURITY_DISABLED:
            raise
        bindings, disabled = [], True
    else:
        disabled = False
    return render(
        request,
        "acls.html",
        bindings=bindings,
        disabled=disabled,
        resource_types=RESOURCE_TYPES,
        pattern_types=PATTERN_TYPES,
        operations=OPERATIONS,
        permissions=PERMISSIONS,
    )


def _choice(text: str, choices: tuple[E, ...]) -> E:
    for choice in choices:
        if choice.name == text:
            return choice
    raise ValueError(f"{text!r} is not one of {', '.join(c.name for c in choices)}")


async def alter_acl(request: Request) -> Response:
    """Create the binding the form names, or delete exactly it when ``delete`` is given."""
    form = await request.form()
    try:
        resource_type = _choice(str(form.get("resource_type", "")), RESOURCE_TYPES)
        pattern_type = _choice(str(form.get("pattern_type", "")), PATTERN_TYPES)
        operation = _choice(str(form.get("operation", "")), OPERATIONS)
        permission = _choice(str(form.get("permission", "")), PERMISSIONS)
    except ValueError as exc:
        return redirect("/acls", error=str(exc))
    name = str(form.get("name", "")).strip()
    if resource_type is ResourceType.CLUSTER:
        name = "kafka-cluster"
    principal = str(form.get("principal", "")).strip()
    host = str(form.get("host", "")).strip() or "*"
    if not name or ":" not in principal:
        return redirect("/acls", error="name the resource and the principal (User:NAME)")
    binding = AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )
    what = (f"{permission.name} {principal} from {host} {operation.name} on "
            f"{resource_type.name} {pattern_type.name.lower()} {name!r}")  # fmt: skip
    admin = clients_of(request).admin
    deleting = bool(form.get("delete"))
    try:
        if deleting:
            exact = AclBindingFilter(resource_type, name, pattern_type, principal, host,
                                     operation, permission)  # fmt: skip
            deleted = (await admin.delete_acls([exact]))[exact]
            if not deleted:
                return redirect("/acls", error=f"no ACL {what}")
        else:
            await admin.create_acls([binding])
    except KafkaError as exc:
        audit(request, "failed to %s ACL %s: %s", "delete" if deleting else "create", what, exc)
        verb = "delete" if deleting else "create"
        return redirect("/acls", error=f"cannot {verb} the ACL: {exc}")
    audit(request, "%s ACL %s", "deleted" if deleting else "created", what)
    return redirect("/acls", notice=f"{'Deleted' if deleting else 'Created'} ACL: {what}.")
