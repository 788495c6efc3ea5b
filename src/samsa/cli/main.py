"""``samsa`` entry point: subcommands with the flags Kafka users already type."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from samsa.cli.session import PrintVersion
from samsa.errors import SamsaError


def _serve(args: argparse.Namespace) -> int:
    # kio imports hypothesis (a test library) whenever it is installed, costing the
    # broker ~100 ms of start-up and ~10 MiB of RSS; a broker never needs it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from samsa.broker.config import BrokerConfig
    from samsa.broker.server import Broker

    try:
        config = BrokerConfig.load(args.config, args.override or [])
    except SamsaError as exc:
        print(f"samsa serve: {exc}", file=sys.stderr)
        print("fix the configuration (server.properties or --override) and start again",
              file=sys.stderr)  # fmt: skip
        return 2

    async def run() -> int:
        broker = Broker(config)
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Task[None]] = []

        def request_stop() -> None:
            if not stopping:
                logging.getLogger("samsa").info("shutting down")
                stopping.append(loop.create_task(broker.stop()))

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, request_stop)
        loop.add_signal_handler(signal.SIGUSR1, _log_tasks)
        try:
            await broker.start()
        except (SamsaError, OSError) as exc:
            print(f"samsa serve: cannot start: {exc}", file=sys.stderr)
            await broker.stop()
            return 1
        # What start-up made (modules, schemas, loaded logs) lives as long as the process:
        # kept out of the collector's full passes, which would scan it again and again —
        # pauses of ~100 ms with 2,000 partitions (bench/RESULTS.md, "Metrics").
        gc.freeze()
        await broker.wait_stopped()
        return 0 if broker.stopped_cleanly else 1

    try:
        import uvloop
    except ImportError:  # uvloop is optional: the stdlib loop serves the same protocol
        return asyncio.run(run())
    return uvloop.run(run())


def _log_tasks() -> None:
    """SIGUSR1: log where every task of the event loop waits (a broker that hangs says why)."""
    import io

    out = io.StringIO()
    tasks = asyncio.all_tasks()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        out.write(f"-- {task.get_name()}: {task.get_coro()!r}\n")
        task.print_stack(limit=12, file=out)
    logging.getLogger("samsa").warning("SIGUSR1: %d tasks\n%s", len(tasks), out.getvalue())


def _dump_log(args: argparse.Namespace) -> int:
    from samsa.cli.dump_log import run

    return run(args)


def _admin_tool(module: str) -> Callable[[argparse.Namespace], int]:
    """Run ``samsa.cli.<module>``, imported only now: each tool parses its own flags."""

    def run(args: argparse.Namespace) -> int:
        tool = importlib.import_module(f"samsa.cli.{module}")
        return int(tool.run(args))

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa", description="A streaming platform that speaks the Kafka protocol."
    )
    parser.add_argument("--version", action=PrintVersion)
    parser.add_argument(
        "--log-level",
        help="DEBUG, INFO, WARNING or ERROR (default INFO for serve, WARNING for the tools)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("--version", action=PrintVersion)
    serve.add_argument("--config", type=Path, help="a server.properties file")
    serve.add_argument(
        "--override",
        action="append",
        metavar="KEY=VALUE",
        help="set a broker property (repeatable), e.g. --override log.dirs=./data",
    )
    serve.set_defaults(func=_serve)
    dump_log = sub.add_parser(
        "dump-log",
        help="print the batches, records and index entries of log files (kafka-dump-log)",
        description="Print what segment (.log), index (.index, .timeindex, .txnindex) and "
        "producer snapshot (.snapshot) files hold, in kafka-dump-log's format.",
    )
    dump_log.add_argument("--version", action=PrintVersion)
    dump_log.add_argument("paths", nargs="*", metavar="FILE", help="files to dump")
    dump_log.add_argument("--files", metavar="FILE,FILE", help="files to dump, comma-separated")
    dump_log.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record with its key and payload (implies --deep-iteration)",
    )
    dump_log.add_argument(
        "--deep-iteration", action="store_true", help="print each record's offset, sizes, headers"
    )
    dump_log.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="with --print-data-log, print keys and payloads only",
    )
    dump_log.add_argument(
        "--max-bytes", type=int, metavar="N", help="read only the first N bytes of .log files"
    )
    dump_log.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode records of __consumer_offsets (implies --print-data-log)",
    )
    dump_log.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode records of __transaction_state (implies --print-data-log)",
    )
    dump_log.set_defaults(func=_dump_log)
    for name, module, summary in (
        ("topics", "topics", "create, list, describe, alter and delete topics (kafka-topics)"),
        ("consumer-groups", "consumer_groups",
         "list, describe, reset and delete consumer groups (kafka-consumer-groups)"),
        ("console-producer", "console_producer",
         "send lines of stdin to a topic (kafka-console-producer)"),
        ("console-consumer", "console_consumer",
         "print the records of topics on stdout (kafka-console-consumer)"),
        ("producer-perf-test", "perf",
         "measure producer throughput and latency (kafka-producer-perf-test)"),
        ("consumer-perf-test", "consumer_perf",
         "measure consumer throughput (kafka-consumer-perf-test)"),
        ("leader-election", "leader_election",
         "elect preferred or unclean partition leaders (kafka-leader-election)"),
        ("log-dirs", "log_dirs", "describe the brokers' log dirs (kafka-log-dirs)"),
        ("configs", "configs",
         "alter and describe topic, broker and client configs (kafka-configs)"),
        ("reassign-partitions", "reassign_partitions",
         "move partitions between brokers (kafka-reassign-partitions)"),
        ("console", "console",
         "a web console: topics, messages, consumer groups and their lag"),
        ("acls", "acls", "add, remove and list ACLs (kafka-acls)"),
        ("top", "top", "a live view of messages in per topic and lag per consumer group"),
    ):  # fmt: skip
        # Every argument goes to the tool's own parser (prefix_chars no flag can use).
        tool = sub.add_parser(name, help=summary, add_help=False, prefix_chars="\0")
        tool.add_argument("argv", nargs=argparse.REMAINDER)
        tool.set_defaults(func=_admin_tool(module))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The tools keep stderr for what the user must see (as Kafka's tools log at WARN).
    level = args.log_level or ("INFO" if args.command == "serve" else "WARNING")
    logging.basicConfig(
        level=getattr(logging, str(level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
