"""``samsa configs``: client quotas of users and client ids, and users' SCRAM credentials,
as kafka-configs.sh sets them.

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

Topic and broker configs are not handled here (``samsa topics --alter
--config`` changes a topic's).
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
        description="Alter and describe client quotas of users and client ids, and users' "
        "SCRAM credentials (kafka-configs.sh's flags and output).",
    )
    add_connection_arguments(parser, "--command-config")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change the entity's quotas")
    action.add_argument("--describe", action="store_true", help="print quotas")
    parser.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), action=_EntityPart,
                        help="users or clients (repeat for a user's client id)")  # fmt: skip
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
    parser.add_argument("--add-config", metavar="K=V,K=V",
                        help="quotas to set (producer_byte_rate, consumer_byte_rate, "
                        "request_percentage) or a user's SCRAM credentials "
                        "(SCRAM-SHA-256=[iterations=8192,password=…])")  # fmt: skip
    parser.add_argument("--delete-config", metavar="K,K",
                        help="quotas or SCRAM mechanisms to remove")  # fmt: skip
    parser.set_defaults(entity_parts=[])
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa configs`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _entity(parts: list[tuple[str, str | None]]) -> list[tuple[str, str | None, bool]]:
    """``(entity type, name, named)`` per type, in order; named False: no name given."""
    if not parts:
        raise UsageError("name an entity with --entity-type users|clients")
    found: list[tuple[str, str | None, bool]] = []
    for kind, value in parts:
        if kind == "type":
            assert value is not None
            found.append((ENTITY_TYPES[value], None, False))
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
