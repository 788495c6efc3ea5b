"""The authorizer: who may do what, decided from ACLs as Kafka's authorizers decide.

Switched on as Kafka's is: ``authorizer.class.name`` naming
``kafka.security.authorizer.AclAuthorizer`` (ZooKeeper-era Kafka) or
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (KRaft) — both
decide alike, and samsa serves both names with the one authorizer here; an
empty name (the default) leaves it off and every request is allowed. Any other
class name stops start-up (a ConfigError, :mod:`samsa.broker.config`): samsa
cannot load Java classes.

A decision for a principal, the client's host, an operation and a resource:

1. a principal in ``super.users`` (``User:admin;User:ops``) is allowed everything;
2. the ACLs that apply are those whose pattern covers the resource (its
   LITERAL name, the LITERAL ``*``, or a PREFIXED name it starts with);
   with none at all, ``allow.everyone.if.no.acl.found`` decides;
3. of those, the ones for the principal (or ``User:*``) and the host (or
   ``*``) count: a DENY of the operation (or ALL) denies — deny wins over
   allow, whatever the pattern types; otherwise an ALLOW of the operation, of
   ALL, or of an operation that implies it (READ, WRITE, DELETE and ALTER imply
   DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows; otherwise denied.

The ACLs live in a store (:mod:`samsa.cluster.acl_store`: a file in the data
dir on a single node, Kafka's znodes in a cluster); the :class:`Authorizer`
keeps them in memory for decisions (one writer: the broker's loop), and the
store tells it of every change, its own and — in a cluster — other brokers'.

Handlers ask through :func:`authorize`, which reads the request's principal
and host and the broker's authorizer from context variables the connection
sets, so a check is one line at the place Kafka checks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any, Protocol

from samsa.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from samsa.broker.api import client_host, request_principal
from samsa.cluster.zk_client import is_expected_zk_error
from samsa.errors import InvalidRequestError, KafkaError, UnknownServerError

log = logging.getLogger(__name__)

Entries = frozenset[AccessControlEntry]
Change = Callable[[Entries], Entries]
"""What to do to one resource pattern's entries: given those stored now, the new set."""

_IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}  # fmt: skip
"""The ALLOW operations that grant an operation besides itself and ALL (Kafka's rule)."""

_GRANTING: Mapping[AclOperation, frozenset[AclOperation]] = {
    op: _IMPLIED_BY.get(op, frozenset({op})) | {AclOperation.ALL} for op in AclOperation
}
"""The ALLOW operations that grant each operation."""


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:ops``)."""
    return frozenset(u.strip() for u in text.split(";") if u.strip())


class AclStore(Protocol):
    """Where ACLs are kept: applies changes to resource patterns, returns their new entries."""

    async def alter(
        self, changes: Mapping[ResourcePattern, Change]
    ) -> dict[ResourcePattern, Entries]: ...


def check_new_binding(binding: AclBinding) -> None:
    """Kafka's checks of an ACL to create (INVALID_REQUEST naming what is wrong)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.DELEGATION_TOKEN, ResourceType.USER):
        raise InvalidRequestError(
            f"ACLs on {pattern.resource_type.name} resources are not supported: "
            "samsa has no delegation tokens"
        )
    if pattern.resource_type not in SUPPORTED_OPERATIONS:
        raise InvalidRequestError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidRequestError(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidRequestError(f"Invalid permissionType {entry.permission_type.name}")
    if not pattern.name:
        raise InvalidRequestError("Invalid empty resource name")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, colon, name = entry.principal.partition(":")
    if not colon or not kind or not name:
        raise InvalidRequestError(
            f"expected a principal in format principalType:principalName but got {entry.principal}"
        )
    if not entry.host:
        raise InvalidRequestError("Invalid empty host")


def check_filter(acl_filter: AclBindingFilter) -> None:
    """A filter with an UNKNOWN element cannot select anything (INVALID_REQUEST)."""
    unknown = [
        what
        for what, value in (
            ("resourceType", acl_filter.resource_type),
            ("patternType", acl_filter.pattern_type),
            ("operation", acl_filter.operation),
            ("permissionType", acl_filter.permission_type),
        )
        if value.name == "UNKNOWN"
    ]
    if unknown:
        raise InvalidRequestError(f"The filter has an unknown {', '.join(unknown)}")


class Authorizer:
    """The ACLs in memory and the decisions made from them (one owner: the broker's loop)."""

    def __init__(
        self,
        super_users: frozenset[str],
        allow_everyone_if_no_acl_found: bool,
        store: AclStore,
    ) -> None:
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.store = store
        self._acls: dict[ResourcePattern, Entries] = {}
        # Indexes for decisions: LITERAL entries by (type, name), PREFIXED by type and prefix.
        self._literal: dict[tuple[ResourceType, str], Entries] = {}
        self._prefixed: dict[ResourceType, dict[str, Entries]] = {}
        self._lock = asyncio.Lock()

    # -- the cache ----------------------------------------------------------------------
    def set_acls(self, pattern: ResourcePattern, entries: Entries) -> None:
        """Take a resource pattern's entries as the store has them now (none: removed)."""
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        if pattern.pattern_type == PatternType.PREFIXED:
            index: dict[Any, Entries] = self._prefixed.setdefault(pattern.resource_type, {})
            key: Any = pattern.name
        else:
            index, key = self._literal, (pattern.resource_type, pattern.name)
        if entries:
            index[key] = entries
        else:
            index.pop(key, None)

    def replace_all(self, acls: Mapping[ResourcePattern, Entries]) -> None:
        """Take every ACL afresh (at start, or after a ZooKeeper session was lost)."""
        self._acls.clear()
        self._literal.clear()
        self._prefixed.clear()
        for pattern, entries in acls.items():
            self.set_acls(pattern, entries)

    def bindings(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every binding (that ``acl_filter`` selects), sorted."""
        found = [
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            for entry in entries
            if acl_filter is None or acl_filter.matches(AclBinding(pattern, entry))
        ]
        return sorted(found)

    # -- decisions ----------------------------------------------------------------------
    def _applying(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        entries: list[AccessControlEntry] = []
        entries += self._literal.get((resource_type, name), ())
        if name != WILDCARD_RESOURCE:
            entries += self._literal.get((resource_type, WILDCARD_RESOURCE), ())
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            if len(by_prefix) > len(name):  # fewer lookups: each prefix of the name
                for end in range(1, len(name) + 1):
                    entries += by_prefix.get(name[:end], ())
            else:
                for prefix, prefixed in by_prefix.items():
                    if name.startswith(prefix):
                        entries += prefixed
        return entries

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        applying = self._applying(resource_type, name)
        if not applying:
            return self.allow_everyone_if_no_acl_found
        denying = (operation, AclOperation.ALL)
        granting = _GRANTING[operation]
        allowed = False
        for e in applying:
            if e.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if e.host not in (host, WILDCARD_HOST):
                continue
            if e.permission_type == AclPermissionType.DENY:
                if e.operation in denying:
                    return False  # a deny wins, whatever allows it
            elif e.operation in granting:
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type
        (Kafka's ``authorizeByResourceType``: an ALLOW not wholly covered by a DENY)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        denied_literal: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed: list[ResourcePattern] = []
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if e.principal not in (principal, WILDCARD_PRINCIPAL):
                    continue
                if e.host not in (host, WILDCARD_HOST):
                    continue
                if e.operation not in (operation, AclOperation.ALL):
                    continue
                if e.permission_type == AclPermissionType.DENY:
                    if pattern.pattern_type == PatternType.PREFIXED:
                        denied_prefixes.add(pattern.name)
                    elif pattern.name == WILDCARD_RESOURCE:
                        return False
                    else:
                        denied_literal.add(pattern.name)
                elif e.permission_type == AclPermissionType.ALLOW:
                    allowed.append(pattern)
        for pattern in allowed:
            if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                return True
            if any(pattern.name.startswith(p) for p in denied_prefixes):
                continue
            if pattern.pattern_type == PatternType.LITERAL and pattern.name in denied_literal:
                continue
            return True
        return False

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> frozenset[AclOperation]:
        """The operations Kafka defines on the resource type that the principal may do."""
        return frozenset(
            op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, op, resource_type, name)
        )

    # -- changes ------------------------------------------------------------------------
    async def create_acls(self, bindings: list[AclBinding]) -> list[KafkaError | None]:
        """Store each valid binding; per binding, None or why it was refused."""
        results: list[KafkaError | None] = []
        adding: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            try:
                check_new_binding(binding)
            except KafkaError as exc:
                results.append(exc)
                continue
            results.append(None)
            adding.setdefault(binding.pattern, set()).add(binding.entry)
        if adding:
            failure = await self._alter(
                {pattern: _adding(frozenset(new)) for pattern, new in adding.items()}
            )
            if failure is not None:
                results = [failure if r is None else r for r in results]
        return results

    async def delete_acls(
        self, filters: list[AclBindingFilter]
    ) -> list[list[AclBinding] | KafkaError]:
        """Remove the bindings each filter selects; per filter, those removed or an error."""
        results: list[list[AclBinding] | KafkaError] = []
        valid: list[AclBindingFilter] = []
        for acl_filter in filters:
            try:
                check_filter(acl_filter)
            except KafkaError as exc:
                results.append(exc)
                continue
            valid.append(acl_filter)
            results.append(self.bindings(acl_filter))
        patterns = {b.pattern for found in results if isinstance(found, list) for b in found}

        def without_matches(pattern: ResourcePattern) -> Change:
            def change(entries: Entries) -> Entries:
                return frozenset(
                    e for e in entries
                    if not any(f.matches(AclBinding(pattern, e)) for f in valid)
                )  # fmt: skip

            return change

        if patterns:
            failure = await self._alter({pattern: without_matches(pattern) for pattern in patterns})
            if failure is not None:
                results = [failure if isinstance(r, list) else r for r in results]
        return results

    async def _alter(self, changes: Mapping[ResourcePattern, Change]) -> KafkaError | None:
        """Apply ``changes`` through the store; the error to answer if it failed."""
        async with self._lock:
            try:
                changed = await self.store.alter(changes)
            except KafkaError as exc:
                return exc
            except Exception as exc:  # ZooKeeper unreachable: patterns written before it
                # failed still reach every broker (this one too) through their notifications.
                log.warning("storing an ACL change failed: %s", exc,
                            exc_info=not is_expected_zk_error(exc))  # fmt: skip
                return UnknownServerError(f"storing the ACLs failed: {exc}")
            for pattern, entries in changed.items():
                self.set_acls(pattern, entries)
            return None


def _adding(new: Entries) -> Change:
    return lambda entries: entries | new


current_authorizer: ContextVar[Authorizer | None] = ContextVar("current_authorizer", default=None)
"""The broker's authorizer (None: no authorizer, everything is allowed); the connection
sets it with the principal and host of the requests it serves."""


def _host() -> str:
    return client_host.get().lstrip("/")


def authorize(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """Whether the request being served may do ``operation`` on the resource."""
    authorizer = current_authorizer.get()
    if authorizer is None:
        return True
    return authorizer.authorize(request_principal.get(), _host(), operation, resource_type, name)


def authorize_cluster(operation: AclOperation) -> bool:
    """Whether the request being served may do ``operation`` on the cluster."""
    return authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_any(operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether the request being served may do ``operation`` on some resource of the type."""
    authorizer = current_authorizer.get()
    if authorizer is None:
        return True
    return authorizer.authorize_any(request_principal.get(), _host(), operation, resource_type)


def authorized_operations(resource_type: ResourceType, name: str) -> frozenset[AclOperation]:
    """The operations on the resource the request being served may do (all of the type's
    operations without an authorizer, as Kafka answers)."""
    authorizer = current_authorizer.get()
    if authorizer is None:
        return SUPPORTED_OPERATIONS[resource_type]
    return authorizer.authorized_operations(request_principal.get(), _host(), resource_type, name)


def authorized_names(
    operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """Those of ``names`` the request being served may do ``operation`` on."""
    return {name for name in names if authorize(operation, resource_type, name)}
