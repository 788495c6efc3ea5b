"""A streaming copy whose write tasks fail on their first attempt, in its own process.

    python -m tests.spark.retry_driver BOOTSTRAP SOURCE SINK CHECKPOINT MARKER_DIR FAIL_AT

copies SOURCE's values to the same partition of SINK (Trigger.AvailableNow) through the samsa stream
reader and the exactly-once writer on ``local[2,4]``: up to four attempts per
task (plain ``local[2]`` gives up after the first failure, so the shared test
session cannot retry a task). A UDF in front of the writer raises on the first
attempt of every task at the record with offset FAIL_AT, once rows before it
are in SINK's log in the writer's open transaction; each such failure leaves a
file in MARKER_DIR. Exits 0 when the query finished without error.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

import samsa.spark
from samsa import Admin
from samsa.client.admin import OffsetSpec
from samsa.types import TopicPartition

ROWS_PER_ARROW_BATCH = 20


def _wait_for_open_transaction(bootstrap: str, tp: TopicPartition) -> None:
    """Until the writer's open transaction has rows in ``tp`` (its end offset moved), at
    most 30 s: then the failure leaves written, uncommitted rows behind."""
    deadline = time.monotonic() + 30
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        while time.monotonic() < deadline:
            if admin.list_offsets({tp: int(OffsetSpec.LATEST)})[tp].offset > 0:
                return
            time.sleep(0.05)


def main(args: list[str]) -> None:
    bootstrap, source, sink, checkpoint, marker_dir, fail_at = args
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"})
    spark = (
        SparkSession.builder.master("local[2,4]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Small Arrow batches reach the writer while the UDF is still running.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ROWS_PER_ARROW_BATCH))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)
    markers = Path(marker_dir)

    @udf(BinaryType(), useArrow=False)
    def fail_first_attempt(value: bytes, partition: int, offset: int) -> bytes:
        context = TaskContext.get()
        if context is not None and context.attemptNumber() == 0 and offset == int(fail_at):
            _wait_for_open_transaction(bootstrap, TopicPartition(sink, partition))
            (markers / f"{partition}-{uuid.uuid4().hex}").touch()
            raise RuntimeError(f"first attempt of the task of {source}-{partition} fails")
        return value

    stream = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.select(
            "key", "partition", fail_first_attempt("value", "partition", "offset").alias("value")
        )
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
    print("driver: done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:7])
