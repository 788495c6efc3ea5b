"""The Spark Structured Streaming job: per-page click counts over 1-minute windows.

Clicks are read from a samsa topic with the ``samsa`` data source, parsed from
JSON, and counted per page in 1-minute event-time windows with a 10-second
watermark. Two queries share that plan, each writing the final count of a window
once the watermark has passed its end (output mode ``append``, the one PySpark's
Python data sources support):

- to a samsa topic as JSON keyed by page, through the exactly-once stream writer;
- to Parquet files.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

CLICK_SCHEMA = "user STRING, page STRING, ts LONG"
WATERMARK = "10 seconds"


def window_counts(clicks: DataFrame) -> DataFrame:
    """Rows of the samsa source → (window_start, window_end, page, clicks)."""
    events = (
        clicks.select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("e"))
        .select("e.*")
        .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
    )
    return (
        events.withWatermark("event_time", WATERMARK)
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            F.col("count").alias("clicks"),
        )
    )


def start(
    spark: SparkSession,
    bootstrap: str,
    clicks_topic: str,
    counts_topic: str,
    work_dir: Path,
    *,
    available_now: bool = False,
) -> list[StreamingQuery]:
    """Start both queries; checkpoints and Parquet files go under ``work_dir``."""
    clicks = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", clicks_topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    counts = window_counts(clicks)
    to_topic = (
        counts.select(
            F.col("page").cast("binary").alias("key"),
            F.to_json(
                F.struct(
                    F.date_format("window_start", "yyyy-MM-dd HH:mm").alias("window"),
                    "page",
                    "clicks",
                )
            ).alias("value"),
        )
        .writeStream.format("samsa")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", counts_topic)
        .option("checkpointLocation", str(work_dir / "checkpoints" / "topic"))
    )
    to_parquet = (
        counts.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(work_dir / "parquet"))
        .option("checkpointLocation", str(work_dir / "checkpoints" / "parquet"))
    )
    if available_now:
        to_topic, to_parquet = (
            to_topic.trigger(availableNow=True),
            to_parquet.trigger(availableNow=True),
        )
    else:
        to_topic = to_topic.trigger(processingTime="2 seconds")
        to_parquet = to_parquet.trigger(processingTime="10 seconds")
    return [to_topic.queryName("page_counts_topic").start(),
            to_parquet.queryName("page_counts_parquet").start()]  # fmt: skip
