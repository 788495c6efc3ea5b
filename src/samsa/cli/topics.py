"""``samsa topics``: create, list, describe, alter and delete topics, as kafka-topics.sh does.

The flags are kafka-topics.sh's. Deliberate differences: ``--topic`` names a topic
exactly when a topic of that name exists and is a regular expression (matched against
whole names) only otherwise, so ``--delete --topic a.b`` never takes ``axb`` with it;
``--describe`` prints two tables (topics, then partitions) instead of ``key: value``
lines; and ``--delete`` and ``--alter`` say what they did.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from samsa.cli.output import print_table
from samsa.cli.session import (
    ToolError,
    UsageError,
    add_connection_arguments,
    only_with,
    open_admin,
    parse_key_values,
    reason,
    run_tool,
)
from samsa.errors import KafkaError

if TYPE_CHECKING:
    from samsa.client.admin import Admin, ConfigEntry, TopicDescription

__all__ = ["build_parser", "run"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa topics",
        description="Create, list, describe, alter and delete topics (kafka-topics.sh's flags).",
    )
    add_connection_arguments(parser, "--command-config")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--list", action="store_true", help="list the topics' names")
    action.add_argument("--describe", action="store_true", help="describe topics")
    action.add_argument("--alter", action="store_true", help="add partitions to a topic")
    action.add_argument("--delete", action="store_true", help="delete topics")
    parser.add_argument(
        "--topic",
        metavar="TOPIC",
        help="the topic; for all but --create a regular expression when no topic has "
        "exactly this name",
    )
    parser.add_argument(
        "--partitions", type=int, metavar="N", help="partitions to create, or to grow to"
    )
    parser.add_argument(
        "--replication-factor", type=int, metavar="R", help="replicas of each partition"
    )
    parser.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="a topic config of the new topic (repeatable), e.g. --config retention.ms=60000",
    )
    parser.add_argument(
        "--if-not-exists", action="store_true", help="with --create: an existing topic is fine"
    )
    parser.add_argument(
        "--if-exists",
        action="store_true",
        help="with --alter or --delete: a missing topic is fine",
    )
    parser.add_argument(
        "--exclude-internal",
        action="store_true",
        help="with --list or --describe: leave out internal topics (__consumer_offsets…)",
    )
    parser.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="with --describe: only topics with configs that differ from the defaults",
    )
    parser.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="with --describe: only partitions whose ISR is smaller than their replica set",
    )
    parser.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="with --describe: only partitions without a leader",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa topics`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _check_usage(options: argparse.Namespace) -> None:
    only_with(options, "--if-not-exists", "create", options.if_not_exists)
    only_with(options, "--if-exists", "alter delete", options.if_exists)
    only_with(options, "--config", "create", options.config)
    only_with(options, "--replication-factor", "create", options.replication_factor is not None)
    only_with(options, "--partitions", "create alter", options.partitions is not None)
    only_with(options, "--exclude-internal", "list describe", options.exclude_internal)
    for flag in ("topics_with_overrides", "under_replicated_partitions", "unavailable_partitions"):
        only_with(options, f"--{flag.replace('_', '-')}", "describe", getattr(options, flag))
    if (options.create or options.alter or options.delete) and not options.topic:
        raise UsageError("name the topic with --topic")
    if options.alter and options.partitions is None:
        raise UsageError("--alter needs --partitions N (the new partition count)")
    if options.partitions is not None and options.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    if options.replication_factor is not None and not 1 <= options.replication_factor <= 32767:
        raise UsageError("--replication-factor must be between 1 and 32767")


def _execute(options: argparse.Namespace) -> int:
    _check_usage(options)
    configs = parse_key_values(options.config, "--config")
    with open_admin(options) as admin:
        if options.create:
            return _create(admin, options, configs)
        if options.list:
            for name in _matching(admin, options.topic, not options.exclude_internal):
                print(name)
            return 0
        if options.describe:
            return _describe(admin, options)
        if options.alter:
            return _alter(admin, options)
        return _delete(admin, options)


def _matching(admin: Admin, topic: str | None, include_internal: bool) -> list[str]:
    """The topics ``--topic`` names: that one, or those its regular expression matches."""
    names = admin.list_topics(include_internal=include_internal)
    if topic is None:
        return names
    if topic in names:
        return [topic]
    try:
        pattern = re.compile(topic)
    except re.error:
        return []
    return [name for name in names if pattern.fullmatch(name)]


def _missing(topic: str) -> ToolError:
    return ToolError(
        f"topic {topic!r} does not exist; use --if-exists to ignore, or `samsa topics --list` "
        "to see the topics"
    )


def _create(admin: Admin, options: argparse.Namespace, configs: dict[str, str]) -> int:
    from samsa.client.admin import NewTopic

    topic = options.topic
    new = NewTopic(
        topic,
        options.partitions if options.partitions is not None else -1,
        options.replication_factor if options.replication_factor is not None else -1,
        configs,
    )
    try:
        admin.create_topics([new])
    except KafkaError as exc:
        if exc.name == "TOPIC_ALREADY_EXISTS":
            if options.if_not_exists:
                return 0
            raise ToolError(
                f"topic {topic!r} already exists; use --if-not-exists to ignore"
            ) from exc
        if exc.name == "INVALID_REPLICATION_FACTOR":
            brokers = len(admin.describe_cluster().nodes)
            raise ToolError(
                f"cannot create the topic: {reason(exc)}; this cluster has {brokers} broker(s), "
                "so choose --replication-factor of at most that"
            ) from exc
        raise ToolError(f"cannot create the topic: {reason(exc)}") from exc
    print(f"Created topic {topic}.")
    return 0


def _describe(admin: Admin, options: argparse.Namespace) -> int:
    from samsa.client.admin import ConfigResource

    names = _matching(admin, options.topic, not options.exclude_internal)
    if options.topic is not None and not names:
        raise _missing(options.topic)
    descriptions = admin.describe_topics(names) if names else {}
    resources = {name: ConfigResource.topic(name) for name in names}
    all_configs = admin.describe_configs(resources.values()) if names else {}
    overrides = {name: _overrides(all_configs.get(resources[name], {}).values()) for name in names}
    if options.topics_with_overrides:
        names = [name for name in names if overrides[name]]

    partition_filter = options.under_replicated_partitions or options.unavailable_partitions
    if not partition_filter:
        print_table(
            ["Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs"],
            (_topic_row(descriptions[name], overrides[name]) for name in names),
        )
    if options.topics_with_overrides:
        return 0
    rows = []
    for name in names:
        for p in descriptions[name].partitions:
            if options.under_replicated_partitions and len(p.isr) >= len(p.replicas):
                continue
            if options.unavailable_partitions and p.leader >= 0:
                continue
            rows.append(
                [
                    name,
                    p.partition,
                    p.leader if p.leader >= 0 else "none",
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                ]
            )
    if not partition_filter:
        print()
    print_table(["Topic", "Partition", "Leader", "Replicas", "Isr"], rows)
    return 0


def _overrides(entries: Iterable[ConfigEntry]) -> str:
    """Configs that differ from the defaults, as Kafka prints them: k=v,k=v."""
    chosen = [e for e in entries if not e.is_default]
    return ",".join(
        f"{e.name}={'<sensitive>' if e.sensitive else e.value}"
        for e in sorted(chosen, key=lambda e: e.name)
    )


def _topic_row(description: TopicDescription, configs: str) -> list[object]:
    partitions = description.partitions
    replication_factor = len(partitions[0].replicas) if partitions else 0
    return [description.name, description.topic_id, len(partitions), replication_factor, configs]


def _alter(admin: Admin, options: argparse.Namespace) -> int:
    names = [n for n in _matching(admin, options.topic, True) if n not in INTERNAL_TOPICS]
    if not names:
        if options.if_exists:
            return 0
        raise _missing(options.topic)
    try:
        admin.create_partitions(dict.fromkeys(names, options.partitions))
    except KafkaError as exc:
        raise ToolError(f"cannot add partitions: {reason(exc)}") from exc
    for name in names:
        print(f"Topic {name} now has {options.partitions} partitions.")
    return 0


def _delete(admin: Admin, options: argparse.Namespace) -> int:
    names = _matching(admin, options.topic, True)
    internal = [n for n in names if n in INTERNAL_TOPICS]
    if internal:
        raise ToolError(
            f"topic {internal[0]} is an internal topic and is not allowed to be deleted"
        )
    if not names:
        if options.if_exists:
            return 0
        raise _missing(options.topic)
    results = admin.delete_topics(names, raise_on_error=False)
    failed = False
    for name in names:
        error = results.get(name)
        if error is None:
            print(f"Deleted topic {name}.")
        elif error.name == "UNKNOWN_TOPIC_OR_PARTITION" and options.if_exists:
            continue
        else:
            print(f"samsa topics: cannot delete: {reason(error)}", file=sys.stderr)
            failed = True
    return 1 if failed else 0
