"""Transaction benchmark: transactional produce against idempotent produce, and read_committed
against read_uncommitted consumption of the transactional output.

Not a test. The script starts its own ``samsa serve`` (127.0.0.1 port 0, data in a
temporary directory) and, for record values of 100 B and 1 KiB, with confluent-kafka:

1. **Idempotent produce**: ``enable.idempotence=true``, ``acks=all``; N records to a
   one-partition topic, timed until every delivery report is in (``flush``).
2. **Transactional produce**: one producer with a ``transactional.id`` writes
   transactions of 50, 500 and 5,000 records to a one-partition topic, back to back,
   for a fixed time (whole transactions only). A transaction's time runs from
   ``begin_transaction()`` to the return of ``commit_transaction()``; the figures are
   records/s, transactions/s, and the median time of a transaction and of its
   ``commit_transaction()`` call (which flushes what is still queued, then EndTxn).
3. **Consume** each transactional output from offset 0 with ``assign()``, once with
   ``isolation.level=read_committed`` and once with ``read_uncommitted``: one untimed
   pass, then whole passes over the log for a fixed time (a transaction of 50 records
   a second yields logs too short to time in one pass).
4. **Round trips**: 1,000 transactions of 50 × 100 B with librdkafka's
   ``debug=protocol``, whose log gives each request's round-trip time (rtt).

Rounds take turns over the cases; the tables give the median round and the range.
Figures are payload figures: MB/s counts record values only (1 MB = 10^6 B).

    .venv/bin/python bench/txn_bench.py            # default run (~2 minutes on a quiet machine)
    .venv/bin/python bench/txn_bench.py --quick    # 1 round, shorter phases (~25 s)

Results and analysis: bench/RESULTS.md, section "Transactions".
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from e2e import CLK_TCK, machine_busy_s  # bench/e2e.py, a neighbour
from samsa.testing.broker import BrokerProcess, start_broker

SIZES = (100, 1024)
TRANSACTION_SIZES = (50, 500, 5000)
QUIET = {"log_level": 3}

# As bench/e2e.py, with idempotence on: the byte size closes a batch, the local queue
# never blocks produce(), and librdkafka caps in-flight requests at 5 per connection.
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}

CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "samsa-txn-bench",  # required by the Python client; nothing is committed
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "fetch.min.bytes": 1,
    # Passes start over at offset 0 (see consume()); a new pass's first fetch waits for the
    # fetch in flight, which at the log end is held for fetch.wait.max.ms: 5, not 100.
    "fetch.wait.max.ms": 5,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 262_144,
    "check.crcs": False,
}


# -- machine and broker CPU -------------------------------------------------------------------
def broker_cpu_s(broker: BrokerProcess) -> float:
    """User + system CPU seconds of the broker process (all its threads)."""
    assert broker.process is not None
    fields = Path(f"/proc/{broker.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_quiet(broker: BrokerProcess, max_wait_s: float) -> None:
    """Wait until other processes use < 5% of a CPU for 0.5 s, at most ``max_wait_s``.

    Other sessions on a 2-core machine take CPU from the client and the broker.
    """
    deadline = time.monotonic() + max_wait_s
    while time.monotonic() < deadline:
        busy0, broker0, own0 = machine_busy_s(), broker_cpu_s(broker), time.process_time()
        time.sleep(0.5)
        others = machine_busy_s() - busy0 - (broker_cpu_s(broker) - broker0)
        if others - (time.process_time() - own0) < 0.025:
            return


@dataclass
class Meter:
    """Wall time, broker CPU, client CPU and other processes' CPU over one phase."""

    broker: BrokerProcess
    seconds: float = 0.0
    broker_cpu: float = 0.0
    client_cpu: float = 0.0
    others_cpu: float = 0.0
    _start: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def start(self) -> None:
        self._start = (
            time.perf_counter(),
            broker_cpu_s(self.broker),
            time.process_time(),
            machine_busy_s(),
        )

    def stop(self) -> None:
        t0, b0, c0, m0 = self._start
        self.seconds = time.perf_counter() - t0
        self.broker_cpu = broker_cpu_s(self.broker) - b0
        self.client_cpu = time.process_time() - c0
        self.others_cpu = max(machine_busy_s() - m0 - self.broker_cpu - self.client_cpu, 0.0)

    def note(self) -> str:
        s = self.seconds
        return (
            f"CPU broker {self.broker_cpu / s:.0%}, client {self.client_cpu / s:.0%}, "
            f"others {self.others_cpu / s:.0%}"
        )


@dataclass
class Phase:
    name: str
    records: int
    size: int
    meter: Meter
    transactions: int = 0
    transaction_s: list[float] = field(default_factory=list)  # begin → commit returned
    commit_s: list[float] = field(default_factory=list)  # the commit_transaction() call

    @property
    def records_per_s(self) -> float:
        return self.records / self.meter.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records * self.size / self.meter.seconds / 1e6

    @property
    def transactions_per_s(self) -> float:
        return self.transactions / self.meter.seconds


# -- phases ------------------------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.delete_topics([topic])[topic].result(30)


def _producer(bootstrap: str, errors: list[KafkaError], **extra: Any) -> Producer:
    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    return Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, **QUIET,
                     "on_delivery": on_delivery, **extra})  # fmt: skip


def _send(producer: Producer, topic: str, payload: bytes, count: int) -> None:
    """``count`` records to partition 0; a full local queue is drained, never dropped."""
    send, poll = producer.produce, producer.poll
    for _ in range(count):
        try:
            send(topic, payload, partition=0)
        except BufferError:
            while True:
                poll(0.005)
                try:
                    send(topic, payload, partition=0)
                    break
                except BufferError:
                    continue


def produce_idempotent(broker: BrokerProcess, topic: str, size: int, count: int) -> Phase:
    errors: list[KafkaError] = []
    producer = _producer(broker.bootstrap, errors)
    # One record first: connects, learns the leader and gets the producer id outside the
    # timing (librdkafka's id request can wait 500 ms on a timer if no broker is up yet).
    producer.produce(topic, b"warm-up", partition=0)
    if producer.flush(30):
        raise RuntimeError("the warm-up record was not delivered")
    payload = os.urandom(size)
    meter = Meter(broker)
    meter.start()
    for sent in range(0, count, 10_000):
        _send(producer, topic, payload, min(10_000, count - sent))
        producer.poll(0)
    left = producer.flush(120)
    meter.stop()
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors: {errors[:3]}")
    return Phase(f"idempotent {size} B", count, size, meter)


def produce_transactional(
    broker: BrokerProcess, topic: str, size: int, per_transaction: int, seconds: float
) -> Phase:
    """Whole transactions of ``per_transaction`` records, back to back, for ``seconds``."""
    errors: list[KafkaError] = []
    producer = _producer(broker.bootstrap, errors, **{"transactional.id": f"bench-{topic}"})
    producer.init_transactions(30)  # FindCoordinator + InitProducerId, outside the timing
    producer.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    phase = Phase(f"txn {per_transaction:,} × {size} B", 0, size, Meter(broker))
    phase.meter.start()
    end = time.perf_counter() + seconds
    while phase.transactions < 3 or time.perf_counter() < end:
        began = time.perf_counter()
        producer.begin_transaction()
        _send(producer, topic, payload, per_transaction)
        committing = time.perf_counter()
        producer.commit_transaction(60)
        done = time.perf_counter()
        phase.transaction_s.append(done - began)
        phase.commit_s.append(done - committing)
        phase.transactions += 1
        phase.records += per_transaction
    phase.meter.stop()
    if errors:
        raise RuntimeError(f"delivery errors: {errors[:3]}")
    return phase


class RoundTrips(logging.Handler):
    """librdkafka's ``Received <Api>Response (..., rtt N ms)`` debug lines, by API."""

    LINE = re.compile(r"Received (\w+)Response \(.*rtt ([0-9.]+)ms\)")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.rtt_ms: dict[str, list[float]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        match = self.LINE.search(record.getMessage())
        if match:
            self.rtt_ms.setdefault(match.group(1), []).append(float(match.group(2)))


def probe_round_trips(
    broker: BrokerProcess, topic: str, size: int, per_transaction: int, transactions: int
) -> dict[str, list[float]]:
    """The round trips of ``transactions`` transactions, as librdkafka timed them.

    A separate run with ``debug=protocol``: the logging slows the client, so its
    transaction rate is not reported, only each request's time on the wire and in the broker.
    """
    handler = RoundTrips()
    logger = logging.getLogger(f"samsa-txn-bench.{topic}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    errors: list[KafkaError] = []
    producer = _producer(broker.bootstrap, errors, **{
        "transactional.id": f"probe-{topic}", "debug": "protocol", "log_level": 7,
        "logger": logger,
    })  # fmt: skip
    producer.init_transactions(30)
    handler.rtt_ms.clear()  # only the transactions' own requests
    payload = os.urandom(size)
    for _ in range(transactions):
        producer.begin_transaction()
        _send(producer, topic, payload, per_transaction)
        producer.commit_transaction(60)
        producer.poll(0)  # the log lines are served by poll()
    producer.flush(10)
    if errors:
        raise RuntimeError(f"delivery errors: {errors[:3]}")
    return handler.rtt_ms


def consume(
    broker: BrokerProcess,
    topic: str,
    size: int,
    *,
    count: int,
    last: int,
    isolation_level: str,
    seconds: float,
) -> Phase:
    """Read the ``count`` records of ``topic`` from offset 0, again and again for ``seconds``;
    the last record must be at offset ``last``.

    Short logs (transactions of 50 write ~20k records a second) would make phases of a few
    milliseconds; whole passes over the log keep each phase long enough to time.
    """
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, **CONSUMER_SETTINGS,
                         "isolation.level": isolation_level, **QUIET})  # fmt: skip
    consumer.list_topics(topic, timeout=10)

    def one_pass() -> None:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        deadline = time.monotonic() + 120
        while seen < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: consumed {seen} of {count} records in 120 s")
            # consume() waits for all it asks for (or the timeout): never ask past the end
            batch = consumer.consume(min(10_000, count - seen), 1.0)
            for message in batch:
                if message.error() is not None:
                    raise RuntimeError(f"{topic}: consumer error {message.error()}")
            seen += len(batch)
        if batch[-1].offset() != last:
            raise RuntimeError(f"{topic}: last record at {batch[-1].offset()}, not {last}")
        consumer.unassign()

    one_pass()  # untimed: the connection to the leader and the first fetch
    meter = Meter(broker)
    meter.start()
    passes = 0
    end = time.perf_counter() + seconds
    while passes == 0 or time.perf_counter() < end:
        one_pass()
        passes += 1
    meter.stop()
    consumer.close()
    return Phase(f"consume {isolation_level}", count * passes, size, meter)


# -- report ------------------------------------------------------------------------------------
def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def median_by(phases: list[Phase], key: Callable[[Phase], float]) -> Phase:
    """The round with the median ``key`` (the lower middle one for an even count)."""
    return sorted(phases, key=key)[(len(phases) - 1) // 2]


def spread(phases: list[Phase], key: Callable[[Phase], float], digits: int = 0) -> str:
    values = sorted(key(p) for p in phases)
    if len(values) == 1:
        return ""
    return f"{fmt(values[0], digits)}–{fmt(values[-1], digits)}"


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]], text: int = 2) -> None:
    """Columns before ``text`` and the last one are text (left-aligned), the others figures."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for n, row in enumerate([header, tuple("-" * w for w in widths), *rows]):
        cells = [
            cell.ljust(widths[i])
            if n == 0 or i < text or i == len(row) - 1
            else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, 1 s transactional phases")
    parser.add_argument("--repeat", type=int, help="rounds over all cases (default 3, quick 1)")
    parser.add_argument("--seconds", type=float,
                        help="length of each transactional phase (default 3, quick 1)")  # fmt: skip
    parser.add_argument("--read-seconds", type=float,
                        help="length of each consume phase (default 1, quick 0.3)")  # fmt: skip
    parser.add_argument("--small", type=int,
                        help="idempotent records of 100 B (default 1,000,000)")  # fmt: skip
    parser.add_argument("--large", type=int,
                        help="idempotent records of 1 KiB (default 300,000)")  # fmt: skip
    parser.add_argument("--quiet-wait", type=float, default=5.0,
                        help="before each produce phase, wait up to this many seconds for "
                        "other processes to go quiet (default 5; 0: do not wait)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the data dir and broker log")
    args = parser.parse_args(argv)
    repeat: int = args.repeat or (1 if args.quick else 3)
    seconds: float = args.seconds or (1.0 if args.quick else 3.0)
    read_seconds: float = args.read_seconds or (0.3 if args.quick else 1.0)
    idempotent_counts = {
        100: args.small or (100_000 if args.quick else 1_000_000),
        1024: args.large or (30_000 if args.quick else 300_000),
    }
    work = Path(tempfile.mkdtemp(prefix="samsa-txn-", dir=args.dir))
    broker = start_broker(work / "data")
    started = time.monotonic()

    def show(r: int, phase: Phase, extra: str = "") -> None:
        print(
            f"  round {r}  {phase.name:<26} {phase.records:>9,} records  "
            f"{phase.meter.seconds:6.2f} s  {fmt(phase.records_per_s):>9} rec/s  "
            f"{fmt(phase.mb_per_s, 1):>6} MB/s  {extra}{phase.meter.note()}",
            flush=True,
        )

    try:
        pid = broker.process.pid if broker.process is not None else "?"
        print(f"broker pid {pid} on {broker.bootstrap}, data in {broker.data_dir}")
        produced: dict[tuple[int, int], list[Phase]] = {}  # (size, per txn; 0: idempotent)
        consumed: dict[tuple[int, int, str], list[Phase]] = {}
        for r in range(repeat):
            for size in SIZES:
                topic = f"idempotent-{size}-{r}-{uuid.uuid4().hex[:6]}"
                create_topic(broker.bootstrap, topic)
                wait_quiet(broker, args.quiet_wait)
                phase = produce_idempotent(broker, topic, size, idempotent_counts[size])
                produced.setdefault((size, 0), []).append(phase)
                show(r, phase)
                delete_topic(broker.bootstrap, topic)
                for per_txn in TRANSACTION_SIZES:
                    topic = f"txn-{size}-{per_txn}-{r}-{uuid.uuid4().hex[:6]}"
                    create_topic(broker.bootstrap, topic)
                    wait_quiet(broker, args.quiet_wait)
                    phase = produce_transactional(broker, topic, size, per_txn, seconds)
                    produced.setdefault((size, per_txn), []).append(phase)
                    commit_ms = statistics.median(phase.commit_s) * 1000
                    show(r, phase, f"{fmt(phase.transactions_per_s, 1)} txn/s, "
                                   f"commit {commit_ms:.1f} ms; ")  # fmt: skip
                    # Each transaction: its records, then its commit marker.
                    last = phase.transactions * (per_txn + 1) - 2
                    for level in ("read_committed", "read_uncommitted"):
                        read = consume(broker, topic, size, count=phase.records, last=last,
                                       isolation_level=level, seconds=read_seconds)  # fmt: skip
                        consumed.setdefault((size, per_txn, level), []).append(read)
                        show(r, read)
                    delete_topic(broker.bootstrap, topic)
        topic = f"probe-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, topic)
        wait_quiet(broker, args.quiet_wait)
        probe_size, probe_per_txn, probe_count = 100, 50, 200 if args.quick else 1000
        rtt_ms = probe_round_trips(broker, topic, probe_size, probe_per_txn, probe_count)

        print()
        print(f"Produce (median round of {repeat}; [range of records/s])")
        rows: list[tuple[str, ...]] = []
        for (size, per_txn), phases in produced.items():
            p = median_by(phases, lambda ph: ph.records_per_s)
            rate_range = spread(phases, lambda ph: ph.records_per_s)
            txn = (
                (
                    fmt(p.transactions_per_s, 1),
                    f"{statistics.median(p.transaction_s) * 1000:.2f}",
                    f"{statistics.median(p.commit_s) * 1000:.2f}",
                    f"{p.meter.broker_cpu / p.transactions * 1000:.2f}",
                )
                if per_txn
                else ("", "", "", "")
            )
            rows.append((
                f"{size} B", "idempotent" if per_txn == 0 else f"txn of {per_txn:,}",
                fmt(p.records_per_s) + (f" [{rate_range}]" if rate_range else ""),
                fmt(p.mb_per_s, 1), *txn,
                f"{p.records:,} rec in {p.meter.seconds:.2f} s; {p.meter.note()}",
            ))  # fmt: skip
        print_table(("size", "mode", "records/s", "MB/s", "txn/s", "txn ms", "commit ms",
                     "broker CPU ms/txn", "note"), rows)  # fmt: skip
        print()
        print(f"Consume the transactional output (median round of {repeat}; [range])")
        rows = []
        for (size, per_txn, level), phases in consumed.items():
            c = median_by(phases, lambda ph: ph.records_per_s)
            rate_range = spread(phases, lambda ph: ph.records_per_s)
            rows.append((
                f"{size} B", f"txn of {per_txn:,}", level,
                fmt(c.records_per_s) + (f" [{rate_range}]" if rate_range else ""),
                fmt(c.mb_per_s, 1),
                f"{c.records:,} rec in {c.meter.seconds:.2f} s; {c.meter.note()}",
            ))  # fmt: skip
        print_table(("size", "written as", "isolation", "records/s", "MB/s", "note"), rows, 3)
        print()
        print(
            f"Round trips of a transaction ({probe_count} of {probe_per_txn} × {probe_size} B, "
            "librdkafka debug=protocol: rtt of each request)"
        )
        rows = [
            (api, str(len(values)), f"{statistics.median(values):.2f}",
             f"{statistics.fmean(values):.2f}", f"{max(values):.2f}")
            for api, values in sorted(rtt_ms.items())
        ]  # fmt: skip
        print_table(("request", "count", "median ms", "mean ms", "max ms"), rows, 1)
        print()
        print(f"total {time.monotonic() - started:.0f} s")
        return 0
    finally:
        broker.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
