"""Spark data source throughput on local[2]: batch read, streaming read, batch write,
per-micro-batch overhead next to Spark's rate source → noop sink, and the cost of
building Arrow batches versus row tuples on an executor.

    python bench/spark_bench.py [--records N]
    python bench/spark_bench.py --versus-parquet [--writes-only] [--records N]
    python bench/spark_bench.py --micro-batches [--seconds S]
    python bench/spark_bench.py --eos-throughput [--records N] [--per-trigger M]

``--task-steps`` times, without Spark, what one write task of the exactly-once sink
does (new producer, init_transactions, the group's offset, 50 sends, the offsets,
flush; then the driver's EndTxn) with and without asking for the topic's partitions
first, and one read task (``read_range`` of 50 records): median and mean of 10 after 2.

``--micro-batches`` measures only the per-micro-batch times, 100 rows a batch from a
2-partition topic: samsa → noop, Spark's ``rate`` source → noop, a Python data
source with no client (``counter``, 100 rows in 2 tasks a batch) → noop, and samsa → samsa
through the exactly-once stream writer, each run for ``--seconds``; it prints the
median of each phase Spark reports (``durationMs``: latestOffset and getBatch are
the source's planning on the driver, addBatch runs the tasks and the sink's commit).

``--eos-throughput`` measures only the exactly-once stream samsa → samsa: ``--records``
rows of 100 B pre-filled, Trigger.AvailableNow with ``--per-trigger`` rows a micro-batch
at most (after a warm-up query of 1 000 rows), rows/s over the whole query and over its
micro-batches, the output counted with a read_committed consumer.

``--versus-parquet`` measures only reads and writes next to Parquet in the same
session, for 100 B and 1 KiB values: a batch read of ``sum(length(value))`` from a
samsa topic and from a Parquet copy of the same rows, and a write of one generated
DataFrame (key, value) to a samsa topic and as Parquet; each pair back to back,
each figure the best of ``--runs`` (after one warm-up run of each).

Starts its own broker in a temporary directory; prints one line per figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from samsa import Admin, Producer
from samsa.client.admin import NewTopic
from samsa.testing import start_broker


def _micro_batch_ms(query_progress: list[dict]) -> float:  # type: ignore[type-arg]
    times = [p["durationMs"]["triggerExecution"] for p in query_progress[2:]]
    return statistics.median(times) if times else float("nan")


PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def _phases(query_progress: list[dict]) -> dict[str, float]:  # type: ignore[type-arg]
    """Median ms of each phase of the micro-batches with rows, after the first three
    (warm-up: Python workers start)."""
    later = [p for p in query_progress if p["numInputRows"]][3:]
    result = {}
    for phase in ("triggerExecution", *PHASES):
        values = [p["durationMs"].get(phase, 0) for p in later]
        result[phase] = statistics.median(values) if values else float("nan")
    return result


class _Steps:
    """Milliseconds of named steps, run after run."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}
        self._step = ""
        self._start = 0.0

    def __call__(self, step: str) -> _Steps:
        self._step = step
        return self

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = (time.perf_counter() - self._start) * 1000
        self.ms.setdefault(self._step, []).append(elapsed)

    def medians(self) -> str:
        """Each step's median / mean ms of the runs after the first two."""
        return ", ".join(
            f"{k} {statistics.median(v[2:]):.1f} / {statistics.mean(v[2:]):.1f}"
            for k, v in self.ms.items()
        )


def _write_task(bootstrap: str, name: str, batch: int, ask_first: bool, steps: _Steps) -> None:
    """What a stream write task and the driver's commit do, step by step."""
    from samsa.client.producer import ConsumerGroupMetadata
    from samsa.spark.transactions import end_transactions, prepared_transaction
    from samsa.types import TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name})
    if ask_first:
        with steps("partitions_for"):
            producer.partitions_for("steps-out")
    with steps("init_transactions"):
        producer.init_transactions()
    with steps("group offset"), Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.list_group_offsets(name, require_stable=True)
    producer.begin_transaction()
    with steps("50 sends"):
        for _ in range(50):
            producer.send("steps-out", b"x" * 100, key=b"k", partition=0)
    with steps("send_offsets"):
        offsets = {TopicPartition("steps-out", 0): batch + 1}
        producer.send_offsets_to_transaction(offsets, ConsumerGroupMetadata(name))
    with steps("flush"):
        producer.flush()
    prepared = prepared_transaction(producer)
    producer.close()
    with steps("EndTxn (driver)"):
        end_transactions({"bootstrap.servers": bootstrap}, [prepared], commit=True)


def task_steps(bootstrap: str) -> None:
    """Median ms of each step of a stream write task and of a read task, without Spark."""
    from samsa.spark.offsets import OffsetRange
    from samsa.spark.options import SourceOptions
    from samsa.spark.reader import read_range
    from samsa.spark.rows import source_schema

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("steps-in", 2), NewTopic("steps-out", 2)])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i in range(1000):
            producer.send("steps-in", b"x" * 100, key=b"%d" % i, partition=0)
    for ask_first in (False, True):
        steps = _Steps()
        for batch in range(12):
            _write_task(bootstrap, f"steps-{ask_first}", batch, ask_first, steps)
        what = "write task, partitions asked first" if ask_first else "write task"
        print(f"{what}: {steps.medians()} ms")
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": "steps-in"}, streaming=True
    )
    schema = source_schema(False)
    steps = _Steps()
    for i in range(12):
        with steps("read_range of 50 records"):
            for _ in read_range(options, schema, OffsetRange("steps-in", 0, i * 50, i * 50 + 50)):
                pass
    print(f"read task: {steps.medians()} ms")


def _counter_source() -> type:
    """A Python streaming data source with no client at all (``counter``): offsets are a
    clock of 100 rows a call, a task yields its rows as one Arrow batch. What a micro-batch
    of a Python data source costs in Spark itself, the floor under samsa's."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class CounterReader(DataSourceStreamReader):
        def __init__(self) -> None:
            self.end = 0

        def initialOffset(self) -> dict[str, int]:
            return {"offset": 0}

        def latestOffset(self) -> dict[str, int]:
            self.end += 100
            return {"offset": self.end}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            half = (start["offset"] + end["offset"]) // 2
            return [InputPartition((start["offset"], half)), InputPartition((half, end["offset"]))]

        def read(self, partition: InputPartition) -> object:
            first, last = partition.value  # type: ignore[attr-defined]
            yield pa.RecordBatch.from_pydict({"value": pa.array(range(first, last), pa.int64())})

    class CounterSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "counter"

        def schema(self) -> str:
            return "value bigint"

        def streamReader(self, schema: object) -> DataSourceStreamReader:
            return CounterReader()

    return CounterSource


def _ready_arrow_source() -> type:
    """A Python batch data source with no client (``readyarrow``): each of 2 tasks yields
    ready-made Arrow batches of 10,000 rows with the samsa source's columns (``size``-byte
    values), built once per task. What any Python data source costs Spark to read: the
    ceiling over samsa's read."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from samsa.spark.rows import source_schema

    chunk = 10_000

    class ReadyReader(DataSourceReader):
        def __init__(self, rows: int, size: int) -> None:
            self.rows, self.size = rows, size

        def partitions(self) -> list[InputPartition]:
            half = self.rows // 2
            return [InputPartition(half), InputPartition(self.rows - half)]

        def read(self, partition: InputPartition) -> object:
            rows = partition.value  # type: ignore[attr-defined]
            n = min(chunk, rows)
            keys = pa.array([b"%d" % i for i in range(n)], pa.binary())
            offsets = np.arange(n + 1, dtype=np.int32) * self.size
            values = pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"x" * (n * self.size))]
            )
            batch = pa.RecordBatch.from_arrays(
                [keys, values, pa.array(["bench"] * n), pa.array(np.zeros(n, np.int32)),
                 pa.array(np.arange(n, dtype=np.int64)),
                 pa.array(np.full(n, 1_700_000_000_000_000, np.int64), pa.timestamp("us", "UTC")),
                 pa.array(np.zeros(n, np.int32))],
                names=["key", "value", "topic", "partition", "offset", "timestamp",
                       "timestampType"],
            )  # fmt: skip
            for first in range(0, rows, n):
                yield batch.slice(0, min(n, rows - first))

    class ReadySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "readyarrow"

        def schema(self) -> object:
            return source_schema(False)

        def reader(self, schema: object) -> DataSourceReader:
            return ReadyReader(int(self.options["rows"]), int(self.options["size"]))

    return ReadySource


def _discard_sink() -> type:
    """A Python sink with no client (``discardarrow``): each task counts the Arrow batches
    Spark hands it. What any Python sink costs Spark to feed: the ceiling over samsa's
    write."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class DiscardWriter(DataSourceArrowWriter):
        def write(self, iterator: object) -> WriterCommitMessage:
            for _ in iterator:  # type: ignore[attr-defined]
                pass
            return WriterCommitMessage()

    class DiscardSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "discardarrow"

        def writer(self, schema: object, overwrite: bool) -> DataSourceArrowWriter:
            return DiscardWriter()

    return DiscardSink


def micro_batches(spark: object, bootstrap: str, work: Path, seconds: float) -> None:
    """Per-micro-batch phase times, samsa → noop, rate → noop, samsa → samsa (exactly-once)."""
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("mb-in", 2), NewTopic("mb-out", 2)])
    rows = int(seconds * 1000)  # enough for 100-row batches at up to 10 a second
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i in range(rows):
            producer.send("mb-in", b"x" * 100, key=b"%d" % i)
    samsa_in = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "mb-in")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
    )
    rate_in = spark.readStream.format("rate").option("rowsPerSecond", "100").load()
    spark.dataSource.register(_counter_source())
    runs = {
        "counter -> noop": spark.readStream.format("counter").load().writeStream.format("noop"),
        "samsa -> noop": samsa_in.writeStream.format("noop"),
        "rate -> noop": rate_in.writeStream.format("noop"),
        "samsa -> samsa": samsa_in.selectExpr("key", "value")
        .writeStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "mb-out"),
    }
    print("median ms a micro-batch  " + "  ".join(["trigger", *PHASES]))
    for name, writer in runs.items():
        query = (
            writer.option("checkpointLocation", str(work / f"cp-{name.replace(' ', '')}"))
            .trigger(processingTime="0 seconds")
            .start()
        )
        time.sleep(seconds)
        query.stop()
        phases = _phases(query.recentProgress)
        batches = sum(1 for p in query.recentProgress if p["numInputRows"])
        print(f"{name:<16} ({batches:>3} batches) "
              + "  ".join(f"{phases[k]:.0f}" for k in ("triggerExecution", *PHASES)))  # fmt: skip


def eos_throughput(spark: object, bootstrap: str, work: Path, n: int, per_trigger: int) -> None:
    """Rows/s of a streaming query samsa → samsa through the exactly-once sink: ``n``
    rows of 100 B pre-filled, Trigger.AvailableNow, ``per_trigger`` rows a micro-batch
    at most; the output counted by a read_committed consumer."""
    from pyspark.sql import SparkSession

    from samsa.client.consumer import Consumer
    from samsa.types import TopicPartition

    assert isinstance(spark, SparkSession)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("eos-in", 2), NewTopic("eos-out", 2)])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i in range(n):
            producer.send("eos-in", b"x" * 100, key=b"%d" % i)

    def run(source: str, sink: str) -> Any:
        query = (
            spark.readStream.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(per_trigger))
            .load()
            .selectExpr("key", "value")
            .writeStream.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(work / f"cp-{source}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return query

    # Warm-up: the broker creates its transaction-state and group-offset topics at their
    # first use (seconds), and Spark starts its Python workers.
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("eos-warm", 2), NewTopic("eos-warm-out", 2)])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i in range(1000):
            producer.send("eos-warm", b"x" * 100, key=b"%d" % i)
    run("eos-warm", "eos-warm-out")
    load = os.getloadavg()[0]
    t = time.perf_counter()
    query = run("eos-in", "eos-out")
    seconds = time.perf_counter() - t
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    committed = 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([TopicPartition("eos-out", 0), TopicPartition("eos-out", 1)])
    consumer.seek_to_beginning()
    deadline = time.monotonic() + 60
    while committed < n and time.monotonic() < deadline:
        committed += len(consumer.poll(1.0, 10_000))
    consumer.close()
    print(f"exactly-once samsa → samsa  {n / seconds:>10,.0f} rows/s  ({n} rows of 100 B in "
          f"{seconds:.1f} s, {len(batches)} micro-batches of at most {per_trigger}, "
          f"read_committed count {committed}, load average {load:.1f} → "
          f"{os.getloadavg()[0]:.1f})")  # fmt: skip
    in_batches = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    print(f"  in its micro-batches: {n / in_batches:,.0f} rows/s (the query's start left out)")
    for phase in ("triggerExecution", "addBatch", "commitOffsets"):
        times = [p["durationMs"].get(phase, 0) for p in batches]
        print(f"  {phase}: ms a micro-batch {times}")


def _best_rate(rows: int, runs: int, work: object) -> float:
    """Rows/s of the fastest of ``runs`` calls of ``work`` (after one unmeasured call)."""
    assert callable(work)
    work()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t)
    return rows / best


def decode_rates(size: int, rows: int = 100_000, *, headers: int = 0) -> tuple[float, float, float]:
    """Executor-side rows/s, fetched batches → one Arrow batch, for ``size``-byte values
    in batches of 16 KiB (the producer's default ``batch.size``), 64 to a fetch: through
    consumer records (the reader's former path), and decoded straight into columns (its
    path now) with the C helper's scan and with the numpy one."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from samsa.client.consumer.types import ConsumerRecord
    from samsa.records import RecordBatchBuilder, read_batch
    from samsa.records.reader import record_tuples
    from samsa.spark import columns
    from samsa.spark.columns import ArrowBatchDecoder
    from samsa.spark.rows import ArrowRows, source_schema
    from samsa.types import TopicPartition

    per_batch = max(1, 16384 // (size + 12))
    batches = []
    for first in range(0, rows, per_batch):
        builder = RecordBatchBuilder(base_offset=first)
        for i in range(first, min(rows, first + per_batch)):
            builder.append(
                b"x" * size, key=b"%d" % i, timestamp=1_700_000_000_000 + i,
                headers=[(f"header-{h}", b"%d" % i) for h in range(headers)],
            )  # fmt: skip
        batches.append(read_batch(builder.build()))
    tp = TopicPartition("bench", 0)

    def via_records() -> None:
        arrow_rows = ArrowRows(source_schema(False))
        for batch in batches:
            arrow_rows.extend(
                ConsumerRecord("bench", 0, o, ts, 0, k, v, h, -1, len(k or b""), len(v or b""))
                for o, ts, k, v, h in record_tuples(batch)
            )
        arrow_rows.take()

    decoder = ArrowBatchDecoder(to_arrow_schema(source_schema(headers > 0), timezone="UTC"))

    # A fetch brings up to max.partition.fetch.bytes (1 MiB): 64 batches of 16 KiB.
    fetches = [batches[i : i + 64] for i in range(0, len(batches), 64)]

    def via_columns() -> None:
        pa.concat_batches([decoder(tp, fetch, 0).batch for fetch in fetches])  # type: ignore[union-attr]

    kept = columns._scan
    try:
        with_c = float("nan")  # without the C helper (built by setup.py when it can be)
        if columns._native is not None:
            columns._scan = columns._scan_native
            with_c = _best_rate(rows, 5, via_columns)
        columns._scan = columns._scan_numpy
        with_numpy = _best_rate(rows, 5, via_columns)
    finally:
        columns._scan = kept
    return _best_rate(rows, 3, via_records), with_c, with_numpy


def encode_rates(size: int, rows: int = 100_000, *, headers: int = 0) -> tuple[float, float]:
    """The sink's rows/s, Arrow batches of 10,000 (key, ``size``-byte value) rows →
    record batches of 512 KiB for 2 partitions, with the C helper and with numpy."""
    import pyarrow as pa

    from samsa.spark import batches
    from samsa.spark.batches import ArrowBatchEncoder

    n = 10_000
    values = pa.array([b"x" * size] * n)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    header_column = (
        pa.array([[{"key": f"header-{h}", "value": b"%d" % i} for h in range(headers)]
                  for i in range(n)], header_type)
        if headers else None
    )  # fmt: skip
    keys = pa.array([b"%d" % i for i in range(n)])
    encoder = ArrowBatchEncoder(batch_size=512 * 1024, max_request_size=1 << 20,
                                buffer_memory=32 << 20)  # fmt: skip

    def encode() -> None:
        for _ in range(rows // n):
            for _ in encoder.encode(
                "bench", 2, values=values, keys=keys, headers=header_column, timestamp=1
            ):
                pass

    kept = batches._encode_in_c
    try:
        with_c = float("nan")
        if batches._native is not None:
            batches._encode_in_c = True
            with_c = _best_rate(rows, 5, encode)
        batches._encode_in_c = False
        with_numpy = _best_rate(rows, 5, encode)
    finally:
        batches._encode_in_c = kept
    return with_c, with_numpy


def print_decode_rates() -> None:
    for size, headers in ((100, 0), (1024, 0), (100, 2)):
        records, with_c, with_numpy = decode_rates(size, headers=headers)
        print(f"decode {size:>4} B, {headers} headers  records → Arrow {records:>10,.0f} "
              f"rows/s  batches → Arrow columns: C {with_c:>10,.0f} rows/s, "
              f"numpy {with_numpy:>10,.0f} rows/s")  # fmt: skip
    for size, headers in ((100, 0), (1024, 0), (100, 2)):
        with_c, with_numpy = encode_rates(size, headers=headers)
        print(f"encode {size:>4} B, {headers} headers  Arrow → record batches: "
              f"C {with_c:>10,.0f} rows/s, numpy {with_numpy:>10,.0f} rows/s")  # fmt: skip


def versus_parquet(
    spark: object,
    bootstrap: str,
    work: Path,
    n: int,
    runs: int,
    *,
    writes_only: bool = False,
    sink_options: dict[str, str] | None = None,
) -> None:
    """Read and write rows/s of the samsa source next to Parquet, same session."""
    if not writes_only:
        print_decode_rates()
    for size in (100, 1024):
        rows = n if size == 100 else max(n // 3, 1)
        _versus_parquet_at(
            spark, bootstrap, work, size=size, rows=rows, runs=runs, writes_only=writes_only,
            sink_options=sink_options or {},
        )  # fmt: skip


def _versus_parquet_at(
    spark: object,
    bootstrap: str,
    work: Path,
    *,
    size: int,
    rows: int,
    runs: int,
    writes_only: bool,
    sink_options: dict[str, str],
) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    topic = f"vs-parquet-{size}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2), NewTopic(f"{topic}-out", 2)])
    if not writes_only:
        with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
            for i in range(rows):
                producer.send(topic, b"x" * size, key=b"%d" % i)
    source = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    parquet = str(work / f"{topic}.parquet")
    if not writes_only:
        source.write.parquet(parquet)

    def read_samsa() -> None:
        source.selectExpr("sum(length(value))").collect()

    def read_parquet() -> None:
        spark.read.parquet(parquet).selectExpr("sum(length(value))").collect()

    spark.dataSource.register(_ready_arrow_source())
    ready = (
        spark.read.format("readyarrow").option("rows", str(rows)).option("size", str(size)).load()
    )

    def read_ready_arrow() -> None:
        ready.selectExpr("sum(length(value))").collect()

    generated = spark.range(rows, numPartitions=2).selectExpr(
        "cast(cast(id as string) as binary) as key",
        f"cast(repeat('x', {size}) as binary) as value",
    )
    writes = iter(range(1_000_000))

    def write_samsa() -> None:
        writer = (
            generated.write.mode("append")
            .format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", f"{topic}-out")
        )
        for name, value in sink_options.items():
            writer = writer.option(name, value)
        writer.save()

    def write_parquet() -> None:
        generated.write.parquet(str(work / f"{topic}-out-{next(writes)}.parquet"))

    spark.dataSource.register(_discard_sink())

    def write_discard() -> None:
        generated.write.mode("append").format("discardarrow").save()

    figures = []
    if not writes_only:
        figures.append(("read ", (_best_rate(rows, runs, read_samsa),
                                  _best_rate(rows, runs, read_parquet))))  # fmt: skip
        ceiling = _best_rate(rows, runs, read_ready_arrow)
        print(f"read  {size:>4} B  a Python source of ready-made Arrow batches "
              f"{ceiling:>9,.0f} rows/s (the ceiling of any Python source)")  # fmt: skip
    figures.append(("write", (_best_rate(rows, runs, write_samsa),
                              _best_rate(rows, runs, write_parquet))))  # fmt: skip
    ceiling = _best_rate(rows, runs, write_discard)
    print(f"write {size:>4} B  a Python sink that only takes the Arrow batches "
          f"{ceiling:>9,.0f} rows/s (the ceiling of any Python sink)")  # fmt: skip
    for what, (ours, theirs) in figures:
        print(f"{what} {size:>4} B  samsa {ours:>9,.0f} rows/s  parquet {theirs:>9,.0f} "
              f"rows/s  ratio {ours / theirs:.2f}  ({rows} rows)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--versus-parquet", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--micro-batches", action="store_true")
    parser.add_argument("--task-steps", action="store_true")
    parser.add_argument(
        "--eos-throughput",
        action="store_true",
        help="only the exactly-once stream samsa → samsa: rows/s of --records 100 B rows",
    )
    parser.add_argument(
        "--per-trigger",
        type=int,
        default=100_000,
        help="with --eos-throughput: maxOffsetsPerTrigger",
    )
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument(
        "--codec",
        action="store_true",
        help="only the executor-side decode and encode (no Spark, no broker): C and numpy",
    )
    parser.add_argument(
        "--writes-only", action="store_true", help="with --versus-parquet: only the writes"
    )
    parser.add_argument(
        "--sink-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --versus-parquet: an option of the samsa writes (e.g. kafka.batch.size=…)",
    )
    args = parser.parse_args()
    n = args.records
    if args.codec:
        print_decode_rates()
        return
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"})
    from pyspark.sql import SparkSession
    from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches

    import samsa.spark
    from samsa.client.consumer import Consumer
    from samsa.spark.rows import ArrowRows, record_tuple, source_schema
    from samsa.spark.source import SamsaDataSource
    from samsa.types import TopicPartition

    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    broker = start_broker(work / "data")
    bootstrap = broker.bootstrap
    try:
        if args.task_steps:
            task_steps(bootstrap)
            return
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("bench", 2), NewTopic("bench-out", 2)])
        with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
            for i in range(0 if args.micro_batches or args.eos_throughput else n):
                producer.send("bench", b"x" * 100, key=b"%d" % i)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        samsa.spark.register(spark)
        if args.eos_throughput:
            eos_throughput(spark, bootstrap, work, n, args.per_trigger)
            spark.stop()
            return
        if args.micro_batches:
            micro_batches(spark, bootstrap, work, args.seconds)
            spark.stop()
            return
        if args.versus_parquet:
            sink_options = dict(option.split("=", 1) for option in args.sink_option)
            versus_parquet(
                spark, bootstrap, work, n, args.runs, writes_only=args.writes_only,
                sink_options=sink_options,
            )  # fmt: skip
            spark.stop()
            return

        def source() -> object:
            return (
                spark.read.format("samsa")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "bench")
                .load()
            )

        source().selectExpr("sum(length(value))").collect()  # warm the Python workers
        t = time.perf_counter()
        source().selectExpr("sum(length(value))").collect()  # type: ignore[attr-defined]
        print(f"batch read      {n / (time.perf_counter() - t):>10,.0f} rows/s ({n} rows)")

        t = time.perf_counter()
        (
            source()
            .selectExpr("key", "value")  # type: ignore[attr-defined]
            .write.mode("append")
            .format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "bench-out")
            .save()
        )
        print(f"batch write     {n / (time.perf_counter() - t):>10,.0f} rows/s (read + write)")

        stream = (
            spark.readStream.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "bench")
            .option("startingOffsets", "earliest")
        )
        t = time.perf_counter()
        stream.load().writeStream.format("noop").option(
            "checkpointLocation", str(work / "cp-read")
        ).trigger(availableNow=True).start().awaitTermination()
        print(f"streaming read  {n / (time.perf_counter() - t):>10,.0f} rows/s (to noop)")

        small = stream.option("maxOffsetsPerTrigger", "100").load()
        query = (
            small.writeStream.format("noop")
            .option("checkpointLocation", str(work / "cp-small"))
            .trigger(processingTime="0 seconds")
            .start()
        )
        time.sleep(20)
        query.stop()
        samsa_ms = _micro_batch_ms(query.recentProgress)
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", "100")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(work / "cp-rate"))
            .trigger(processingTime="0 seconds")
            .start()
        )
        time.sleep(20)
        query.stop()
        rate_ms = _micro_batch_ms(query.recentProgress)
        print(f"micro-batch     samsa → noop {samsa_ms:.0f} ms, rate → noop {rate_ms:.0f} ms "
              "(median triggerExecution, 100 rows a batch)")  # fmt: skip

        consumer = Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False})
        consumer.assign([TopicPartition("bench", 0)])
        consumer.seek_to_beginning()
        records = []
        while len(records) < 50_000:
            records += consumer.poll(1.0, 10_000)
        consumer.close()
        schema = source_schema(False)
        t = time.perf_counter()
        rows = ArrowRows(schema)
        rows.extend(records)
        rows.take()
        arrow_s = time.perf_counter() - t
        t = time.perf_counter()
        tuples = iter([record_tuple(r, False) for r in records])
        list(records_to_arrow_batches(tuples, 10_000, schema, SamsaDataSource({})))
        tuple_s = time.perf_counter() - t
        print(f"executor rows   arrow {len(records) / arrow_s:,.0f} rows/s, tuples "
              f"{len(records) / tuple_s:,.0f} rows/s (records → Arrow for Spark)")  # fmt: skip
        spark.stop()
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
