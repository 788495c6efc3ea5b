"""Client benchmark: samsa's producer and consumer next to confluent-kafka, kafka-python and
aiokafka, on one broker and one workload.

Not a test. The script starts its own ``samsa serve`` (127.0.0.1 port 0, data in a
temporary directory). For record values of 100 B and 1 KiB (random bytes, no key):

1. **Produce.** Each producer writes N records to a fresh one-partition topic:
   ``acks=all``, idempotence on, ``linger.ms`` 5, no compression, ``batch.size``
   16 KiB (the Java default) and 1,000,000 B (librdkafka's default). One record is sent
   and awaited first, outside the clock (connection, metadata, producer id). The clock
   runs from the first send to the return of ``flush()``. No per-record callback or
   future is kept: the topic's high watermark is checked afterwards (N + 1).
   - ``samsa``: ``samsa.Producer``, a ``send()`` loop, then ``flush()``;
   - ``samsa-async``: ``samsa.AsyncProducer``, ``await send()`` in a loop, then
     ``await flush()``, on uvloop;
   - ``confluent-kafka``: ``Producer.produce()`` (``poll(0)`` every 1,000 records, and
     on ``BufferError``), then ``flush()``; 32 MiB local queue as ``buffer.memory``;
   - ``kafka-python``: ``KafkaProducer.send()``, then ``flush()``;
   - ``aiokafka``: ``await AIOKafkaProducer.send()``, then ``await flush()``, on uvloop.
2. **Consume.** A topic pre-filled with N records (by confluent-kafka) is read from
   offset 0 by each consumer, with ``assign()`` and no group, each client's fetch
   defaults, and each record's value touched (``len``). The clock runs from the first
   poll to the N-th record. The consumer is created and assigned before the clock
   starts; connecting is inside it.
   - ``samsa``: ``samsa.Consumer.poll(1.0)`` (``max.poll.records`` 500);
   - ``samsa-async``: ``await samsa.AsyncConsumer.poll(1.0)``, on uvloop;
   - ``confluent-kafka``: ``Consumer.consume(500, 1.0)``;
   - ``kafka-python``: ``KafkaConsumer.poll(1000)`` (``max_poll_records`` 500);
   - ``aiokafka``: ``await AIOKafkaConsumer.getmany(timeout_ms=1000)``, on uvloop.

Rounds take turns over the clients; each row is the median round, with the range.
Ratios are to kafka-python's median on the same row. Before each run the script
waits (up to ``--quiet-wait`` s) for other processes to go quiet; a run during which
they used more than ``--max-others`` of a CPU is done again (up to ``--retries`` times).
Figures are payload figures: MB/s counts record values only (1 MB = 10^6 B).

    .venv/bin/python bench/client_bench.py           # default run (~8 minutes)
    .venv/bin/python bench/client_bench.py --quick   # 1 round, fewer records (~1 minute)
    .venv/bin/python bench/client_bench.py --clients samsa --no-consume --repeat 1
                                                     # one client, e.g. under a profiler

Results and analysis: bench/RESULTS.md, section "Clients".
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import uvloop
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient

from e2e import fmt  # bench/e2e.py, a neighbour
from group_bench import CpuWindow, create_topic, print_table, wait_quiet
from samsa.testing.broker import start_broker

CLIENTS = ("samsa", "samsa-async", "confluent-kafka", "kafka-python", "aiokafka")
BASELINE = "kafka-python"
SIZES = (100, 1024)
BATCH_SIZES = (16_384, 1_000_000)
LINGER_MS = 5
BUFFER_MEMORY = 33_554_432  # the Java default, and samsa's and kafka-python's
POLL_TIMEOUT_S = 1.0
RUN_TIMEOUT_S = 120.0  # a consumer that has not read everything by then has failed
QUIET = {"log_level": 3}


@dataclass(frozen=True)
class Case:
    """One row of a table: what is measured, with which record and batch size."""

    operation: str  # "produce" or "consume"
    size: int
    batch_size: int = 0  # produce only

    def label(self) -> str:
        if self.operation == "consume":
            return f"consume {self.size} B"
        batch = "16 KiB" if self.batch_size == 16_384 else f"{self.batch_size / 1e6:g} MB"
        return f"produce {self.size} B, batch {batch}"


@dataclass
class Run:
    client: str
    records: int
    size: int
    window: CpuWindow

    @property
    def records_per_s(self) -> float:
        return self.records / self.window.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records * self.size / self.window.seconds / 1e6


# -- topics ------------------------------------------------------------------------------------
def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.delete_topics([topic])[topic].result(30)


def high_watermark(bootstrap: str, topic: str) -> int:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "bench", **QUIET})
    try:
        _low, high = consumer.get_watermark_offsets(ConfluentTopicPartition(topic, 0), 30)
        return int(high)
    finally:
        consumer.close()


def fill(bootstrap: str, topic: str, payload: bytes, count: int) -> None:
    """Write ``count`` records for the consumers to read (confluent-kafka: the fastest)."""
    producer = ConfluentProducer({
        "bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576,
        **QUIET,
    })  # fmt: skip
    for i in range(count):
        producer.produce(topic, payload, partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError(f"could not fill {topic}")


def run_async(coroutine: Coroutine[Any, Any, CpuWindow]) -> CpuWindow:
    """The asyncio clients run on uvloop, as samsa's blocking clients' own loop does."""
    return uvloop.run(coroutine)


# -- producers ---------------------------------------------------------------------------------
class ProduceJob(NamedTuple):
    bootstrap: str
    topic: str
    payload: bytes
    count: int
    batch_size: int
    broker_pid: int


Producing = Callable[[ProduceJob], CpuWindow]


def samsa_config(bootstrap: str, batch_size: int) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": LINGER_MS,
        "batch.size": batch_size,
        "compression.type": "none",
    }


def produce_samsa(job: ProduceJob) -> CpuWindow:
    from samsa import Producer

    bootstrap, topic, payload, count, batch_size, pid = job
    with Producer(samsa_config(bootstrap, batch_size)) as producer:
        producer.send(topic, payload).result(30)
        send = producer.send
        with CpuWindow(pid) as window:
            for _ in range(count):
                send(topic, payload)
            producer.flush()
    return window


def produce_samsa_async(job: ProduceJob) -> CpuWindow:
    from samsa import AsyncProducer

    bootstrap, topic, payload, count, batch_size, pid = job

    async def run() -> CpuWindow:
        async with AsyncProducer(samsa_config(bootstrap, batch_size)) as producer:
            await (await producer.send(topic, payload))
            send = producer.send
            with CpuWindow(pid) as window:
                for _ in range(count):
                    await send(topic, payload)
                await producer.flush()
        return window

    return run_async(run())


def produce_confluent(job: ProduceJob) -> CpuWindow:
    bootstrap, topic, payload, count, batch_size, pid = job
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    producer = ConfluentProducer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": LINGER_MS, "batch.size": batch_size, "compression.type": "none",
        "queue.buffering.max.kbytes": BUFFER_MEMORY // 1024,
        "queue.buffering.max.messages": 2_000_000,  # the byte limit binds, as buffer.memory
        "delivery.report.only.error": True, "on_delivery": on_delivery, **QUIET,
    })  # fmt: skip
    producer.produce(topic, payload)
    producer.flush(30)
    send, poll = producer.produce, producer.poll
    with CpuWindow(pid) as window:
        for i in range(count):
            while True:
                try:
                    send(topic, payload)
                    break
                except BufferError:  # the local queue is full: serve delivery reports, retry
                    poll(0.005)
            if i % 1000 == 0:
                poll(0)
        left = producer.flush(RUN_TIMEOUT_S)
    if left or errors:
        raise RuntimeError(f"confluent-kafka: {left} undelivered, errors {errors[:3]}")
    return window


def produce_kafka_python(job: ProduceJob) -> CpuWindow:
    from kafka import KafkaProducer

    bootstrap, topic, payload, count, batch_size, pid = job
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
        linger_ms=LINGER_MS, batch_size=batch_size, compression_type=None,
    )  # fmt: skip
    try:
        producer.send(topic, payload).get(30)
        send = producer.send
        with CpuWindow(pid) as window:
            for _ in range(count):
                send(topic, payload)
            producer.flush()
    finally:
        producer.close()
    return window


def produce_aiokafka(job: ProduceJob) -> CpuWindow:
    from aiokafka import AIOKafkaProducer

    bootstrap, topic, payload, count, batch_size, pid = job

    async def run() -> CpuWindow:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
            linger_ms=LINGER_MS, max_batch_size=batch_size, compression_type=None,
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send_and_wait(topic, payload)
            send = producer.send
            with CpuWindow(pid) as window:
                for _ in range(count):
                    await send(topic, payload)
                await producer.flush()
        finally:
            await producer.stop()
        return window

    return run_async(run())


PRODUCERS: dict[str, Producing] = {
    "samsa": produce_samsa,
    "samsa-async": produce_samsa_async,
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}


# -- consumers ---------------------------------------------------------------------------------
class ConsumeJob(NamedTuple):
    bootstrap: str
    topic: str
    count: int
    broker_pid: int


Consuming = Callable[[ConsumeJob], tuple[CpuWindow, int]]  # → window, bytes of values read


def consume_samsa(job: ConsumeJob) -> tuple[CpuWindow, int]:
    from samsa import Consumer
    from samsa.types import TopicPartition

    bootstrap, topic, count, pid = job
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}  # fmt: skip
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        poll = consumer.poll
        records = value_bytes = 0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        with CpuWindow(pid) as window:
            while records < count and time.monotonic() < deadline:
                for record in poll(POLL_TIMEOUT_S):
                    value_bytes += len(record.value)
                    records += 1
    return window, value_bytes


def consume_samsa_async(job: ConsumeJob) -> tuple[CpuWindow, int]:
    from samsa import AsyncConsumer
    from samsa.types import TopicPartition

    bootstrap, topic, count, pid = job
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}  # fmt: skip

    async def run() -> tuple[CpuWindow, int]:
        async with AsyncConsumer(config) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            poll = consumer.poll
            records = value_bytes = 0
            deadline = time.monotonic() + RUN_TIMEOUT_S
            with CpuWindow(pid) as window:
                while records < count and time.monotonic() < deadline:
                    for record in await poll(POLL_TIMEOUT_S):
                        value_bytes += len(record.value)
                        records += 1
        return window, value_bytes

    return uvloop.run(run())


def consume_confluent(job: ConsumeJob) -> tuple[CpuWindow, int]:
    bootstrap, topic, count, pid = job
    consumer = ConfluentConsumer({
        "bootstrap.servers": bootstrap, "group.id": "client-bench",  # required; not joined
        "enable.auto.commit": False, "enable.partition.eof": False, **QUIET,
    })  # fmt: skip
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        consume = consumer.consume
        records = value_bytes = 0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        with CpuWindow(pid) as window:
            while records < count and time.monotonic() < deadline:
                for message in consume(500, POLL_TIMEOUT_S):
                    if message.error() is not None:
                        raise RuntimeError(f"confluent-kafka: {message.error()}")
                    value_bytes += len(message.value())
                    records += 1
    finally:
        consumer.close()
    return window, value_bytes


def consume_kafka_python(job: ConsumeJob) -> tuple[CpuWindow, int]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    bootstrap, topic, count, pid = job
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
        enable_auto_commit=False,
    )  # fmt: skip
    try:
        consumer.assign([KafkaTopicPartition(topic, 0)])
        poll = consumer.poll
        records = value_bytes = 0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        with CpuWindow(pid) as window:
            while records < count and time.monotonic() < deadline:
                for batch in poll(timeout_ms=int(POLL_TIMEOUT_S * 1000)).values():
                    for record in batch:
                        value_bytes += len(record.value)
                        records += 1
    finally:
        consumer.close()
    return window, value_bytes


def consume_aiokafka(job: ConsumeJob) -> tuple[CpuWindow, int]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    bootstrap, topic, count, pid = job

    async def run() -> tuple[CpuWindow, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
            enable_auto_commit=False,
        )  # fmt: skip
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            getmany = consumer.getmany
            records = value_bytes = 0
            deadline = time.monotonic() + RUN_TIMEOUT_S
            with CpuWindow(pid) as window:
                while records < count and time.monotonic() < deadline:
                    batches = await getmany(timeout_ms=int(POLL_TIMEOUT_S * 1000))
                    for batch in batches.values():
                        for record in batch:
                            value_bytes += len(record.value)
                            records += 1
        finally:
            await consumer.stop()
        return window, value_bytes

    return uvloop.run(run())


CONSUMERS: dict[str, Consuming] = {
    "samsa": consume_samsa,
    "samsa-async": consume_samsa_async,
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


# -- report ------------------------------------------------------------------------------------
def median_run(runs: list[Run]) -> Run:
    """The run with the median rate (the lower middle one for an even count)."""
    return sorted(runs, key=lambda r: r.records_per_s)[(len(runs) - 1) // 2]


def report(title: str, results: dict[Case, dict[str, list[Run]]], clients: list[str]) -> None:
    print()
    print(title)
    rows: list[tuple[str, ...]] = []
    for case, by_client in results.items():
        base = by_client.get(BASELINE)
        base_rate = median_run(base).records_per_s if base else float("nan")
        for client in clients:
            runs = by_client.get(client)
            if not runs:
                continue
            m = median_run(runs)
            rates = [r.records_per_s for r in runs]
            spread = f"{fmt(min(rates))}–{fmt(max(rates))}" if len(runs) > 1 else ""
            rows.append((
                case.label(), client, fmt(m.records_per_s), spread, fmt(m.mb_per_s, 1),
                f"{m.records_per_s / base_rate:.2f}",
                f"{m.records:,} in {m.window.seconds:.2f} s; {m.window.note()}",
            ))  # fmt: skip
    header = ("case", "client", "records/s", "range", "MB/s", f"× {BASELINE}", "median run")
    print_table(header, rows, right={2, 3, 4, 5})


# -- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, a fifth of the records")
    parser.add_argument("--repeat", type=int, help="rounds over all clients (default 3)")
    parser.add_argument("--small", type=int, help="records of 100 B to produce (default 200,000)")
    parser.add_argument("--large", type=int, help="records of 1 KiB to produce (default 80,000)")
    parser.add_argument("--read-small", type=int,
                        help="records of 100 B to consume (default 500,000)")  # fmt: skip
    parser.add_argument("--read-large", type=int,
                        help="records of 1 KiB to consume (default 200,000)")  # fmt: skip
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="record value sizes in bytes (default 100,1024)")  # fmt: skip
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help=f"comma-separated subset of {', '.join(CLIENTS)}")  # fmt: skip
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)),
                        help="producer batch.size values (default 16384,1000000)")  # fmt: skip
    parser.add_argument("--no-produce", action="store_true")
    parser.add_argument("--no-consume", action="store_true")
    parser.add_argument("--quiet-wait", type=float, default=3.0,
                        help="before each run, wait up to this many seconds for other "
                        "processes to go quiet (default 3; 0: do not wait)")  # fmt: skip
    parser.add_argument("--max-others", type=float, default=0.25,
                        help="run again when other processes used more than this share of "
                        "a CPU during a run (default 0.25)")  # fmt: skip
    parser.add_argument("--retries", type=int, default=3,
                        help="runs again at most, per run (default 3; 0: never)")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the data dir and broker log")
    args = parser.parse_args(argv)
    repeat: int = args.repeat or (1 if args.quick else 3)
    counts = {
        100: args.small or (40_000 if args.quick else 200_000),
        1024: args.large or (16_000 if args.quick else 80_000),
    }
    read_counts = {
        100: args.read_small or (100_000 if args.quick else 500_000),
        1024: args.read_large or (40_000 if args.quick else 200_000),
    }
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not set(sizes) <= set(SIZES):
        parser.error(f"--sizes: choose from {SIZES}")
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients {sorted(unknown)}; known: {', '.join(CLIENTS)}")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b]
    consumers = clients

    work = Path(tempfile.mkdtemp(prefix="samsa-clients-", dir=args.dir))
    broker = start_broker(work / "data")
    started = time.monotonic()
    assert broker.process is not None
    pid = broker.process.pid
    produced: dict[Case, dict[str, list[Run]]] = {}
    consumed: dict[Case, dict[str, list[Run]]] = {}

    def show(r: int, case: Case, run: Run) -> None:
        print(
            f"  round {r}  {case.label():<32} {run.client:<16} {run.records:>8,} rec "
            f"{run.window.seconds:6.2f} s {fmt(run.records_per_s):>8} rec/s "
            f"{fmt(run.mb_per_s, 1):>6} MB/s  {run.window.note()}",
            flush=True,
        )

    try:
        print(f"broker pid {pid} on {broker.bootstrap}, data in {broker.data_dir}")
        filled: dict[int, str] = {}
        if not args.no_consume:
            for size in sizes:
                filled[size] = f"filled-{size}-{uuid.uuid4().hex[:6]}"
                create_topic(broker.bootstrap, filled[size], 1)
                fill(broker.bootstrap, filled[size], os.urandom(size), read_counts[size])

        def produce_once(client: str, size: int, batch_size: int, payload: bytes) -> Run:
            topic = f"produce-{client}-{size}-{uuid.uuid4().hex[:6]}"
            create_topic(broker.bootstrap, topic, 1)
            wait_quiet(pid, args.quiet_wait)
            job = ProduceJob(broker.bootstrap, topic, payload, counts[size], batch_size, pid)
            window = PRODUCERS[client](job)
            written = high_watermark(broker.bootstrap, topic)
            if written != counts[size] + 1:
                raise RuntimeError(f"{client}: {written:,} records in {topic}, "
                                   f"expected {counts[size] + 1:,}")  # fmt: skip
            delete_topic(broker.bootstrap, topic)
            return Run(client, counts[size], size, window)

        def consume_once(client: str, size: int, topic: str) -> Run:
            wait_quiet(pid, args.quiet_wait)
            count = read_counts[size]
            window, value_bytes = CONSUMERS[client](ConsumeJob(broker.bootstrap, topic, count, pid))
            if value_bytes != count * size:
                raise RuntimeError(f"{client}: read {value_bytes:,} B of values from "
                                   f"{topic}, expected {count * size:,}")  # fmt: skip
            return Run(client, count, size, window)

        def measure(r: int, case: Case, attempt: Callable[[], Run]) -> Run:
            """One run; again (up to --retries times) while other processes took too much CPU."""
            for tries_left in range(args.retries, -1, -1):
                run = attempt()
                others = run.window.others_s / run.window.seconds
                if others <= args.max_others or not tries_left:
                    show(r, case, run)
                    return run
                print(f"  round {r}  {case.label():<32} {run.client:<16} again: other "
                      f"processes used {others:.0%} of a CPU", flush=True)  # fmt: skip
            raise AssertionError("unreachable")

        for r in range(repeat):
            for size in sizes if not args.no_produce else ():
                payload = os.urandom(size)
                for batch_size in batch_sizes:
                    case = Case("produce", size, batch_size)
                    for client in clients:
                        run = measure(r, case, functools.partial(
                            produce_once, client, size, batch_size, payload))  # fmt: skip
                        produced.setdefault(case, {}).setdefault(client, []).append(run)
            for size, topic in filled.items():
                case = Case("consume", size)
                for client in consumers:
                    run = measure(r, case, functools.partial(consume_once, client, size, topic))
                    consumed.setdefault(case, {}).setdefault(client, []).append(run)
        cores = os.cpu_count()
        machine = f"{cores} cores, client and broker share them"
        if produced:
            report(f"Produce (median of {repeat}; acks=all, idempotent, linger.ms {LINGER_MS}, "
                   f"no compression; {machine})", produced, clients)  # fmt: skip
        if consumed:
            report(f"Consume from offset 0 (median of {repeat}; assign(), no group; {machine})",
                   consumed, consumers)  # fmt: skip
        print()
        print(f"total {time.monotonic() - started:.0f} s")
    except BaseException:
        if broker.process is not None and broker.process.poll() is not None:
            print(f"the broker exited with {broker.process.returncode}", file=sys.stderr)
        args.keep = True  # the broker's log says what went wrong
        raise
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
