"""Spark data source throughput on local[2]: batch read, streaming read, batch write,
per-micro-batch overhead next to Spark's rate source → noop sink, and the cost of
building Arrow batches versus row tuples on an executor.

    python bench/spark_bench.py [--records N]

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

from samsa import Admin, Producer
from samsa.client.admin import NewTopic
from samsa.testing import start_broker


def _micro_batch_ms(query_progress: list[dict]) -> float:  # type: ignore[type-arg]
    times = [p["durationMs"]["triggerExecution"] for p in query_progress[2:]]
    return statistics.median(times) if times else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    n = parser.parse_args().records
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
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("bench", 2), NewTopic("bench-out", 2)])
        with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
            for i in range(n):
                producer.send("bench", b"x" * 100, key=b"%d" % i)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        samsa.spark.register(spark)

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
