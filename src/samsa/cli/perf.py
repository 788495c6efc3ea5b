"""``samsa producer-perf-test``: send N records as fast as asked and report throughput and
latency, as kafka-producer-perf-test.sh does.

Every 5 seconds a line of the last window's figures, then one line for the whole run,
in Kafka's words and format, so scripts written for Kafka's tool read these too.
Latency is from ``send()`` to the delivery callback. As in Kafka, at most 500 000
latencies are kept (evenly sampled) for the percentiles. On a terminal a progress bar
counts delivered records. Not offered: ``--transactional-id`` and
``--transaction-duration-ms``.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import threading
import time
from array import array
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.cli.session import (
    DeliveryFailures,
    ToolError,
    UsageError,
    check_reachable,
    client_properties,
    parse_key_values,
    run_tool,
)

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from samsa.client.producer import Producer, RecordMetadata

__all__ = ["Stats", "build_parser", "run"]

PROG = "samsa producer-perf-test"
REPORTING_INTERVAL_S = 5.0
MAX_LATENCY_SAMPLES = 500_000
MB = 1024 * 1024


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure producer throughput and latency "
        "(kafka-producer-perf-test.sh's flags).",
    )
    parser.add_argument("--topic", required=True, help="the topic to write to (required)")
    parser.add_argument(
        "--num-records", type=int, required=True, metavar="N", help="records to send (required)"
    )
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="BYTES", help="size of each record")
    payload.add_argument(
        "--payload-file",
        type=Path,
        metavar="FILE",
        help="send records drawn at random from this file's payloads",
    )
    parser.add_argument(
        "--payload-delimiter",
        default="\\n",
        metavar="TEXT",
        help="what separates the payloads of --payload-file (default: a line break)",
    )
    parser.add_argument(
        "--throughput",
        type=float,
        required=True,
        metavar="RECORDS/S",
        help="at most this many records a second; -1: as fast as possible (required)",
    )
    parser.add_argument(
        "--producer-props",
        nargs="+",
        action="extend",
        metavar="KEY=VALUE",
        help="producer configs, e.g. bootstrap.servers=127.0.0.1:9092 linger.ms=5",
    )
    parser.add_argument(
        "--producer.config",
        dest="client_config",
        type=Path,
        metavar="FILE",
        help="a properties file of producer configs",
    )
    parser.add_argument(
        "--bootstrap-server",
        "--broker-list",
        dest="bootstrap_server",
        metavar="HOST:PORT",
        help="the broker(s) to connect to (or bootstrap.servers in --producer-props)",
    )
    parser.add_argument(
        "--print-metrics", action="store_true", help="print the run's counters at the end"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``samsa producer-perf-test`` with the arguments after the subcommand in ``args.argv``."""
    return run_tool(build_parser(), args.argv, _execute)


class Stats:
    """Counts deliveries; prints a window line every ``interval_s`` and the run's total.

    :meth:`completed` runs on the producer's thread, the rest on the caller's.
    """

    def __init__(self, num_records: int, interval_s: float = REPORTING_INTERVAL_S) -> None:
        self.start = time.perf_counter()
        self.interval_s = interval_s
        self.sampling = max(1, num_records // max(1, min(num_records, MAX_LATENCY_SAMPLES)))
        self.latencies = array("d")
        self.count = self.bytes = 0
        self.failures = DeliveryFailures(PROG)
        self.total_latency = self.max_latency = 0.0
        self._lock = threading.Lock()
        self._new_window(self.start)
        self.progress: tuple[Progress, TaskID] | None = None

    def _new_window(self, now: float) -> None:
        self.window_start = now
        self.window_count = self.window_bytes = 0
        self.window_total_latency = self.window_max_latency = 0.0

    def completed(
        self,
        sent_at: float,
        size: int,
        _metadata: RecordMetadata | None,
        error: BaseException | None,
    ) -> None:
        """A delivery callback (bound to a record's send time and size)."""
        now = time.perf_counter()
        if error is not None:
            with self._lock:
                self.failures.record(error)
            return
        latency = (now - sent_at) * 1000
        with self._lock:
            if self.count % self.sampling == 0:
                self.latencies.append(latency)
            self.count += 1
            self.bytes += size
            self.total_latency += latency
            self.max_latency = max(self.max_latency, latency)
            self.window_count += 1
            self.window_bytes += size
            self.window_total_latency += latency
            self.window_max_latency = max(self.window_max_latency, latency)
            if now - self.window_start >= self.interval_s:
                self._print_window(now)
                self._new_window(now)
            if self.progress is not None and self.count % 1000 == 0:
                progress, task = self.progress
                progress.update(task, completed=self.count)

    def _print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        count = self.window_count
        self._out(
            f"{count} records sent, {count / elapsed:.1f} records/sec "
            f"({self.window_bytes / elapsed / MB:.2f} MB/sec), "
            f"{self.window_total_latency / max(count, 1):.1f} ms avg latency, "
            f"{self.window_max_latency:.1f} ms max latency."
        )

    def _out(self, line: str) -> None:
        if self.progress is not None:
            self.progress[0].console.print(line, highlight=False, markup=False, soft_wrap=True)
        else:
            print(line, flush=True)

    def percentiles(self, *fractions: float) -> list[int]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0 for _ in fractions]
        return [int(ordered[min(int(f * len(ordered)), len(ordered) - 1)]) for f in fractions]

    def print_total(self) -> float:
        """The run's summary line; returns the elapsed seconds."""
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        self._out(
            f"{self.count} records sent, {self.count / elapsed:f} records/sec "
            f"({self.bytes / elapsed / MB:.2f} MB/sec), "
            f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
            f"{self.max_latency:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
            f"{p99} ms 99th, {p999} ms 99.9th."
        )
        return elapsed


def _payloads(options: argparse.Namespace) -> list[bytes]:
    if options.record_size is not None:
        if options.record_size < 0:
            raise UsageError("--record-size must be at least 0")
        rng = random.Random()
        return [bytes(rng.randrange(65, 91) for _ in range(options.record_size))]  # A-Z
    delimiter = options.payload_delimiter.encode().decode("unicode_escape").encode()
    try:
        text = options.payload_file.read_bytes()
    except OSError as exc:
        raise ToolError(f"cannot read {options.payload_file}: {exc.strerror or exc}") from exc
    payloads = [p for p in text.split(delimiter) if p]
    if not payloads:
        raise ToolError(f"{options.payload_file} holds no payloads")
    return payloads


def _producer(options: argparse.Namespace) -> Producer:
    from samsa.client.config import producer_config
    from samsa.client.producer import Producer

    overrides = parse_key_values(options.producer_props, "--producer-props")
    props = client_properties(options.bootstrap_server, options.client_config, overrides)
    check_reachable(producer_config(props))
    return Producer(props)


def _print_metrics(stats: Stats, elapsed: float) -> None:
    from samsa.cli.output import print_table

    rows = [
        ("record-send-total", stats.count),
        ("record-error-total", stats.failures.count),
        ("byte-total", stats.bytes),
        ("elapsed-ms", f"{elapsed * 1000:.0f}"),
        ("record-send-rate", f"{stats.count / elapsed:.1f}"),
        ("byte-rate", f"{stats.bytes / elapsed:.1f}"),
        ("request-latency-avg-ms", f"{stats.total_latency / max(stats.count, 1):.3f}"),
        ("request-latency-max-ms", f"{stats.max_latency:.3f}"),
    ]
    print()
    print_table(["METRIC", "VALUE"], rows)


def _send_all(producer: Producer, options: argparse.Namespace, stats: Stats) -> None:
    payloads = _payloads(options)
    choose = random.Random().choice
    topic, throughput = options.topic, options.throughput
    perf_counter, sleep, completed = time.perf_counter, time.sleep, stats.completed
    start = perf_counter()
    for i in range(options.num_records):
        payload = payloads[0] if len(payloads) == 1 else choose(payloads)
        sent_at = perf_counter()
        producer.send(
            topic, payload, on_delivery=functools.partial(completed, sent_at, len(payload))
        )
        if throughput > 0:
            ahead = start + (i + 1) / throughput - perf_counter()
            if ahead > 0:
                sleep(ahead)
    producer.flush()


def _execute(options: argparse.Namespace) -> int:
    if options.num_records < 0:
        raise UsageError("--num-records must be at least 0")
    if options.throughput == 0:
        raise UsageError("--throughput must be above 0, or -1 for no limit")
    producer = _producer(options)
    stats = Stats(options.num_records)
    try:
        if sys.stdout.isatty():
            from rich.progress import Progress

            with Progress() as progress:
                task = progress.add_task("records delivered", total=options.num_records)
                stats.progress = (progress, task)
                _send_all(producer, options, stats)
                progress.update(task, completed=stats.count)
                stats.progress = None
        else:
            _send_all(producer, options, stats)
        elapsed = stats.print_total()
    finally:
        producer.close()
    if options.print_metrics:
        _print_metrics(stats, elapsed)
    return stats.failures.exit_code()
