"""``samsa consumer-perf-test``: read N records as fast as they come and report the
throughput, as kafka-consumer-perf-test.sh does.

The consumer joins a group (``--group``, default ``perf-consumer-NNNNN``) and
subscribes, so the figures include what a real group member pays: rebalance.time.ms
is the time spent waiting for an assignment, and the fetch.* figures leave it out.
Sizes are keys plus values, MB are MiB (as in Kafka). The output is Kafka's:

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2026-01-01 12:00:00:000, 2026-01-01 12:00:03:250, 95.3674, 29.3438, 100000, …

(times in Kafka's ``yyyy-MM-dd HH:mm:ss:SSS``, local time). ``--show-detailed-stats``
prints a line every ``--reporting-interval`` instead and, as in Kafka, no summary.
On a terminal a progress bar counts the records and the summary is a table with the
same column names (``--hide-header`` prints Kafka's bare line instead). Ctrl-C stops
the run early and still reports it.

Deliberate differences from Kafka: the run stops at exactly ``--messages`` records
(Kafka counts the whole last poll); ``--date-format`` is not offered.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.cli.console_consumer import (
    Stopper,
    add_topic_arguments,
    consumer_properties,
    open_consumer,
    topic_pattern,
)
from samsa.cli.session import UsageError, run_tool
from samsa.types import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from samsa.client.consumer import Consumer

__all__ = ["RebalanceTimer", "build_parser", "run"]

PROG = "samsa consumer-perf-test"
MB = 1024 * 1024
# Kafka's tool polls with this timeout: how soon --timeout and Ctrl-C are noticed.
POLL_S = 0.1
SUMMARY_HEADERS = [
    "start.time", "end.time", "data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg",
    "nMsg.sec", "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec",
]  # fmt: skip
DETAILED_HEADERS = ["time", "threadId", *SUMMARY_HEADERS[2:]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure consumer throughput (kafka-consumer-perf-test.sh's flags).",
    )
    parser.add_argument(
        "--bootstrap-server",
        "--broker-list",
        dest="bootstrap_server",
        metavar="HOST:PORT",
        help="the broker(s) to connect to (or bootstrap.servers in --consumer.config)",
    )
    add_topic_arguments(parser)
    parser.add_argument(
        "--messages", type=int, required=True, metavar="N", help="records to read (required)"
    )
    parser.add_argument(
        "--group",
        default=f"perf-consumer-{random.randrange(100_000)}",
        help="the consumer group to join (default perf-consumer-NNNNN)",
    )
    parser.add_argument(
        "--from-latest",
        action="store_true",
        help="without a committed offset, start at the end of each partition (default: "
        "at the earliest record)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=10_000,
        metavar="MS",
        help="give up when no record arrives for this long (default 10000)",
    )
    parser.add_argument(
        "--fetch-size",
        type=int,
        default=1024 * 1024,
        metavar="BYTES",
        help="max.partition.fetch.bytes (default 1048576)",
    )
    parser.add_argument(
        "--socket-buffer-size",
        type=int,
        default=2 * 1024 * 1024,
        metavar="BYTES",
        help="receive.buffer.bytes (default 2097152)",
    )
    parser.add_argument(
        "--consumer.config",
        "--command-config",
        dest="client_config",
        type=Path,
        metavar="FILE",
        help="a properties file of consumer configs (the flags above win)",
    )
    parser.add_argument(
        "--print-metrics", action="store_true", help="print the run's counters at the end"
    )
    parser.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="print a line every --reporting-interval (and no summary)",
    )
    parser.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="how often --show-detailed-stats prints (default 5000)",
    )
    parser.add_argument(
        "--hide-header", action="store_true", help="print the figures without the header line"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa consumer-perf-test`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def kafka_time(ms: int) -> str:
    """Epoch milliseconds in Kafka's default ``yyyy-MM-dd HH:mm:ss:SSS`` (local time)."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S:") + f"{ms % 1000:03d}"


def java_ratio(amount: float, divisor: float) -> str:
    """``amount / divisor`` as Java's ``%.4f`` prints a double, Infinity and NaN included."""
    if divisor == 0:
        if amount == 0:
            return "NaN"
        return "Infinity" if amount > 0 else "-Infinity"
    return f"{amount / divisor:.4f}"


class RebalanceTimer:
    """A rebalance listener that adds up the time the consumer spends without partitions
    (Kafka's ConsumerPerfRebListener)."""

    def __init__(self, started_ms: int) -> None:
        self.join_started_ms = started_ms
        self.total_ms = 0
        self.window_ms = 0
        self.assigned: set[TopicPartition] = set()

    def on_partitions_revoked(self, partitions: Collection[TopicPartition]) -> None:
        self.assigned.difference_update(partitions)
        if not self.assigned:
            self.join_started_ms = _now_ms()

    def on_partitions_assigned(self, partitions: Collection[TopicPartition]) -> None:
        if not self.assigned:
            waited = _now_ms() - self.join_started_ms
            self.total_ms += waited
            self.window_ms += waited
        self.assigned.update(partitions)

    def on_partitions_lost(self, partitions: Collection[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)


@dataclass(slots=True)
class Counts:
    """What the run read, in total and since the last detailed line."""

    records: int = 0
    bytes: int = 0
    polls: int = 0
    window_records: int = 0
    window_bytes: int = 0
    window_started_ms: int = field(default_factory=_now_ms)


def _detailed_line(counts: Counts, timer: RebalanceTimer, now_ms: int) -> str:
    elapsed_ms = now_ms - counts.window_started_ms
    fetch_ms = elapsed_ms - timer.window_ms
    window_mb = counts.window_bytes / MB
    fetch_rates = (
        f"{java_ratio(1000 * window_mb, fetch_ms)}, "
        f"{java_ratio(1000 * counts.window_records, fetch_ms)}"
        if fetch_ms > 0
        else "0.0000, 0.0000"
    )
    return (
        f"{kafka_time(now_ms)}, 0, {counts.bytes / MB:.4f}, "
        f"{java_ratio(1000 * window_mb, elapsed_ms)}, {counts.records}, "
        f"{java_ratio(1000 * counts.window_records, elapsed_ms)}, "
        f"{timer.window_ms}, {fetch_ms}, {fetch_rates}"
    )


def _summary(counts: Counts, timer: RebalanceTimer, start_ms: int, end_ms: int) -> list[str]:
    elapsed_s = (end_ms - start_ms) / 1000
    fetch_ms = end_ms - start_ms - timer.total_ms
    mb = counts.bytes / MB
    return [
        kafka_time(start_ms),
        kafka_time(end_ms),
        f"{mb:.4f}",
        java_ratio(mb, elapsed_s),
        str(counts.records),
        java_ratio(counts.records, elapsed_s),
        str(timer.total_ms),
        str(fetch_ms),
        java_ratio(mb, fetch_ms / 1000),
        java_ratio(counts.records, fetch_ms / 1000),
    ]


def _consume(
    consumer: Consumer,
    options: argparse.Namespace,
    timer: RebalanceTimer,
    counts: Counts,
    stopper: Stopper,
    *,
    out: Callable[[str], None],
    progress: Callable[[int], None],
) -> None:
    messages, timeout_ms = options.messages, options.timeout
    interval_ms = options.reporting_interval
    batch = int(consumer.config["max.poll.records"])
    last_consumed_ms = now_ms = _now_ms()
    counts.window_started_ms = now_ms
    while counts.records < messages and now_ms - last_consumed_ms <= timeout_ms:
        if stopper.signal is not None:
            return
        records = consumer.poll(POLL_S, max_records=min(batch, messages - counts.records))
        counts.polls += 1
        now_ms = _now_ms()
        if records:
            last_consumed_ms = now_ms
            size = 0
            for record in records:
                if record.key is not None:
                    size += len(record.key)
                if record.value is not None:
                    size += len(record.value)
            counts.records += len(records)
            counts.bytes += size
            counts.window_records += len(records)
            counts.window_bytes += size
            progress(counts.records)
            # As in Kafka, a window ends only when records arrive.
            if now_ms - counts.window_started_ms >= interval_ms:
                if options.show_detailed_stats:
                    out(_detailed_line(counts, timer, now_ms))
                timer.window_ms = 0
                counts.window_started_ms = now_ms
                counts.window_records = counts.window_bytes = 0
    if counts.records < messages:
        out(
            f"WARNING: Exiting before consuming the expected number of messages: timeout "
            f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the "
            "timeout."
        )


def _properties(options: argparse.Namespace) -> dict[str, Any]:
    # As in Kafka, these flags (defaults included) win over the properties file.
    overrides = {
        "group.id": options.group,
        "receive.buffer.bytes": str(options.socket_buffer_size),
        "max.partition.fetch.bytes": str(options.fetch_size),
        "auto.offset.reset": "latest" if options.from_latest else "earliest",
        "check.crcs": "false",
    }
    props = consumer_properties(options.bootstrap_server, options.client_config, overrides)
    props.setdefault("client.id", "perf-consumer-client")
    return props


def _subscribe(consumer: Consumer, options: argparse.Namespace, timer: RebalanceTimer) -> None:
    pattern = topic_pattern(options)
    if pattern is None:
        consumer.subscribe([options.topic], listener=timer)
    else:
        consumer.subscribe(pattern=pattern, listener=timer)


def _print_metrics(counts: Counts, timer: RebalanceTimer, elapsed_ms: int) -> None:
    from samsa.cli.output import print_table

    seconds = max(elapsed_ms, 1) / 1000
    rows = [
        ("records-consumed-total", counts.records),
        ("bytes-consumed-total", counts.bytes),
        ("elapsed-ms", elapsed_ms),
        ("rebalance-time-ms", timer.total_ms),
        ("records-consumed-rate", f"{counts.records / seconds:.1f}"),
        ("bytes-consumed-rate", f"{counts.bytes / seconds:.1f}"),
        ("poll-total", counts.polls),
        ("records-per-poll-avg", f"{counts.records / max(counts.polls, 1):.1f}"),
    ]
    print()
    print_table(["METRIC", "VALUE"], rows)


def _execute(options: argparse.Namespace) -> int:
    topic_pattern(options)  # checked before connecting
    if options.messages < 0:
        raise UsageError("--messages must be at least 0")
    if options.reporting_interval <= 0:
        raise UsageError("--reporting-interval must be above 0")
    if options.timeout < 0:
        raise UsageError("--timeout must be at least 0")
    consumer = open_consumer(_properties(options))
    terminal = sys.stdout.isatty()
    table = terminal and not options.hide_header and not options.show_detailed_stats
    if not options.hide_header and not table:
        headers = DETAILED_HEADERS if options.show_detailed_stats else SUMMARY_HEADERS
        print(", ".join(headers), flush=True)
    start_ms = _now_ms()
    timer = RebalanceTimer(start_ms)
    counts = Counts()
    stopper = Stopper()
    try:
        with stopper:
            _subscribe(consumer, options, timer)
            if terminal:
                from rich.progress import Progress

                with Progress(transient=True) as bar:
                    task = bar.add_task("records consumed", total=options.messages)

                    def out(line: str) -> None:
                        bar.console.print(line, highlight=False, markup=False, soft_wrap=True)

                    def progress(done: int) -> None:
                        bar.update(task, completed=done)

                    _consume(consumer, options, timer, counts, stopper, out=out, progress=progress)
            else:
                _consume(
                    consumer, options, timer, counts, stopper, out=_print_line, progress=_ignore
                )
            end_ms = _now_ms()
    finally:
        consumer.close()
    if not options.show_detailed_stats:
        summary = _summary(counts, timer, start_ms, end_ms)
        if table:
            from samsa.cli.output import print_table

            print_table(SUMMARY_HEADERS, [summary])
        else:
            print(", ".join(summary), flush=True)
    if options.print_metrics:
        _print_metrics(counts, timer, end_ms - start_ms)
    return 0 if stopper.signal is None else 128 + stopper.signal


def _print_line(line: str) -> None:
    print(line, flush=True)


def _ignore(_done: int) -> None:
    return None
