"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, bindings.

Shared by the broker (which stores and enforces ACLs), the admin client and
the ``samsa acls`` command. The codes are Kafka's wire codes
(``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``);
the names are the ones Kafka writes in ZooKeeper and prints (``Topic``,
``Read``, ``Allow``, Pascal case), parsed without regard to case as Kafka's
``SecurityUtils`` parses them.

An :class:`AclBinding` is one rule: a :class:`ResourcePattern` (a resource
type, a name and whether the name is LITERAL — ``*`` meaning every resource —
or a PREFIXED name) and an :class:`AccessControlEntry` (principal, host,
operation, ALLOW or DENY). An :class:`AclBindingFilter` selects bindings for
DescribeAcls and DeleteAcls with Kafka's rules: ANY matches every value, a
null name, principal or host matches every one, and the MATCH pattern type
selects every pattern that would apply to the named resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

CLUSTER_NAME = "kafka-cluster"
"""The name of the one CLUSTER resource."""
WILDCARD_RESOURCE = "*"
"""A LITERAL resource name that matches every resource of its type."""
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's ``PatternType`` codes: how a binding's resource name is matched."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (also bit positions in authorized-operations fields)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    """Kafka's ``AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }),
    ResourceType.GROUP: frozenset({
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    }),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}  # fmt: skip
"""The operations Kafka defines on each resource type (``AclEntry.supportedOperations``)."""


def kafka_name(value: IntEnum) -> str:
    """Kafka's Pascal-case name of a code: ``TRANSACTIONAL_ID`` → ``TransactionalId``."""
    return "".join(part.capitalize() for part in value.name.split("_"))


E = TypeVar("E", bound=IntEnum)


def parse_name(kind: type[E], text: str) -> E:
    """The code named ``text`` (``Read``, ``READ``, ``read``, ``transactional-id``…);
    ValueError when it names none."""
    key = text.strip().replace("-", "_").replace(" ", "_").upper()
    for member in kind:
        if key in (member.name, member.name.replace("_", "")):
            return member
    raise ValueError(f"{text!r} is not a {kind.__name__}")


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """The resources a binding applies to: one name, ``*`` (every one), or a prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the resource ``name`` of ``resource_type``."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD_RESOURCE)


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings (DescribeAcls, DeleteAcls): ANY and None match every value."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type != PatternType.MATCH:
            return self.name == pattern.name
        return pattern.applies_to(pattern.resource_type, self.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
