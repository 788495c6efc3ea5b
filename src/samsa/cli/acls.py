"""``samsa acls``: add, remove and list ACLs, as kafka-acls.sh does.

The flags are kafka-acls.sh's: ``--add``, ``--remove`` or ``--list``; the
principals (``--allow-principal``, ``--deny-principal``) and their hosts
(``--allow-host``, ``--deny-host``, ``*`` by default); ``--operation``
(repeatable; ``All`` by default with ``--add``); the resources (``--topic``,
``--group``, ``--transactional-id``, repeatable, and ``--cluster``) and
``--resource-pattern-type`` (``literal`` by default; ``prefixed``; for
``--list`` and ``--remove`` also ``any`` and ``match``). ``--producer`` and
``--consumer`` add the ACLs a producer (WRITE, DESCRIBE and CREATE on the
topics; WRITE and DESCRIBE on the transactional ids; IDEMPOTENT_WRITE on the
cluster with ``--idempotent``) or a consumer (READ and DESCRIBE on the topics,
READ on the groups) needs. ``--remove`` asks before it removes unless
``--force`` is given. ``--list`` prints Kafka's lines
(``Current ACLs for resource `ResourcePattern(...)`:``). Deviation:
``--delegation-token`` and ``--user-principal`` resources are refused, as the
broker refuses them (samsa has no delegation tokens).
"""

from __future__ import annotations

import argparse
import sys
from itertools import product
from typing import TYPE_CHECKING

from samsa.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_name,
)
from samsa.cli.session import (
    UsageError,
    add_connection_arguments,
    open_admin,
    run_tool,
)

if TYPE_CHECKING:
    from samsa.client.admin import Admin

__all__ = ["build_parser", "run"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa acls", description="Add, remove and list ACLs (kafka-acls.sh's flags)."
    )
    add_connection_arguments(parser, "--command-config")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag, what in (
        ("--allow-principal", "a principal allowed (User:alice), repeatable"),
        ("--deny-principal", "a principal denied, repeatable"),
        ("--allow-host", "a host the allowed principals connect from (default *), repeatable"),
        ("--deny-host", "a host the denied principals connect from (default *), repeatable"),
        ("--operation", "an operation (Read, Write, Create, Delete, Alter, Describe, "
                        "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All), "
                        "repeatable"),
        ("--topic", "a topic (or prefix, or *), repeatable"),
        ("--group", "a consumer group (or prefix, or *), repeatable"),
        ("--transactional-id", "a transactional id (or prefix, or *), repeatable"),
        ("--delegation-token", "refused: samsa has no delegation tokens"),
        ("--user-principal", "refused: samsa has no delegation tokens"),
        ("--principal", "with --list: only the ACLs of this principal, repeatable"),
    ):  # fmt: skip
        parser.add_argument(flag, action="append", default=[], help=what)
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        default=None,
        choices=["literal", "prefixed", "any", "match"],
        type=str.lower,
        help="how resource names match: literal (default), prefixed; --list and --remove "
        "also take any and match",
    )
    parser.add_argument("--producer", action="store_true", help="the ACLs of a producer")
    parser.add_argument("--consumer", action="store_true", help="the ACLs of a consumer")
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE too"
    )
    parser.add_argument("--force", action="store_true", help="with --remove: do not ask")
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa acls`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _pattern_type(options: argparse.Namespace) -> PatternType:
    name = options.resource_pattern_type or "literal"
    if options.add and name not in ("literal", "prefixed"):
        raise UsageError("--add takes --resource-pattern-type literal or prefixed")
    return parse_name(PatternType, name)


def _resources(options: argparse.Namespace, pattern_type: PatternType) -> list[ResourcePattern]:
    if options.delegation_token or options.user_principal:
        raise UsageError("samsa has no delegation tokens: there are no ACLs on them")
    found = [ResourcePattern(ResourceType.TOPIC, t, pattern_type) for t in options.topic]
    found += [ResourcePattern(ResourceType.GROUP, g, pattern_type) for g in options.group]
    found += [
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type)
        for t in options.transactional_id
    ]
    if options.cluster:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    return found


def _operations(options: argparse.Namespace, default: list[AclOperation]) -> list[AclOperation]:
    try:
        return [parse_name(AclOperation, op) for op in options.operation] or default
    except ValueError as exc:
        raise UsageError(f"--operation: {exc}") from exc


def _principals(options: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) of every principal flag."""
    for principal in options.allow_principal + options.deny_principal:
        if ":" not in principal:
            raise UsageError(f"principal {principal!r} is not Type:name (User:alice)")
    allow = product(options.allow_principal, options.allow_host or ["*"], [AclPermissionType.ALLOW])
    deny = product(options.deny_principal, options.deny_host or ["*"], [AclPermissionType.DENY])
    return [*allow, *deny]


def _convenience(
    options: argparse.Namespace, resources: list[ResourcePattern]
) -> list[tuple[ResourcePattern, AclOperation]]:
    """The (resource, operation) pairs ``--producer`` / ``--consumer`` stand for."""
    by_type: dict[ResourceType, list[ResourcePattern]] = {}
    for r in resources:
        by_type.setdefault(r.resource_type, []).append(r)
    pairs: list[tuple[ResourcePattern, AclOperation]] = []
    topics = by_type.get(ResourceType.TOPIC, [])
    if options.producer:
        if not topics and not by_type.get(ResourceType.TRANSACTIONAL_ID):
            raise UsageError("--producer needs --topic or --transactional-id")
        ops = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
        pairs += [(t, op) for t in topics for op in ops]
        pairs += [
            (t, op)
            for t in by_type.get(ResourceType.TRANSACTIONAL_ID, [])
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
        if options.idempotent:
            cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
            pairs.append((cluster, AclOperation.IDEMPOTENT_WRITE))
    if options.consumer:
        if not topics or not by_type.get(ResourceType.GROUP):
            raise UsageError("--consumer needs --topic and --group")
        pairs += [(t, op) for t in topics for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        pairs += [(g, AclOperation.READ) for g in by_type[ResourceType.GROUP]]
    return pairs


def _bindings(options: argparse.Namespace) -> list[AclBinding]:
    resources = _resources(options, _pattern_type(options))
    principals = _principals(options)
    if not principals:
        raise UsageError("--add needs --allow-principal or --deny-principal")
    if options.producer or options.consumer:
        pairs = _convenience(options, resources)
    else:
        if not resources:
            raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
        pairs = [(r, op) for r in resources for op in _operations(options, [AclOperation.ALL])]
    return [
        AclBinding(resource, AccessControlEntry(principal, host, op, permission))
        for resource, op in pairs
        for principal, host, permission in principals
    ]


def _filters(options: argparse.Namespace) -> list[AclBindingFilter]:
    pattern_type = _pattern_type(options)
    resources = _resources(options, pattern_type)
    targets: list[tuple[ResourceType, str | None]] = [
        (r.resource_type, r.name) for r in resources
    ] or [(ResourceType.ANY, None)]
    if options.list:
        principals: list[tuple[str | None, str | None, AclPermissionType]] = [
            (p, None, AclPermissionType.ANY) for p in options.principal
        ]
    else:
        principals = list(_principals(options))
    operations = _operations(options, [AclOperation.ANY])
    if not resources and options.resource_pattern_type is None:
        pattern_type = PatternType.ANY
    return [
        AclBindingFilter(kind, name, pattern_type, principal, host, op, permission)
        for kind, name in targets
        for principal, host, permission in principals or [(None, None, AclPermissionType.ANY)]
        for op in operations
    ]


def _describe(binding: AclBinding) -> str:
    entry = binding.entry
    return (
        f"\t(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
        f"permissionType={entry.permission_type.name})"
    )


def _print_by_resource(bindings: list[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, []).append(binding)
    for pattern, found in sorted(by_pattern.items()):
        print(f"Current ACLs for resource `{_pattern_text(pattern)}`: ")
        for binding in found:
            print(_describe(binding))
        print()


def _execute(options: argparse.Namespace) -> int:
    if options.add:
        bindings = _bindings(options)
        with open_admin(options) as admin:
            admin.create_acls(bindings)
            for pattern in dict.fromkeys(b.pattern for b in bindings):
                print(f"Adding ACLs for resource `{_pattern_text(pattern)}`: ")
                for binding in bindings:
                    if binding.pattern == pattern:
                        print(_describe(binding))
                print()
        return 0
    if options.list:
        with open_admin(options) as admin:
            _print_by_resource(_listed(admin, _filters(options)))
        return 0
    filters = _filters(options)
    if not options.force and not _confirmed(filters):
        return 1
    with open_admin(options) as admin:
        removed = [b for found in admin.delete_acls(filters).values() for b in found]
    for binding in sorted(set(removed)):
        print(f"Removed ACL for resource `{_pattern_text(binding.pattern)}`: {_describe(binding)}")
    return 0


def _pattern_text(pattern: ResourcePattern) -> str:
    return (
        f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
        f"patternType={pattern.pattern_type.name})"
    )


def _listed(admin: Admin, filters: list[AclBindingFilter]) -> list[AclBinding]:
    found: set[AclBinding] = set()
    for acl_filter in filters:
        found.update(admin.describe_acls(acl_filter))
    return sorted(found)


def _confirmed(filters: list[AclBindingFilter]) -> bool:
    print("Are you sure you want to remove the ACLs these filters select: (y/n)")
    for acl_filter in filters:
        print(f"\t{acl_filter}")
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")
