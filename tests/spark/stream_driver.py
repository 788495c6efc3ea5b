"""A streaming query run as its own process, so a test can kill -9 it mid-batch.

    python -m tests.spark.stream_driver BOOTSTRAP SOURCE SINK CHECKPOINT MODE

copies SOURCE's values to SINK through the samsa stream reader and writer, 100
offsets a micro-batch. MODE ``run`` keeps going until killed; ``finish`` stops
when everything available at start is copied (Trigger.AvailableNow).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

import samsa.spark


def main(bootstrap: str, source: str, sink: str, checkpoint: str, mode: str) -> None:
    os.environ.update({"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"})
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)
    stream = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
    )
    writer = (
        stream.writeStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.transaction.timeout.ms", "10000")
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
    )
    if mode == "finish":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        writer.trigger(processingTime="0 seconds").start().awaitTermination()
    print("driver: done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
