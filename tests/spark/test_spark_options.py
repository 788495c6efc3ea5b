"""The source's options and the sinks' guarantees beyond the basics: real PySpark, real broker.

minOffsetsPerTrigger with maxTriggerDelay, subscribePattern, offsets and timestamps
as bounds, a topic deleted under a query, a write task retried within a micro-batch
of the exactly-once sink, and headers written and read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import BinaryType
from tests.spark.conftest import new_topic, produce, spark_env
from tests.spark.fetch_watch import FetchWatch

from samsa import Admin, Producer
from samsa.client.admin import NewTopic, OffsetSpec
from samsa.testing import BrokerProcess, start_broker
from samsa.testing.waiting import wait_until
from samsa.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


# -- helpers -------------------------------------------------------------------------------


def _options(reader: Any, bootstrap: str, options: dict[str, str]) -> Any:
    reader = reader.format("samsa").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def _read(spark: SparkSession, bootstrap: str, **options: str) -> list[tuple[str, int, int]]:
    """A batch read's (topic, partition, offset) triples, sorted."""
    rows = _options(spark.read, bootstrap, options).load().collect()
    return sorted((r.topic, r.partition, r.offset) for r in rows)


def _stream(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    return _options(spark.readStream, bootstrap, options).load()


def _produce_at_once(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    """``values`` in one record batch, so a reader sees all of them or none."""
    produce(bootstrap, topic, values, partition, **{"linger.ms": 60_000})


@contextmanager
def _running(
    df: DataFrame, columns: tuple[str, ...] = ("topic", "partition", "offset")
) -> Iterator[StreamingQuery]:
    """``df`` streamed into a memory table (named after the query) every 100 ms; progress
    is reported after idle triggers too, so a test can see what the source saw."""
    spark = df.sparkSession
    name = f"q{uuid.uuid4().hex[:10]}"
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "100ms")
    try:
        query = (
            df.select(*columns)
            .writeStream.format("memory")
            .queryName(name)
            .trigger(processingTime="100 milliseconds")
            .start()
        )
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        yield query
    finally:
        query.stop()


def _sizes(query: StreamingQuery) -> list[int]:
    """The micro-batches that read rows, by their number of rows."""
    _raise_if_failed(query)
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def _raise_if_failed(query: StreamingQuery) -> None:
    error = query.exception()
    if error is not None:
        raise error


def _idle_at(query: StreamingQuery, topic: str, partition: int, offset: int) -> bool:
    """Whether a trigger read nothing while the source saw ``partition`` end at ``offset``."""
    for progress in query.recentProgress:
        if progress["numInputRows"]:
            continue
        for source in progress["sources"]:
            latest = source.get("latestOffset") or {}
            latest = json.loads(latest) if isinstance(latest, str) else latest
            if latest.get(topic, {}).get(str(partition)) == offset:
                return True
    return False


def _table(spark: SparkSession, query: StreamingQuery) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.table(query.name).collect())


# -- minOffsetsPerTrigger and maxTriggerDelay -----------------------------------------------


@contextmanager
def _after_a_first_batch(
    spark: SparkSession, bootstrap: str, **options: str
) -> Iterator[tuple[str, StreamingQuery]]:
    """A running stream of a new topic with ``options``, once its first batch (which
    does not wait) has read the topic's one record."""
    topic = new_topic(bootstrap)
    _produce_at_once(bootstrap, topic, [b"first"])
    df = _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", **options)
    with _running(df) as query:
        wait_until(
            lambda: _sizes(query) == [1],
            "the first batch read its one record",
            timeout=60,
            interval=0.1,
        )
        yield topic, query


def test_min_offsets_per_trigger_holds_a_micro_batch_back_until_enough_offsets_wait(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    with _after_a_first_batch(
        spark, bootstrap, minOffsetsPerTrigger="50", maxTriggerDelay="1h"
    ) as (topic, query):
        _produce_at_once(bootstrap, topic, [b"a%d" % i for i in range(20)])
        wait_until(
            lambda: _idle_at(query, topic, 0, 21),
            "a trigger left the 20 waiting",
            timeout=60,
            interval=0.1,
        )
        assert _sizes(query) == [1], "20 offsets are fewer than minOffsetsPerTrigger=50"
        _produce_at_once(bootstrap, topic, [b"b%d" % i for i in range(30)])
        wait_until(
            lambda: sum(_sizes(query)) == 51,
            "the 50 waiting offsets were read",
            timeout=60,
            interval=0.1,
        )
        assert _sizes(query) == [1, 50]


def test_max_trigger_delay_lets_a_smaller_micro_batch_through_once_it_has_passed(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    with _after_a_first_batch(
        spark, bootstrap, minOffsetsPerTrigger="1000", maxTriggerDelay="2s"
    ) as (topic, query):
        _produce_at_once(bootstrap, topic, [b"a%d" % i for i in range(10)])
        wait_until(
            lambda: sum(_sizes(query)) == 11,
            "the delay let the 10 waiting through",
            timeout=60,
            interval=0.1,
        )
        assert _sizes(query) == [1, 10]


def test_min_and_max_offsets_per_trigger_cap_full_batches_and_hold_back_the_rest(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    with _after_a_first_batch(
        spark, bootstrap, minOffsetsPerTrigger="30", maxOffsetsPerTrigger="50",
        maxTriggerDelay="1h",
    ) as (topic, query):  # fmt: skip
        _produce_at_once(bootstrap, topic, [b"a%d" % i for i in range(120)])
        wait_until(
            lambda: sum(_sizes(query)) == 101,
            "two batches of 50 were read",
            timeout=60,
            interval=0.1,
        )
        wait_until(
            lambda: _idle_at(query, topic, 0, 121),
            "a trigger left the 20 waiting",
            timeout=60,
            interval=0.1,
        )
        assert _sizes(query) == [1, 50, 50], "20 left over are fewer than 30"
        _produce_at_once(bootstrap, topic, [b"b%d" % i for i in range(10)])
        wait_until(
            lambda: sum(_sizes(query)) == 131,
            "the 30 waiting offsets were read",
            timeout=60,
            interval=0.1,
        )
        assert _sizes(query) == [1, 50, 50, 30]


# -- subscribePattern ----------------------------------------------------------------------


def test_subscribe_pattern_batch_reads_every_topic_the_whole_pattern_matches(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(f"{prefix}-a", 2), NewTopic(f"{prefix}-b", 1),
                             NewTopic(f"{prefix}-c", 1), NewTopic(f"x{prefix}-a", 1)])  # fmt: skip
    for topic in (f"{prefix}-a", f"{prefix}-b", f"{prefix}-c", f"x{prefix}-a"):
        produce(bootstrap, topic, [b"1", b"2"], 0)
    rows = _read(spark, bootstrap, subscribePattern=f"{prefix}-[ab]")
    assert rows == [(f"{prefix}-a", 0, 0), (f"{prefix}-a", 0, 1),
                    (f"{prefix}-b", 0, 0), (f"{prefix}-b", 0, 1)]  # fmt: skip


def test_subscribe_pattern_stream_picks_up_a_matching_topic_created_later_from_its_start(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    first = new_topic(bootstrap, prefix=prefix)
    produce(bootstrap, first, [b"%d" % i for i in range(5)])
    df = _stream(spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="latest")
    with _running(df) as query:
        wait_until(
            lambda: _idle_at(query, first, 0, 5),
            "the stream started at latest",
            timeout=60,
            interval=0.1,
        )
        produce(bootstrap, first, [b"%d" % i for i in range(5, 8)])
        later = new_topic(bootstrap, partitions=2, prefix=prefix)
        produce(bootstrap, later, [b"x", b"y"], 0)
        produce(bootstrap, later, [b"z"], 1)
        new_topic(bootstrap, prefix=f"other{prefix}")  # does not match
        expected = [(first, 0, 5), (first, 0, 6), (first, 0, 7),
                    (later, 0, 0), (later, 0, 1), (later, 1, 0)]  # fmt: skip
        wait_until(
            lambda: sum(_sizes(query)) >= 6, "six records were read", timeout=60, interval=0.1
        )
        assert _table(spark, query) == sorted(expected)


# -- offsets and timestamps as bounds ------------------------------------------------------


@pytest.fixture(scope="module")
def stamped(spark: SparkSession, samsa_broker: BrokerProcess) -> str:
    """A topic of two partitions with ten records each; record i of partition p has
    timestamp 1_000_000 + p * 100 + i * 1000."""
    topic = new_topic(samsa_broker.bootstrap, partitions=2)
    with Producer({"bootstrap.servers": samsa_broker.bootstrap}) as producer:
        for p in (0, 1):
            for i in range(10):
                producer.send(
                    topic, b"%d" % i, partition=p, timestamp=1_000_000 + p * 100 + i * 1000
                )
    return topic


def _offsets(topic: str, ranges: dict[int, range]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, offsets in ranges.items() for o in offsets)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            {"startingOffsetsByTimestamp": {"0": 1_003_000, "1": 1_006_050}},
            {0: range(3, 10), 1: range(6, 10)},
            id="startingOffsetsByTimestamp: the first record at or after each time",
        ),
        pytest.param(
            {"startingOffsetsByTimestamp": {"0": 1_004_500}},
            {0: range(5, 10), 1: range(10)},
            id="startingOffsetsByTimestamp: a partition not named starts at earliest",
        ),
        pytest.param(
            {"endingTimestamp": "1004050"},
            {0: range(5), 1: range(4)},
            id="endingTimestamp: up to, not including, the first record at or after it",
        ),
        pytest.param(
            {"endingOffsetsByTimestamp": {"0": 1_002_000, "1": 9_999_999}},
            {0: range(2), 1: range(10)},
            id="endingOffsetsByTimestamp: a time after the last record ends at latest",
        ),
        pytest.param(
            {
                "startingOffsetsByTimestamp": {"0": 1_001_000, "1": 1_001_000},
                "endingOffsetsByTimestamp": {"0": 1_003_000, "1": 1_003_000},
            },
            {0: range(1, 3), 1: range(1, 3)},
            id="timestamps at both ends",
        ),
        pytest.param(
            {"startingOffsets": {"0": -2, "1": 7}, "endingOffsets": {"0": 4, "1": -1}},
            {0: range(4), 1: range(7, 10)},
            id="offsets as JSON with -2 (earliest) and -1 (latest)",
        ),
        pytest.param(
            {
                "startingTimestamp": "1005000",
                "startingOffsets": {"0": 0, "1": 0},
                "endingOffsets": {"0": -1, "1": 8},
            },
            {0: range(5, 10), 1: range(5, 8)},
            id="startingTimestamp wins over startingOffsets",
        ),
    ],
)
def test_batch_read_bounds_return_exactly_the_records_between_them(
    spark: SparkSession,
    samsa_broker: BrokerProcess,
    stamped: str,
    options: dict[str, Any],
    expected: dict[int, range],
) -> None:
    given = {
        name: json.dumps({stamped: value}) if isinstance(value, dict) else value
        for name, value in options.items()
    }
    rows = _read(spark, samsa_broker.bootstrap, subscribe=stamped, **given)
    assert rows == _offsets(stamped, expected)


def test_starting_timestamp_after_every_record_fails_naming_the_option_unless_strategy_latest(
    spark: SparkSession, samsa_broker: BrokerProcess, stamped: str
) -> None:
    late = json.dumps({stamped: {"0": 1_009_000, "1": 9_999_999}})
    with pytest.raises(PySparkException, match="startingOffsetsByTimestamp"):
        _read(spark, samsa_broker.bootstrap, subscribe=stamped, startingOffsetsByTimestamp=late)
    rows = _read(spark, samsa_broker.bootstrap, subscribe=stamped,
                 startingOffsetsByTimestamp=late,
                 startingOffsetsByTimestampStrategy="latest")  # fmt: skip
    assert rows == [(stamped, 0, 9)]


def test_stream_starting_offsets_json_starts_each_partition_where_it_says(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    topic = new_topic(bootstrap, partitions=3)
    for p in (0, 1, 2):
        produce(bootstrap, topic, [b"old-%d" % i for i in range(4)], p)
    starting = json.dumps({topic: {"0": -2, "1": -1, "2": 2}})
    df = _stream(spark, bootstrap, subscribe=topic, startingOffsets=starting)
    with _running(df) as query:
        wait_until(
            lambda: _idle_at(query, topic, 0, 4), "the stream started", timeout=60, interval=0.1
        )
        for p in (0, 1, 2):
            produce(bootstrap, topic, [b"new"], p)
        wait_until(
            lambda: sum(_sizes(query)) >= 5 + 1 + 3,
            "the new records were read",
            timeout=60,
            interval=0.1,
        )
        assert _table(spark, query) == _offsets(topic, {0: range(5), 1: [4], 2: range(2, 5)})


# -- a topic deleted under a query ---------------------------------------------------------


def _delete_topic(bootstrap: str, topic: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_topics([topic])


def _topics(bootstrap: str) -> list[str]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.list_topics()


def _stream_of_two_topics(
    spark: SparkSession, bootstrap: str, fail_on_data_loss: str
) -> tuple[str, str, DataFrame]:
    """(a topic to delete, a topic to keep, a stream of both); five records in each."""
    doomed, kept = new_topic(bootstrap), new_topic(bootstrap)
    for topic in (doomed, kept):
        produce(bootstrap, topic, [b"%d" % i for i in range(5)])
    df = _stream(spark, bootstrap, subscribe=f"{doomed},{kept}", startingOffsets="earliest",
                 failOnDataLoss=fail_on_data_loss)  # fmt: skip
    return doomed, kept, df


def test_a_topic_deleted_under_a_stream_fails_it_naming_the_topic_when_fail_on_data_loss_is_true(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    doomed, kept, df = _stream_of_two_topics(spark, bootstrap, "true")
    with _running(df) as query:
        wait_until(
            lambda: sum(_sizes(query)) == 10, "both topics were read", timeout=60, interval=0.1
        )
        _delete_topic(bootstrap, doomed)
        produce(bootstrap, kept, [b"after"])
        with pytest.raises(PySparkException) as failure:
            query.awaitTermination(60)
    message = str(failure.value)
    assert f"topic {doomed!r} was deleted" in message
    assert "failOnDataLoss=false" in message


def test_a_topic_deleted_under_a_stream_is_skipped_when_fail_on_data_loss_is_false(
    spark: SparkSession, samsa_broker: BrokerProcess
) -> None:
    bootstrap = samsa_broker.bootstrap
    doomed, kept, df = _stream_of_two_topics(spark, bootstrap, "false")
    with _running(df) as query:
        wait_until(
            lambda: sum(_sizes(query)) == 10, "both topics were read", timeout=60, interval=0.1
        )
        _delete_topic(bootstrap, doomed)
        produce(bootstrap, kept, [b"%d" % i for i in range(5, 8)])
        wait_until(
            lambda: sum(_sizes(query)) == 13,
            "the kept topic's new records were read",
            timeout=60,
            interval=0.1,
        )
        assert query.isActive
        expected = _offsets(doomed, {0: range(5)}) + _offsets(kept, {0: range(8)})
        assert _table(spark, query) == sorted(expected)
    assert doomed not in _topics(bootstrap)


def test_a_topic_deleted_between_available_now_runs_fails_the_next_run_naming_it(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = samsa_broker.bootstrap
    doomed, kept, df = _stream_of_two_topics(spark, bootstrap, "true")

    def run() -> None:
        query = (
            df.select("topic", "offset")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the query did not catch up in 120 s"

    run()
    _delete_topic(bootstrap, doomed)
    produce(bootstrap, kept, [b"after"])
    with pytest.raises(PySparkException, match=f"topic '{doomed}' was deleted"):
        run()


@contextmanager
def _broker_behind_a_fetch_watch(tmp_path: Path) -> Iterator[tuple[str, FetchWatch]]:
    """A broker of its own that advertises a FetchWatch proxy, and the proxy's address."""
    watch = FetchWatch()
    broker = start_broker(
        tmp_path / "watched", [f"advertised.listeners=PLAINTEXT://127.0.0.1:{watch.port}"]
    )
    try:
        watch.forward_to(broker.bootstrap)
        yield f"127.0.0.1:{watch.port}", watch
    finally:
        watch.close()
        broker.stop()


def _read_while_the_topic_is_deleted(
    spark: SparkSession, tmp_path: Path, fail_on_data_loss: str
) -> tuple[str, list[tuple[str, int, int]], list[str]]:
    """A batch read of offsets 0..19 of a topic that has 10 records: its task reads them
    and waits for the rest; the topic is deleted once the task's consumer asks for offset
    10 (its records 0..9 returned by poll(); seen on the wire), so while the task waits.
    Returns the topic, the rows read and the topics left on the broker after the read."""
    with _broker_behind_a_fetch_watch(tmp_path) as (bootstrap, watch):
        topic = new_topic(bootstrap)
        produce(bootstrap, topic, [b"%d" % i for i in range(10)])
        waiting_at_10 = watch.watch(topic, 0, 10)

        def delete_once_the_task_waits() -> None:
            waiting_at_10.wait(120)  # the read fails after the finally below if never set
            _delete_topic(bootstrap, topic)

        deleter = threading.Thread(target=delete_once_the_task_waits)
        deleter.start()
        try:
            rows = _read(spark, bootstrap, subscribe=topic,
                         endingOffsets=json.dumps({topic: {"0": 20}}),
                         failOnDataLoss=fail_on_data_loss,
                         **{"kafkaConsumer.pollTimeoutMs": "120000"})  # fmt: skip
        finally:
            deleter.join()
            assert waiting_at_10.is_set(), "the task's consumer never asked for offset 10"
        return topic, rows, _topics(bootstrap)


def test_a_topic_deleted_while_a_task_reads_it_fails_the_read_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    with pytest.raises(PySparkException, match=r"topic '[^']+' was deleted while offsets 10\.\.19"):
        _read_while_the_topic_is_deleted(spark, tmp_path, "true")


def test_a_topic_deleted_while_a_task_reads_it_ends_the_task_without_fail_on_data_loss(
    spark: SparkSession, tmp_path: Path
) -> None:
    topic, rows, topics = _read_while_the_topic_is_deleted(spark, tmp_path, "false")
    assert rows == _offsets(topic, {0: range(10)})
    assert topic not in topics, "the read brought the topic back"


# -- a write task retried within a micro-batch ---------------------------------------------


def _read_values(spark: SparkSession, bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    df = _options(spark.read, bootstrap, {"subscribe": topic, "kafka.isolation.level": isolation})
    return sorted(bytes(r.value) for r in df.load().select("value").collect())


@pytest.mark.slow
def test_a_write_task_retried_within_a_micro_batch_writes_each_row_once_for_read_committed(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Slow (about 35 s; `make test-slow`): runs tests/spark/retry_driver.py, its own Spark
    (local[2,4], so a failed task is retried), whose write tasks fail once at offset 150
    of their partition with rows of their open transaction already in the sink's log."""
    bootstrap = samsa_broker.bootstrap
    source, sink = new_topic(bootstrap, partitions=2), new_topic(bootstrap, partitions=2)
    # 2 KB values: a Python UDF's worker sends its results through a 64 KB buffer; with
    # small rows none reached the writer before the UDF failed.
    values = {p: [b"p%d-%04d-" % (p, i) + b"." * 2048 for i in range(300)] for p in (0, 1)}
    for p, batch in values.items():
        produce(bootstrap, source, batch, p)
    markers, log = tmp_path / "failed-attempts", tmp_path / "driver.log"
    markers.mkdir()
    args = [bootstrap, source, sink, str(tmp_path / "checkpoint"), str(markers), "150"]
    with open(log, "wb") as out:
        driver = subprocess.run(
            [sys.executable, "-m", "tests.spark.retry_driver", *args],
            check=False, stdout=out, stderr=subprocess.STDOUT, timeout=180,
            env={**os.environ, **spark_env()}, cwd=Path(__file__).parents[2],
        )  # fmt: skip
    assert driver.returncode == 0, log.read_text()
    assert sorted(m.name.split("-")[0] for m in markers.iterdir()) == ["0", "1"], (
        "each write task's first attempt failed"
    )
    written = _read_values(spark, bootstrap, sink, "read_committed")
    assert written == sorted(values[0] + values[1])
    uncommitted = _read_values(spark, bootstrap, sink, "read_uncommitted")
    assert len(uncommitted) > len(written), "the failed attempts had written rows, aborted"


@pytest.mark.slow
def test_a_micro_batch_whose_transaction_timed_out_fails_and_is_written_once_on_restart(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Slow (about 20 s; `make test-slow`): waits for the broker to abort a timed-out
    transaction, which it looks for every 10 s."""
    bootstrap = samsa_broker.bootstrap
    source, sink = new_topic(bootstrap, partitions=2), new_topic(bootstrap, partitions=2)
    values = {p: [b"p%d-%02d" % (p, i) for i in range(20)] for p in (0, 1)}
    for p, batch in values.items():
        produce(bootstrap, source, batch, p)
    hold = tmp_path / "hold"
    hold.touch()

    @udf(BinaryType(), useArrow=False)
    def held(value: bytes, partition: int) -> bytes:
        # The task of partition 1 waits until the coordinator has aborted the open
        # transaction of the task of partition 0 (nothing open left in sink-0).
        if partition == 1 and hold.exists():
            sink_0 = TopicPartition(sink, 0)
            deadline = time.monotonic() + 60
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                while time.monotonic() < deadline:
                    end = admin.list_offsets({sink_0: int(OffsetSpec.LATEST)})[sink_0].offset
                    stable = admin.list_offsets(
                        {sink_0: int(OffsetSpec.LATEST)}, isolation_level="read_committed"
                    )[sink_0].offset
                    if end > 0 and stable == end:
                        break
                    time.sleep(0.2)
        return value

    def run() -> None:
        query = (
            _stream(spark, bootstrap, subscribe=source, startingOffsets="earliest")
            .select("key", "partition", held("value", "partition").alias("value"))
            .writeStream.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.transaction.timeout.ms", "1000")
            .option("topic", sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    with pytest.raises(PySparkException, match=r"kafka\.transaction\.timeout\.ms"):
        run()
    # The other task's transaction was committed: its rows, and none of the timed-out one.
    assert _read_values(spark, bootstrap, sink, "read_committed") == values[1]
    hold.unlink()
    run()
    expected = sorted(values[0] + values[1])
    assert _read_values(spark, bootstrap, sink, "read_committed") == expected


# -- headers -------------------------------------------------------------------------------


def test_headers_written_by_the_stream_sink_are_read_back_with_include_headers(
    spark: SparkSession, samsa_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = samsa_broker.bootstrap
    source, sink = new_topic(bootstrap), new_topic(bootstrap)
    produce(bootstrap, source, [b"0", b"1", b"2", b"3"])
    headers = {
        b"0": [("a", b"\x01"), ("a", b"\x02"), ("é", None)],  # repeated key, null value
        b"1": None,  # an empty array is written as no headers, read back as null
        b"2": None,  # null headers
        b"3": [("bin", b"\x00\xff")],
    }
    expression = """CASE cast(value AS string)
        WHEN '0' THEN array(named_struct('key', 'a', 'value', X'01'),
                            named_struct('key', 'a', 'value', X'02'),
                            named_struct('key', 'é', 'value', cast(NULL AS binary)))
        WHEN '1' THEN cast(array() AS array<struct<key: string, value: binary>>)
        WHEN '3' THEN array(named_struct('key', 'bin', 'value', X'00FF'))
        END AS headers"""
    (
        _stream(spark, bootstrap, subscribe=source, startingOffsets="earliest")
        .selectExpr("key", "value", expression)
        .writeStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination(120)
    )
    df = _options(spark.read, bootstrap, {"subscribe": sink, "includeHeaders": "true",
                                          "kafka.isolation.level": "read_committed"})  # fmt: skip
    back = {
        bytes(r.value): None
        if r.headers is None
        else [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers]
        for r in df.load().collect()
    }
    assert back == headers
