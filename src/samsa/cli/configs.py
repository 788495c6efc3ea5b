"""``samsa configs``: topic, broker and broker-logger configs, client quotas of users and
client ids, and users' SCRAM credentials, as kafka-configs.sh sets them.

    samsa configs --bootstrap-server HOST:PORT --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=3600000,cleanup.policy=compact
    samsa configs --bootstrap-server HOST:PORT --describe --topic t [--all]
    samsa configs --bootstrap-server HOST:PORT --alter --broker-defaults --delete-config k

    samsa configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    samsa configs --bootstrap-server HOST:PORT --alter --entity-type clients --entity-default \\
        --delete-config request_percentage
    samsa configs --bootstrap-server HOST:PORT --describe --entity-type users
    samsa configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    samsa configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \
        --delete-config SCRAM-SHA-256

An entity is one ``--entity-type`` (``users`` or ``clients``) followed by its
``--entity-name`` or ``--entity-default``, or both types in turn for a user's
client id (``--user``/``--client``/``--user-defaults``/``--client-defaults`` say
the same). ``--describe`` without a name lists every entity of those types, and
only entities of exactly those types, as kafka-configs does; it prints one line
per entity::

    Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192

A SCRAM credential is set for one named user; the password is salted here, and only
the salt and the salted password go to the broker (``iterations`` defaults to 4096).

Topics (``--topic``), brokers (``--broker ID``, ``--broker-defaults`` or
``--entity-default``) and broker loggers (``--broker-logger ID``) are changed with
IncrementalAlterConfigs (SET for ``--add-config``, DELETE for ``--delete-config``,
back to the default) and described as kafka-configs does::

    Dynamic configs for topic t are:
      retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000, \
DEFAULT_CONFIG:log.retention.hours=168}

``--all`` lists every config ("All configs for topic t are:"), not only the
overrides. Without a name, ``--describe`` covers every topic, or every broker and
then the cluster-wide defaults. A broker that refuses (samsa has no logger configs)
is quoted, with exit code 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from samsa.cli.session import (
    ToolError,
    UsageError,
    add_connection_arguments,
    open_admin,
    reason,
    run_tool,
)
from samsa.errors import ErrorCode, KafkaError

__all__ = ["build_parser", "run"]

ENTITY_TYPES = {"users": "user", "clients": "client-id"}
# Entity types with configs (DescribeConfigs, IncrementalAlterConfigs), by --entity-type.
RESOURCE_TYPES = ("topics", "brokers", "broker-loggers")
_SHOWN = {"user": "user-principal", "client-id": "client-id"}


class _EntityPart(argparse.Action):
    """Keeps the entity flags in the order given, so each name follows its type."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parts = list(getattr(namespace, "entity_parts", None) or [])
        flag = option_string or ""
        if flag == "--user":
            parts += [("type", "users"), ("name", values)]
        elif flag == "--client":
            parts += [("type", "clients"), ("name", values)]
        elif flag == "--user-defaults":
            parts += [("type", "users"), ("default", None)]
        elif flag == "--client-defaults":
            parts += [("type", "clients"), ("default", None)]
        elif flag == "--topic":
            parts += [("type", "topics"), ("name", values)]
        elif flag == "--broker":
            parts += [("type", "brokers"), ("name", values)]
        elif flag == "--broker-defaults":
            parts += [("type", "brokers"), ("default", None)]
        elif flag == "--broker-logger":
            parts += [("type", "broker-loggers"), ("name", values)]
        elif flag == "--entity-type":
            parts.append(("type", values))
        elif flag == "--entity-name":
            parts.append(("name", values))
        else:
            parts.append(("default", None))
        namespace.entity_parts = parts


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa configs",
        description="Alter and describe the configs of topics, brokers and broker loggers, "
        "client quotas of users and client ids, and users' SCRAM credentials "
        "(kafka-configs.sh's flags and output).",
    )
    add_connection_arguments(parser, "--command-config")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change the entity's configs")
    action.add_argument("--describe", action="store_true", help="print configs")
    parser.add_argument("--entity-type", choices=sorted([*ENTITY_TYPES, *RESOURCE_TYPES]),
                        action=_EntityPart,
                        help="topics, brokers, broker-loggers, users or clients "
                        "(users then clients for a user's client id)")  # fmt: skip
    parser.add_argument("--entity-name", action=_EntityPart, metavar="NAME",
                        help="the name of the entity of the --entity-type before it")  # fmt: skip
    parser.add_argument("--entity-default", action=_EntityPart, nargs=0,
                        help="the default entity of the --entity-type before it")  # fmt: skip
    parser.add_argument("--user", action=_EntityPart, metavar="NAME",
                        help="same as --entity-type users --entity-name NAME")  # fmt: skip
    parser.add_argument("--client", action=_EntityPart, metavar="ID",
                        help="same as --entity-type clients --entity-name ID")  # fmt: skip
    parser.add_argument("--user-defaults", action=_EntityPart, nargs=0,
                        help="same as --entity-type users --entity-default")  # fmt: skip
    parser.add_argument("--client-defaults", action=_EntityPart, nargs=0,
                        help="same as --entity-type clients --entity-default")  # fmt: skip
    parser.add_argument("--topic", action=_EntityPart, metavar="TOPIC",
                        help="same as --entity-type topics --entity-name TOPIC")  # fmt: skip
    parser.add_argument("--broker", action=_EntityPart, metavar="ID",
                        help="same as --entity-type brokers --entity-name ID")  # fmt: skip
    parser.add_argument("--broker-defaults", action=_EntityPart, nargs=0,
                        help="same as --entity-type brokers --entity-default")  # fmt: skip
    parser.add_argument("--broker-logger", action=_EntityPart, metavar="ID",
                        help="same as --entity-type broker-loggers --entity-name ID")  # fmt: skip
    parser.add_argument("--all", action="store_true",
                        help="with --describe of topics or brokers: every config, not only "
                        "the overrides")  # fmt: skip
    parser.add_argument("--add-config", metavar="K=V,K=V",
                        help="configs to set: a topic's or broker's (a list value in "
                        "brackets: k=[a,b]), quotas (producer_byte_rate, consumer_byte_rate, "
                        "request_percentage) or a user's SCRAM credentials "
                        "(SCRAM-SHA-256=[iterations=8192,password=…])")  # fmt: skip
    parser.add_argument("--delete-config", metavar="K,K",
                        help="configs, quotas or SCRAM mechanisms to remove")  # fmt: skip
    parser.set_defaults(entity_parts=[])
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa configs`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _entity(parts: list[tuple[str, str | None]]) -> list[tuple[str, str | None, bool]]:
    """``(entity type, name, named)`` per type, in order; named False: no name given."""
    if not parts:
        raise UsageError(
            "name an entity with --entity-type topics|brokers|broker-loggers|users|clients"
        )
    found: list[tuple[str, str | None, bool]] = []
    for kind, value in parts:
        if kind == "type":
            assert value is not None
            found.append((ENTITY_TYPES.get(value, value), None, False))
            continue
        if not found or found[-1][2]:
            flag = "--entity-name" if kind == "name" else "--entity-default"
            raise UsageError(f"{flag} must follow an --entity-type")
        found[-1] = (found[-1][0], value, True)
    kinds = [k for k, _, _ in found]
    if len(set(kinds)) != len(kinds):
        raise UsageError("each entity type may be named once")
    return found


def _describe_line(entity: dict[str, str | None], quotas: dict[str, float]) -> str:
    named = []
    for kind in ("user", "client-id"):
        if kind not in entity:
            continue
        name = entity[kind]
        named.append(f"the default {_SHOWN[kind]}" if name is None else f"{_SHOWN[kind]} '{name}'")
    values = ", ".join(f"{k}={v}" for k, v in sorted(quotas.items()))
    return f"Quota configs for {', '.join(named)} are {values}"


_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _split_configs(text: str | None) -> list[str]:
    """``K=V,K=[a=1,b=2]`` → its items, commas inside brackets kept."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text or "":
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def _scram_upsertions(user: str, items: list[str]) -> list[Any]:
    from samsa.client.admin import ScramUpsertion

    upsertions = []
    for item in items:
        mechanism, _, value = item.partition("=")
        if not (value.startswith("[") and value.endswith("]")):
            raise UsageError(f"--add-config {mechanism}=[iterations=N,password=P] expected")
        fields = dict(part.partition("=")[::2] for part in value[1:-1].split(",") if part)
        password = fields.pop("password", "")
        if not password:
            raise UsageError(f"--add-config {mechanism} needs password=…")
        try:
            iterations = int(fields.pop("iterations", "4096"))
        except ValueError:
            raise UsageError(f"--add-config {mechanism}: iterations is not a number") from None
        if fields:
            raise UsageError(f"--add-config {mechanism}: unknown {', '.join(sorted(fields))}")
        upsertions.append(ScramUpsertion(user, mechanism, password, iterations))
    return upsertions


def _describe_scram(admin: Any, user: str | None, named: bool) -> None:
    if named and user is None:
        return  # the default user has no credentials
    try:
        found = admin.describe_user_scram_credentials(None if user is None else [user])
    except KafkaError as exc:
        if exc.code == ErrorCode.RESOURCE_NOT_FOUND:
            return
        raise ToolError(f"cannot describe the SCRAM credentials: {reason(exc)}") from exc
    for name, mechanisms in sorted(found.items()):
        values = ", ".join(f"{m}=iterations={i}" for m, i in sorted(mechanisms.items()))
        print(f"SCRAM credential configs for user-principal '{name}' are {values}")


def _parse_added(items: list[str]) -> dict[str, float | None]:
    ops: dict[str, float | None] = {}
    for item in items:
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"--add-config {item!r} is not KEY=VALUE")
        try:
            ops[key.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--add-config {item!r}: {value!r} is not a number") from None
    return ops


def _execute(options: argparse.Namespace) -> int:
    from samsa.client.admin import ClientQuotaAlteration, ClientQuotaFilterComponent

    entity = _entity(options.entity_parts)
    if options.describe and (options.add_config or options.delete_config):
        raise UsageError("--add-config and --delete-config work only with --alter")
    if any(kind in RESOURCE_TYPES for kind, _, _ in entity):
        if len(entity) != 1:
            raise UsageError(f"{entity[0][0]} cannot be combined with another --entity-type")
        return _execute_resource(options, *entity[0])
    if options.all:
        raise UsageError("--all works only with --describe of topics, brokers or broker-loggers")
    with open_admin(options) as admin:
        if options.describe:
            components = [
                ClientQuotaFilterComponent.of_entity_type(kind)
                if not named
                else ClientQuotaFilterComponent.of_default_entity(kind)
                if name is None
                else ClientQuotaFilterComponent.of_entity(kind, name)
                for kind, name, named in entity
            ]
            try:
                found = admin.describe_client_quotas(components, strict=True)
            except KafkaError as exc:
                raise ToolError(f"cannot describe the quotas: {reason(exc)}") from exc
            for described, quotas in sorted(found.items(), key=lambda item: str(item[0])):
                print(_describe_line(dict(described), quotas))
            if [kind for kind, _, _ in entity] == ["user"]:
                _describe_scram(admin, entity[0][1] if entity[0][2] else None, entity[0][2])
            return 0
        if not all(named for _, _, named in entity):
            raise UsageError("--alter needs --entity-name or --entity-default for each type")
        added = _split_configs(options.add_config)
        deleted = _split_configs(options.delete_config)
        scram_added = [i for i in added if i.partition("=")[0].upper() in _SCRAM]
        scram_deleted = [k.upper() for k in deleted if k.upper() in _SCRAM]
        ops = _parse_added([i for i in added if i not in scram_added])
        for key in deleted:
            if key.upper() not in _SCRAM:
                ops[key] = None
        if not ops and not scram_added and not scram_deleted:
            raise UsageError("--alter needs --add-config or --delete-config")
        target = {kind: name for kind, name, _ in entity}
        if scram_added or scram_deleted:
            user = target.get("user")
            if len(target) != 1 or user is None:
                raise UsageError(
                    "SCRAM credentials belong to one --entity-type users --entity-name"
                )
            try:
                admin.alter_user_scram_credentials(
                    _scram_upsertions(user, scram_added), [(user, m) for m in scram_deleted]
                )
            except KafkaError as exc:
                raise ToolError(f"cannot alter the SCRAM credentials: {reason(exc)}") from exc
        if ops:
            try:
                admin.alter_client_quotas([ClientQuotaAlteration(target, ops)])
            except KafkaError as exc:
                raise ToolError(f"cannot alter the quotas: {reason(exc)}") from exc
        shown = _describe_line(target, {}).removeprefix("Quota configs for ").removesuffix(" are ")
        print(f"Completed updating config for {shown}.")
        return 0


# -- topics, brokers and broker loggers ----------------------------------------------------

# What each entity type is called in the output, and the config source of its overrides.
_RESOURCE_SHOWN = {"topics": "topic", "brokers": "broker", "broker-loggers": "broker-logger"}


def _resource(kind: str, name: str | None) -> Any:
    from samsa.client.admin import ConfigResource, ResourceType

    if kind == "topics":
        if not name:
            raise UsageError("a topic is named with --entity-name TOPIC; it has no default")
        return ConfigResource.topic(name)
    if name is not None and not name.strip().isdigit():
        raise UsageError(
            f"the entity name for {kind} must be a valid integer broker id, but it is: {name}"
        )
    if kind == "broker-loggers":
        if name is None:
            raise UsageError("broker loggers are named by broker id: --entity-name ID")
        return ConfigResource(ResourceType.BROKER_LOGGER, name.strip())
    return ConfigResource.broker("" if name is None else name.strip())


def _overrides_source(kind: str, name: str | None) -> Any:
    """The config source of what ``--describe`` without ``--all`` shows (None: everything)."""
    from samsa.client.admin import ConfigSource

    if kind == "topics":
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    if kind == "brokers":
        return (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            if name is None
            else ConfigSource.DYNAMIC_BROKER_CONFIG
        )
    return None


def _entry_line(entry: Any) -> str:
    synonyms = ", ".join(
        f"{s.source.name}:{s.name}={'null' if s.value is None else s.value}" for s in entry.synonyms
    )
    value = "null" if entry.value is None else entry.value
    return (
        f"  {entry.name}={value} sensitive={'true' if entry.sensitive else 'false'} "
        f"synonyms={{{synonyms}}}"
    )


def _refused(exc: KafkaError) -> ToolError:
    """The broker's answer as it gave it ("[CODE] why"), without the client's resource repr."""
    text = reason(exc)
    start = text.find(f"[{exc.name}]")
    return ToolError(text[start:] if start > 0 else text)


def _describe_one(admin: Any, kind: str, name: str | None, show_all: bool) -> None:
    resource = _resource(kind, name)
    try:
        found = admin.describe_configs([resource], include_synonyms=True)
    except KafkaError as exc:
        raise _refused(exc) from exc
    entries = sorted(found.get(resource, {}).values(), key=lambda e: e.name)
    source = _overrides_source(kind, name)
    if not show_all and source is not None:
        entries = [e for e in entries if e.source == source]
    shown = _RESOURCE_SHOWN[kind]
    if name is None:
        print(f"Default configs for {kind} in the cluster are:")
    else:
        print(f"{'All' if show_all else 'Dynamic'} configs for {shown} {name} are:")
    for entry in entries:
        print(_entry_line(entry))


def _describe_resources(
    admin: Any, kind: str, name: str | None, named: bool, show_all: bool
) -> None:
    if named:
        _describe_one(admin, kind, name, show_all)
        return
    if kind == "topics":
        try:
            names: list[str | None] = list(admin.list_topics())
        except KafkaError as exc:
            raise ToolError(f"cannot list the topics: {reason(exc)}") from exc
    else:
        try:
            nodes = admin.describe_cluster().nodes
        except KafkaError as exc:
            raise ToolError(f"cannot list the brokers: {reason(exc)}") from exc
        names = [str(node.node_id) for node in nodes]
        if kind == "brokers":
            names.append(None)  # then the cluster-wide defaults, as kafka-configs does
    for each in names:
        _describe_one(admin, kind, each, show_all)


def _alter_ops(options: argparse.Namespace) -> list[Any]:
    from samsa.client.admin import AlterConfigOp, AlterConfigOpType

    ops: list[Any] = []
    for item in _split_configs(options.add_config):
        key, equals, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise UsageError(f"--add-config {item!r} is not KEY=VALUE")
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]  # a list value: k=[a,b] sets "a,b"
        ops.append(AlterConfigOp(key, value))
    # Deleted keys go to the broker as they are: it says which it does not know.
    deleted = [key.strip() for key in _split_configs(options.delete_config)]
    ops += [AlterConfigOp(key, None, AlterConfigOpType.DELETE) for key in deleted]
    if not ops:
        raise UsageError("--alter needs --add-config or --delete-config")
    return ops


def _execute_resource(options: argparse.Namespace, kind: str, name: str | None, named: bool) -> int:
    if options.all and not options.describe:
        raise UsageError("--all works only with --describe")
    with open_admin(options) as admin:
        if options.describe:
            _describe_resources(admin, kind, name, named, options.all)
            return 0
        if not named:
            raise UsageError(f"--alter of {kind} needs --entity-name or --entity-default")
        resource = _resource(kind, name)
        ops = _alter_ops(options)
        try:
            admin.alter_configs({resource: ops})
        except KafkaError as exc:
            raise _refused(exc) from exc
        if name is None:
            print(f"Completed updating default config for {kind} in the cluster.")
        else:
            print(f"Completed updating config for {_RESOURCE_SHOWN[kind]} {name}.")
        return 0
