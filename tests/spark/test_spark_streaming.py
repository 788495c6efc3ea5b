"""Streaming reads and the exactly-once stream writer: real PySpark, real broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from tests.spark.conftest import new_topic, produce, spark_env

from samsa import Admin
from samsa.client.admin import OffsetSpec
from samsa.testing import BrokerProcess
from samsa.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _stream(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _to_parquet(df: DataFrame, directory: Path) -> tuple[str, list[int]]:
    """Run until caught up (Trigger.AvailableNow) into Parquet files under ``directory``
    (its checkpoint beside them); returns (the files' path, the micro-batch sizes)."""
    query = (
        df.selectExpr("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(directory / "out"))
        .option("checkpointLocation", str(directory / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(120):
        query.stop()
        raise AssertionError(f"the query did not catch up in 120 s: {query.lastProgress}")
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    return str(directory / "out"), sizes


def _read_committed(spark: SparkSession, bootstrap: str, topic: str) -> list[bytes]:
    rows = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("value")
        .collect()
    )
    return sorted(bytes(r.value) for r in rows)


def test_max_offsets_per_trigger_caps_each_micro_batch(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=3)
    for p, count in enumerate((40, 35, 25)):
        produce(samsa_broker.bootstrap, topic, [b"%d-%d" % (p, i) for i in range(count)], p)
    df = _stream(spark, samsa_broker.bootstrap, topic, maxOffsetsPerTrigger="30")
    name, sizes = _to_parquet(df, tmp_path)
    assert sizes == [30, 30, 30, 10]
    rows = spark.read.parquet(name).collect()
    assert len({(r.partition, r.offset) for r in rows}) == len(rows) == 100


def test_restart_from_the_checkpoint_reads_on_without_duplicates_or_gaps(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    source = new_topic(samsa_broker.bootstrap, partitions=2)
    sink = new_topic(samsa_broker.bootstrap, partitions=2)
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        (
            _stream(spark, samsa_broker.bootstrap, source, maxOffsetsPerTrigger="25")
            .selectExpr("key", "value")
            .writeStream.format("samsa")
            .option("kafka.bootstrap.servers", samsa_broker.bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
            .awaitTermination(120)
        )

    first = [b"a%03d" % i for i in range(60)]
    produce(samsa_broker.bootstrap, source, first)
    run()
    assert _read_committed(spark, samsa_broker.bootstrap, sink) == first
    second = [b"b%03d" % i for i in range(60)]
    produce(samsa_broker.bootstrap, source, second)
    run()
    assert _read_committed(spark, samsa_broker.bootstrap, sink) == first + second


def test_partitions_added_to_a_topic_are_read_from_their_start(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = new_topic(samsa_broker.bootstrap, partitions=1)
    produce(samsa_broker.bootstrap, topic, [b"old-%d" % i for i in range(5)], 0)
    df = _stream(spark, samsa_broker.bootstrap, topic)
    _to_parquet(df, tmp_path)
    with Admin({"bootstrap.servers": samsa_broker.bootstrap}) as admin:
        admin.create_partitions({topic: 2})
    produce(samsa_broker.bootstrap, topic, [b"new-%d" % i for i in range(7)], 1)
    name, sizes = _to_parquet(df, tmp_path)
    assert sum(sizes) == 7
    rows = spark.read.parquet(name).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, i) for i in range(5)] + [
        (1, i) for i in range(7)
    ]


def _stream_after_deletion(
    spark: SparkSession, bootstrap: str, tmp_path: Path, fail_on_data_loss: str
) -> tuple[DataFrame, Path]:
    """A query that read offsets 0..19, then offsets 20..59 are deleted before it goes on."""
    topic = new_topic(bootstrap)
    produce(bootstrap, topic, [b"%03d" % i for i in range(20)])
    df = _stream(spark, bootstrap, topic, failOnDataLoss=fail_on_data_loss)
    _to_parquet(df, tmp_path)
    produce(bootstrap, topic, [b"%03d" % i for i in range(20, 100)])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 60})
    return df, tmp_path


def test_records_deleted_under_a_stream_fail_it_when_fail_on_data_loss_is_true(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    df, directory = _stream_after_deletion(spark, samsa_broker.bootstrap, tmp_path, "true")
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        _to_parquet(df, directory)


def test_records_deleted_under_a_stream_are_skipped_when_fail_on_data_loss_is_false(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    df, directory = _stream_after_deletion(spark, samsa_broker.bootstrap, tmp_path, "false")
    name, _ = _to_parquet(df, directory)
    offsets = sorted(r.offset for r in spark.read.parquet(name).collect())
    assert offsets == list(range(20)) + list(range(60, 100))  # the first run's, then past 59


def _start_driver(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """tests/spark/stream_driver.py with ``args`` in its own session (kill -9 gets it all)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.stream_driver", *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **spark_env()}, cwd=Path(__file__).parents[2],
        )  # fmt: skip


def _sink_end(bootstrap: str, sink: str) -> int:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        found = admin.list_offsets(
            {TopicPartition(sink, p): int(OffsetSpec.LATEST) for p in range(2)}
        )
    return sum(r.offset for r in found.values())


def test_kill_9_of_the_driver_mid_batch_then_restart_writes_each_record_once(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = samsa_broker.bootstrap
    source = new_topic(bootstrap, partitions=2)
    sink = new_topic(bootstrap, partitions=2)
    values = [b"%05d" % i for i in range(1200)]
    produce(bootstrap, source, values)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "driver.log"
    driver = _start_driver([bootstrap, source, sink, str(checkpoint), "run"], log)
    deadline = time.monotonic() + 120
    while _sink_end(bootstrap, sink) < 400 and time.monotonic() < deadline:  # incl. aborted
        assert driver.poll() is None, log.read_text()
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)  # the Python driver and Spark's JVM, mid-batch
    driver.wait()
    assert len(_read_committed(spark, bootstrap, sink)) < len(values), "finished before the kill"
    driver = _start_driver([bootstrap, source, sink, str(checkpoint), "finish"], log)
    assert driver.wait(180) == 0, log.read_text()
    written = _read_committed(spark, bootstrap, sink)
    assert len(written) == len(set(written)), "duplicates"
    assert written == values, "gaps"
    offsets = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    assert source in offsets
