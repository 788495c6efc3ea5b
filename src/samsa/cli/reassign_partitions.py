"""``samsa reassign-partitions``: move partitions between brokers, as kafka-reassign-partitions.sh.

Kafka's flags and JSON files::

    --generate --topics-to-move-json-file F --broker-list 1,2,3
        F: {"version":1,"topics":[{"topic":"orders"}]}
        prints the current assignment and a proposed one over the brokers listed
    --execute  --reassignment-json-file F     starts the moves; prints the current
        assignment first (keep it to roll back)
    --verify   --reassignment-json-file F     says which moves are done, which still run
    --cancel   --reassignment-json-file F     cancels the moves still running
    F: {"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3]}]}

A proposal spreads each topic's partitions over the brokers listed with Kafka's
round robin (its replication factor kept); ``log_dirs`` entries are accepted
and must be "any" (samsa places a replica in its broker's emptiest log dir).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.cli.session import (
    ToolError,
    UsageError,
    add_connection_arguments,
    open_admin,
    reason,
    run_tool,
)
from samsa.errors import KafkaError
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa.client.admin import Admin

__all__ = ["build_parser", "run"]

Plan = dict[TopicPartition, list[int]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa reassign-partitions",
        description="Move partitions between brokers (kafka-reassign-partitions.sh's flags "
        "and JSON files).",
    )
    add_connection_arguments(parser, "--command-config")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose a reassignment")
    action.add_argument("--execute", action="store_true", help="start the moves of a file")
    action.add_argument("--verify", action="store_true", help="check the moves of a file")
    action.add_argument("--cancel", action="store_true", help="cancel the moves of a file")
    parser.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE",
                        help='with --generate: {"topics": [{"topic": "t"}]}')  # fmt: skip
    parser.add_argument(
        "--broker-list", metavar="1,2,3", help="with --generate: the brokers to spread over"
    )
    parser.add_argument("--reassignment-json-file", type=Path, metavar="FILE",
                        help='{"partitions": [{"topic": "t", "partition": 0, '
                        '"replicas": [1, 2]}]}')  # fmt: skip
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa reassign-partitions`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _read_json(path: Path | None, flag: str) -> Any:
    if path is None:
        raise UsageError(f"this action needs {flag}")
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ToolError(f"{path} is not JSON: {exc}") from exc


def _plan(path: Path | None) -> Plan:
    document = _read_json(path, "--reassignment-json-file")
    try:
        plan: Plan = {}
        for entry in document["partitions"]:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            plan[tp] = [int(b) for b in entry["replicas"]]
            for log_dir in entry.get("log_dirs", []):
                if log_dir != "any":
                    raise UsageError(f'{tp}: log_dirs may only say "any" here')
        return plan
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"{path} is not a reassignment ({exc!r})") from exc


def _document(plan: Plan) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": replicas,
                    "log_dirs": ["any"] * len(replicas),
                }
                for tp, replicas in sorted(plan.items())
            ],
        },
        separators=(",", ":"),
    )


def _current(admin: Admin, topics: list[str]) -> Plan:
    described = admin.describe_topics(topics)
    return {
        TopicPartition(name, p.partition): list(p.replicas)
        for name, description in described.items()
        for p in description.partitions
    }


def _execute(options: argparse.Namespace) -> int:
    with open_admin(options) as admin:
        try:
            if options.generate:
                return _generate(admin, options)
            plan = _plan(options.reassignment_json_file)
            if options.execute:
                return _start(admin, plan)
            if options.verify:
                return _verify(admin, plan)
            return _cancel(admin, plan)
        except KafkaError as exc:
            raise ToolError(reason(exc)) from exc


def _generate(admin: Admin, options: argparse.Namespace) -> int:
    from samsa.cluster.assignment import assign_replicas

    document = _read_json(options.topics_to_move_json_file, "--topics-to-move-json-file")
    if options.broker_list is None:
        raise UsageError("--generate needs --broker-list")
    try:
        topics = [str(t["topic"]) for t in document["topics"]]
        brokers = [int(b) for b in options.broker_list.split(",") if b.strip()]
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"cannot read the topics or brokers to move: {exc!r}") from exc
    current = _current(admin, topics)
    proposed: Plan = {}
    for topic in topics:
        mine = {tp: r for tp, r in current.items() if tp.topic == topic}
        if not mine:
            continue
        replication = len(next(iter(mine.values())))
        placed = assign_replicas(dict.fromkeys(brokers), len(mine), replication)
        proposed.update({TopicPartition(topic, p): list(r) for p, r in placed.items()})
    print("Current partition replica assignment")
    print(_document(current))
    print()
    print("Proposed partition reassignment configuration")
    print(_document(proposed))
    return 0


def _start(admin: Admin, plan: Plan) -> int:
    current = _current(admin, sorted({tp.topic for tp in plan}))
    print("Current partition replica assignment")
    print()
    print(_document({tp: current[tp] for tp in plan if tp in current}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    results = admin.alter_partition_reassignments(dict(plan.items()))
    started = sorted(str(tp) for tp, error in results.items() if error is None)
    failed = {tp: error for tp, error in results.items() if error is not None}
    if started:
        print(f"Successfully started partition reassignments for {','.join(started)}")
    for tp, error in sorted(failed.items()):
        print(f"Error reassigning partition(s): {tp}: {reason(error)}")
    return 1 if failed else 0


def _verify(admin: Admin, plan: Plan) -> int:
    moving = admin.list_partition_reassignments(list(plan))
    current = _current(admin, sorted({tp.topic for tp in plan}))
    print("Status of partition reassignment:")
    done = True
    for tp, target in sorted(plan.items()):
        if tp in moving:
            print(f"Reassignment of partition {tp} is still in progress.")
            done = False
        elif current.get(tp) == target:
            print(f"Reassignment of partition {tp} is completed.")
        else:
            print(f"There is no active reassignment of partition {tp}, but replica set is "
                  f"{current.get(tp)} rather than {target}.")  # fmt: skip
            done = False
    return 0 if done else 1


def _cancel(admin: Admin, plan: Plan) -> int:
    results = admin.alter_partition_reassignments(dict.fromkeys(plan))
    cancelled = sorted(str(tp) for tp, error in results.items() if error is None)
    if cancelled:
        print(f"Successfully cancelled partition reassignments for: {','.join(cancelled)}")
    none = sorted(str(tp) for tp, error in results.items() if error is not None)
    if none:
        print(f"None of the specified partition reassignments are active: {','.join(none)}")
    return 0
