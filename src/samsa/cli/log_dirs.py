"""``samsa log-dirs --describe``: each broker's log dirs and the replicas in them, as
kafka-log-dirs.sh prints them (two lines, then one line of JSON)::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2,3
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,
      "partitions":[{"partition":"orders-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}
"""

from __future__ import annotations

import argparse
import json

from samsa.cli.session import (
    ToolError,
    UsageError,
    add_connection_arguments,
    open_admin,
    reason,
    run_tool,
)
from samsa.errors import KafkaError

__all__ = ["build_parser", "run"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa log-dirs",
        description="Describe the brokers' log dirs and the replicas they hold "
        "(kafka-log-dirs.sh's flags and output).",
    )
    add_connection_arguments(parser, "--command-config")
    parser.add_argument("--describe", action="store_true", required=True,
                        help="describe the log dirs")  # fmt: skip
    parser.add_argument("--broker-list", metavar="1,2", help="the brokers (default: all)")
    parser.add_argument("--topic-list", metavar="T1,T2", help="the topics (default: all)")
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa log-dirs`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise UsageError(f"--broker-list {text!r} is not a list of broker ids") from None


def _execute(options: argparse.Namespace) -> int:
    brokers = _ids(options.broker_list)
    topics = (
        None
        if options.topic_list is None
        else [t.strip() for t in options.topic_list.split(",") if t.strip()]
    )
    print("Querying brokers for log directories information")
    with open_admin(options) as admin:
        try:
            described = admin.describe_log_dirs(brokers, topics)
        except KafkaError as exc:
            raise ToolError(f"cannot describe the log dirs: {reason(exc)}") from exc
    print(f"Received log directory information from brokers {','.join(map(str, described))}")
    document = {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": log_dir.path,
                        "error": None if log_dir.error is None else log_dir.error.name,
                        "partitions": [
                            {
                                "partition": str(tp),
                                "size": info.size,
                                "offsetLag": info.offset_lag,
                                "isFuture": info.is_future,
                            }
                            for tp, info in sorted(log_dir.replicas.items())
                        ],
                    }
                    for log_dir in log_dirs
                ],
            }
            for broker, log_dirs in described.items()
        ],
    }
    print(json.dumps(document, separators=(",", ":")))
    return 0
