"""A driver for a Spark standalone cluster, run as its own process by the cluster tests.

    python -m tests.spark.cluster_driver MASTER EXECUTORS read BOOTSTRAP TOPIC OUT
    python -m tests.spark.cluster_driver MASTER EXECUTORS copy BOOTSTRAP SOURCE SINK CHECKPOINT

connects to MASTER (``spark://host:port``) and waits until EXECUTORS executors
have registered, so the tasks spread over the workers. ``read`` reads TOPIC with
the batch reader (four tasks at least) and writes the values it got, in hex, one
a line, to OUT. ``copy`` copies SOURCE's values to SINK with the stream reader
and the exactly-once stream writer, 100 offsets a micro-batch, until everything
there was at the start is copied (Trigger.AvailableNow). Executors import samsa
from the PYTHONPATH this process has (``spark.executorEnv.PYTHONPATH``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

import samsa.spark

EXECUTORS_TIMEOUT_S = 300


def _session(master: str, executors: int) -> SparkSession:
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"})
    spark = (
        SparkSession.builder.master(master)
        .appName("samsa-cluster-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(executors))
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)
    deadline = time.monotonic() + EXECUTORS_TIMEOUT_S
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()  # type: ignore[union-attr]
    while status.size() < executors + 1:  # the driver's block manager counts too
        if time.monotonic() > deadline:
            raise SystemExit(f"driver: only {status.size() - 1} of {executors} executors came")
        time.sleep(0.2)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()  # type: ignore[union-attr]
    print(f"driver: {executors} executors registered", flush=True)
    return spark


def read(spark: SparkSession, bootstrap: str, topic: str, out: str) -> None:
    rows = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", "4")
        .load()
        .select("value")
        .collect()
    )
    Path(out).write_text("".join(bytes(r.value).hex() + "\n" for r in rows))


def copy(spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    query = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"driver: the query failed: {query.exception()}")


def main(args: list[str]) -> None:
    master, executors, mode, *rest = args
    spark = _session(master, int(executors))
    if mode == "read":
        read(spark, *rest)
    else:
        copy(spark, *rest)
    spark.stop()
    print("driver: done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
