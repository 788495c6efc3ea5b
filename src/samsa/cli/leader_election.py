"""``samsa leader-election``: preferred or unclean leader elections, as kafka-leader-election.sh.

The flags and the report lines are Kafka's tool's::

    samsa leader-election --bootstrap-server HOST:PORT --election-type preferred \\
        (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)

The JSON file is Kafka's: ``{"partitions": [{"topic": "t", "partition": 0}, …]}``. The
tool prints which partitions got a new leader, which already had the leader asked for,
and the error of each one that failed; it exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
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
from samsa.types import TopicPartition

__all__ = ["build_parser", "run"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa leader-election",
        description="Elect partition leaders: the preferred replica, or any live one "
        "(unclean) for partitions without a leader (kafka-leader-election.sh's flags).",
    )
    add_connection_arguments(parser, "--admin.config")
    parser.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=("preferred", "unclean"),
        help="preferred: the first replica of each partition leads again if it is in the "
        "ISR; unclean: a partition without a leader takes any live replica (records its ISR "
        "had may be lost)",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    which.add_argument("--topic", metavar="TOPIC", help="the topic (with --partition)")
    which.add_argument(
        "--path-to-json-file",
        type=Path,
        metavar="FILE",
        help='partitions as {"partitions": [{"topic": "t", "partition": 0}]}',
    )
    parser.add_argument("--partition", type=int, metavar="N", help="the partition (with --topic)")
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa leader-election`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _partitions(options: argparse.Namespace) -> list[TopicPartition] | None:
    if options.all_topic_partitions:
        if options.partition is not None:
            raise UsageError("--partition works only with --topic")
        return None
    if options.topic is not None:
        if options.partition is None:
            raise UsageError("--topic needs --partition")
        return [TopicPartition(options.topic, options.partition)]
    if options.partition is not None:
        raise UsageError("--partition works only with --topic")
    try:
        document: Any = json.loads(options.path_to_json_file.read_text())
        return [TopicPartition(str(p["topic"]), int(p["partition"]))
                for p in document["partitions"]]  # fmt: skip
    except OSError as exc:
        raise ToolError(f"cannot read {options.path_to_json_file}: {exc.strerror}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(
            f"{options.path_to_json_file} is not a partition list "
            '({"partitions": [{"topic": "t", "partition": 0}]}): ' + str(exc)
        ) from exc


def _execute(options: argparse.Namespace) -> int:
    from samsa.client.admin import ElectionType

    wanted = _partitions(options)
    election = (
        ElectionType.PREFERRED if options.election_type == "preferred" else (ElectionType.UNCLEAN)
    )
    with open_admin(options) as admin:
        try:
            results = admin.elect_leaders(election, wanted)
        except KafkaError as exc:
            raise ToolError(f"cannot elect leaders: {reason(exc)}") from exc
    return _report(election.name, results)


def _report(name: str, results: dict[TopicPartition, KafkaError | None]) -> int:
    done = sorted(str(tp) for tp, error in results.items() if error is None)
    not_needed = sorted(
        str(tp)
        for tp, error in results.items()
        if error is not None and error.code == ErrorCode.ELECTION_NOT_NEEDED
    )
    failed = {
        tp: error
        for tp, error in sorted(results.items())
        if error is not None and error.code != ErrorCode.ELECTION_NOT_NEEDED
    }
    if done:
        print(f"Successfully completed leader election ({name}) for partitions {', '.join(done)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if failed:
        print(f"Error completing leader election ({name}) for partitions "
              f"{', '.join(str(tp) for tp in failed)}", file=sys.stderr)  # fmt: skip
        for tp, error in failed.items():
            print(f"Error completing leader election ({name}) for partition: {tp}: "
                  f"{reason(error)}", file=sys.stderr)  # fmt: skip
        return 1
    return 0
